package lockfree

import (
	"sync"
	"sync/atomic"
)

// Buffer is a lossy, striped buffer of recorded events (cache accesses).
//
// Why lossy: replacement order only needs to be approximately right, and a
// hit must never wait for the policy lock. Add takes one stripe's mutex with
// TryLock; when another goroutine holds that stripe the event is dropped
// (counted in Drops) instead of waiting. When a stripe fills up, Add hands
// the whole batch back to the caller, who may apply it (for example under
// the policy lock acquired with TryLock) or drop it.
//
// This is the same trade-off Caffeine and Ristretto make for their read
// buffers.
type Buffer[T any] struct {
	stripes []bufStripe[T]
	mask    uint32
	size    int
	drops   atomic.Int64
}

type bufStripe[T any] struct {
	mu  sync.Mutex
	buf []T // guarded by mu; never longer than size
	_   [cacheLine]byte
}

// NewBuffer returns a Buffer whose stripes each hold size events.
func NewBuffer[T any](size int) *Buffer[T] {
	if size < 1 {
		size = 1
	}
	n := procStripes()
	return &Buffer[T]{stripes: make([]bufStripe[T], n), mask: uint32(n - 1), size: size}
}

// Add records v and reports whether it was kept (false: dropped because its
// stripe was busy). When v's stripe becomes full, Add returns its events as
// full (the stripe starts empty again) and the caller owns that slice.
func (b *Buffer[T]) Add(v T) (full []T, kept bool) {
	// The P's stripe (see ProcHint): one goroutine runs on a P at a time,
	// so TryLock fails only when a goroutine was preempted inside Add.
	s := &b.stripes[uint32(ProcHint())&b.mask]
	if !s.mu.TryLock() {
		b.drops.Add(1)
		return nil, false
	}
	if s.buf == nil {
		s.buf = make([]T, 0, b.size)
	}
	s.buf = append(s.buf, v)
	if len(s.buf) >= b.size {
		full = s.buf
		s.buf = nil
	}
	s.mu.Unlock()
	return full, true
}

// AddFlush records v like Add, but when v's stripe becomes full it calls
// flush with the stripe's events while it holds the stripe, and then
// empties the stripe for reuse: no slice is handed over, so recording
// allocates nothing in steady state (Add allocates a new stripe slice per
// batch). flush must not keep the slice, must not call Add or AddFlush on
// the same Buffer, and should be short: Adds on the same stripe are
// dropped meanwhile. It may take a lock that is held by a caller of Drain
// only with TryLock (Drain takes the stripes while its caller holds it).
func (b *Buffer[T]) AddFlush(v T, flush func([]T)) (kept bool) {
	s := &b.stripes[uint32(ProcHint())&b.mask]
	if !s.mu.TryLock() {
		b.drops.Add(1)
		return false
	}
	if s.buf == nil {
		s.buf = make([]T, 0, b.size)
	}
	s.buf = append(s.buf, v)
	if len(s.buf) >= b.size {
		flush(s.buf)
		clear(s.buf)
		s.buf = s.buf[:0]
	}
	s.mu.Unlock()
	return true
}

// Drain calls f with the events of every stripe and empties them. f must not
// call Add on the same Buffer.
func (b *Buffer[T]) Drain(f func([]T)) {
	for i := range b.stripes {
		s := &b.stripes[i]
		s.mu.Lock()
		batch := s.buf
		s.buf = s.buf[:0]
		if len(batch) > 0 {
			f(batch)
		}
		clear(batch)
		s.mu.Unlock()
	}
}

// Drops reports how many events were dropped because their stripe was busy.
func (b *Buffer[T]) Drops() int64 { return b.drops.Load() }
