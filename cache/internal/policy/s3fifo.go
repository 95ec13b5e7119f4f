package policy

import "fmt"

// s3fifoPolicy is S3-FIFO (Juncheng Yang, Yazhuo Zhang, Ziyue Qiu, Yao Yue
// and K. V. Rashmi, "FIFO queues are all you need for cache eviction",
// SOSP 2023): three FIFO queues.
//
//   - small (S, about 10% of the resident chunks): every new chunk enters
//     here unless the ghost queue remembers it. A chunk reaching the tail of
//     S is promoted to main if it was accessed while in S, and otherwise
//     evicted, its key going to the ghost queue. One-time scans therefore
//     pass through S and never displace main (SCC requirements §3.3: whole-dataset
//     reads must not push out the chunks others reuse).
//   - main (M, the rest): a FIFO with a 2-bit saturating frequency per chunk
//     (CLOCK with up to three chances): a chunk at the tail with frequency
//     f > 0 is reinserted at the head with f-1, one with f == 0 is evicted.
//   - ghost (G): hashes of chunks recently evicted from S, as many as M
//     holds chunks, no data. A chunk loaded again while its key is in G
//     goes straight to M: it was evicted from S too early.
//
// Sizes are counted in chunks, not bytes, because the policy has no stable
// per-chunk byte figure (a chunk's size changes when its layout condenses
// it); the chunks of one cache are mostly of similar size.
//
// Hit path: S3-FIFO needs no reordering on a hit, only a saturating bump of
// the chunk's 2-bit frequency, which is exactly what makes it scale. In the
// cache the bump arrives like every policy's Touch: the hit records the
// entry in a lossy striped access buffer (no lock shared by all
// goroutines) and Touch runs when the buffer is replayed under the policy
// lock, always before victims are chosen. The buffer keeps at most one
// record per chunk per drain and may drop records under contention; for
// S3-FIFO that costs little, because what decides a chunk's fate is mostly
// whether it was accessed at all since it was last examined (promotion from
// S needs one access), not how often. A frequency field updated by an atomic
// OR/CAS directly on the hit path (the clock-bit approach of the paper)
// would bypass the buffer, but needs an atomic field in the cache's entry
// and a hook in its hit path; until then the buffered path is used for
// uniformity.
//
// Per-dataset minimums (SCC design §4.2): the cache answers exhausted for a
// chunk whose dataset is at its minimum; that dataset then sits out the rest
// of the round (its chunks are passed over where they stand, neither
// offered, promoted nor aged), like the two-stage LRU's exhausted list.
//
// Partial chunks (SCC design §4.2 second pass): with secondChance, a
// partially read or written chunk that reaches the tail of S unaccessed is
// promoted to M once, instead of being evicted, so it gets one more pass.
//
// An entry's counter holds the state: bits 0-1 the frequency, bit 2 set
// while the chunk is in M, bit 3 set once its partial second pass was
// used.
type s3fifoPolicy[E, G comparable, N Nodes[E, G]] struct {
	n            N
	small, main  List[E]
	nSmall       int // chunks on small (INVARIANT: its length)
	nMain        int // chunks on main (INVARIANT: its length)
	peak         int // most chunks ever resident: stands in for the capacity
	ghost        ghostFIFO
	secondChance bool
}

const (
	s3FreqMask   = 3
	s3InMain     = 4
	s3SecondUsed = 8
	s3MaxFreq    = 3
	// s3SmallPercent is S's share of the resident chunks (the paper's 10%,
	// which its authors found to generalize across traces).
	s3SmallPercent = 10
)

func (p *s3fifoPolicy[E, G, N]) Add(e E) {
	p.peak = max(p.peak, p.nSmall+p.nMain+1)
	if p.ghost.take(p.n.Key(e)) {
		*p.n.Counter(e) = s3InMain
		pushFront(p.n, &p.main, e)
		p.nMain++
		return
	}
	*p.n.Counter(e) = 0
	pushFront(p.n, &p.small, e)
	p.nSmall++
}

func (p *s3fifoPolicy[E, G, N]) Remove(e E) {
	if *p.n.Counter(e)&s3InMain != 0 {
		unlink(p.n, &p.main, e)
		p.nMain--
		return
	}
	unlink(p.n, &p.small, e)
	p.nSmall--
	// Evicted from S (or dropped by a flush or extent change, which the
	// policy cannot tell apart; a ghost of a dropped chunk only sends it to
	// M if it ever comes back).
	// G holds as many keys as M's share of the cache (the paper). The
	// capacity in chunks is not known (the budget is in bytes), so the most
	// chunks ever resident stands in for it: unlike the current count it
	// does not shrink while a batch of victims is being removed.
	p.ghost.push(p.n.Key(e), max(p.peak*(100-s3SmallPercent)/100, 1))
}

func (p *s3fifoPolicy[E, G, N]) Touch(e E) {
	if c := p.n.Counter(e); p.n.Linked(e) && *c&s3FreqMask < s3MaxFreq {
		*c++
	}
}

// promote moves e from S to the head of M with its frequency cleared.
func (p *s3fifoPolicy[E, G, N]) promote(e E, flags int32) {
	unlink(p.n, &p.small, e)
	p.nSmall--
	*p.n.Counter(e) = s3InMain | flags
	pushFront(p.n, &p.main, e)
	p.nMain++
}

func (p *s3fifoPolicy[E, G, N]) Nominate(try func(E) Verdict) {
	// Each queue is walked once from its tail toward its head by a cursor.
	// Offered entries stay where they are (a taken one stays linked until
	// the cache calls remove), so the cursor never meets them again. An
	// entry of M with frequency f > 0 is moved to M's head with f-1 and met
	// again later, at most s3MaxFreq times; entries promoted from S land at
	// M's head, ahead of M's cursor. So every entry is offered at most once
	// and the walk ends even when try always answers skip.
	var none E
	var out map[G]bool // groups that answered exhausted this round
	sCur, mCur := p.small.tail, p.main.tail
	sTaken, mTaken := 0, 0
	pushMain := func(e E) {
		if mCur == none {
			mCur = e // M's walk had ended (or M was empty): resume at e
		}
	}
	// useSmall decides where the next victim comes from (the paper's
	// evict(): from S while S holds at least its share of the cache).
	useSmall := func() bool {
		s := p.nSmall - sTaken
		n := s + p.nMain - mTaken
		return s > 0 && s*100 >= n*s3SmallPercent
	}
	fromSmall := useSmall()
	for {
		if fromSmall && sCur == none {
			fromSmall = false
		}
		if !fromSmall && mCur == none {
			if sCur == none {
				return
			}
			fromSmall = true
		}
		var e E
		if fromSmall {
			e, sCur = sCur, *p.n.Prev(sCur)
		} else {
			e, mCur = mCur, *p.n.Prev(mCur)
		}
		if out[p.n.Group(e)] {
			continue
		}
		c := p.n.Counter(e)
		if fromSmall {
			switch {
			case *c&s3FreqMask != 0:
				p.promote(e, *c&s3SecondUsed)
				pushMain(e)
				continue
			case p.secondChance && *c&s3SecondUsed == 0 && p.n.Partial(e):
				p.promote(e, s3SecondUsed)
				pushMain(e)
				continue
			}
		} else if *c&s3FreqMask != 0 {
			*c--
			moveFront(p.n, &p.main, e)
			pushMain(e)
			continue
		}
		switch try(e) {
		case Stop:
			return
		case Take:
			if fromSmall {
				sTaken++
			} else {
				mTaken++
			}
			fromSmall = useSmall()
		case Exhausted:
			if out == nil {
				out = map[G]bool{}
			}
			out[p.n.Group(e)] = true
		}
	}
}

// contents checks the queue counts, that each entry's counter places it
// on the queue that holds it, and the ghost queue's bounds.
func (p *s3fifoPolicy[E, G, N]) contents(limit int) ([]E, error) {
	out, err := appendList(p.n, nil, &p.small, limit)
	if err != nil {
		return out, err
	}
	nSmall := len(out)
	if out, err = appendList(p.n, out, &p.main, limit); err != nil {
		return out, err
	}
	if nSmall != p.nSmall || len(out)-nSmall != p.nMain {
		return out, fmt.Errorf("s3fifo counts %d+%d, lists hold %d+%d", p.nSmall, p.nMain, nSmall, len(out)-nSmall)
	}
	for i, e := range out {
		if inMain := *p.n.Counter(e)&s3InMain != 0; inMain != (i >= nSmall) {
			return out, fmt.Errorf("s3fifo: entry %d on the wrong queue", i)
		}
	}
	if g, c := p.ghost.len(), max(p.peak*(100-s3SmallPercent)/100, 1); g > c || len(p.ghost.ring)-p.ghost.head > 2*c+16 {
		return out, fmt.Errorf("s3fifo: ghost holds %d keys in a ring of %d, bound %d", g, len(p.ghost.ring)-p.ghost.head, c)
	}
	return out, nil
}

// ghostFIFO remembers the hashes of recently evicted keys in FIFO order,
// bounded by a capacity given at each push. A hash taken out (a ghost hit)
// leaves a stale record in the ring that is skipped when it reaches the
// front.
type ghostFIFO struct {
	ring []ghostRec // FIFO from ring[head]; ring[:head] is dead space
	head int
	live map[uint64]uint64 // hash → sequence number of its newest record
	seq  uint64
}

type ghostRec struct{ h, seq uint64 }

func (g *ghostFIFO) push(h uint64, capacity int) {
	if g.live == nil {
		g.live = map[uint64]uint64{}
	}
	g.seq++
	g.live[h] = g.seq
	g.ring = append(g.ring, ghostRec{h, g.seq})
	// INVARIANT: at most capacity live hashes, and the ring (live plus stale
	// records) at most twice that plus slack, so memory stays bounded.
	for len(g.live) > capacity || len(g.ring)-g.head > 2*capacity+16 {
		r := g.ring[g.head]
		g.head++
		if g.live[r.h] == r.seq {
			delete(g.live, r.h)
		}
	}
	if g.head > 64 && g.head*2 >= len(g.ring) {
		n := copy(g.ring, g.ring[g.head:])
		clear(g.ring[n:])
		g.ring, g.head = g.ring[:n], 0
	}
}

// take reports whether h is remembered and forgets it.
func (g *ghostFIFO) take(h uint64) bool {
	if _, ok := g.live[h]; !ok {
		return false
	}
	delete(g.live, h)
	return true
}

// len reports the number of remembered hashes.
func (g *ghostFIFO) len() int { return len(g.live) }
