package serialize

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestFastReadTakesNoTicket: with no writer on the shard a read holds
// without a ticket or a list entry, and reads of one region hold together.
func TestFastReadTakesNoTicket(t *testing.T) {
	s := New()
	h1, ok1 := s.TryFastRead(rd(box2(1, 0, 4, 0, 4)))
	h2, ok2 := s.TryFastRead(rd(box2(1, 0, 4, 0, 4)))
	if !ok1 || !ok2 {
		t.Fatal("fast read refused with no writer")
	}
	if s.ticket.Load() != 0 || inFlight(s) != 0 {
		t.Fatalf("fast reads took ticket %d, %d list entries", s.ticket.Load(), inFlight(s))
	}
	if n := s.readers.sum(shardOf(1)); n != 2 {
		t.Fatalf("reader count %d, want 2", n)
	}
	h1.Release()
	h2.Release()
	if n := s.readers.sum(shardOf(1)); n != 0 {
		t.Fatalf("reader count %d after release", n)
	}
	// Malformed, empty and multi-dataset reads go to the locked path.
	for _, r := range []Request{
		rd(Region{Dataset: 1, Lo: []uint64{1}, Hi: []uint64{0}}),
		rd(box2(1, 2, 2, 0, 4)),
		rd(box2(1, 0, 1, 0, 1), box2(2, 0, 1, 0, 1)),
	} {
		if _, ok := s.TryFastRead(r); ok {
			t.Fatalf("fast read accepted %+v", r)
		}
	}
}

// TestWriterDrainsFastReads: a write registered on the shard turns reads
// away from the fast path, waits for the fast reads already in (even a
// disjoint one: see the fast-hold contract), and fast reads resume once
// it is released.
func TestWriterDrainsFastReads(t *testing.T) {
	s := New()
	h, ok := s.TryFastRead(rd(box2(1, 0, 1, 0, 1)))
	if !ok {
		t.Fatal("fast read refused")
	}
	w := async(s, context.Background(), wr(box2(1, 5, 6, 5, 6)))
	waitWaiting(t, s, 1)
	notYet(t, w, "write while a fast read is in")
	if _, ok := s.TryFastRead(rd(box2(1, 7, 8, 7, 8))); ok {
		t.Fatal("fast read accepted while a writer is registered")
	}
	h.Release()
	relW := granted(t, w)
	relW()
	h, ok = s.TryFastRead(rd(box2(1, 0, 1, 0, 1)))
	if !ok {
		t.Fatal("fast read refused after the writer left")
	}
	h.Release()
	// Exclusive acquires drain the same way.
	h, _ = s.TryFastRead(rd(box2(1, 0, 1, 0, 1)))
	ex := asyncExclusive(s, context.Background(), 1)
	waitWaiting(t, s, 1)
	notYet(t, ex, "exclusive while a fast read is in")
	h.Release()
	granted(t, ex)()
}

// TestCancelDrainingWriter: a writer cancelled while it waits for fast
// reads withdraws, and the shard is open to fast reads again.
func TestCancelDrainingWriter(t *testing.T) {
	s := New()
	h, _ := s.TryFastRead(rd(box2(1, 0, 1, 0, 1)))
	ctx, cancel := context.WithCancel(context.Background())
	w := async(s, ctx, wr(box2(1, 0, 1, 0, 1)))
	waitWaiting(t, s, 1)
	cancel()
	if r := get(t, w); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled writer: %v", r.err)
	}
	if n := s.shards[shardOf(1)].writers.Load(); n != 0 {
		t.Fatalf("writers %d after the withdrawal", n)
	}
	h.Release()
	h, ok := s.TryFastRead(rd(box2(1, 0, 1, 0, 1)))
	if !ok {
		t.Fatal("fast read refused after the withdrawal")
	}
	h.Release()
	if inFlight(s) != 0 {
		t.Fatal("entries left")
	}
}

// TestFastReadsExcludeWriters is a stress test under the race detector:
// readers (fast when they can, locked otherwise) read a value that writers
// of the same region change without any other synchronization. The
// detector reports a read that overlaps a write; the check catches a read
// that sees a write half done.
func TestFastReadsExcludeWriters(t *testing.T) {
	s := New()
	var a, b int // a == b whenever no write runs
	var fast, locked atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	reg := rd(box2(3, 0, 2, 0, 2))
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				h, ok := s.TryFastRead(reg)
				if ok {
					fast.Add(1)
				} else {
					var err error
					if h, err = s.AcquireHold(ctx, reg); err != nil {
						t.Error(err)
						return
					}
					locked.Add(1)
				}
				if a != b {
					t.Errorf("read saw a write half done: %d, %d", a, b)
				}
				h.Release()
			}
		}()
	}
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				h, err := s.AcquireHold(ctx, wr(box2(3, 1, 2, 1, 2)))
				if err != nil {
					t.Error(err)
					return
				}
				a++
				runtime.Gosched()
				b++
				h.Release()
			}
		}()
	}
	wg.Wait()
	if fast.Load() == 0 {
		t.Fatal("no read took the fast path")
	}
	if inFlight(s) != 0 || s.readers.sum(shardOf(3)) != 0 || s.shards[shardOf(3)].writers.Load() != 0 {
		t.Fatal("state left behind")
	}
	t.Logf("%d fast, %d locked reads", fast.Load(), locked.Load())
}
