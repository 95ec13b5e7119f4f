// Package resource is the admission control in front of the shared chunk
// cache: the "resource allocation module" of seed 000 §5.2. Requests state
// how much cache memory they need; an Admitter lets them in only while the
// cache can serve all admitted requests at once without thrashing, first
// come first served, and runs a request larger than the whole cache alone
// ("Such I/O requests will require exclusive access to the shared chunk
// cache if we are to avoid thrashing", seed 000 §5.2).
//
// Also here: Split, which cuts a request's per-chunk sizes into the fewest
// consecutive sub-lists that each fit the space S eviction can free (seed
// 000 §3.6 and §3.7), and Estimator, which keeps a per-dataset moving
// average of a chunk's in-memory size to estimate a request's memory before
// the chunks are loaded.
//
// Admitter and Estimator are safe for concurrent use; Split is a pure
// function.
package resource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrInvalid reports a bad argument (non-positive capacity or budget,
// negative size). Check with errors.Is.
var ErrInvalid = errors.New("resource: invalid argument")

// Options configures an Admitter.
type Options struct {
	// Capacity is how many bytes of cache memory admitted requests may hold
	// at once, typically the cache's active limit. Required (> 0); there is
	// no sensible default without knowing the cache.
	Capacity int64
}

// Validate reports whether o is usable.
func (o Options) Validate() error {
	if o.Capacity <= 0 {
		return fmt.Errorf("%w: Capacity %d must be > 0", ErrInvalid, o.Capacity)
	}
	return nil
}

// Admitter admits requests against a byte capacity, in arrival order.
//
// Rules:
//   - FIFO: a request is admitted only when every request that arrived
//     before it has been admitted (or withdrew). A large waiting request is
//     therefore never starved by a stream of small ones behind it; the
//     price is that a small request that would fit waits behind it.
//   - A request of more than Capacity bytes is charged Capacity: it is
//     admitted only when nothing else is in, and nothing else is admitted
//     until it is released. The caller then processes it in pieces
//     (Split) with the whole cache to itself.
//   - Every wait honours ctx. A waiter whose ctx ends is removed, and the
//     waiters behind it are re-evaluated at once (the head may have been
//     the only thing holding them back).
type Admitter struct {
	capacity int64

	// Snapshots for InUse and Waiting; written under mu, read without it.
	inUse   atomic.Int64
	waiting atomic.Int64

	mu struct {
		sync.Mutex
		// inUse is the sum of the charges of admitted, unreleased
		// requests. INVARIANT: 0 <= inUse <= capacity.
		inUse int64
		// head and tail of the FIFO queue of waiters.
		// INVARIANT: the queue is empty or head does not fit
		// (inUse+head.charge > capacity): grant() runs after every change.
		head, tail *waiter
	}
}

type waiter struct {
	charge     int64
	ready      chan struct{} // closed under mu when admitted
	prev, next *waiter       // queue links, guarded by mu
	admitted   bool          // guarded by mu
}

// New returns an Admitter with nothing admitted.
func New(o Options) (*Admitter, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Admitter{capacity: o.Capacity}, nil
}

// Capacity returns the configured capacity.
func (a *Admitter) Capacity() int64 { return a.capacity }

// InUse reports the bytes currently admitted (oversized requests count as
// Capacity). A snapshot: it may be stale by the time it is read.
func (a *Admitter) InUse() int64 { return a.inUse.Load() }

// Waiting reports how many requests are queued. A snapshot.
func (a *Admitter) Waiting() int { return int(a.waiting.Load()) }

// Admit waits until a request needing bytes of cache memory may run and
// returns the function that gives the memory back (idempotent). It returns
// ctx.Err() if ctx ends first, with nothing admitted. A request of zero
// bytes needs nothing and is admitted at once.
func (a *Admitter) Admit(ctx context.Context, bytes int64) (release func(), err error) {
	if bytes < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrInvalid, bytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if bytes == 0 {
		return func() {}, nil
	}
	charge := min(bytes, a.capacity)

	a.mu.Lock()
	if a.mu.head == nil && a.mu.inUse+charge <= a.capacity {
		a.setInUseLocked(a.mu.inUse + charge)
		a.mu.Unlock()
		return a.releaser(charge), nil
	}
	w := &waiter{charge: charge, ready: make(chan struct{})}
	a.pushLocked(w)
	a.mu.Unlock()

	select {
	case <-w.ready:
		return a.releaser(charge), nil
	case <-ctx.Done():
	}
	a.mu.Lock()
	if w.admitted {
		// Admitted while ctx ended: give the memory back, as if never
		// admitted; the caller asked to stop.
		a.setInUseLocked(a.mu.inUse - charge)
	} else {
		a.removeLocked(w)
	}
	a.grantLocked()
	a.mu.Unlock()
	return nil, ctx.Err()
}

func (a *Admitter) releaser(charge int64) func() {
	var once atomic.Bool
	return func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		a.mu.Lock()
		a.setInUseLocked(a.mu.inUse - charge)
		a.grantLocked()
		a.mu.Unlock()
	}
}

func (a *Admitter) setInUseLocked(n int64) {
	a.mu.inUse = n
	a.inUse.Store(n)
}

func (a *Admitter) pushLocked(w *waiter) {
	w.prev = a.mu.tail
	if a.mu.tail != nil {
		a.mu.tail.next = w
	} else {
		a.mu.head = w
	}
	a.mu.tail = w
	a.waiting.Add(1)
}

func (a *Admitter) removeLocked(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		a.mu.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		a.mu.tail = w.prev
	}
	w.prev, w.next = nil, nil
	a.waiting.Add(-1)
}

// grantLocked admits waiters from the head for as long as they fit. It
// stops at the first that does not: FIFO.
func (a *Admitter) grantLocked() {
	for w := a.mu.head; w != nil && a.mu.inUse+w.charge <= a.capacity; w = a.mu.head {
		a.removeLocked(w)
		a.setInUseLocked(a.mu.inUse + w.charge)
		w.admitted = true
		close(w.ready)
	}
}

// Range is one sub-list of Split: sizes[Start:End], totalling Bytes.
type Range struct {
	Start, End int
	Bytes      int64
}

// Split divides sizes (per-chunk sizes in request order) into the minimal
// number of consecutive sub-lists whose totals are at most budget (seed 000
// §3.6: "divide this list into a minimal set of chunk I/O request
// sub-lists such that the sum of the sizes of the target chunks in each
// sub-list is less than S"; a sub-list exactly filling S fits, so "at
// most"). A single size larger than budget forms a sub-list of its own.
//
// Filling each sub-list greedily is optimal: the feasible sub-lists are
// closed under taking sub-intervals, so no cut can be placed later than the
// greedy one, and by induction greedy uses no more sub-lists than any other
// split.
func Split(budget int64, sizes []int64) ([]Range, error) {
	if budget <= 0 {
		return nil, fmt.Errorf("%w: budget %d must be > 0", ErrInvalid, budget)
	}
	var out []Range
	cur := Range{}
	for i, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("%w: size[%d] = %d is negative", ErrInvalid, i, s)
		}
		// s > budget-cur.Bytes is cur.Bytes+s > budget without overflow;
		// after an oversized piece budget-cur.Bytes < 0, so it cuts.
		if i > cur.Start && s > budget-cur.Bytes {
			cur.End = i
			out = append(out, cur)
			cur = Range{Start: i}
		}
		cur.Bytes += s
	}
	if len(sizes) > 0 {
		cur.End = len(sizes)
		out = append(out, cur)
	}
	return out, nil
}

// Split is the package Split with budget capped at the Admitter's
// capacity: a sub-list larger than the cache cannot be served without
// thrashing whatever the free space looks like.
func (a *Admitter) Split(budget int64, sizes []int64) ([]Range, error) {
	return Split(min(budget, a.capacity), sizes)
}
