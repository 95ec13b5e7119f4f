package cache

import (
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/internal/policy"
	"github.com/scc-dev/scc/cache/layout"
)

// policyLock is the replacement order: the policy lock (Cache.mu; the
// cache's lock order is written at that declaration), the policy it
// guards, the datasets' member lists and adaptive sizing's age ring.
// Everything here but aging is guarded by the lock; aging is written
// under it and read without it.
type policyLock struct {
	sync.Mutex
	pol policy.Policy[*entry] // policy.go
	// aging is set while the sizing in force ages out (adaptive_age.go):
	// then every access the order applies stamps its entry in ring.
	aging atomic.Bool
	ring  ageRing
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
//
// What it writes: the policy's own fields of each entry (its list links,
// counters, visited bit: lines after the first) and, while the sizing ages
// out, the entry's age stamp; never the entry's first line, which every
// hit reads (entry.go). A write there from the replayer's core takes the
// line away from the cores that read the chunk, and their next hit on it
// waits for the line to come back: when the recency policies stamped each
// replayed entry with a clock on that line (so that a hit near the front
// of the order could leave its record out), that stamp cost more than
// every record it saved. bench/peers' BenchmarkLookup (4,096 resident
// 64-byte chunks, 2-core EPYC VM), stamped beside not stamped: uniform
// keys 17-21 against 24-25 Mlookups/s at 1 goroutine, 46-48 against 49
// at 2; Zipf(1.1) keys 21 against 25.5 at 1 goroutine, 48.5 against 53
// at 2. Every hit is recorded now, once per replay and entry as far as
// its read slot remembers (pendingFilter), and replays are lossy
// (latch.go): the order is the policy's exact order up to the records
// dropped when the replayer falls behind.
func (p *policyLock) touchLocked(batch []*entry) {
	stamp := p.aging.Load()
	for _, e := range batch {
		p.pol.Touch(e)
		if stamp {
			p.stampLocked(e)
		}
	}
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
	return p.ring.advance(n), true
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
