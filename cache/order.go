package cache

import (
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/internal/policy"
	"github.com/scc-dev/scc/cache/layout"
)

// policyLock is the replacement order: the policy lock (Cache.mu; the
// cache's lock order is written at that declaration), the policy it
// guards, the datasets' member lists, the clock that tells the hit path
// which hits the order need not hear about, and adaptive sizing's age
// ring. Everything here but the clock's words and aging is guarded by
// the lock; those are written under it and read without it.
type policyLock struct {
	sync.Mutex
	pol policy.Policy[*entry] // policy.go
	// clock counts the entries put at the front (accessClock).
	clock accessClock
	// aging is set while the sizing in force ages out (adaptive_age.go):
	// then every access the order applies stamps its entry in ring.
	aging atomic.Bool
	ring  ageRing
	// chunks is the chunk table, whose size sets the clock's window.
	chunks *chunkTable
}

// linkLocked makes a freshly loaded entry known to its dataset and the
// policy. Caller holds p.
func (p *policyLock) linkLocked(e *entry) {
	d := e.ds
	e.mprev, e.mnext = nil, d.members
	if d.members != nil {
		d.members.mprev = e
	}
	d.members = e
	e.linked = true
	p.pol.Add(e)
	e.touchedAt.Store(p.clock.clock.Add(1)) // at the front, as after a touch
	p.stampLocked(e)
}

// unlinkLocked takes e out of the policy and its dataset's members.
// Caller holds p.
func (p *policyLock) unlinkLocked(e *entry) {
	if !e.linked {
		return
	}
	p.unstampLocked(e)
	p.pol.Remove(e)
	d := e.ds
	if e.mprev != nil {
		e.mprev.mnext = e.mnext
	} else {
		d.members = e.mnext
	}
	if e.mnext != nil {
		e.mnext.mprev = e.mprev
	}
	e.mnext, e.mprev = nil, nil
	e.linked = false
}

// drainLocked replays the accesses a holds into the policy. Caller holds p.
func (p *policyLock) drainLocked(a *accessRecording) {
	a.drainLocked(p.touchLocked)
}

// touchLocked applies a batch of access records. Caller holds p.
func (p *policyLock) touchLocked(batch []*entry) {
	stamp := p.aging.Load()
	clock := p.clock.clock.Load()
	for _, e := range batch {
		p.pol.Touch(e)
		clock++
		e.touchedAt.Store(clock)
		if stamp {
			p.stampLocked(e)
		}
	}
	p.clock.clock.Store(clock)
	p.clock.window.Store(uint64(p.chunks.Len()) / recentWindowDiv)
}

// accessClock tells the hit path which hits the recency policies need
// not hear about.
//
// Why: recording is the largest single item of a hit — the buffer's stripe
// lock, and, when the batch is replayed, the policy's list move, which
// writes the lines of the entry and its two neighbours. An LRU order needs
// no record of a hit on an entry that the policy put at the front (a
// touch, or its load) only a few such moves ago: it is still near the
// front, and the record would move it at most window places. So for the
// LRU policies (two-stage LRU, LRU) a hit on an entry put at the front
// within the last window moves is not recorded: the order stays exact up
// to window positions (a quarter of the resident entries) at the end that
// is not evicted, and a hot set smaller than that costs no record at all.
// MRU evicts from the front, where those positions are the ones that
// count, and the frequency policies (LFU, SIEVE's visited bit, S3-FIFO's
// 2-bit counts) count hits: they record every one.
//
// The window: on the traces of trace_test.go (the /smp rows), LRU fed this
// way loses at most 0.16 points of hit ratio against LRU fed every hit at
// a quarter, 0.6 at a half (which TestPolicyHitRatios, allowing 0.5,
// rejects). Under uniform access over N resident entries a hit finds its
// entry within the window about 1-e^(-1/4) ≈ 22 % of the time; under
// skewed access (the usual case) most hits do.
//
// Both words are written once per replayed batch (touchLocked) or load
// (linkLocked), under the policy lock, and read by every hit: the padding
// keeps them off the lines of the fields around them.
type accessClock struct {
	_      [64]byte
	clock  atomic.Uint64 // entries put at the front so far (touchLocked, linkLocked)
	window atomic.Uint64 // moves within which a touched entry needs no record
	// epoch is clock when adaptive sizing's age epoch in progress began
	// (advanceAge): a record also stamps the entry's age
	// (adaptive_age.go), so an entry not put at the front since then is
	// recorded however recent, or it would look unused to the age-out.
	epoch atomic.Uint64
	_     [40]byte
}

// recentWindowDiv: window = resident entries / recentWindowDiv.
const recentWindowDiv = 4

// recentlyTouched reports whether an entry touched at clock at is still
// within window moves of the front at clock now (0: never touched), and
// was touched after clock since.
func recentlyTouched(now, at, window, since uint64) bool {
	return at != 0 && at > since && now-at < window
}

// skipRecord reports whether the hit path may leave out the access
// record of a hit on e under policy k (see accessClock). Takes no lock.
func (p *policyLock) skipRecord(k PolicyKind, e *entry) bool {
	switch k {
	case PolicyTwoStageLRU, PolicyLRU:
		return recentlyTouched(p.clock.clock.Load(), e.touchedAt.Load(), p.clock.window.Load(), p.clock.epoch.Load())
	}
	return false
}

// stampLocked records an access to e in the age epoch in progress.
// Caller holds p (which guards the ring).
func (p *policyLock) stampLocked(e *entry) {
	// A drained record may be of an entry already unlinked (evicted):
	// only linked entries are in the ring, so unlinking takes back all.
	if !e.linked || !p.aging.Load() {
		return
	}
	r := &p.ring
	if e.age.epoch == r.cur+1 {
		return
	}
	if r.valid(e.age.epoch) {
		r.slots[(e.age.epoch-1)%ageSlots] -= e.age.bytes
	}
	sz := e.size.Load()
	e.age = ageStamp{epoch: r.cur + 1, bytes: sz}
	r.slots[r.cur%ageSlots] += sz
}

// unstampLocked takes a departing entry's bytes out of the ring. Caller
// holds p.
func (p *policyLock) unstampLocked(e *entry) {
	r := &p.ring
	if r.valid(e.age.epoch) {
		r.slots[(e.age.epoch-1)%ageSlots] -= e.age.bytes
	}
	e.age = ageStamp{}
}

// advanceAge closes the ring's epoch and returns the bytes of the chunks
// accessed in the last n epochs, the closed one included. It only tries
// the lock (and then holds it for a drain of a and O(1) more): ok is
// false, and nothing changed, when the lock is busy, so closing an epoch
// never waits; the epoch closes at the next look. The caller holds
// Cache.sizes.adaptive.mu (lock order: Cache.mu).
func (p *policyLock) advanceAge(n int, a *accessRecording) (recent int64, ok bool) {
	if !p.TryLock() {
		return 0, false
	}
	defer p.Unlock()
	// Buffered hits stamp their entries when drained; a hot set smaller
	// than the buffer, in a cache that never evicts, would otherwise never
	// be drained and look unused.
	p.drainLocked(a)
	recent = p.ring.advance(n)
	p.clock.epoch.Store(p.clock.clock.Load()) // hits record again until stamped in this epoch
	return recent, true
}

// evictableNow reports whether some resident entry is idle (could be
// evicted right now). Used only on the slow path before blocking.
func (p *policyLock) evictableNow() bool {
	found := false
	p.Lock()
	p.pol.Nominate(func(e *entry) verdict {
		if !e.bypass && e.word.Load() == packWord(stateResident, 0) {
			found = true
			return stop
		}
		return skip
	})
	p.Unlock()
	return found
}

// dirtySnapshot returns the entries of dss dirty now, under the lock
// (which guards the member lists).
func (p *policyLock) dirtySnapshot(dss []*Dataset) []*entry {
	var snap []*entry
	p.Lock()
	for _, d := range dss {
		for e := d.members; e != nil; e = e.mnext {
			if e.dirty.Load() {
				snap = append(snap, e)
			}
		}
	}
	p.Unlock()
	return snap
}

// condense asks Condenser layouts to give back slack memory of the chunks
// next in eviction order (SCC internal API H5SC_chunk_condense_t), before
// anything is evicted for space, charging the change to b. It returns the
// bytes given back. The lock is held only to pick the candidates.
func (p *policyLock) condense(need int64, b *budget) int64 {
	const maxCandidates = 64
	var cands []*entry
	p.Lock()
	p.pol.Nominate(func(e *entry) verdict {
		if len(cands) >= maxCandidates {
			return stop
		}
		if _, ok := e.ds.lay().l.(layout.Condenser); ok && !e.bypass {
			if ok, _ := e.pin(); ok {
				cands = append(cands, e)
			}
		}
		return skip
	})
	p.Unlock()
	var freed int64
	for _, e := range cands {
		if freed < need {
			cd := e.ds.lay().l.(layout.Condenser)
			e.lockChunk() // replaces e.chunk: keep light readers out
			old := e.size.Load()
			if nc := cd.Condense(e.coord, e.chunk); nc != nil {
				e.setChunk(e.ds.lay().l, nc)
				ms := nc.MemSize()
				if img := e.encoded.Load(); img != nil {
					ms += img.bytes() // the image stays charged
				}
				if ms != old {
					e.size.Store(ms)
					e.ds.size.Add(ms - old)
					if e.dirty.Load() {
						b.dirty.Add(ms - old)
					}
					b.charge(ms - old)
					freed += old - ms
				}
			}
			e.unlockChunk()
		}
		b.unpin(e)
	}
	return freed
}
