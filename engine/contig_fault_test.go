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

// enospcOnce fails the n-th (from 0) write of exactly size bytes with
// ENOSPC after letting the first half of it through: a disk that fills up
// part way through a piece.
func enospcOnce(size, n int64) vfd.Injector {
	var seen atomic.Int64
	return vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		if !info.Op.IsWrite() || info.Len != size || seen.Add(1)-1 != n {
			return vfd.Effect{}
		}
		return vfd.Effect{
			Err: fmt.Errorf("%w: %w", vfd.ErrInjected, syscall.ENOSPC),
			Partial: func(sorted []vfd.Extent) []vfd.Extent {
				x := sorted[0]
				return []vfd.Extent{{Off: x.Off, Buf: x.Buf[:len(x.Buf)/2]}}
			},
		}
	})
}

// TestContiguousRewriteFailureKeepsPiece: a whole piece written directly
// into the working extent, then written again, and that second direct
// write fails half way with ENOSPC. The failed Write must leave the
// dataset as it was: the piece reads, flushes, commits and reopens as
// the first write left it, and the file checks clean. Writing the second
// copy over the first in place lost the first (the only copy of an
// acknowledged write) and committed the torn bytes under the first
// copy's checksum. The same holds when the failing write is the third
// (the current copy is then elsewhere).
func TestContiguousRewriteFailureKeepsPiece(t *testing.T) {
	ctx := context.Background()
	const rowBytes, rows = 8192, 16 // two pieces of 8 rows (64 KiB)
	piece := int64(contigPieceBytes)
	for good := 1; good <= 3; good++ {
		t.Run(fmt.Sprintf("after %d good", good), func(t *testing.T) {
			mem := vfd.NewMem()
			fd := vfd.NewFault(mem, enospcOnce(piece, int64(good)))
			f := tCreate(t, fd, &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 10}})
			ds, err := f.CreateDataset(ctx, "c", DatasetSpec{Type: Uint8, Shape: []uint64{rows, rowBytes}, Layout: Contiguous})
			must(t, err)
			sel := Box([]uint64{0, 0}, []uint64{8, rowBytes})
			var last []byte
			for i := 0; i < good; i++ {
				last = pattern(int(piece), byte(i+1))
				must(t, ds.Write(ctx, sel, last))
			}
			if st := f.Cache().Stats(); st.DirectWrites != int64(good) {
				t.Fatalf("%d direct writes, want %d", st.DirectWrites, good)
			}
			if err := ds.Write(ctx, sel, pattern(int(piece), 99)); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrIO) {
				t.Fatalf("failing write: %v", err)
			}
			if fd.Injected() != 1 {
				t.Fatalf("%d faults injected", fd.Injected())
			}
			got := make([]byte, piece)
			must(t, ds.Read(ctx, sel, got))
			if !bytes.Equal(got, last) {
				t.Fatal("after the failed write the piece is not what the last good write left")
			}
			must(t, f.Flush(ctx))
			must(t, f.Close(ctx))
			if rep, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
				t.Fatalf("check: %v %q", err, rep.Problems)
			}
			g, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true})
			must(t, err)
			defer g.Close(ctx)
			d, err := g.OpenDataset(ctx, "c", nil)
			must(t, err)
			must(t, d.Read(ctx, sel, got))
			if !bytes.Equal(got, last) {
				t.Fatal("committed piece is not what the last good write left")
			}
		})
	}
}
