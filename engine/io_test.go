package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/vfd"
)

// TestOneChunkMatchesSplit: for random selections, oneChunk accepts
// exactly the selections Split cuts into one piece with one run per
// dimension, and produces that same piece.
func TestOneChunkMatchesSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for i := 0; i < 5000; i++ {
		r := 1 + rng.IntN(3)
		chunk := make([]uint64, r)
		start, stride, count, block := make([]uint64, r), make([]uint64, r), make([]uint64, r), make([]uint64, r)
		for d := 0; d < r; d++ {
			chunk[d] = 1 + rng.Uint64N(8)
			start[d] = rng.Uint64N(20)
			count[d] = 1 + rng.Uint64N(3)
			block[d] = 1 + rng.Uint64N(4)
			stride[d] = block[d] + rng.Uint64N(2)
		}
		h := selection.Hyperslab{Start: start, Stride: stride, Count: count, Block: block}
		if i%2 == 0 {
			h = selection.Box(start, block)
		}
		s := &dsState{id: 1, chunk: chunk}
		sc := new(ioScratch)
		reg := s.regionInto(general(h), sc)
		got := sc.oneChunk(h, chunk, reg)
		ps, err := selection.Pieces(h, chunk)
		if err != nil {
			t.Fatal(err)
		}
		want := len(ps) == 1
		if want {
			for _, rs := range ps[0].Runs {
				want = want && len(rs) == 1
			}
		}
		if got != want {
			t.Fatalf("%v chunk %v: oneChunk %v, Split gives %d pieces %+v", h, chunk, got, len(ps), ps)
		}
		if got {
			accepted++
			if !reflect.DeepEqual(sc.oneSel.Coord, ps[0].Coord) || !reflect.DeepEqual(sc.oneSel.Runs, ps[0].Runs) || sc.oneSel.N != ps[0].N {
				t.Fatalf("%v chunk %v: oneChunk %+v, Split %+v", h, chunk, sc.oneSel, ps[0])
			}
		}
	}
	if accepted < 100 {
		t.Fatalf("only %d single-chunk selections drawn", accepted)
	}
}

// TestReadPartlyResident: a read over chunks of which only some are
// resident is served by the fast path up to the first miss and then, with
// the same requests, by the locked path; the bytes are right either way,
// and a shrink-then-grow between reads (a new extent slice) is seen.
func TestReadPartlyResident(t *testing.T) {
	ctx := context.Background()
	c, err := cache.New(cache.Config{QuiescentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	drv := vfd.NewMem()
	f := tCreate(t, drv, &Options{Cache: c})
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{4, 16}, MaxShape: []uint64{Unlimited, 16}, Chunk: []uint64{1, 16}})
	if err != nil {
		t.Fatal(err)
	}
	all := make([]byte, 64)
	for i := range all {
		all[i] = byte(i + 1)
	}
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{4, 16}), all); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Drop every chunk from the cache, then make rows 0 and 1 resident.
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f, err = Open(ctx, "", &Options{Driver: drv, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	if ds, err = f.OpenDataset(ctx, "d", nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{2, 16}), buf); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{4, 16}), got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, all) {
		t.Fatalf("read %v, want %v", got, all)
	}
	if err := ds.SetExtent(ctx, []uint64{2, 16}); err != nil {
		t.Fatal(err)
	}
	if err := ds.SetExtent(ctx, []uint64{4, 16}); err != nil {
		t.Fatal(err)
	}
	if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{4, 16}), got); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte(nil), all[:32]...), make([]byte, 32)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("after shrink and grow: %v, want %v", got, want)
	}
}
