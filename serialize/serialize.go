// Package serialize orders the I/O requests that reach the shared chunk
// cache: the "serialization module" of SCC design §5.2. When requests are
// served in parallel, only non-conflicting ones may run at once: overlapping
// writes, and reads overlapping a write, run one after the other in the
// order the requests arrived; overlapping reads run together; requests on
// disjoint regions never wait for each other. Changing a dataset's extent
// drains the dataset's in-flight requests and holds new ones until the
// change is done (SCC design §3.4, §5.2; AcquireExclusive).
//
// A request is described in chunk space (per-dimension [lo,hi) ranges of
// chunk coordinates), one axis-aligned box per dataset it touches; the
// engine builds it from the selection before it enters the cache (DESIGN.md
// "A write, walked through", step 2).
//
// Rules, with a ticket taken at Acquire fixing the receipt order:
//
//   - Two requests conflict when they touch the same dataset with
//     intersecting boxes and at least one of them writes; an exclusive
//     acquire conflicts with every request on its dataset.
//   - A request waits exactly for the earlier requests it conflicts with,
//     running or waiting. So a read never overtakes an earlier waiting
//     write it overlaps (no starvation of writers), and a request that
//     spans several datasets is ordered correctly on each.
//   - A waiter whose ctx ends is removed, and requests that waited only for
//     it proceed.
//
// Waits-for edges always point from a later ticket to an earlier one, so
// they never form a cycle: the serializer cannot deadlock by itself.
//
// A Serializer is safe for concurrent use. Its state is sharded by dataset:
// requests on datasets in different shards share no lock, and an
// uncontended Acquire/release takes one shard mutex twice. Reads that meet
// no writer take no lock at all (fast.go).
package serialize

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/internal/invariants"
)

// ErrInvalid reports a malformed request (Lo and Hi of different lengths,
// or Lo > Hi in some dimension). Check with errors.Is.
var ErrInvalid = errors.New("serialize: invalid request")

// Region is an axis-aligned box of chunk coordinates in one dataset:
// dimension d covers [Lo[d], Hi[d]). A box with Lo[d] == Hi[d] in some
// dimension is empty and conflicts with nothing.
type Region struct {
	Dataset uint64
	Lo, Hi  []uint64
}

// Request is one I/O request: the regions it touches (several may name the
// same dataset) and whether it writes them.
type Request struct {
	Regions []Region
	Write   bool
}

// numShards is a power of two; 64 shards keep two busy datasets on
// different locks with high probability at a few KiB of memory.
const numShards = 64

// Serializer orders requests. The zero value is not usable; call New.
type Serializer struct {
	// ticket is the receipt order. It is advanced while the shard locks of
	// every dataset of the request are held, so on each dataset the list
	// order equals ticket order.
	ticket  atomic.Uint64
	waiting atomic.Int64 // requests currently blocked in Acquire
	shards  [numShards]shard
	// free recycles requests: an uncontended Acquire/release would
	// otherwise allocate and clear a ~300-byte request each time, which
	// dominated its cost. See request.state for why reuse is safe.
	free sync.Pool
	// readers counts the fast reads in flight (fast.go), per P stripe and
	// shard.
	readers readerCounts
}

type shard struct {
	mu sync.Mutex
	// lists maps a dataset id to its in-flight entries; guarded by mu.
	// INVARIANT: each list is in ticket order. Emptied lists stay in the
	// map so that a dataset's next request costs no map insert; empty
	// counts them, and they are swept when there are more than
	// maxEmptyLists (datasets no longer in use).
	lists map[uint64]*dsList
	empty int
	// writers counts the registered write and exclusive entries of the
	// shard's datasets; while it is non-zero, reads of the shard take the
	// locked path (fast.go). Changed under mu, read without it.
	writers atomic.Int32
	// drain is closed (and cleared) when a fast read leaves while writers
	// is non-zero; guarded by mu.
	drain chan struct{}
	_     [24]byte
}

const maxEmptyLists = 16

type dsList struct {
	entries []*entry
}

// entry is one request's presence on one dataset.
type entry struct {
	req       *request
	dataset   uint64
	exclusive bool
	boxes     []box // non-empty boxes only
	oneBox    [1]box
	// dependents are later requests that counted this entry among their
	// blockers; guarded by the dataset's shard mutex. Each is decremented
	// once when this entry leaves the list.
	dependents []*request
}

type box struct{ lo, hi []uint64 }

// request is one Acquire. Fields other than blockers, ready and state are
// immutable from registration until release.
//
// Requests are recycled through Serializer.free. Two things could still
// point at a recycled request, and both are excluded:
//   - a release function kept by the caller: it carries the generation it
//     was made for and does nothing unless state still holds that
//     generation, unreleased;
//   - an earlier entry's dependents list: a request is recycled only when
//     its blockers count is zero at release, i.e. every entry that listed
//     it has already decremented it and dropped its dependents.
type request struct {
	s      *Serializer
	ticket uint64
	write  bool
	// entries: one per dataset touched. oneEntry backs it for the common
	// single-dataset request so that registration allocates less.
	entries   []*entry
	oneEntry  entry
	oneEntryP [1]*entry
	shards    []int // sorted, unique shard indexes of entries
	oneShard  [1]int
	// blockers counts (earlier conflicting entry) pairs still in the
	// lists. INVARIANT: set while every shard in shards is locked, before
	// any of those entries can leave; only decremented afterwards.
	blockers atomic.Int32
	// ready is closed when blockers reaches zero; nil when the request had
	// no blockers at registration.
	ready chan struct{}
	// state is generation<<1 | released. A new use of the request gets a
	// new generation.
	state    atomic.Uint64
	coordBuf [8]uint64
}

// New returns an empty Serializer.
func New() *Serializer {
	s := &Serializer{readers: newReaderCounts()}
	for i := range s.shards {
		s.shards[i].lists = make(map[uint64]*dsList)
	}
	return s
}

func shardOf(dataset uint64) int {
	// Fibonacci hashing: consecutive ids spread over shards.
	return int((dataset * 0x9E3779B97F4A7C15) >> (64 - 6))
}

// Acquire waits until every earlier request that conflicts with r has been
// released (or cancelled), then returns the function that releases r. It
// returns ctx.Err() if ctx ends first; r is then withdrawn as if it had
// never been made. A request with no non-empty region returns at once.
//
// release is idempotent and must be called exactly when the I/O is done;
// until then later conflicting requests wait.
func (s *Serializer) Acquire(ctx context.Context, r Request) (release func(), err error) {
	h, err := s.AcquireHold(ctx, r)
	if err != nil {
		return nil, err
	}
	return h.releaser(), nil
}

// AcquireHold is Acquire returning the hold as a value, which costs no
// closure allocation. Release the Hold exactly once.
func (s *Serializer) AcquireHold(ctx context.Context, r Request) (Hold, error) {
	if err := ctx.Err(); err != nil {
		return Hold{}, err
	}
	req, err := s.build(r)
	if err != nil {
		return Hold{}, err
	}
	return s.acquire(ctx, req)
}

// AcquireExclusive waits until every earlier request on dataset has been
// released, and holds every later one until release is called: the
// drain-and-lock of an extent change (SCC design §3.4 and §5.2).
func (s *Serializer) AcquireExclusive(ctx context.Context, dataset uint64) (release func(), err error) {
	req := s.buildExclusive(dataset)
	h, err := s.acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return h.releaser(), nil
}

// Waiting reports how many requests are blocked in Acquire right now.
func (s *Serializer) Waiting() int { return int(s.waiting.Load()) }

func (s *Serializer) buildExclusive(dataset uint64) *request {
	req := s.newRequest(true)
	e := req.entryFor(dataset)
	e.exclusive = true
	req.shards = append(req.shards, shardOf(dataset))
	return req
}

// newRequest returns a clean request (from free when possible) with a new
// generation.
func (s *Serializer) newRequest(write bool) *request {
	req, _ := s.free.Get().(*request)
	if req == nil {
		req = &request{s: s}
	}
	req.write = write
	req.state.Store((req.state.Load()>>1 + 1) << 1)
	return req
}

// recycle clears req and puts it back into free. The caller guarantees
// that nothing refers to it any more (see request).
func (req *request) recycle() {
	deps := req.oneEntry.dependents[:0]
	if cap(deps) > 64 {
		deps = nil
	}
	req.oneEntry = entry{dependents: deps}
	req.oneEntryP[0] = nil
	req.entries, req.shards = nil, nil
	req.ticket, req.ready = 0, nil
	req.s.free.Put(req)
}

// build validates r and turns it into an unregistered request, copying the
// coordinates so the caller may reuse its slices.
func (s *Serializer) build(r Request) (*request, error) {
	n := 0
	for i, g := range r.Regions {
		if len(g.Lo) != len(g.Hi) {
			return nil, fmt.Errorf("%w: region %d: len(Lo)=%d, len(Hi)=%d", ErrInvalid, i, len(g.Lo), len(g.Hi))
		}
		for d := range g.Lo {
			if g.Lo[d] > g.Hi[d] {
				return nil, fmt.Errorf("%w: region %d: dimension %d: Lo %d > Hi %d", ErrInvalid, i, d, g.Lo[d], g.Hi[d])
			}
		}
		n += 2 * len(g.Lo)
	}
	req := s.newRequest(r.Write)
	// One buffer for every box: inline for up to 4-D single-box requests.
	coords := req.coordBuf[:0]
	if n > len(req.coordBuf) {
		coords = make([]uint64, 0, n)
	}
	for _, g := range r.Regions {
		if isEmpty(g.Lo, g.Hi) {
			continue
		}
		start := len(coords)
		coords = append(coords, g.Lo...)
		coords = append(coords, g.Hi...)
		k := len(g.Lo)
		b := box{lo: coords[start : start+k : start+k], hi: coords[start+k : start+2*k : start+2*k]}
		e := req.entryFor(g.Dataset)
		e.boxes = append(e.boxes, b)
	}
	for _, e := range req.entries {
		req.shards = append(req.shards, shardOf(e.dataset))
	}
	if len(req.shards) > 1 {
		slices.Sort(req.shards)
		req.shards = slices.Compact(req.shards)
	}
	return req, nil
}

// entryFor returns req's entry for dataset, creating it.
func (req *request) entryFor(dataset uint64) *entry {
	for _, e := range req.entries {
		if e.dataset == dataset {
			return e
		}
	}
	if len(req.entries) == 0 {
		e := &req.oneEntry
		e.req, e.dataset, e.exclusive = req, dataset, false
		e.boxes = e.oneBox[:0]
		req.oneEntryP[0] = e
		req.entries = req.oneEntryP[:]
		req.shards = req.oneShard[:0]
		return &req.oneEntry
	}
	e := &entry{req: req, dataset: dataset}
	e.boxes = e.oneBox[:0]
	req.entries = append(req.entries, e)
	return e
}

func isEmpty(lo, hi []uint64) bool {
	for d := range lo {
		if lo[d] >= hi[d] {
			return true
		}
	}
	return false
}

// conflicts reports whether later entry e must wait for earlier entry old
// (both on the same dataset).
func conflicts(old, e *entry) bool {
	if old.exclusive || e.exclusive {
		return true
	}
	if !old.req.write && !e.req.write {
		return false // overlapping reads run together
	}
	for _, a := range old.boxes {
		for _, b := range e.boxes {
			if intersects(a, b) {
				return true
			}
		}
	}
	return false
}

// intersects: two non-empty boxes intersect when their ranges overlap in
// every dimension. Boxes of different rank on one dataset are a caller bug;
// they are treated as intersecting, which can only cost concurrency.
func intersects(a, b box) bool {
	if len(a.lo) != len(b.lo) {
		return true
	}
	for d := range a.lo {
		if a.lo[d] >= b.hi[d] || b.lo[d] >= a.hi[d] {
			return false
		}
	}
	return true
}

func (s *Serializer) lock(shards []int) {
	for _, i := range shards { // ascending: a global lock order
		s.shards[i].mu.Lock()
	}
}

func (s *Serializer) unlock(shards []int) {
	for _, i := range shards {
		s.shards[i].mu.Unlock()
	}
}

// acquire registers req, waits for its blockers (and, for a writer, for
// the fast reads in flight on its shards) and returns its hold.
func (s *Serializer) acquire(ctx context.Context, req *request) (Hold, error) {
	if err := ctx.Err(); err != nil {
		req.recycle() // never registered: nothing refers to it
		return Hold{}, err
	}
	if len(req.entries) == 0 {
		req.recycle()
		return Hold{}, nil
	}
	s.lock(req.shards)
	req.ticket = s.ticket.Add(1)
	var blockers int32
	drains := false
	for _, e := range req.entries {
		sh := &s.shards[shardOf(e.dataset)]
		l := sh.lists[e.dataset]
		if l == nil {
			l = &dsList{}
			sh.lists[e.dataset] = l
		} else if len(l.entries) == 0 {
			sh.empty--
			if invariants.Enabled && sh.empty < 0 {
				panic(invariants.Violation("serialize: shard counts %d empty lists", sh.empty))
			}
		}
		for _, old := range l.entries {
			if conflicts(old, e) {
				old.dependents = append(old.dependents, req)
				blockers++
			}
		}
		l.entries = append(l.entries, e)
		if e.writes() {
			sh.writers.Add(1) // from here on, reads of the shard lock (fast.go)
			drains = true
		}
	}
	if blockers > 0 {
		req.ready = make(chan struct{})
	}
	req.blockers.Store(blockers)
	h := Hold{req: req, gen: req.state.Load() >> 1}
	s.unlock(req.shards)
	if blockers == 0 && !drains {
		return h, nil
	}

	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	if drains {
		for _, e := range req.entries {
			if !e.writes() {
				continue
			}
			if err := s.drainFast(ctx, shardOf(e.dataset)); err != nil {
				h.Release()
				return Hold{}, err
			}
		}
	}
	if blockers == 0 {
		return h, nil
	}
	select {
	case <-req.ready:
		return h, nil
	case <-ctx.Done():
		// Withdraw. If the last blocker left meanwhile, the request was
		// granted just now; withdrawing it is still correct, and the
		// caller sees the cancellation it asked for.
		h.Release()
		return Hold{}, ctx.Err()
	}
}

// writes reports whether e keeps reads of its dataset off the fast path:
// a write or an exclusive entry.
func (e *entry) writes() bool { return e.exclusive || e.req.write }

// release removes generation gen of req from every list and wakes requests
// for which it was the last blocker. Idempotent; a no-op for a stale
// generation.
func (req *request) release(gen uint64) {
	if !req.state.CompareAndSwap(gen<<1, gen<<1|1) {
		return
	}
	s := req.s
	s.lock(req.shards)
	for _, e := range req.entries {
		sh := &s.shards[shardOf(e.dataset)]
		if e.writes() {
			if n := sh.writers.Add(-1); invariants.Enabled && n < 0 {
				panic(invariants.Violation("serialize: shard counts %d registered writers", n))
			}
		}
		l := sh.lists[e.dataset]
		i := slices.Index(l.entries, e)
		if invariants.Enabled && i < 0 {
			// The state word said held, but no list has the entry: a
			// release of a request that was never registered, or one
			// whose entries were removed behind its back.
			panic(invariants.Violation("serialize: release of a request not held on dataset %d", e.dataset))
		}
		l.entries = slices.Delete(l.entries, i, i+1)
		if len(l.entries) == 0 {
			if cap(l.entries) > 64 {
				l.entries = nil // do not hoard the array of a burst
			}
			sh.empty++
			if sh.empty > maxEmptyLists {
				for ds, l := range sh.lists {
					if len(l.entries) == 0 {
						delete(sh.lists, ds)
					}
				}
				sh.empty = 0
			}
		}
		for _, d := range e.dependents {
			n := d.blockers.Add(-1)
			if invariants.Enabled && n < 0 {
				panic(invariants.Violation("serialize: request %d has %d blockers", d.ticket, n))
			}
			if n == 0 {
				close(d.ready)
			}
		}
		clear(e.dependents)
		e.dependents = e.dependents[:0]
	}
	// Decrements of req.blockers happen under these shard locks, so the
	// value is final here: zero means no entry refers to req any more.
	// (Non-zero: req was withdrawn while blocked; its blockers will still
	// decrement it, so it must not be reused.)
	reusable := req.blockers.Load() == 0
	s.unlock(req.shards)
	if reusable {
		req.recycle()
	}
}
