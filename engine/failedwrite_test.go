package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// armedWriteFault fails the first write after arm is set, once, with EIO.
func armedWriteFault(arm *atomic.Bool) vfd.Injector {
	return vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		if !info.Op.IsWrite() || !arm.CompareAndSwap(true, false) {
			return vfd.Effect{}
		}
		return vfd.Effect{Err: fmt.Errorf("%w: %w", vfd.ErrInjected, syscall.EIO)}
	})
}

// TestFailedWriteIsNotApplied: a Write inside one chunk that needs room
// in a full cache, whose write-back fails (another chunk's, evicted to
// make the room, or, for a chunk above the bypass threshold, its own
// straight after the write), returns the error and leaves the dataset as
// it was: the chunk reads as before, the next Flush (the disk repaired)
// commits the chunk as before, and the evicted chunk, kept dirty, fails
// a Flush that cannot write it and is committed with its contents by one
// that can. With the write kept anyway, a Write that
// failed became durable at the next Flush.
func TestFailedWriteIsNotApplied(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		chunk uint64 // bytes per chunk (one row)
	}{
		{"victim write-back fails", 1 << 10},
		{"own write-back of a bypass chunk fails", 8 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var arm atomic.Bool
			mem := vfd.NewMem()
			fd := vfd.NewFault(mem, armedWriteFault(&arm))
			// Bypass threshold 4 KiB: 1 KiB chunks stay cached, 8 KiB
			// ones bypass. Direct writes off: every write goes through
			// the cache, as partial writes do. The active limit is the
			// quiescent one and nothing is pre-encoded, so the background
			// trim never makes the room the write needs before it asks.
			opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 10, ActiveMultiplier: 1, PreEncodeBytes: -1, NoDirectWrites: true}}
			f := tCreate(t, fd, opts)
			const rows = 64
			spec := DatasetSpec{Type: Uint8, Shape: []uint64{rows, tc.chunk}, Chunk: []uint64{1, tc.chunk}}
			ds, err := f.CreateDataset(ctx, "d", spec)
			must(t, err)
			ref := newRef(spec.Shape, 1, nil)
			row := func(r uint64) Selection { return Box([]uint64{r, 0}, []uint64{1, tc.chunk}) }
			// Committed rows, then dirty ones filling the cache.
			for r := uint64(0); r < rows; r++ {
				b := pattern(int(tc.chunk), byte(r+1))
				must(t, ds.Write(ctx, row(r), b))
				ref.write(row(r), b)
				if r == rows/2 {
					must(t, f.Flush(ctx))
				}
			}
			if st := f.Cache().Stats(); tc.chunk == 1<<10 && st.DirtyBytes == 0 {
				t.Fatal("no dirty chunk left to evict")
			}
			// Rewrite half of a committed row that is not resident.
			victimsBefore := f.Cache().Stats().DirtyEvictions
			half := Box([]uint64{0, 0}, []uint64{1, tc.chunk / 2})
			arm.Store(true)
			err = ds.Write(ctx, half, pattern(int(tc.chunk/2), 200))
			if !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrIO) {
				t.Fatalf("write with a failing write-back: %v (injected %d)", err, fd.Injected())
			}
			if tc.chunk == 1<<10 && f.Cache().Stats().DirtyEvictions != victimsBefore {
				t.Fatal("a victim counted as evicted although its write failed")
			}
			ref.verify(t, ds)
			if tc.chunk == 1<<10 {
				// The victim is still dirty: its write-back's failure
				// surfaces on the Flush that writes it.
				arm.Store(true)
				if err := f.Flush(ctx); !errors.Is(err, syscall.EIO) {
					t.Fatalf("flush with the victim's write-back failing: %v", err)
				}
			}
			must(t, f.Flush(ctx))
			ref.verify(t, ds)
			must(t, f.Close(ctx))
			g, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true})
			must(t, err)
			defer g.Close(ctx)
			d, err := g.OpenDataset(ctx, "d", nil)
			must(t, err)
			ref.verify(t, d)
			got := make([]byte, tc.chunk)
			must(t, d.Read(ctx, row(0), got))
			if !bytes.Equal(got, pattern(int(tc.chunk), 1)) {
				t.Fatal("row 0 committed with the failed write")
			}
		})
	}
}
