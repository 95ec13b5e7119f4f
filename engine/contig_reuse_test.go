package engine

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// pauseRead runs hook once, before the first read of exactly size bytes at
// off (an extent of a vector read, or a plain read): the moment between a
// reader's lookup of a location and its read of the bytes there.
type pauseRead struct {
	vfd.Driver
	off, size atomic.Int64
	hook      atomic.Pointer[func()]
}

func (p *pauseRead) at(off, size int64) bool {
	if off != p.off.Load() || size != p.size.Load() {
		return false
	}
	if h := p.hook.Swap(nil); h != nil {
		(*h)()
		return true
	}
	return false
}

func (p *pauseRead) ReadAt(b []byte, off int64) (int, error) {
	p.at(off, int64(len(b)))
	return p.Driver.ReadAt(b, off)
}

func (p *pauseRead) ReadV(exts []vfd.Extent) error {
	for _, x := range exts {
		if p.at(x.Off, int64(len(x.Buf))) {
			break
		}
	}
	return p.Driver.ReadV(exts)
}

// TestContiguousReadDuringCommit: a read of a piece that is not resident
// looks up its place, and before it reads the bytes there, commits move the
// piece and the space it was in is given to another dataset's piece. A
// commit copies every piece not rewritten since the last commit into the
// working extent and stops naming the old extent; freeing that extent (and
// the side slots) at once let the next allocation hand it out while a read
// that looked up the old place, holding its piece in the serializer, had
// still to read it, and the read found other bytes there: ErrCorrupt for a
// race, with nothing damaged. The same for a read whose piece was in its
// side slot when it looked it up, and for a partial write, which loads the
// piece through the cache.
func TestContiguousReadDuringCommit(t *testing.T) {
	ctx := context.Background()
	const rows, rowBytes = 12, 9000 // pieces of 7 and 5 rows
	pieceRows := uint64(contigPieceBytes / rowBytes)
	pieceBytes := int64(pieceRows * rowBytes)
	for _, tc := range []struct {
		name   string
		side   bool  // piece 0's current copy is in its side slot
		load   bool  // a partial write, which loads the piece, instead of a read
		bypass int64 // Config.BypassBytes: below a piece, reads go directly
	}{
		{"read", false, false, 0},
		{"read directly", false, false, 32 << 10},
		{"read side slot", true, false, 0},
		{"read side slot directly", true, false, 32 << 10},
		{"partial write", false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := &pauseRead{Driver: vfd.NewMem()}
			f := tCreate(t, pr, &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 20, BypassBytes: tc.bypass}})
			spec := DatasetSpec{Type: Uint8, Shape: []uint64{rows, rowBytes}, Layout: Contiguous}
			a, err := f.CreateDataset(ctx, "a", spec)
			must(t, err)
			// b's extent lands where piece 0 of a was: one piece fits the
			// start of a's old extent; a side slot, allocated after the
			// working extent, is freed with it, and the two coalesce.
			bRows := pieceRows
			if tc.side {
				bRows += rows
			}
			all := Box([]uint64{0, 0}, []uint64{bRows, rowBytes})
			b, err := f.CreateDataset(ctx, "b", DatasetSpec{Type: Uint8, Shape: []uint64{bRows, rowBytes}, Layout: Contiguous})
			must(t, err)
			first := Box([]uint64{0, 0}, []uint64{pieceRows, rowBytes})
			rest := Box([]uint64{pieceRows, 0}, []uint64{rows - pieceRows, rowBytes})
			want := pattern(int(pieceBytes), 1)
			must(t, a.Write(ctx, first, want))
			must(t, a.Write(ctx, rest, pattern(int((rows-pieceRows)*rowBytes), 2)))
			must(t, a.Evict(ctx))
			must(t, f.Flush(ctx))
			commits := 1
			if tc.side {
				// Written back twice after the commit, piece 0 is in its
				// side slot; the first commit copies it to its place and
				// stops naming the slot, the second makes the slot free.
				must(t, a.Write(ctx, first, pattern(int(pieceBytes), 3)))
				must(t, a.Evict(ctx))
				must(t, a.Write(ctx, first, want))
				must(t, a.Evict(ctx))
				commits = 2
			}
			l := a.s.store.(*contigLayout)
			l.mu.Lock()
			at := l.mu.committed.base
			if tc.side {
				at = l.mu.cur[0]
				if at == l.mu.wbase {
					at = 0
				}
			}
			l.mu.Unlock()
			if at == 0 {
				t.Fatal("piece 0 is not where the test needs it")
			}
			// The moves run beside the paused read, which goes on when
			// they are done or when a commit waits for it (drain): they
			// must not wait for each other.
			moved := make(chan struct{})
			var once sync.Once
			resume := func() { once.Do(func() { close(moved) }) }
			drained := func() { resume() }
			testHookContigDrain.Store(&drained)
			defer testHookContigDrain.Store(nil)
			var wg sync.WaitGroup
			defer wg.Wait()
			hook := func() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resume()
					step := func(err error) bool {
						if err != nil {
							t.Error(err)
						}
						return err == nil
					}
					// The piece moves: a write of the other piece makes a
					// working extent, and the commits copy piece 0 into it.
					for i := 0; i < commits; i++ {
						if !step(a.Write(ctx, rest, pattern(int((rows-pieceRows)*rowBytes), byte(10+i)))) || !step(f.Flush(ctx)) {
							return
						}
					}
					// Space freed is handed out again: the other dataset's
					// extent lands where the piece was.
					_ = step(b.Write(ctx, all, pattern(int(bRows*rowBytes), 7))) && step(b.Flush(ctx)) && step(f.Flush(ctx))
				}()
				<-moved
			}
			pr.off.Store(at)
			pr.size.Store(pieceBytes)
			pr.hook.Store(&hook)
			if tc.load {
				// A write of part of piece 0: a read-modify-write.
				must(t, a.Write(ctx, Box([]uint64{0, 0}, []uint64{1, 10}), want[:10]))
			} else {
				got := make([]byte, pieceBytes-rowBytes)
				must(t, a.Read(ctx, Box([]uint64{0, 0}, []uint64{pieceRows - 1, rowBytes}), got))
				if !bytes.Equal(got, want[:len(got)]) {
					t.Fatal("piece 0 reads other bytes than were written")
				}
			}
			wg.Wait()
			if pr.hook.Load() != nil {
				t.Fatal("no read of piece 0 at its looked-up place")
			}
			got := make([]byte, pieceBytes)
			must(t, a.Read(ctx, first, got))
			if !bytes.Equal(got, want) {
				t.Fatal("piece 0 is not what was written")
			}
			must(t, f.Close(ctx))
			if rep, err := Check(ctx, "", &Options{Driver: pr.Driver}); err != nil || len(rep.Problems) > 0 {
				t.Fatalf("check: %v %q", err, rep.Problems)
			}
		})
	}
}
