package cache

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
// per-chunk byte figure (entry.size changes when a layout condenses a
// chunk); the chunks of one cache are mostly of similar size.
//
// Hit path: S3-FIFO needs no reordering on a hit, only a saturating bump of
// the chunk's 2-bit frequency, which is exactly what makes it scale. In this
// cache the bump arrives like every policy's touch: the hit records the
// entry in the lossy striped access buffer (recordAccess, evict.go; no lock
// shared by all goroutines) and touch runs when the buffer is replayed under
// Cache.mu, always before victims are chosen. The buffer keeps at most one
// record per chunk per drain and may drop records under contention; for
// S3-FIFO that costs little, because what decides a chunk's fate is mostly
// whether it was accessed at all since it was last examined (promotion from
// S needs one access), not how often. A frequency field updated by an atomic
// OR/CAS directly on the hit path (the clock-bit approach of the paper)
// would bypass the buffer, but needs an atomic field in entry and a hook in
// recordAccess; until then the buffered path is used for uniformity.
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
// entry.counter holds the state: bits 0-1 the frequency, bit 2 set while
// the chunk is in M, bit 3 set once its partial second pass was used.
type s3fifoPolicy struct {
	small, main  entryList
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

// ghostSeed keys the ghost hashes; any fixed value works (a collision only
// sends one chunk to M instead of S).
const ghostSeed = 0x9e3779b97f4a7c15

func (p *s3fifoPolicy) add(e *entry) {
	p.peak = max(p.peak, p.nSmall+p.nMain+1)
	if p.ghost.take(e.key.hash(ghostSeed)) {
		e.counter = s3InMain
		p.main.pushFront(e)
		p.nMain++
		return
	}
	e.counter = 0
	p.small.pushFront(e)
	p.nSmall++
}

func (p *s3fifoPolicy) remove(e *entry) {
	if e.counter&s3InMain != 0 {
		p.main.unlink(e)
		p.nMain--
		return
	}
	p.small.unlink(e)
	p.nSmall--
	// Evicted from S (or dropped by a flush or extent change, which the
	// policy cannot tell apart; a ghost of a dropped chunk only sends it to
	// M if it ever comes back).
	// G holds as many keys as M's share of the cache (the paper). The
	// capacity in chunks is not known (the budget is in bytes), so the most
	// chunks ever resident stands in for it: unlike the current count it
	// does not shrink while a batch of victims is being removed.
	p.ghost.push(e.key.hash(ghostSeed), max(p.peak*(100-s3SmallPercent)/100, 1))
}

func (p *s3fifoPolicy) touch(e *entry) {
	if e.linked && e.counter&s3FreqMask < s3MaxFreq {
		e.counter++
	}
}

// promote moves e from S to the head of M with its frequency cleared.
func (p *s3fifoPolicy) promote(e *entry, flags int32) {
	p.small.unlink(e)
	p.nSmall--
	e.counter = s3InMain | flags
	p.main.pushFront(e)
	p.nMain++
}

func (p *s3fifoPolicy) nominate(try func(*entry) verdict) {
	// Each queue is walked once from its tail toward its head by a cursor.
	// Offered entries stay where they are (a taken one stays linked until
	// the cache calls remove), so the cursor never meets them again. An
	// entry of M with frequency f > 0 is moved to M's head with f-1 and met
	// again later, at most s3MaxFreq times; entries promoted from S land at
	// M's head, ahead of M's cursor. So every entry is offered at most once
	// and the walk ends even when try always answers skip.
	var out map[*Dataset]bool // datasets that answered exhausted this round
	sCur, mCur := p.small.tail, p.main.tail
	sTaken, mTaken := 0, 0
	pushMain := func(e *entry) {
		if mCur == nil {
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
		if fromSmall && sCur == nil {
			fromSmall = false
		}
		if !fromSmall && mCur == nil {
			if sCur == nil {
				return
			}
			fromSmall = true
		}
		var e *entry
		if fromSmall {
			e, sCur = sCur, sCur.pprev
		} else {
			e, mCur = mCur, mCur.pprev
		}
		if out[e.ds] {
			continue
		}
		if fromSmall {
			switch {
			case e.counter&s3FreqMask != 0:
				p.promote(e, e.counter&s3SecondUsed)
				pushMain(e)
				continue
			case p.secondChance && e.counter&s3SecondUsed == 0 && e.partial().Load():
				p.promote(e, s3SecondUsed)
				pushMain(e)
				continue
			}
		} else if e.counter&s3FreqMask != 0 {
			e.counter--
			p.main.moveFront(e)
			pushMain(e)
			continue
		}
		switch try(e) {
		case stop:
			return
		case take:
			if fromSmall {
				sTaken++
			} else {
				mTaken++
			}
			fromSmall = useSmall()
		case exhausted:
			if out == nil {
				out = map[*Dataset]bool{}
			}
			out[e.ds] = true
		}
	}
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
