package cache

import (
	"context"
	"fmt"
	"sync"

	"github.com/scc-dev/scc/cache/layout"
)

// remove takes entries that are in the evicting (or loading, for entries
// never made resident) state out of the cache: unlink, delete from the
// table, release their bytes, call Evicter, and wake waiters.
func (c *Cache) remove(es []*entry) {
	if len(es) == 0 {
		return
	}
	if invariants {
		for _, e := range es {
			if w := e.word.Load(); stateOf(w) != stateLoading && stateOf(w) != stateEvicting || w&pinMask != 0 {
				broken("remove of entry %v in state %d with %d pins", e.coord, stateOf(w), w&pinMask)
			}
		}
	}
	c.mu.Lock()
	for _, e := range es {
		c.mu.unlinkLocked(e)
	}
	c.mu.Unlock()
	var expire []*Dataset
	for _, e := range es {
		c.chunks.CompareAndDelete(e.key, func(v *entry) bool { return v == e })
		sz := e.size.Swap(0) // includes a pre-encoded image's bytes
		dsz := sz
		if p := e.encoded.Swap(nil); p != nil {
			dsz -= p.bytes() // not part of the dataset's size
			c.background.preEncode.bytes.Add(-p.bytes())
			if e.dirty.Load() {
				c.stats.preWasted.Add(1) // dropped unwritten (SetExtent, Close, failed load)
			}
			p.release()
		}
		e.ds.size.Add(-dsz)
		if e.prefetched().Swap(false) {
			c.background.prefetch.bytes.Add(-e.prefSize)
			c.stats.prefetchWasted.Add(1)
		}
		if e.dirty.Swap(false) {
			c.budget.dirty.Add(-sz)
		}
		// Uncharge before the dataset's count drops: File.Unregister waits
		// for that count to reach zero, and then every byte is released.
		c.budget.charge(-sz)
		if e.ds.chunks.Add(-1) == 0 && !e.ds.registered.Load() {
			expire = append(expire, e.ds)
		}
		if ev, ok := e.ds.lay().l.(layout.Evicter); ok && e.chunk != nil {
			ev.Evict(e.coord, e.chunk)
		}
		e.setChunk(nil, nil)
		e.settle(stateDead, false)
	}
	for _, d := range expire {
		d.maybeExpire()
	}
	// charge signalled before the datasets' counts dropped; unregistering
	// waits for the counts, so wake it again now.
	if c.budget.spaceWaiters.Load() > 0 {
		c.budget.signalSpace()
	}
}

// evict frees at least need bytes if it can (SCC design §4.2): the policy
// nominates victims; the first pass honours per-dataset minimums, a second
// pass (when passes is 2 and the first fell short) ignores them: a request
// that needs memory may take it from a dataset's reservation, the
// background trim may not. Clean victims are
// dropped; dirty ones are encoded in parallel, inserted with one
// Layout.Insert per dataset and written with one WriteV per file
// (SCC design §3.6) before being dropped. It returns the bytes freed.
//
// A failed write returns the error and leaves those victims resident and
// dirty; clean victims are still freed.
func (c *Cache) evict(ctx context.Context, need int64, passes int) (int64, error) {
	// Prefetched image entries never requested go first (imageentries.go).
	if freed := c.images.evict(need); freed > 0 {
		c.budget.charge(-freed)
		return freed, nil
	}
	// Then stored images nobody holds (storedimages.go): one read brings
	// one back, with no decode.
	if freed := c.stored.evict(need); freed > 0 {
		return freed, nil
	}
	if c.registered.condensers.Load() > 0 {
		if freed := c.mu.condense(need, &c.budget); freed >= need {
			return freed, nil
		}
	}
	sc := evictScratchPool.Get().(*evictScratch)
	defer sc.put()
	victims := sc.victims
	var planned int64
	for pass := 0; pass < passes && planned < need; pass++ {
		round := sc.round
		clear(round)
		c.mu.Lock()
		c.mu.drainLocked(&c.access)
		c.mu.pol.Nominate(func(e *entry) verdict {
			if planned >= need {
				return stop
			}
			d := e.ds
			sz := e.size.Load()
			if pass == 0 {
				if m := d.min.Load(); m > 0 && d.size.Load()-round[d] <= m {
					return exhausted
				}
			}
			if e.bypass || !e.tryStartEvict() {
				return skip
			}
			victims = append(victims, e)
			planned += sz
			if p := e.encoded.Load(); p != nil {
				sz -= p.bytes() // a kept image is not part of the dataset's size
			}
			round[d] += sz
			return take
		})
		c.mu.Unlock()
	}
	sc.victims = victims // keep grown capacity
	if len(victims) == 0 {
		return 0, nil
	}
	clean, dirty := sc.clean, sc.dirty
	for _, e := range victims {
		if e.dirty.Load() {
			dirty = append(dirty, e)
		} else {
			clean = append(clean, e)
		}
	}
	var freed int64
	for _, e := range clean {
		freed += e.size.Load()
	}
	sc.clean, sc.dirty = clean, dirty
	c.stats.evictions.Add(int64(len(clean)))
	c.sizes.noteEvicted(clean)
	c.remove(clean)
	if len(dirty) == 0 {
		return freed, nil
	}
	err := c.writer.writeBack(ctx, dirty, false)
	gone, back := sc.gone, sc.back
	for _, e := range dirty {
		if e.dirty.Load() {
			back = append(back, e)
		} else {
			gone = append(gone, e)
			freed += e.size.Load()
		}
	}
	sc.gone, sc.back = gone, back
	c.stats.evictions.Add(int64(len(gone)))
	c.stats.dirtyEvictions.Add(int64(len(gone)))
	c.sizes.noteEvicted(gone)
	c.remove(gone)
	for _, e := range back {
		c.budget.settleBack(e)
	}
	if err != nil {
		return freed, fmt.Errorf("cache: evicting dirty chunks: %w", err)
	}
	return freed, nil
}

// evictScratch is evict's working set, pooled: every miss into a full
// cache evicts.
type evictScratch struct {
	round                             map[*Dataset]int64
	victims, clean, dirty, gone, back []*entry
}

var evictScratchPool = sync.Pool{New: func() any {
	return &evictScratch{round: map[*Dataset]int64{}}
}}

// put drops the references to entries and datasets and pools s, unless a
// huge eviction grew it.
func (s *evictScratch) put() {
	if cap(s.victims) > 4096 {
		return
	}
	clear(s.round)
	for _, l := range []*[]*entry{&s.victims, &s.clean, &s.dirty, &s.gone, &s.back} {
		clear((*l)[:cap(*l)])
		*l = (*l)[:0]
	}
	evictScratchPool.Put(s)
}
