package policy

import "fmt"

// twoStageLRU is SCC design §4.2: groups (datasets) in LRU order; within
// the LRU group, chunks from the tail of its chunk LRU. A partially read
// or written chunk met for the first time gets a second pass (counter set
// to 1, moved to the head). A group that reaches its minimum is moved to
// the exhausted list until the round ends, then returned to the LRU end.
type twoStageLRU[E, G comparable, N Nodes[E, G]] struct {
	n            N
	head, tail   G // group LRU list; head = most recently used
	secondChance bool
}

func (p *twoStageLRU[E, G, N]) pushGroup(d G) {
	var none G
	*p.n.GroupPrev(d), *p.n.GroupNext(d) = none, p.head
	if p.head != none {
		*p.n.GroupPrev(p.head) = d
	} else {
		p.tail = d
	}
	p.head = d
	*p.n.OnList(d) = true
}

func (p *twoStageLRU[E, G, N]) pushGroupBack(d G) {
	var none G
	*p.n.GroupNext(d), *p.n.GroupPrev(d) = none, p.tail
	if p.tail != none {
		*p.n.GroupNext(p.tail) = d
	} else {
		p.head = d
	}
	p.tail = d
	*p.n.OnList(d) = true
}

func (p *twoStageLRU[E, G, N]) unlinkGroup(d G) {
	var none G
	next, prev := p.n.GroupNext(d), p.n.GroupPrev(d)
	if *prev != none {
		*p.n.GroupNext(*prev) = *next
	} else {
		p.head = *next
	}
	if *next != none {
		*p.n.GroupPrev(*next) = *prev
	} else {
		p.tail = *prev
	}
	*next, *prev = none, none
	*p.n.OnList(d) = false
}

func (p *twoStageLRU[E, G, N]) touchGroup(d G) {
	if *p.n.Exhausted(d) {
		return // rejoins at the end of the round
	}
	if *p.n.OnList(d) {
		if p.head == d {
			return
		}
		p.unlinkGroup(d)
	}
	p.pushGroup(d)
}

func (p *twoStageLRU[E, G, N]) Add(e E) {
	d := p.n.Group(e)
	pushFront(p.n, p.n.Chunks(d), e)
	*p.n.Counter(e) = 0
	p.touchGroup(d)
}

func (p *twoStageLRU[E, G, N]) Remove(e E) {
	var none E
	d := p.n.Group(e)
	l := p.n.Chunks(d)
	unlink(p.n, l, e)
	if l.head == none && *p.n.OnList(d) {
		p.unlinkGroup(d)
	}
}

func (p *twoStageLRU[E, G, N]) Touch(e E) {
	if !p.n.Linked(e) {
		return
	}
	d := p.n.Group(e)
	moveFront(p.n, p.n.Chunks(d), e)
	*p.n.Counter(e) = 0
	p.touchGroup(d)
}

func (p *twoStageLRU[E, G, N]) Nominate(try func(E) Verdict) {
	var noneE E
	var noneG G
	var out []G // the exhausted list, tail-most first
	defer func() {
		for i := len(out) - 1; i >= 0; i-- {
			d := out[i]
			*p.n.Exhausted(d) = false
			if p.n.Chunks(d).head != noneE {
				p.pushGroupBack(d)
			}
		}
	}()
	for d := p.tail; d != noneG; {
		prev := *p.n.GroupPrev(d)
		l := p.n.Chunks(d)
		isExhausted := false
		for e := l.tail; e != noneE; {
			ep := *p.n.Prev(e)
			if p.secondChance && *p.n.Counter(e) == 0 && p.n.Partial(e) {
				*p.n.Counter(e) = 1 // second pass (SCC design §2.2 chunk_counter)
				moveFront(p.n, l, e)
				if ep == noneE {
					ep = e // e was the head: look at it again, now on its second pass
				}
				e = ep
				continue
			}
			switch try(e) {
			case Stop:
				return
			case Exhausted:
				isExhausted = true
			}
			if isExhausted {
				break
			}
			e = ep
		}
		if isExhausted {
			p.unlinkGroup(d)
			*p.n.Exhausted(d) = true
			out = append(out, d)
		}
		d = prev
	}
}

// contents walks the group list (at rest every group holding entries is
// on it) and each group's chunk list.
func (p *twoStageLRU[E, G, N]) contents(limit int) ([]E, error) {
	var none G
	var out []E
	var err error
	prev, k := none, 0
	for d := p.head; d != none; d = *p.n.GroupNext(d) {
		if k++; k > limit {
			return out, fmt.Errorf("two-stage LRU: group list longer than %d (a cycle?)", limit)
		}
		if *p.n.GroupPrev(d) != prev || !*p.n.OnList(d) || *p.n.Exhausted(d) {
			return out, fmt.Errorf("two-stage LRU: group %d of the list is mislinked or marked off it", k)
		}
		l := p.n.Chunks(d)
		var zero E
		if l.head == zero {
			return out, fmt.Errorf("two-stage LRU: empty group %d on the list", k)
		}
		if out, err = appendList(p.n, out, l, limit); err != nil {
			return out, err
		}
		prev = d
	}
	if p.tail != prev {
		return out, fmt.Errorf("two-stage LRU: group list tail is not its last group")
	}
	return out, nil
}

// listPolicy is one global recency list: LRU evicts from the tail, MRU from
// the head.
type listPolicy[E, G comparable, N Nodes[E, G]] struct {
	n            N
	l            List[E]
	mru          bool
	secondChance bool
}

func (p *listPolicy[E, G, N]) Add(e E) { pushFront(p.n, &p.l, e); *p.n.Counter(e) = 0 }

func (p *listPolicy[E, G, N]) Remove(e E) { unlink(p.n, &p.l, e) }

func (p *listPolicy[E, G, N]) Touch(e E) {
	if p.n.Linked(e) {
		moveFront(p.n, &p.l, e)
		*p.n.Counter(e) = 0
	}
}

func (p *listPolicy[E, G, N]) Nominate(try func(E) Verdict) {
	var none E
	if p.mru {
		for e := p.l.head; e != none; {
			next := *p.n.Next(e)
			if try(e) == Stop {
				return
			}
			e = next
		}
		return
	}
	for e := p.l.tail; e != none; {
		prev := *p.n.Prev(e)
		if p.secondChance && *p.n.Counter(e) == 0 && p.n.Partial(e) {
			*p.n.Counter(e) = 1
			moveFront(p.n, &p.l, e)
			if prev == none {
				prev = e
			}
			e = prev
			continue
		}
		if try(e) == Stop {
			return
		}
		e = prev
	}
}

func (p *listPolicy[E, G, N]) contents(limit int) ([]E, error) {
	return appendList(p.n, nil, &p.l, limit)
}
