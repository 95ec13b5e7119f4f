package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// link makes freshly loaded entries known to their datasets and the
// policy. Caller holds c.mu.
func (c *Cache) linkLocked(e *entry) {
	d := e.ds
	e.mprev, e.mnext = nil, d.members
	if d.members != nil {
		d.members.mprev = e
	}
	d.members = e
	e.linked = true
	c.mu.pol.Add(e)
	e.touchedAt.Store(c.access.clock.clock.Add(1)) // at the front, as after a touch
	c.sizes.adaptive.stampLocked(e)
}

func (c *Cache) unlinkLocked(e *entry) {
	if !e.linked {
		return
	}
	c.sizes.adaptive.unstampLocked(e)
	c.mu.pol.Remove(e)
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

// drainLocked replays buffered accesses into the policy. Caller holds c.mu.
func (c *Cache) drainLocked() {
	c.access.drainLocked(c.touchLocked)
}

// drainLocked calls f with the buffered access records: the read slots'
// (latch.go) and the shared buffer's (hits that took a pin). Caller holds
// Cache.mu.
func (a *accessRecording) drainLocked(f func([]*entry)) {
	a.slots.drain(f)
	a.buf.Drain(f)
}

func (c *Cache) touchLocked(batch []*entry) {
	stamp := c.sizes.adaptive.aging.Load()
	clock := c.access.clock.clock.Load()
	for _, e := range batch {
		c.mu.pol.Touch(e)
		clock++
		e.touchedAt.Store(clock)
		if stamp {
			c.sizes.adaptive.stampLocked(e)
		}
	}
	c.access.clock.clock.Store(clock)
	c.access.clock.window.Store(uint64(c.chunks.Len()) / recentWindowDiv)
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
// record of a hit on e under policy p (see accessClock).
func (a *accessRecording) skipRecord(p PolicyKind, e *entry) bool {
	switch p {
	case PolicyTwoStageLRU, PolicyLRU:
		return recentlyTouched(a.clock.clock.Load(), e.touchedAt.Load(), a.clock.window.Load(), a.clock.epoch.Load())
	}
	return false
}

// record notes a hit that took a pin (a write, or a read that found
// its P's read slots taken) for the policy without taking the policy lock
// (see policy.go): it appends e to its stripe of the shared access buffer
// and, if that brought the stripe to its mark, wakes the replayer
// (replay.go), which applies the records on its own goroutine. Read hits
// that hold a read slot record in the slot instead (slotHit).
func (a *accessRecording) record(e *entry) {
	if _, ready := a.buf.Record(e); ready {
		a.kickReplay()
	}
}

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
		c.unlinkLocked(e)
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
		e.chunk = nil
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
		if freed := c.condense(need); freed >= need {
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
		c.drainLocked()
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
	err := c.writeBack(ctx, dirty, false)
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

// writeBackRounds is writeBack for a flush. Encoded images live outside the
// budget until written: a flush of a full cache encoding every dirty chunk
// at once would hold a second cache's worth of them. Rounds of at most an
// eighth of the active limit of chunks bound that, and still give the pool
// many chunks to encode in parallel and the driver one vector write per
// round. (Eviction writes its victims in one round, SCC design §3.6: they
// are what one request needs.)
func (c *Cache) writeBackRounds(ctx context.Context, es []*entry) error {
	limit := max(c.sizes.current().active/8, 1)
	var errs []error
	for start := 0; start < len(es); {
		rest := es[start:]
		end := start + cut(limit, len(rest), func(i int) int64 { return rest[i].size.Load() })
		if err := c.writeBack(ctx, es[start:end], false); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		start = end
	}
	return errors.Join(errs...)
}

// writeBack writes the given dirty entries (SCC requirements §3.2.3 chunk flush):
// encode in parallel under the shared latch remembering each version,
// one Layout.Insert per dataset, one WriteV per file, optionally Sync, then
// mark clean each entry whose version did not change meanwhile.
//
// The caller guarantees exclusive write-back rights on every entry: the
// entry is evicting, or the caller holds its flushMu. On error no entry is
// marked clean (DESIGN.md "No data loss").
//
// It works in phases: encode every chunk on the workers (encodeRound),
// allocate new space with one Layout.Insert per dataset (allocateRound),
// write every image with one WriteV per file (writeImages), publish the
// outcome with one Layout.Publish per dataset (publishRound), and mark the
// chunks written that did not change meanwhile clean (markWritten). A dataset whose Insert fails and a file
// whose write fails keep their chunks dirty; the others go on.
func (c *Cache) writeBack(ctx context.Context, es []*entry, sync bool) error {
	if len(es) == 0 {
		return nil
	}
	// Every eviction of a dirty chunk comes through here: its slices and
	// maps are recycled so that it makes no garbage per chunk.
	sc := wbScratchPool.Get().(*wbScratch)
	defer sc.put()
	sc.size(len(es))
	defer func() { c.budget.encoding.Add(-sc.encoding.Swap(0)) }() // once released
	defer sc.release(es)
	if err := c.encodeRound(ctx, es, sc); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	errs := allocateRound(ctx, es, sc)
	writeImages(sc, &c.stats, sync)
	sc.unlatch(es) // the images are written (or failed): the chunks may change
	for _, err := range sc.fileErr {
		errs = append(errs, err)
	}
	errs = publishRound(ctx, es, sc, errs)
	c.markWritten(es, sc)
	return errors.Join(errs...)
}

// encodeRound encodes es on the workers into sc.enc, noting in sc.ver
// the version each image is of. A kept pre-encoded image of that version
// is used as it is (sc.pre holds it); a BorrowingEncoder's image that
// aliases the chunk leaves the chunk's latch held shared (sc.held).
func (c *Cache) encodeRound(ctx context.Context, es []*entry, sc *wbScratch) error {
	enc, ver, pre, held := sc.enc, sc.ver, sc.pre, sc.held
	return c.workers.run(ctx, len(es), func(i int) (err error) {
		e := es[i]
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: Encode: %v", ErrPanic, r)
			}
		}()
		e.latch.RLock()
		keep := false
		defer func() {
			if !keep {
				e.latch.RUnlock()
			}
		}()
		ver[i] = e.version.Load()
		if p := e.encoded.Load(); p != nil && p.ver == ver[i] {
			// Pre-encoded in the background (background.go). The entry
			// holds p while we hold the latch, so taking a hold is safe.
			p.refs.Add(1)
			pre[i], enc[i] = p, p.enc
			c.stats.preHits.Add(1)
			return nil
		}
		l := e.ds.lay().l
		if b, ok := l.(layout.BorrowingEncoder); ok {
			enc[i], err = b.EncodeBorrowed(e.coord, e.chunk)
			keep = err == nil && !enc[i].Pooled // a pooled image is a copy
			held[i] = keep
		} else {
			enc[i], err = l.Encode(e.coord, e.chunk)
		}
		if err == nil && !held[i] {
			// An image of its own, outside the budget until written
			// (Stats.EncodingBytes); a borrowed one is the chunk.
			n := int64(cap(enc[i].Image))
			sc.encoding.Add(n)
			c.budget.noteEncoding(c.budget.encoding.Add(n))
		}
		return err
	})
}

// allocateRound groups es by dataset (sc.byDS, in sc.order) and calls one
// Layout.Insert per dataset, recording each dataset's insertions in
// sc.insOf. A dataset whose Insert fails is left out of sc.insOf (its
// chunks stay dirty) and its error returned.
func allocateRound(ctx context.Context, es []*entry, sc *wbScratch) []error {
	enc, byDS := sc.enc, sc.byDS
	for i, e := range es {
		if _, ok := byDS[e.ds]; !ok {
			sc.order = append(sc.order, e.ds)
		}
		byDS[e.ds] = append(byDS[e.ds], i)
	}
	var errs []error
	for _, d := range sc.order {
		idx := byDS[d]
		ins := make([]layout.Insertion, len(idx))
		for k, i := range idx {
			e := es[i]
			ins[k] = layout.Insertion{Coord: e.coord, Old: e.loc, Size: int64(len(enc[i].Image)), Mask: enc[i].Mask, Sum: enc[i].Sum}
		}
		if err := d.lay().l.Insert(ctx, ins); err != nil {
			errs = append(errs, fmt.Errorf("cache: Layout.Insert: %w", err))
			continue // this dataset's chunks stay dirty
		}
		sc.insOf[d] = ins
	}
	return errs
}

// writeImages writes every allocated image with one WriteV per file (and
// a Sync after it when sync is set), recording each file's error in
// sc.fileErr, and counts the writes in st.
func writeImages(sc *wbScratch, st *counters, sync bool) {
	enc, byFile := sc.enc, sc.byFile
	for _, d := range sc.order {
		ins, ok := sc.insOf[d]
		if !ok {
			continue
		}
		f := d.file
		if _, ok := byFile[f]; !ok {
			sc.files = append(sc.files, f)
		}
		for k, i := range sc.byDS[d] {
			if len(enc[i].Image) > 0 {
				byFile[f] = append(byFile[f], vfd.Extent{Off: ins[k].New.Addr, Buf: enc[i].Image})
			}
		}
	}
	for _, f := range sc.files {
		exts := byFile[f]
		if len(exts) == 0 {
			continue
		}
		var n int64
		for _, x := range exts {
			n += int64(len(x.Buf))
		}
		st.vectorWrites.Add(1)
		st.vectorWriteBytes.Add(n)
		if err := f.drv.WriteV(exts); err != nil {
			sc.fileErr[f] = fmt.Errorf("cache: writing %d chunks: %w", len(exts), err)
			continue
		}
		if sync {
			st.syncs.Add(1)
			if err := f.drv.Sync(); err != nil {
				sc.fileErr[f] = fmt.Errorf("cache: sync: %w", err)
			}
		}
	}
}

// publishRound publishes each allocated dataset's outcome (Layout.Publish
// with its file's write error) and, for the datasets written and
// published, moves their entries to the new locations and lists them in
// sc.done: only published chunks can become clean. It returns errs with
// the Publish errors added.
func publishRound(ctx context.Context, es []*entry, sc *wbScratch, errs []error) []error {
	for _, d := range sc.order {
		ins, ok := sc.insOf[d]
		if !ok {
			continue
		}
		werr := sc.fileErr[d.file]
		perr := d.lay().l.Publish(ctx, ins, werr)
		d.relocs.Add(1) // after Publish: see group.epoch
		if werr != nil {
			continue
		}
		if perr != nil {
			errs = append(errs, fmt.Errorf("cache: Layout.Publish: %w", perr))
			continue
		}
		for k, i := range sc.byDS[d] {
			e := es[i]
			nl := ins[k].New
			nl.Size, nl.Mask = ins[k].Size, ins[k].Mask
			if nl.SizeHint == 0 {
				nl.SizeHint = e.loc.SizeHint
			}
			e.loc = nl
			sc.done = append(sc.done, i)
		}
	}
	return errs
}

// markWritten counts the chunks of sc.done as flushed and marks clean
// those whose version is still the one written, dropping their kept
// images; a chunk changed meanwhile stays dirty.
func (c *Cache) markWritten(es []*entry, sc *wbScratch) {
	for _, i := range sc.done {
		e := es[i]
		c.stats.bytesFlushed.Add(int64(len(sc.enc[i].Image)))
		c.stats.chunksFlushed.Add(1)
		e.latch.Lock()
		if e.version.Load() == sc.ver[i] {
			// Written: a kept image has served its purpose.
			c.background.preEncode.dropImageLocked(e, &c.budget)
			if e.dirty.Swap(false) {
				c.budget.dirty.Add(-e.size.Load())
			}
		}
		e.latch.Unlock()
	}
}

// condense asks Condenser layouts to give back slack memory of the chunks
// next in eviction order (SCC internal API H5SC_chunk_condense_t), before anything
// is evicted for space. It returns the bytes given back.
func (c *Cache) condense(need int64) int64 {
	const maxCandidates = 64
	var cands []*entry
	c.mu.Lock()
	c.mu.pol.Nominate(func(e *entry) verdict {
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
	c.mu.Unlock()
	var freed int64
	for _, e := range cands {
		if freed < need {
			cd := e.ds.lay().l.(layout.Condenser)
			e.lockChunk() // replaces e.chunk: keep light readers out
			old := e.size.Load()
			if nc := cd.Condense(e.coord, e.chunk); nc != nil {
				e.chunk = nc
				ms := nc.MemSize()
				if p := e.encoded.Load(); p != nil {
					ms += p.bytes() // the image stays charged
				}
				if ms != old {
					e.size.Store(ms)
					e.ds.size.Add(ms - old)
					if e.dirty.Load() {
						c.budget.dirty.Add(ms - old)
					}
					c.budget.charge(ms - old)
					freed += old - ms
				}
			}
			e.unlockChunk()
		}
		c.budget.unpin(e)
	}
	return freed
}

// wbScratch is writeBack's working set, pooled.
type wbScratch struct {
	enc []layout.Encoded
	ver []uint64
	// pre[i] is the kept image enc[i] came from, held (preImage.refs)
	// until the write is over; other images are released then, on every
	// path (the buffer pool's ownership rule, internal/bufpool).
	pre []*preImage
	// held[i]: enc[i] came from EncodeBorrowed and es[i]'s latch is still
	// held shared, so that the chunk, which the image may be, cannot
	// change before the vector write has read it (BorrowingEncoder).
	// unlatch lets go of them; it runs once the writes are done, and on
	// every earlier return.
	held    []bool
	byDS    map[*Dataset][]int
	order   []*Dataset
	insOf   map[*Dataset][]layout.Insertion
	byFile  map[*File][]vfd.Extent
	files   []*File
	fileErr map[*File]error
	done    []int
	// encoding is the bytes of this round's images counted in
	// budget.encoding (encodeRound), taken out once they are released.
	encoding atomic.Int64
}

var wbScratchPool = sync.Pool{New: func() any {
	return &wbScratch{
		byDS:    map[*Dataset][]int{},
		insOf:   map[*Dataset][]layout.Insertion{},
		byFile:  map[*File][]vfd.Extent{},
		fileErr: map[*File]error{},
	}
}}

// size readies s for n entries.
func (s *wbScratch) size(n int) {
	if cap(s.enc) < n {
		s.enc, s.ver, s.pre, s.held = make([]layout.Encoded, n), make([]uint64, n), make([]*preImage, n), make([]bool, n)
	}
	s.enc, s.ver, s.pre, s.held = s.enc[:n], s.ver[:n], s.pre[:n], s.held[:n]
}

// unlatch releases the latches held for borrowed images (held).
func (s *wbScratch) unlatch(es []*entry) {
	for i, h := range s.held {
		if h {
			s.held[i] = false
			es[i].latch.RUnlock()
		}
	}
}

// release ends a round on every path: it releases the latches still held
// and the images, giving kept images their hold back.
func (s *wbScratch) release(es []*entry) {
	s.unlatch(es)
	for i := range s.enc {
		if s.pre[i] != nil {
			s.pre[i].release()
		} else {
			releaseImage(s.enc[i])
		}
	}
}

// put drops every reference (images, entries, datasets, errors) and pools
// s, unless a huge round grew it.
func (s *wbScratch) put() {
	if cap(s.enc) > 4096 {
		return
	}
	clear(s.enc[:cap(s.enc)])
	clear(s.pre[:cap(s.pre)])
	clear(s.byDS)
	clear(s.order[:cap(s.order)])
	s.order = s.order[:0]
	clear(s.insOf)
	clear(s.byFile)
	clear(s.files[:cap(s.files)])
	s.files = s.files[:0]
	clear(s.fileErr)
	s.done = s.done[:0]
	wbScratchPool.Put(s)
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
