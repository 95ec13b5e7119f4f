package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/vfd"
)

// FuzzSparseDecode feeds arbitrary frames, defined counts and checksums
// to the sparse layout's decoders (the whole chunk, and the selection
// view's prefix decoder): they must never panic, must return ErrCorrupt
// for anything they refuse, and what they accept must be canonical runs
// inside the chunk with one value per defined element.
func FuzzSparseDecode(f *testing.F) {
	file := tCreate(f, vfd.NewMem(), nil)
	defer file.Close(context.Background())
	spec := DatasetSpec{Type: Uint16, Shape: []uint64{64}, Chunk: []uint64{64}, Layout: Sparse,
		Filters: []Filter{Shuffle(), Zstd(1)}, SelectionFilters: []Filter{Deflate(1)}}
	ds, err := file.CreateDataset(context.Background(), "s", spec)
	if err != nil {
		f.Fatal(err)
	}
	l := ds.s.store.(*sparseLayout)
	// Seeds: real frames of a few chunks.
	for _, sel := range []Selection{Box([]uint64{3}, []uint64{5}), Hyperslab([]uint64{0}, []uint64{3}, []uint64{20}, nil), All([]uint64{64})} {
		c := &sparseChunk{}
		buf := make([]byte, sel.NumElements()*2)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		reqs, _, err := ds.s.kindRequests(sel, pieceData, buf)
		if err != nil {
			f.Fatal(err)
		}
		if err := l.Gather(c, reqs[0].Piece); err != nil {
			f.Fatal(err)
		}
		enc, err := l.Encode(layout.Coord{0}, c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), enc.Image...), enc.Mask, enc.Sum)
	}
	f.Fuzz(func(t *testing.T, img []byte, k uint32, sum uint32) {
		check := func(ch layout.Chunk, values bool) {
			c := ch.(*sparseChunk)
			var n uint64
			for i, r := range c.runs {
				if r.Len == 0 || uint64(r.End()) > l.elems || i > 0 && r.Start <= c.runs[i-1].End() || uint64(r.At) != n {
					t.Fatalf("accepted run %d %+v is not canonical", i, r)
				}
				n += uint64(r.Len)
			}
			if n != uint64(k) || values && uint64(len(c.data)) != n*2 {
				t.Fatalf("accepted %d defined elements (k %d), %d value bytes", n, k, len(c.data))
			}
		}
		loc := layout.Location{Addr: 8192, Size: int64(len(img)), Mask: k, Sum: sum}
		if ch, err := l.Decode(layout.Coord{0}, loc, append([]byte(nil), img...)); err == nil {
			check(ch, true)
		} else if !isCorrupt(err) {
			t.Fatalf("decode: %v is not ErrCorrupt", err)
		}
		v := l.view
		vc := v.viewCoord([]uint64{0}, indexEntry(uint64(len(img)), k, sum))
		pre := img[:min(len(img), int(v.prefix(int64(len(img)), uint64(k))))]
		if ch, err := v.Decode(vc, loc, append([]byte(nil), pre...)); err == nil {
			check(ch, false)
		} else if !isCorrupt(err) {
			t.Fatalf("view decode: %v is not ErrCorrupt", err)
		}
	})
}

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func indexEntry(size uint64, k, sum uint32) index.Entry {
	return index.Entry{Addr: 8192, Size: size, Mask: k, Sum: sum}
}

// FuzzVlenDecode feeds arbitrary frames and heap sizes to the
// variable-length decoder: no panic, ErrCorrupt for what it refuses, and
// what it accepts points only inside its heap.
func FuzzVlenDecode(f *testing.F) {
	file := tCreate(f, vfd.NewMem(), nil)
	defer file.Close(context.Background())
	ds, err := file.CreateDataset(context.Background(), "v", DatasetSpec{Type: Uint8, Shape: []uint64{6}, Chunk: []uint64{6}, Layout: Vlen, Filters: []Filter{Zstd(1)}})
	if err != nil {
		f.Fatal(err)
	}
	l := ds.s.store.(*vlenLayout)
	for _, vals := range [][][]byte{{[]byte("a"), nil, []byte("bcd"), nil, nil, []byte("efgh")}, make([][]byte, 6)} {
		c, _ := l.NewChunk(layout.Coord{0}, true)
		reqs, pieces, err := ds.s.kindRequests(All([]uint64{6}), pieceVlen, nil)
		if err != nil {
			f.Fatal(err)
		}
		pieces[0].vals = vals
		if err := l.Gather(c, reqs[0].Piece); err != nil {
			f.Fatal(err)
		}
		enc, err := l.Encode(layout.Coord{0}, c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), enc.Image...), enc.Mask, enc.Sum)
	}
	f.Fuzz(func(t *testing.T, img []byte, heap uint32, sum uint32) {
		loc := layout.Location{Addr: 8192, Size: int64(len(img)), Mask: heap, Sum: sum}
		ch, err := l.Decode(layout.Coord{0}, loc, append([]byte(nil), img...))
		if err != nil {
			if !isCorrupt(err) {
				t.Fatalf("decode: %v is not ErrCorrupt", err)
			}
			return
		}
		c := ch.(*vlenChunk)
		if len(c.heap) != int(heap) || len(c.off) != 6 {
			t.Fatalf("accepted a heap of %d bytes (index says %d), %d elements", len(c.heap), heap, len(c.off))
		}
		for i := range c.off {
			if uint64(c.off[i])+uint64(c.ln[i]) > uint64(len(c.heap)) {
				t.Fatalf("element %d points outside the heap", i)
			}
		}
	})
}
