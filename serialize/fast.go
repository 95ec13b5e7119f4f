package serialize

import (
	"context"
	"runtime"
	"sync/atomic"
	_ "unsafe" // go:linkname

	"github.com/scc-dev/scc/internal/invariants"
)

// Fast reads.
//
// The locked path costs every request two acquisitions of its dataset's
// shard mutex and an increment of the global ticket: with several
// goroutines reading one dataset, those are words every request writes,
// and they made concurrent reads of resident chunks slower than one
// goroutine alone. But a read conflicts only with writes (and exclusive
// acquires): while none is registered on its shard, a read can neither
// wait for anything nor make anything wait, so it need not be in the
// lists at all. A fast read only has to be visible to a writer that
// arrives while it runs, so that the writer waits for it.
//
// Protocol (a reader-biased lock in the style of BRAVO, Dice & Kogan
// 2019, with per-P reader counts):
//
//   - A fast read increments its P's reader count for the shard, then
//     loads shard.writers. Zero: it runs, and on release decrements the
//     same count (the same one, not the current P's: each count then stays
//     the number of readers registered in it, never negative, so a writer
//     summing the counts one by one cannot see a reader's decrement
//     without its increment). Non-zero: it decrements again and takes the
//     locked path.
//   - A writer (or exclusive acquire) increments shard.writers while
//     registering in the list, under the shard mutex, then waits until
//     the shard's reader counts sum to zero (drainFast).
//
// Both sides store, then load the other side's word; Go's atomics are
// sequentially consistent, so at least one of them sees the other: either
// the reader sees the writer and locks, or the writer sees the reader and
// waits for it. A reader that arrives after a writer registered takes the
// locked path and is ordered after that writer like any later request, so
// receipt order holds: fast reads are exactly the reads that came before
// every registered writer of their shard.
//
// Cost to writers: a writer waits for every fast read in flight on its
// shard when it registers, also disjoint ones and reads of other datasets
// of the shard. That would break "disjoint requests never wait for each
// other" for a read that runs long (a miss that goes to the disk), so fast
// holds are only for work that is short and never blocks: TryFastRead is
// a separate entry point, and its contract is that the caller does no
// more than copy resident bytes under it (the engine serves resident
// chunks with cache.ServeResident under a fast hold, and for anything
// else releases it and starts over on the locked path). A writer then
// waits at most for a few copies already under way, the way it would
// wait for a latch, and no new fast read starts meanwhile. While writes
// keep arriving on a shard its reads use the locked path, which is what
// they did before fast reads existed.
//
// Waking: a fast read that leaves while shard.writers is non-zero closes
// shard.drain. A draining writer takes the channel under the shard mutex
// before it sums the counts, so a read that leaves after the sum closes
// that very channel (or a later one, made only after it was closed).

// Hold is an acquired request, returned by AcquireHold. Release it exactly
// once. The zero Hold holds nothing (its Release does nothing).
type Hold struct {
	req  *request // locked path
	gen  uint64
	slot *atomic.Int32 // fast read: the reader count it incremented
	sh   *shard
}

// Release ends the hold: later conflicting requests may run.
func (h Hold) Release() {
	switch {
	case h.slot != nil:
		if n := h.slot.Add(-1); invariants.Enabled && n < 0 {
			panic(invariants.Violation("serialize: fast read slot counts %d readers", n))
		}
		if h.sh.writers.Load() != 0 {
			h.sh.wakeDrain()
		}
	case h.req != nil:
		h.req.release(h.gen)
	}
}

// releaser wraps h in the idempotent release function of Acquire.
func (h Hold) releaser() func() {
	if h.req == nil && h.slot == nil {
		return func() {}
	}
	if h.slot == nil {
		return func() { h.req.release(h.gen) } // release checks gen itself
	}
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			h.Release()
		}
	}
}

// TryFastRead holds the read r without taking any lock or writing any
// word other requests write, when r touches one dataset and no write or
// exclusive request is registered on the dataset's shard; ok false means
// use Acquire or AcquireHold. A malformed or empty r also reports false
// (Acquire reports the error, or holds nothing).
//
// Contract: under a fast hold the caller does only short work that never
// blocks (copying resident bytes), because a writer that registers
// meanwhile waits for it even when they are disjoint (see above).
func (s *Serializer) TryFastRead(r Request) (h Hold, ok bool) {
	var ds uint64
	found := false
	for _, g := range r.Regions {
		if len(g.Lo) != len(g.Hi) {
			return Hold{}, false
		}
		for d := range g.Lo {
			if g.Lo[d] > g.Hi[d] {
				return Hold{}, false
			}
		}
		if isEmpty(g.Lo, g.Hi) {
			continue
		}
		if found && g.Dataset != ds {
			return Hold{}, false // several datasets: the locked path orders them
		}
		ds, found = g.Dataset, true
	}
	if !found {
		return Hold{}, false
	}
	return s.TryFastReadDataset(ds)
}

// drainFast waits until no fast read is in flight on shard k. The caller
// has registered a writer there, so no new fast read starts.
func (s *Serializer) drainFast(ctx context.Context, k int) error {
	sh := &s.shards[k]
	for {
		sh.mu.Lock()
		if sh.drain == nil {
			sh.drain = make(chan struct{})
		}
		ch := sh.drain
		sh.mu.Unlock()
		if s.readers.sum(k) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (sh *shard) wakeDrain() {
	sh.mu.Lock()
	ch := sh.drain
	sh.drain = nil
	sh.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// readerCounts holds the fast-read counts: one row of numShards counters
// per P stripe, so that a P's reads write only its own row (4 cache
// lines), and a writer sums one column.
type readerCounts struct {
	c    []atomic.Int32
	mask int
}

func newReaderCounts() readerCounts {
	n := 1
	for n < runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	// A spare row on each side keeps the first and last rows off lines
	// shared with other allocations.
	c := make([]atomic.Int32, (n+2)*numShards)
	return readerCounts{c: c[numShards : (n+1)*numShards], mask: n - 1}
}

func (r *readerCounts) slot(k int) *atomic.Int32 {
	return &r.c[(procHint()&r.mask)*numShards+k]
}

func (r *readerCounts) sum(k int) int32 {
	var s int32
	for i := k; i < len(r.c); i += numShards {
		s += r.c[i].Load()
	}
	return s
}

// procHint is lockfree.ProcHint (see there for why the P index), repeated
// here because serialize imports only the standard library.
func procHint() int {
	p := runtime_procPin()
	runtime_procUnpin()
	return p
}

//go:linkname runtime_procPin runtime.procPin
func runtime_procPin() int

//go:linkname runtime_procUnpin runtime.procUnpin
func runtime_procUnpin()
