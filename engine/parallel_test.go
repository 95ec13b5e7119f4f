package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestManyChunkIORace runs writers and readers of boxes that cross many
// chunks, at once, against a small cache, so that requests of many chunks
// load, create, serve and evict chunks that other requests are serving on
// the workers at the same time. Each writer owns a band of rows that cuts
// through chunks shared with its neighbours, and writes boxes in it with
// the number of its write: every element of a band only grows, so a read
// is checked against its band's model element by element (at least the
// value its writer had finished before the read began, at most the last
// number it had begun when the read ended). At the end the dataset must
// equal the model exactly, in the cache and after a reopen.
func TestManyChunkIORace(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const rows, cols, bands = 512, 512, 4
	const band = rows / bands // 128 rows: bands cut through chunks of 96 rows
	for _, codec := range []struct {
		name    string
		filters []Filter
	}{{"raw", nil}, {"zstd", []Filter{Zstd(1)}}} {
		t.Run(codec.name, func(t *testing.T) {
			mem := vfd.NewMem()
			f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 256 << 10, Workers: 4}})
			shape := []uint64{rows, cols}
			ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: shape, Chunk: []uint64{96, 80}, Filters: codec.filters})
			must(t, err)
			type bandModel struct {
				mu      sync.Mutex
				done    []uint16 // the band's values once its finished writes are applied
				started atomic.Uint32
			}
			models := make([]*bandModel, bands)
			for w := range models {
				models[w] = &bandModel{done: make([]uint16, band*cols)}
			}
			var wg sync.WaitGroup
			errc := make(chan error, 16)
			for w := range bands {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					m := models[w]
					for seq := uint16(1); seq <= 12; seq++ {
						r0 := uint64(rng.IntN(band))
						nr := uint64(1 + rng.IntN(band-int(r0)))
						c0 := uint64(rng.IntN(cols / 2))
						nc := uint64(cols/2 + rng.IntN(cols/2-int(c0)+1))
						buf := make([]byte, 2*nr*nc)
						for i := 0; i < len(buf); i += 2 {
							binary.LittleEndian.PutUint16(buf[i:], seq)
						}
						m.started.Store(uint32(seq))
						if err := ds.Write(ctx, Box([]uint64{uint64(w*band) + r0, c0}, []uint64{nr, nc}), buf); err != nil {
							errc <- err
							return
						}
						m.mu.Lock()
						for r := r0; r < r0+nr; r++ {
							for c := c0; c < c0+nc; c++ {
								m.done[r*cols+c] = seq
							}
						}
						m.mu.Unlock()
					}
				}()
			}
			for rd := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(rd), 9))
					for range 12 {
						r0 := uint64(rng.IntN(rows / 2))
						nr := uint64(rows/4 + rng.IntN(rows/2-int(r0)+rows/4))
						nr = min(nr, rows-r0)
						c0 := uint64(rng.IntN(cols / 4))
						nc := uint64(cols - c0 - uint64(rng.IntN(cols/4)))
						low := make([]uint16, nr*nc)
						for r := r0; r < r0+nr; r++ {
							m := models[r/band]
							m.mu.Lock()
							for c := c0; c < c0+nc; c++ {
								low[(r-r0)*nc+c-c0] = m.done[(r%band)*cols+c]
							}
							m.mu.Unlock()
						}
						buf := make([]byte, 2*nr*nc)
						if err := ds.Read(ctx, Box([]uint64{r0, c0}, []uint64{nr, nc}), buf); err != nil {
							errc <- err
							return
						}
						for r := r0; r < r0+nr; r++ {
							high := uint16(models[r/band].started.Load())
							for c := c0; c < c0+nc; c++ {
								i := (r-r0)*nc + c - c0
								v := binary.LittleEndian.Uint16(buf[2*i:])
								if v < low[i] || v > high {
									errc <- fmt.Errorf("element (%d, %d) read %d, want between %d and %d", r, c, v, low[i], high)
									return
								}
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			want := make([]byte, 2*rows*cols)
			for w, m := range models {
				for i, v := range m.done {
					binary.LittleEndian.PutUint16(want[2*(w*band*cols+i):], v)
				}
			}
			got := make([]byte, len(want))
			must(t, ds.Read(ctx, All(shape), got))
			if !bytes.Equal(got, want) {
				t.Fatal("the dataset differs from the model")
			}
			must(t, f.Close(ctx))
			f = tOpen(t, mem, &Options{ReadOnly: true})
			defer f.Close(ctx)
			ds, err = f.OpenDataset(ctx, "d", nil)
			must(t, err)
			clear(got)
			must(t, ds.Read(ctx, All(shape), got))
			if !bytes.Equal(got, want) {
				t.Fatal("the reopened dataset differs from the model")
			}
		})
	}
}

// TestManyChunkReadIOError: an I/O error on one of the reads that bring in
// the stored bytes of a read of many chunks (decoded and served on the
// workers) fails the read with ErrIO, keeping its cause, and leaves none
// of its chunks in the cache; the same read afterwards returns the right
// bytes.
func TestManyChunkReadIOError(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	shape := []uint64{128, 128, 128}
	for _, codec := range []struct {
		name    string
		filters []Filter
	}{{"raw", nil}, {"zstd", []Filter{Zstd(1)}}} {
		for _, nth := range []int64{1, 2} {
			t.Run(fmt.Sprintf("%s/read-%d", codec.name, nth), func(t *testing.T) {
				mem := vfd.NewMem()
				f := tCreate(t, mem, nil)
				ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: shape, Chunk: []uint64{32, 32, 32}, Filters: codec.filters})
				must(t, err)
				data := compressibleBytes(rand.New(rand.NewPCG(1, uint64(nth))), int(prod(shape))*2)
				must(t, ds.Write(ctx, All(shape), data))
				must(t, f.Close(ctx))

				var armed atomic.Bool
				var reads atomic.Int64
				fd := vfd.NewFault(mem, vfd.Fail(vfd.TriggerFunc(func(info vfd.OpInfo) bool {
					return armed.Load() && (info.Op == vfd.OpRead || info.Op == vfd.OpReadV) && reads.Add(1) == nth
				})))
				f = tOpen(t, fd, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 64 << 20, Workers: 4}})
				defer f.Close(ctx)
				ds, err = f.OpenDataset(ctx, "d", nil)
				must(t, err)
				before := f.Cache().Stats()
				armed.Store(true)
				got := make([]byte, len(data))
				err = ds.Read(ctx, All(shape), got)
				armed.Store(false)
				if !errors.Is(err, ErrIO) || !errors.Is(err, vfd.ErrInjected) || errors.Is(err, ErrCorrupt) {
					t.Fatalf("read with a failing driver: %v, want ErrIO from the injected failure", err)
				}
				st := f.Cache().Stats()
				if st.Chunks != before.Chunks || st.Loads != before.Loads {
					t.Fatalf("after the failed read: %d chunks resident, %d loads; before: %d, %d", st.Chunks, st.Loads, before.Chunks, before.Loads)
				}
				clear(got)
				must(t, ds.Read(ctx, All(shape), got))
				if !bytes.Equal(got, data) {
					t.Fatal("the read after the failure returned other bytes than were written")
				}
			})
		}
	}
}
