package cache

import (
	"container/heap"
	"math"
	"math/rand/v2"
)

// Replacement policies (SCC design §4.2, §4.2.1; SCC requirements §2.2 item 4, §3.3).
//
// How accesses reach a policy: a hit never takes the policy lock. It
// records the entry in a lossy buffer (its read slot's, latch.go, or the
// striped lockfree.Buffer for hits that took a pin); the buffers are
// replayed into the policy (touch) under Cache.mu by the replayer
// goroutine (replay.go), never by a reader, and always before victims are
// chosen. Lost accesses only make the order slightly less exact. A read
// hit on an entry whose record still waits in the same slot adds none
// (pendingFilter), so LFU counts about one access per entry per slot and
// drain (an approximation of frequency, like any sampled LFU). We chose buffers over CLOCK bits
// because the default policy is SCC design's two-stage LRU, which needs real
// recency order per dataset and per chunk; CLOCK would only approximate it.
// (SIEVE below is the CLOCK-like option and uses a visited bit; S3-FIFO,
// policy_s3fifo.go, uses 2-bit frequencies that a hit only bumps.)
//
// Adding a policy: implement policy, add a PolicyKind constant and a case in
// newPolicy, and add it to the policy table tests (TestPolicies*). The
// cache, not the policy, enforces per-dataset minimums (it answers
// exhausted) and checks whether an entry can be evicted right now (it
// answers skip), so a policy only keeps an order.
//
// Every method is called with Cache.mu held, and may use the fields of
// entry and Dataset marked "guarded by Cache.mu" (pnext, pprev, counter,
// visited, dnext, dprev, onList, exhausted, lru).
type policy interface {
	// add: e just became resident (counts as an access).
	add(e *entry)
	// remove: e left the cache. e was added before.
	remove(e *entry)
	// touch: e was accessed. e may already have been removed (a stale
	// record from the access buffer); check e.linked.
	touch(e *entry)
	// nominate offers entries in eviction order to try, until try answers
	// stop or every entry was offered. An entry answered take stays linked
	// until the cache calls remove; the policy must not offer it twice in
	// one call. nominate must terminate even when try always answers skip.
	nominate(try func(e *entry) verdict)
}

// verdict is the cache's answer to a nominated entry.
type verdict uint8

const (
	take      verdict = iota // the cache took e as a victim
	skip                     // e cannot go now (in use or already going)
	exhausted                // e's dataset is at its minimum: offer no more of its chunks this round
	stop                     // enough space nominated
)

func newPolicy(k PolicyKind, secondChance bool) policy {
	switch k {
	case PolicyLRU:
		return &listPolicy{secondChance: secondChance}
	case PolicyMRU:
		return &listPolicy{mru: true}
	case PolicyLFU:
		return &lfuPolicy{}
	case PolicyRandom:
		return &randomPolicy{}
	case PolicySIEVE:
		return &sievePolicy{}
	case PolicyS3FIFO:
		return &s3fifoPolicy{secondChance: secondChance}
	default:
		return &twoStageLRU{secondChance: secondChance}
	}
}

// entryList is an intrusive doubly linked list over entry.pnext/pprev.
type entryList struct{ head, tail *entry }

func (l *entryList) pushFront(e *entry) {
	e.pprev, e.pnext = nil, l.head
	if l.head != nil {
		l.head.pprev = e
	} else {
		l.tail = e
	}
	l.head = e
}

func (l *entryList) unlink(e *entry) {
	if e.pprev != nil {
		e.pprev.pnext = e.pnext
	} else {
		l.head = e.pnext
	}
	if e.pnext != nil {
		e.pnext.pprev = e.pprev
	} else {
		l.tail = e.pprev
	}
	e.pnext, e.pprev = nil, nil
}

func (l *entryList) moveFront(e *entry) {
	if l.head == e {
		return
	}
	l.unlink(e)
	l.pushFront(e)
}

// twoStageLRU is SCC design §4.2: datasets in LRU order; within the LRU
// dataset, chunks from the tail of its chunk LRU. A partially read or
// written chunk met for the first time gets a second pass (counter set to
// 1, moved to the head). A dataset that reaches its minimum is moved to the
// exhausted list until the round ends, then returned to the LRU end.
type twoStageLRU struct {
	head, tail   *Dataset // dataset LRU list; head = most recently used
	secondChance bool
}

func (p *twoStageLRU) dsList(d *Dataset) *entryList { return &d.lru }

func (p *twoStageLRU) pushDataset(d *Dataset) {
	d.dprev, d.dnext = nil, p.head
	if p.head != nil {
		p.head.dprev = d
	} else {
		p.tail = d
	}
	p.head = d
	d.onList = true
}

func (p *twoStageLRU) pushDatasetBack(d *Dataset) {
	d.dnext, d.dprev = nil, p.tail
	if p.tail != nil {
		p.tail.dnext = d
	} else {
		p.head = d
	}
	p.tail = d
	d.onList = true
}

func (p *twoStageLRU) unlinkDataset(d *Dataset) {
	if d.dprev != nil {
		d.dprev.dnext = d.dnext
	} else {
		p.head = d.dnext
	}
	if d.dnext != nil {
		d.dnext.dprev = d.dprev
	} else {
		p.tail = d.dprev
	}
	d.dnext, d.dprev = nil, nil
	d.onList = false
}

func (p *twoStageLRU) touchDataset(d *Dataset) {
	if d.exhausted {
		return // rejoins at the end of the round
	}
	if d.onList {
		if p.head == d {
			return
		}
		p.unlinkDataset(d)
	}
	p.pushDataset(d)
}

func (p *twoStageLRU) add(e *entry) {
	p.dsList(e.ds).pushFront(e)
	e.counter = 0
	p.touchDataset(e.ds)
}

func (p *twoStageLRU) remove(e *entry) {
	d := e.ds
	l := p.dsList(d)
	l.unlink(e)
	if l.head == nil && d.onList {
		p.unlinkDataset(d)
	}
}

func (p *twoStageLRU) touch(e *entry) {
	if !e.linked {
		return
	}
	p.dsList(e.ds).moveFront(e)
	e.counter = 0
	p.touchDataset(e.ds)
}

func (p *twoStageLRU) nominate(try func(*entry) verdict) {
	var out []*Dataset // the exhausted list, tail-most first
	defer func() {
		for i := len(out) - 1; i >= 0; i-- {
			d := out[i]
			d.exhausted = false
			if d.lru.head != nil {
				p.pushDatasetBack(d)
			}
		}
	}()
	for d := p.tail; d != nil; {
		prev := d.dprev
		l := p.dsList(d)
		isExhausted := false
		for e := l.tail; e != nil; {
			ep := e.pprev
			if p.secondChance && e.counter == 0 && e.partial().Load() {
				e.counter = 1 // second pass (SCC design §2.2 chunk_counter)
				l.moveFront(e)
				if ep == nil {
					ep = e // e was the head: look at it again, now on its second pass
				}
				e = ep
				continue
			}
			switch try(e) {
			case stop:
				return
			case exhausted:
				isExhausted = true
			}
			if isExhausted {
				break
			}
			e = ep
		}
		if isExhausted {
			p.unlinkDataset(d)
			d.exhausted = true
			out = append(out, d)
		}
		d = prev
	}
}

// listPolicy is one global recency list: LRU evicts from the tail, MRU from
// the head.
type listPolicy struct {
	l            entryList
	mru          bool
	secondChance bool
}

func (p *listPolicy) add(e *entry) { p.l.pushFront(e); e.counter = 0 }

func (p *listPolicy) remove(e *entry) { p.l.unlink(e) }

func (p *listPolicy) touch(e *entry) {
	if e.linked {
		p.l.moveFront(e)
		e.counter = 0
	}
}

func (p *listPolicy) nominate(try func(*entry) verdict) {
	if p.mru {
		for e := p.l.head; e != nil; {
			next := e.pnext
			if try(e) == stop {
				return
			}
			e = next
		}
		return
	}
	for e := p.l.tail; e != nil; {
		prev := e.pprev
		if p.secondChance && e.counter == 0 && e.partial().Load() {
			e.counter = 1
			p.l.moveFront(e)
			if prev == nil {
				prev = e
			}
			e = prev
			continue
		}
		if try(e) == stop {
			return
		}
		e = prev
	}
}

// lfuPolicy evicts the least frequently used chunks (ties: least recently
// added first). Frequencies live in entry.counter and are halved when one
// saturates, so old popularity fades. Choosing victims scans the resident
// chunks: O(n) per eviction round (see nominate), acceptable for the few
// thousand chunks a cache holds, not for millions.
type lfuPolicy struct {
	l entryList
}

func (p *lfuPolicy) add(e *entry) { p.l.pushFront(e); e.counter = 1 }

func (p *lfuPolicy) remove(e *entry) { p.l.unlink(e) }

func (p *lfuPolicy) touch(e *entry) {
	if !e.linked {
		return
	}
	if e.counter >= 1<<20 {
		for x := p.l.head; x != nil; x = x.pnext {
			x.counter /= 2
		}
	}
	e.counter++
}

func (p *lfuPolicy) nominate(try func(*entry) verdict) {
	// Offer in ascending (counter, position from the tail) order, a total
	// order. A round usually needs a victim or two out of thousands of
	// chunks, so the first few are found by linear scans for the smallest
	// entry after the last one offered; a longer round builds a binary heap
	// of the rest (O(n)) and pops it as far as needed. Either way no full
	// sort: O(n) per round for the common case.
	const scans = 4
	last := lfuItem{counter: math.MinInt32, position: -1}
	for k := 0; k < scans; k++ {
		var best lfuItem
		i := int32(0)
		for e := p.l.tail; e != nil; e = e.pprev {
			it := lfuItem{e, e.counter, i}
			if last.less(it) && (best.e == nil || it.less(best)) {
				best = it
			}
			i++
		}
		if best.e == nil || try(best.e) == stop {
			return
		}
		last = best
	}
	var h lfuHeap
	i := int32(0)
	for e := p.l.tail; e != nil; e = e.pprev {
		if it := (lfuItem{e, e.counter, i}); last.less(it) {
			h = append(h, it)
		}
		i++
	}
	heap.Init(&h)
	for h.Len() > 0 {
		if try(heap.Pop(&h).(lfuItem).e) == stop {
			return
		}
	}
}

type lfuItem struct {
	e        *entry
	counter  int32
	position int32 // from the tail: older entries first among equal counters
}

type lfuHeap []lfuItem

func (a lfuItem) less(b lfuItem) bool {
	if a.counter != b.counter {
		return a.counter < b.counter
	}
	return a.position < b.position
}

func (h lfuHeap) Len() int           { return len(h) }
func (h lfuHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h lfuHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lfuHeap) Push(x any)        { *h = append(*h, x.(lfuItem)) }
func (h *lfuHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// randomPolicy evicts chunks in random order (SCC requirements §3.3). entry.counter
// holds the entry's index in all.
type randomPolicy struct {
	all []*entry
}

func (p *randomPolicy) add(e *entry) {
	e.counter = int32(len(p.all))
	p.all = append(p.all, e)
}

func (p *randomPolicy) remove(e *entry) {
	i := e.counter
	last := p.all[len(p.all)-1]
	p.all[i] = last
	last.counter = i
	p.all[len(p.all)-1] = nil
	p.all = p.all[:len(p.all)-1]
}

func (p *randomPolicy) touch(*entry) {}

func (p *randomPolicy) nominate(try func(*entry) verdict) {
	n := len(p.all)
	if n == 0 {
		return
	}
	// Visit every index once, starting anywhere, with a stride coprime to n.
	start := rand.IntN(n)
	stride := 1
	if n > 2 {
		stride = 1 + rand.IntN(n-1)
		for gcd(stride, n) != 1 {
			stride++
			if stride >= n {
				stride = 1
			}
		}
	}
	// p.all cannot change meanwhile: try never calls back into the policy
	// (the cache removes victims after nominate returns).
	for k, i := 0, start; k < n; k, i = k+1, (i+stride)%n {
		if try(p.all[i]) == stop {
			return
		}
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// sievePolicy is SIEVE (Zhang et al., NSDI 2024): new chunks enter at the
// head of a FIFO; an access only sets a visited bit; the hand moves from
// the tail toward the head, clearing visited bits and evicting the first
// unvisited chunk. One-time scans therefore pass through without pushing
// out the chunks that are used repeatedly.
type sievePolicy struct {
	l    entryList
	n    int // entries on l (INVARIANT: its length)
	hand *entry
}

func (p *sievePolicy) add(e *entry) { p.l.pushFront(e); e.visited = false; p.n++ }

func (p *sievePolicy) remove(e *entry) {
	if p.hand == e {
		p.hand = e.pprev
	}
	p.l.unlink(e)
	p.n--
}

func (p *sievePolicy) touch(e *entry) {
	if e.linked {
		e.visited = true
	}
}

func (p *sievePolicy) nominate(try func(*entry) verdict) {
	// Two sweeps at most: the first may only clear visited bits.
	n := p.n
	var taken map[*entry]bool // allocated at the first take
	e := p.hand
	for steps := 0; steps < 2*n; steps++ {
		if e == nil {
			e = p.l.tail
		}
		if e == nil {
			return
		}
		prev := e.pprev
		if e.visited {
			e.visited = false
		} else if !taken[e] {
			v := try(e)
			if v == stop {
				p.hand = e
				return
			}
			if v == take {
				if taken == nil {
					taken = map[*entry]bool{}
				}
				taken[e] = true // still linked until removed: do not offer again
			}
		}
		e = prev
		p.hand = e
	}
}
