package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/internal/bufpool"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// fillPoisonFrame fills frame i of dataset d with bytes no poisoned buffer
// (bufpool.Poison: all 0xDB) and no other frame can match.
func fillPoisonFrame(b []byte, d, i, gen int) {
	x := uint64(d)<<40 | uint64(i)<<8 | uint64(gen)
	for k := 0; k+8 <= len(b); k += 8 {
		// Smooth enough to compress, distinct per frame and generation.
		binary.LittleEndian.PutUint64(b[k:], x+uint64(k/512))
	}
}

// TestBufPoisonConcurrent checks the ownership rule of recycled buffers
// (internal/bufpool) end to end: every buffer given back to the pool is
// filled with poison, and many goroutines write, overwrite, read back and
// flush through a cache far smaller than the data, so chunk buffers, read
// images and encoded images (kept pre-encoded ones too) are recycled all
// the time. A buffer returned while a reader was still copying out of it,
// a vector write was still reading it or a chunk still lived in it would
// show up as poison or another frame's bytes in a read (and, under -race,
// as a race between the poisoning and that use).
func TestBufPoisonConcurrent(t *testing.T) {
	defer verifyNoLeaks(t)
	defer bufpool.Poison(true)()
	ctx := context.Background()
	const (
		h, w    = 32, 64 // uint16: 4 KiB chunks, the smallest pooled class
		frames  = 96
		writers = 8
		readers = 8
	)
	frameBytes := h * w * 2
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{
		QuiescentBytes: 16 * int64(frameBytes), // a few chunks: constant eviction
		PreEncodeBytes: 4 * int64(frameBytes),
		MinBytes:       -1,
	}})
	var err error
	filters := [][]Filter{nil, {Shuffle(), Zstd(1)}, {LZ4(), CRC32C()}}
	dss := make([]*Dataset, len(filters))
	for i, fl := range filters {
		dss[i], err = f.CreateDataset(ctx, fmt.Sprintf("d%d", i), DatasetSpec{
			Type: Uint16, Shape: []uint64{frames, h, w}, Chunk: []uint64{1, h, w}, Filters: fl,
		})
		must(t, err)
	}
	// gen[d][i] is the generation last acknowledged for frame i of d; a
	// writer owns its frames (i % writers), so only it changes them.
	gen := make([][]atomic.Int32, len(dss))
	for d := range gen {
		gen[d] = make([]atomic.Int32, frames)
	}
	sel := func(i int) Selection { return Box([]uint64{uint64(i), 0, 0}, []uint64{1, h, w}) }
	var wg sync.WaitGroup
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(format, args...)
		}
	}
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, frameBytes)
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for r := 1; r <= rounds && !failed.Load(); r++ {
				for i := g; i < frames; i += writers {
					d := rng.IntN(len(dss))
					fillPoisonFrame(buf, d, i, r)
					if rng.IntN(3) == 0 {
						// Half a frame: the chunk is loaded, then gathered into.
						half := Box([]uint64{uint64(i), 0, 0}, []uint64{1, h / 2, w})
						old := make([]byte, frameBytes)
						fillPoisonFrame(old, d, i, int(gen[d][i].Load()))
						if gen[d][i].Load() == 0 {
							clear(old)
						}
						copy(old, buf[:frameBytes/2])
						if err := dss[d].Write(ctx, half, buf[:frameBytes/2]); err != nil {
							fail("write: %v", err)
							return
						}
						// Read it whole: the second half must be the old one.
						got := make([]byte, frameBytes)
						if err := dss[d].Read(ctx, sel(i), got); err != nil {
							fail("read: %v", err)
							return
						}
						if string(got) != string(old) {
							fail("dataset %d frame %d after a half write: wrong bytes (poison: %v)", d, i, got[frameBytes-1] == 0xDB)
							return
						}
						// Complete it so the frame is one generation again.
						if err := dss[d].Write(ctx, sel(i), buf); err != nil {
							fail("write: %v", err)
							return
						}
					} else if err := dss[d].Write(ctx, sel(i), buf); err != nil {
						fail("write: %v", err)
						return
					}
					gen[d][i].Store(int32(r))
				}
				if g == 0 {
					if err := f.Flush(ctx); err != nil {
						fail("flush: %v", err)
						return
					}
				}
			}
		}()
	}
	for g := 0; g < readers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			got := make([]byte, frameBytes)
			want := make([]byte, frameBytes)
			for n := 0; n < rounds*frames && !failed.Load(); n++ {
				d, i := rng.IntN(len(dss)), rng.IntN(frames)
				// A frame's writer may be overwriting it: read it only
				// once it is between writes of known generations, and
				// accept either.
				g0 := gen[d][i].Load()
				if err := dss[d].Read(ctx, sel(i), got); err != nil {
					fail("read: %v", err)
					return
				}
				// Each half holds a generation from g0 on (a write, or the
				// first half of a half write, may be in flight).
				ok := true
				for _, half := range [][2]int{{0, frameBytes / 2}, {frameBytes / 2, frameBytes}} {
					part := got[half[0]:half[1]]
					hok := g0 == 0 && allZero(part)
					for gg := max(g0, 1); gg <= int32(rounds) && !hok; gg++ {
						fillPoisonFrame(want, d, i, int(gg))
						hok = string(part) == string(want[half[0]:half[1]])
					}
					ok = ok && hok
				}
				if !ok {
					fail("dataset %d frame %d (gen %d): wrong bytes (poison: %v)", d, i, g0, got[0] == 0xDB || got[frameBytes-1] == 0xDB)
					return
				}
			}
		}()
	}
	wg.Wait()
	must(t, f.Flush(ctx))
	got := make([]byte, frameBytes)
	want := make([]byte, frameBytes)
	for d, ds := range dss {
		for i := 0; i < frames; i++ {
			must(t, ds.Read(ctx, sel(i), got))
			fillPoisonFrame(want, d, i, int(gen[d][i].Load()))
			if gen[d][i].Load() == 0 {
				clear(want)
			}
			if string(got) != string(want) {
				t.Fatalf("dataset %d frame %d: wrong bytes after the run", d, i)
			}
		}
	}
	must(t, f.Close(ctx))
}
