package policy

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
)

// lfuPolicy evicts the least frequently used chunks (ties: least recently
// added first). Frequencies live in the entries' counters and are halved
// when one saturates, so old popularity fades. Choosing victims scans the
// resident chunks: O(n) per eviction round (see Nominate), acceptable for
// the few thousand chunks a cache holds, not for millions.
type lfuPolicy[E, G comparable, N Nodes[E, G]] struct {
	n N
	l List[E]
}

func (p *lfuPolicy[E, G, N]) Add(e E) { pushFront(p.n, &p.l, e); *p.n.Counter(e) = 1 }

func (p *lfuPolicy[E, G, N]) Remove(e E) { unlink(p.n, &p.l, e) }

func (p *lfuPolicy[E, G, N]) Touch(e E) {
	if !p.n.Linked(e) {
		return
	}
	if *p.n.Counter(e) >= 1<<20 {
		var none E
		for x := p.l.head; x != none; x = *p.n.Next(x) {
			*p.n.Counter(x) /= 2
		}
	}
	*p.n.Counter(e)++
}

func (p *lfuPolicy[E, G, N]) Nominate(try func(E) Verdict) {
	// Offer in ascending (counter, position from the tail) order, a total
	// order. A round usually needs a victim or two out of thousands of
	// chunks, so the first few are found by linear scans for the smallest
	// entry after the last one offered; a longer round builds a binary heap
	// of the rest (O(n)) and pops it as far as needed. Either way no full
	// sort: O(n) per round for the common case.
	const scans = 4
	var none E
	last := lfuItem[E]{counter: math.MinInt32, position: -1}
	for k := 0; k < scans; k++ {
		var best lfuItem[E]
		found := false
		i := int32(0)
		for e := p.l.tail; e != none; e = *p.n.Prev(e) {
			it := lfuItem[E]{e, *p.n.Counter(e), i}
			if last.less(it) && (!found || it.less(best)) {
				best, found = it, true
			}
			i++
		}
		if !found || try(best.e) == Stop {
			return
		}
		last = best
	}
	var h lfuHeap[E]
	i := int32(0)
	for e := p.l.tail; e != none; e = *p.n.Prev(e) {
		if it := (lfuItem[E]{e, *p.n.Counter(e), i}); last.less(it) {
			h = append(h, it)
		}
		i++
	}
	heap.Init(&h)
	for h.Len() > 0 {
		if try(heap.Pop(&h).(lfuItem[E]).e) == Stop {
			return
		}
	}
}

func (p *lfuPolicy[E, G, N]) contents(limit int) ([]E, error) {
	return appendList(p.n, nil, &p.l, limit)
}

type lfuItem[E any] struct {
	e        E
	counter  int32
	position int32 // from the tail: older entries first among equal counters
}

type lfuHeap[E any] []lfuItem[E]

func (a lfuItem[E]) less(b lfuItem[E]) bool {
	if a.counter != b.counter {
		return a.counter < b.counter
	}
	return a.position < b.position
}

func (h lfuHeap[E]) Len() int           { return len(h) }
func (h lfuHeap[E]) Less(i, j int) bool { return h[i].less(h[j]) }
func (h lfuHeap[E]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lfuHeap[E]) Push(x any)        { *h = append(*h, x.(lfuItem[E])) }
func (h *lfuHeap[E]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// randomPolicy evicts chunks in random order (SCC requirements §3.3). An
// entry's counter holds its index in all.
type randomPolicy[E, G comparable, N Nodes[E, G]] struct {
	n   N
	all []E
}

func (p *randomPolicy[E, G, N]) Add(e E) {
	*p.n.Counter(e) = int32(len(p.all))
	p.all = append(p.all, e)
}

func (p *randomPolicy[E, G, N]) Remove(e E) {
	var none E
	i := *p.n.Counter(e)
	last := p.all[len(p.all)-1]
	p.all[i] = last
	*p.n.Counter(last) = i
	p.all[len(p.all)-1] = none
	p.all = p.all[:len(p.all)-1]
}

func (p *randomPolicy[E, G, N]) Touch(E) {}

func (p *randomPolicy[E, G, N]) Nominate(try func(E) Verdict) {
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
	// (the cache removes victims after Nominate returns).
	for k, i := 0, start; k < n; k, i = k+1, (i+stride)%n {
		if try(p.all[i]) == Stop {
			return
		}
	}
}

// contents checks that every entry's counter is its index.
func (p *randomPolicy[E, G, N]) contents(int) ([]E, error) {
	for i, e := range p.all {
		if c := *p.n.Counter(e); int(c) != i {
			return p.all, fmt.Errorf("random policy: entry at %d says %d", i, c)
		}
	}
	return append([]E(nil), p.all...), nil
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
type sievePolicy[E, G comparable, N Nodes[E, G]] struct {
	n    N
	l    List[E]
	size int // entries on l (INVARIANT: its length)
	hand E
}

func (p *sievePolicy[E, G, N]) Add(e E) { pushFront(p.n, &p.l, e); *p.n.Visited(e) = false; p.size++ }

func (p *sievePolicy[E, G, N]) Remove(e E) {
	if p.hand == e {
		p.hand = *p.n.Prev(e)
	}
	unlink(p.n, &p.l, e)
	p.size--
}

func (p *sievePolicy[E, G, N]) Touch(e E) {
	if p.n.Linked(e) {
		*p.n.Visited(e) = true
	}
}

func (p *sievePolicy[E, G, N]) Nominate(try func(E) Verdict) {
	// Two sweeps at most: the first may only clear visited bits.
	var none E
	n := p.size
	var taken map[E]bool // allocated at the first take
	e := p.hand
	for steps := 0; steps < 2*n; steps++ {
		if e == none {
			e = p.l.tail
		}
		if e == none {
			return
		}
		prev := *p.n.Prev(e)
		if *p.n.Visited(e) {
			*p.n.Visited(e) = false
		} else if !taken[e] {
			v := try(e)
			if v == Stop {
				p.hand = e
				return
			}
			if v == Take {
				if taken == nil {
					taken = map[E]bool{}
				}
				taken[e] = true // still linked until removed: do not offer again
			}
		}
		e = prev
		p.hand = e
	}
}

func (p *sievePolicy[E, G, N]) contents(limit int) ([]E, error) {
	out, err := appendList(p.n, nil, &p.l, limit)
	if err == nil && len(out) != p.size {
		err = fmt.Errorf("sieve counts %d, its list holds %d", p.size, len(out))
	}
	return out, err
}
