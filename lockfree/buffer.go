package lockfree

import (
	"sync"
	"sync/atomic"
)

// Buffer is a lossy, striped buffer of recorded events (cache accesses).
//
// Why lossy: replacement order only needs to be approximately right, and a
// hit must never wait for the policy lock. Record takes one stripe's mutex
// with TryLock; when another goroutine holds that stripe, or the stripe is
// full, the event is dropped (counted in Drops) instead of waiting.
//
// Who replays: Record never applies events itself. When a stripe reaches
// half its capacity Record reports ready, once, and the caller wakes a
// goroutine of its own that calls Drain (the cache's replayer). Drain
// swaps each stripe's array for a spare and hands the full one to its
// callback outside the stripe's lock, so recording goes on, into the
// spare, while a batch is being applied. The half-full mark leaves the
// drainer the other half to get there before events are dropped.
//
// This is the same trade-off Caffeine and otter make for their read
// buffers: the reading goroutine appends, a maintenance task replays.
type Buffer[T any] struct {
	stripes []bufStripe[T]
	mask    uint32
	size    int
	mark    int // Record reports ready when a stripe reaches mark events
	drops   atomic.Int64
	// drainMu serializes Drain calls: it guards every stripe's spare.
	drainMu sync.Mutex
}

type bufStripe[T any] struct {
	mu  sync.Mutex
	buf []T // guarded by mu; never longer than size
	// spare is the array Drain swaps in for buf. Guarded by
	// Buffer.drainMu; empty between Drains.
	spare []T
	_     [cacheLine]byte
}

// NewBuffer returns a Buffer whose stripes each hold size events; Record
// reports ready when a stripe reaches size/2 of them (at least 1).
func NewBuffer[T any](size int) *Buffer[T] {
	if size < 1 {
		size = 1
	}
	n := procStripes()
	return &Buffer[T]{stripes: make([]bufStripe[T], n), mask: uint32(n - 1), size: size, mark: max(size/2, 1)}
}

// Record adds v to the stripe of the caller's P. kept is false when v was
// dropped (the stripe busy or full). ready is true for exactly the event
// that brought the stripe to its mark (half its capacity) since it was
// last drained: the caller should then have Drain called soon. Record
// allocates only a stripe's first array.
func (b *Buffer[T]) Record(v T) (kept, ready bool) {
	s := &b.stripes[uint32(ProcHint())&b.mask]
	if !s.mu.TryLock() {
		b.drops.Add(1)
		return false, false
	}
	if s.buf == nil {
		s.buf = make([]T, 0, b.size)
	}
	n := len(s.buf)
	if n >= b.size {
		s.mu.Unlock()
		b.drops.Add(1)
		return false, false
	}
	s.buf = append(s.buf, v)
	s.mu.Unlock()
	return true, n+1 == b.mark
}

// Drain calls f with the events of every stripe and empties them. Each
// stripe's lock is held only to swap its array for the spare, so Records
// on it go on while f runs. f must not call Drain, and must not keep the
// slice. Drains are serialized (one at a time).
func (b *Buffer[T]) Drain(f func([]T)) {
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	for i := range b.stripes {
		s := &b.stripes[i]
		s.mu.Lock()
		batch := s.buf
		if len(batch) == 0 {
			s.mu.Unlock()
			continue
		}
		if s.spare == nil {
			s.spare = make([]T, 0, b.size) // once per stripe
		}
		s.buf = s.spare
		s.mu.Unlock()
		f(batch)
		clear(batch)
		s.spare = batch[:0]
	}
}

// Drops reports how many events were dropped because their stripe was busy.
func (b *Buffer[T]) Drops() int64 { return b.drops.Load() }
