// Package resource is the admission control in front of the shared chunk
// cache: the "resource allocation module" of SCC design §5.2. Requests state
// how much cache memory they need; an Admitter lets them in only while the
// cache can serve all admitted requests at once without thrashing, first
// come first served, and runs a request larger than the whole cache alone
// ("Such I/O requests will require exclusive access to the shared chunk
// cache if we are to avoid thrashing", SCC design §5.2).
//
// Also here: the one splitting rule of the project (Cut, and Split built on
// it), which cuts a request's per-chunk sizes into the fewest consecutive
// sub-lists that each fit a budget (SCC design §3.6 and §3.7), and Estimator,
// which keeps a per-dataset moving average of a chunk's in-memory size to
// estimate a request's memory before the chunks are loaded.
//
// # Who owns admission
//
// Memory is a property of the cache, so every file sharing a cache.Cache
// must share one Admitter. The cache carries it (cache.Cache.Admission),
// typed only as the small cache.Admission interface because cache may not
// import resource (DESIGN: engine → resource, cache → lockfree/pool/vfd);
// the engine creates it there on first use with NewForCache and the cache's
// active limit, and the cache calls SetCapacity whenever that limit
// changes. No registry keyed by caches exists anywhere.
//
// # The splitting rule
//
// One rule cuts every large request into pieces, wherever it is applied:
//
//	greedy consecutive sub-lists, in request order, each totalling at
//	most the budget; a single item larger than the budget forms a
//	sub-list of its own.
//
// Greedy filling yields the fewest sub-lists (see Split). The rule is
// applied with three budgets:
//   - the engine, BatchBytes (half the capacity): the batches of a request
//     that are admitted one after another;
//   - the cache, S (the active limit minus the bytes other requests hold
//     in flight): the sub-lists of an admitted batch loaded at once (seed
//     000 §3.6);
//   - the cache, an eighth of the active limit: the rounds of a write-back
//     of dirty chunks (one vector write each).
//
// The cache cannot import this package, so it carries a copy of Cut
// (cache/io.go cut) that a test in cache checks against Cut.
//
// Admitter and Estimator are safe for concurrent use; Cut and Split are
// pure functions.
package resource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/internal/invariants"
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
//     (Split) with the whole cache to itself. More generally the head
//     waiter is admitted when it fits beside what is in, or when nothing
//     is in: a request always runs alone if it can run no other way.
//   - Capacity follows the cache's active limit: SetCapacity changes it
//     and re-evaluates the waiters at once (a larger capacity admits
//     them; a smaller one admits nothing new until releases make room).
//   - Every wait honours ctx. A waiter whose ctx ends is removed, and the
//     waiters behind it are re-evaluated at once (the head may have been
//     the only thing holding them back).
type Admitter struct {
	// Snapshots for Capacity, InUse and Waiting; written under mu, read
	// without it.
	capacity atomic.Int64
	inUse    atomic.Int64
	waiting  atomic.Int64

	mu struct {
		sync.Mutex
		// capacity is the byte capacity. INVARIANT: > 0.
		capacity int64
		// inUse is the sum of the charges of admitted, unreleased
		// requests; a request's charge is min(bytes, capacity) at the
		// moment it is admitted. INVARIANT: 0 <= inUse <= capacity,
		// except after SetCapacity lowered capacity below what was
		// already in; then nothing is admitted until releases bring
		// inUse under it again.
		inUse int64
		// head and tail of the FIFO queue of waiters.
		// INVARIANT: the queue is empty or head may not run yet
		// (!fitsLocked(head)): grantLocked runs after every change of
		// inUse, capacity or the head.
		head, tail *waiter
	}
}

type waiter struct {
	bytes      int64         // what the request asked for
	charge     int64         // what it was charged; set when admitted
	ready      chan struct{} // closed under mu when admitted
	prev, next *waiter       // queue links, guarded by mu
	admitted   bool          // guarded by mu
}

// New returns an Admitter with nothing admitted.
func New(o Options) (*Admitter, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	a := &Admitter{}
	a.mu.capacity = o.Capacity
	a.capacity.Store(o.Capacity)
	return a, nil
}

// NewForCache returns the Admitter of a cache whose active limit is limit
// (a limit below 1 counts as 1). It is the constructor the engine hands to
// cache.Cache.Admission; the cache keeps the result and calls SetCapacity
// when its limit changes.
func NewForCache(limit int64) *Admitter {
	a, err := New(Options{Capacity: max(limit, 1)})
	if err != nil {
		panic(err) // unreachable: the capacity is positive
	}
	return a
}

// Capacity returns the current capacity. A snapshot.
func (a *Admitter) Capacity() int64 { return a.capacity.Load() }

// SetCapacity changes the capacity (the cache's active limit changed) and
// admits at once the waiters that fit under the new one. Requests already
// admitted keep their charge. A capacity below 1 counts as 1.
func (a *Admitter) SetCapacity(capacity int64) {
	capacity = max(capacity, 1)
	a.mu.Lock()
	a.mu.capacity = capacity
	a.capacity.Store(capacity)
	a.grantLocked()
	a.mu.Unlock()
}

// BatchBytes is the budget of one admitted batch of a large request: half
// the capacity (at least 1). A request over it is cut by Cut into batches
// admitted one after another, so that a huge request never holds the whole
// cache and small requests keep flowing between its batches.
func (a *Admitter) BatchBytes() int64 { return max(a.Capacity()/2, 1) }

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

	a.mu.Lock()
	if a.mu.head == nil && a.fitsLocked(bytes) {
		charge := min(bytes, a.mu.capacity)
		a.setInUseLocked(a.mu.inUse + charge)
		a.mu.Unlock()
		return a.releaser(charge), nil
	}
	w := &waiter{bytes: bytes, ready: make(chan struct{})}
	a.pushLocked(w)
	a.mu.Unlock()

	select {
	case <-w.ready:
		return a.releaser(w.charge), nil // charge was written before ready closed
	case <-ctx.Done():
	}
	a.mu.Lock()
	if w.admitted {
		// Admitted while ctx ended: give the memory back, as if never
		// admitted; the caller asked to stop.
		a.setInUseLocked(a.mu.inUse - w.charge)
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
	if invariants.Enabled {
		// Growth past the capacity means a request was admitted that does
		// not fit (a lowered capacity is only ever left by releases).
		if n < 0 || n > a.mu.inUse && n > a.mu.capacity {
			panic(invariants.Violation("resource: %d bytes admitted (was %d) against a capacity of %d", n, a.mu.inUse, a.mu.capacity))
		}
	}
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
	if n := a.waiting.Add(-1); invariants.Enabled && n < 0 {
		panic(invariants.Violation("resource: %d requests waiting", n))
	}
}

// fitsLocked reports whether a request of bytes (> 0) may be admitted
// now, ignoring the queue: it fits beside what is in (charged at most the
// capacity), or nothing is in, so it runs alone.
func (a *Admitter) fitsLocked(bytes int64) bool {
	// min(bytes, capacity) <= capacity-inUse without overflow; the right
	// side is negative after SetCapacity lowered capacity under inUse.
	return a.mu.inUse == 0 || min(bytes, a.mu.capacity) <= a.mu.capacity-a.mu.inUse
}

// grantLocked admits waiters from the head for as long as they may run. It
// stops at the first that may not: FIFO.
func (a *Admitter) grantLocked() {
	for w := a.mu.head; w != nil && a.fitsLocked(w.bytes); w = a.mu.head {
		a.removeLocked(w)
		w.charge = min(w.bytes, a.mu.capacity)
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

// Cut applies the splitting rule (see the package comment) to the items
// [0, n) whose sizes size reports: it returns the end of the first
// sub-list and its total bytes. The sub-list is items [0, end): the longest
// prefix totalling at most budget, but never empty (an item larger than
// budget forms a sub-list alone). Call it again on the rest for the next
// sub-list. n == 0 returns (0, 0). A negative size counts as 0; a budget
// below 1 counts as 1. Cut does not retain size, so a closure passed to it
// need not escape to the heap.
func Cut(budget int64, n int, size func(i int) int64) (end int, bytes int64) {
	budget = max(budget, 1)
	for end < n {
		s := max(size(end), 0)
		// s > budget-bytes is bytes+s > budget without overflow.
		if end > 0 && s > budget-bytes {
			break
		}
		bytes += s
		end++
	}
	return end, bytes
}

// Split divides sizes (per-chunk sizes in request order) into the minimal
// number of consecutive sub-lists whose totals are at most budget (SCC design
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
	for i, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("%w: size[%d] = %d is negative", ErrInvalid, i, s)
		}
	}
	var out []Range
	for start := 0; start < len(sizes); {
		rest := sizes[start:]
		n, bytes := Cut(budget, len(rest), func(i int) int64 { return rest[i] })
		out = append(out, Range{Start: start, End: start + n, Bytes: bytes})
		start += n
	}
	return out, nil
}

// Split is the package Split with budget capped at BatchBytes: the pieces
// of a request that are admitted one after another.
func (a *Admitter) Split(budget int64, sizes []int64) ([]Range, error) {
	return Split(min(budget, a.BatchBytes()), sizes)
}
