package cache

import (
	"context"
	"fmt"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/vfd"
)

// Prefetch (SCC requirements §2.2 item 6: "background thread(s) prefetching
// chunks"). Each dataset remembers the last chunk a read missed on; a miss
// on the next chunk along one dimension (the last dimension for row-major
// scans, dimension 0 for frame stacks) starts a stream, and the next
// Config.PrefetchChunks chunks along that dimension are loaded by one
// background goroutine. Using a prefetched chunk continues the stream
// from it, so a sequential reader keeps running ahead of itself.
//
// Bounds: prefetched chunks not yet used stay under Config.PrefetchBytes;
// a prefetch takes memory only if it fits under the quiescent limit, after
// evicting at most clean, cold chunks that are not themselves unused
// prefetches (never a dirty chunk, never a write); it never blocks a
// request (jobs are dropped when the queue is full) and never retries.
// Chunks that exist nowhere are not prefetched (a read of them costs no
// I/O anyway). The cache does not know the dataset's extent, so a stream
// past the end of a row or of the dataset just finds nothing stored.

// prefetchState is the prefetcher's. Its configuration is fixed after New;
// only bytes changes.
type prefetchState struct {
	// max caps the bytes of prefetched chunks not used yet:
	// Config.PrefetchBytes. INVARIANT: 0 means prefetch is off (the
	// detector ignores misses, jobs is nil, no goroutine runs).
	max int64
	// ahead is how many chunks a job looks ahead: Config.PrefetchChunks.
	ahead int
	// bytes is the sum of prefSize over the cached entries still marked
	// prefetched (unused). Added when a prefetch settles its entries,
	// taken back by whoever clears the mark: the first use
	// (prefetchState.used) or removal. INVARIANT: 0 <= bytes. A job loads only
	// chunks whose size hints fit in max-bytes (one job runs at a time and
	// others only lower bytes), so bytes exceeds max at most by what the
	// decoded chunks' real sizes exceed their hints.
	bytes atomic.Int64
	// jobs is the prefetcher's queue, capacity 16; queue drops a
	// job rather than block a request when it is full. nil when off.
	jobs chan prefetchJob
}

// prefetchJob asks for the chunks after from along dim.
type prefetchJob struct {
	d    *Dataset
	from layout.Coord
	dim  int
}

// seqState is a dataset's sequential-read detector. Guarded by its mutex;
// touched only on misses and on the first use of a prefetched chunk.
type seqState struct {
	sync.Mutex
	last layout.Coord
	dim  int // dimension of the current stream
	run  int // consecutive steps along dim
	// grid holds, per dimension, the chunks along it as learned from a
	// reader that wrapped (wrapStep); 0 where none has been seen. The
	// cache does not know the extent: a scan in C order shows it.
	grid []uint64
}

// wrapStep reports whether b is the chunk after a in C order of a stream
// along dim that ran off the end of a row: some dimension k < dim steps
// by one, the dimensions after k up to dim start again at 0, the others
// stay. It returns k.
func wrapStep(a, b layout.Coord, dim int) (int, bool) {
	if len(a) != len(b) || dim < 0 || dim >= len(a) {
		return -1, false
	}
	k := -1
	for j := 0; j <= dim; j++ {
		if b[j] != a[j] {
			k = j
			break
		}
	}
	if k < 0 || k == dim || b[k] != a[k]+1 {
		return -1, false
	}
	for j := k + 1; j < len(a); j++ {
		if j <= dim && b[j] != 0 || j > dim && b[j] != a[j] {
			return -1, false
		}
	}
	return k, true
}

// next steps x to the chunk after it in the stream along dim: one along
// dim, and past the end of a row (a dimension whose chunks grid knows)
// on to the start of the next one. It reports false past the last chunk
// grid knows of.
func nextInStream(x layout.Coord, dim int, grid []uint64) bool {
	for j := dim; j >= 0; j-- {
		x[j]++
		if x[j] == 0 {
			return false // overflow
		}
		if j >= len(grid) || grid[j] == 0 || x[j] < grid[j] {
			return true
		}
		x[j] = 0 // a full row: carry into the dimension before
	}
	return false
}

// stepDim returns the dimension along which b is the chunk after a, or -1.
func stepDim(a, b layout.Coord) int {
	if len(a) != len(b) {
		return -1
	}
	k := -1
	for j := range a {
		switch {
		case a[j] == b[j]:
		case b[j] == a[j]+1 && k < 0:
			k = j
		default:
			return -1
		}
	}
	return k
}

// noteReadMiss feeds a read miss of coord to d's detector.
func (p *prefetchState) noteReadMiss(d *Dataset, coord layout.Coord) {
	if p.max <= 0 {
		return
	}
	s := &d.seq
	s.Lock()
	k := stepDim(s.last, coord)
	switch w, wrapped := wrapStep(s.last, coord, s.dim); {
	case k >= 0 && (s.run == 0 || k == s.dim):
		s.run++
		s.dim = k
	case wrapped && s.run > 0:
		// The stream ran off a row and goes on with the next: the rows'
		// lengths are now known, so it continues across them.
		if len(s.grid) != len(coord) {
			s.grid = make([]uint64, len(coord))
		}
		for j := w + 1; j <= s.dim; j++ {
			s.grid[j] = s.last[j] + 1
		}
		s.run++
	default:
		s.run = 0
	}
	s.last = append(s.last[:0], coord...)
	start := s.run >= 1
	dim := s.dim
	s.Unlock()
	if start {
		p.queue(d, coord, dim)
	}
}

// used is called when a request finds e still marked prefetched:
// it counts the hit and continues the stream from e.
func (p *prefetchState) used(e *entry, st *counters) {
	if !e.prefetched().CompareAndSwap(true, false) {
		return
	}
	p.bytes.Add(-e.prefSize)
	st.prefetchHits.Add(1)
	d := e.ds
	d.seq.Lock()
	dim := d.seq.dim
	d.seq.last = append(d.seq.last[:0], e.coord...)
	d.seq.Unlock()
	p.queue(d, e.coord, dim)
}

// queue hands a job to the prefetcher without ever blocking.
func (p *prefetchState) queue(d *Dataset, from layout.Coord, dim int) {
	if d.noPrefetch.Load() {
		return
	}
	if p.bytes.Load() >= p.max {
		return
	}
	select {
	case p.jobs <- prefetchJob{d: d, from: append(layout.Coord(nil), from...), dim: dim}:
	default:
	}
}

func (c *Cache) prefetcher() {
	defer c.background.jobs.wg.Done()
	for {
		select {
		case <-c.background.jobs.ctx.Done():
			return
		case j := <-c.background.prefetch.jobs:
			f := j.d.file
			if !f.prefetchBegin() {
				continue
			}
			if j.d.registered.Load() {
				_ = c.prefetch(c.background.jobs.ctx, j)
			}
			f.prefetchEnd()
		}
	}
}

// prefetchBegin registers an in-flight prefetch on f unless f is being
// unregistered.
func (f *File) prefetchBegin() bool {
	f.pf.Lock()
	defer f.pf.Unlock()
	if f.pf.closing {
		return false
	}
	f.pf.n++
	return true
}

func (f *File) prefetchEnd() {
	f.pf.Lock()
	f.pf.n--
	if f.pf.n == 0 && f.pf.cond != nil {
		f.pf.cond.Broadcast()
	}
	f.pf.Unlock()
}

// waitPrefetches waits until no prefetch runs on f; with closing, none
// starts afterwards either. Prefetches are bounded work (one vector read
// and its decodes), so this wait is short.
func (f *File) waitPrefetches(closing bool) {
	f.pf.Lock()
	if closing {
		f.pf.closing = true
	}
	for f.pf.n > 0 {
		if f.pf.cond == nil {
			f.pf.cond = sync.NewCond(&f.pf.Mutex)
		}
		f.pf.cond.Wait()
	}
	f.pf.Unlock()
}

// prefetch loads the chunks of one job that are stored, not cached, and
// fit the budgets. Errors only end the job: a later demand read reports
// them. Its phases: pick the chunks (prefetchState.coords), look them up, claim
// table slots for those that fit (prefetchState.claim), charge the budget
// (chargePrefetch), read and decode them (readPrefetch, decodePrefetch),
// and make them resident (prefetchState.settle). Whatever ends the job early
// removes the claimed entries, so a demand read loads them.
func (c *Cache) prefetch(ctx context.Context, j prefetchJob) error {
	d := j.d
	box := d.lay()
	if j.dim < 0 || j.dim >= len(box.dims) || len(j.from) != len(box.dims) {
		return nil
	}
	coords := c.background.prefetch.coords(j, c.chunks)
	if len(coords) == 0 {
		return nil
	}
	epoch := d.relocs.Load()
	locs := make([]layout.Location, len(coords))
	n, err := lookupPrefix(ctx, box.l, coords, locs)
	if err != nil {
		return err
	}
	es, total := c.background.prefetch.claim(d, coords[:n], locs[:n], c.chunks, &c.sizes)
	if len(es) == 0 {
		return nil
	}
	if d.relocs.Load() != epoch {
		c.remove(es) // a location may have moved: give up, a demand read will load
		return nil
	}
	if !c.chargePrefetch(total) {
		c.remove(es)
		return nil
	}
	c.budget.inflight.Add(total)
	defer c.budget.inflight.Add(-total)
	images, err := readPrefetch(d, es, &c.stats)
	if err == nil {
		err = decodePrefetch(ctx, c.workers, box, es, images)
	}
	if err != nil {
		c.remove(es)
		return err
	}
	c.background.prefetch.settle(d, es, &c.mu, &c.budget, &c.stats)
	return nil
}

// coords returns the next p.ahead chunks after j.from in the stream along
// j.dim (nextInStream: across rows whose length a reader has shown) that
// are not in the chunk table t.
func (p *prefetchState) coords(j prefetchJob, t *chunkTable) []layout.Coord {
	j.d.seq.Lock()
	grid := slices.Clone(j.d.seq.grid)
	j.d.seq.Unlock()
	var coords []layout.Coord
	x := slices.Clone(j.from)
	for k := 1; k <= p.ahead; k++ {
		if !nextInStream(x, j.dim, grid) {
			break
		}
		if _, ok := t.Load(makeKey(j.d.serial, x)); ok {
			continue
		}
		coords = append(coords, slices.Clone(x))
	}
	return coords
}

// lookupPrefix looks up coords and returns how many of them it located:
// all, or, when the lookup of all fails (a chunk past the dataset's
// extent, which the cache does not know: the stream ran off its end),
// those before the first that fails alone.
func lookupPrefix(ctx context.Context, l layout.Layout, coords []layout.Coord, locs []layout.Location) (int, error) {
	err := l.Lookup(ctx, coords, locs)
	if err == nil {
		return len(coords), nil
	}
	for i := range coords {
		if e := l.Lookup(ctx, coords[i:i+1], locs[i:i+1]); e != nil {
			if i == 0 {
				return 0, e
			}
			return i, nil
		}
	}
	return 0, err // failed together, but not one by one: give up
}

// claim puts a loading entry into the chunk table t for each chunk
// of coords that is stored, loadable without bypass (z), and fits the
// prefetch budget's room, in order until one does not fit. It returns the
// entries (counted in d) and the sum of their size hints.
func (p *prefetchState) claim(d *Dataset, coords []layout.Coord, locs []layout.Location, t *chunkTable, z *sizer) (es []*entry, total int64) {
	room := p.max - p.bytes.Load()
	for i, x := range coords {
		loc := locs[i]
		if !loc.Exists() || loc.Size < 0 || loc.SizeHint <= 0 || loc.Size > maxStored(loc.SizeHint) || loc.SizeHint > z.current().bypass {
			continue
		}
		if total+loc.SizeHint > room {
			break
		}
		e := &entry{key: makeKey(d.serial, x), coord: x, ds: d, loc: loc}
		e.initLoading()
		if _, loaded := t.LoadOrStore(e); loaded {
			continue
		}
		d.chunks.Add(1)
		es = append(es, e)
		total += loc.SizeHint
	}
	return es, total
}

// chargePrefetch charges total bytes if they fit under the quiescent
// limit, after evicting clean cold chunks to make room (evictClean); it
// never waits. Not the active limit: a prefetched chunk, once used, stays
// resident as any other, so a prefetch allowed past the quiescent limit
// would let a one-pass scan (whose own misses are decoded straight into
// the caller's buffer once the cache is full, directdecode.go) grow the
// cache to its active limit a job at a time; under the quiescent limit
// the chunks it makes room for are the scan's own used ones, the coldest.
func (c *Cache) chargePrefetch(total int64) bool {
	limit := c.sizes.current().quiescent
	if c.budget.tryCharge(total, limit) {
		return true
	}
	c.evictClean(total - (limit - c.budget.resident.Load()))
	return c.budget.tryCharge(total, limit)
}

// readPrefetch sizes the claimed entries at their hints and reads their
// images with one vector read, counted in st.
func readPrefetch(d *Dataset, es []*entry, st *counters) ([][]byte, error) {
	images := make([][]byte, len(es))
	exts := make([]vfd.Extent, len(es))
	var n int64
	for i, e := range es {
		h := e.loc.SizeHint
		e.size.Store(h)
		d.size.Add(h)
		images[i] = bufpool.GetFull(int(e.loc.Size)) // Decode owns it (bufpool.go)
		exts[i] = vfd.Extent{Off: e.loc.Addr, Buf: images[i]}
		n += e.loc.Size
	}
	st.vectorReads.Add(1)
	st.vectorReadBytes.Add(n)
	if err := d.file.drv.ReadV(exts); err != nil {
		return nil, err
	}
	return images, nil
}

// decodePrefetch decodes the images read into the entries' chunks on w; a
// panicking Decode is an error like any other.
func decodePrefetch(ctx context.Context, w workers, box *layoutBox, es []*entry, images [][]byte) error {
	return w.run(ctx, len(es), func(i int) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrPanic, r)
			}
		}()
		e := es[i]
		ch, err := box.l.Decode(e.coord, e.loc, images[i])
		if err == nil && ch == nil {
			err = fmt.Errorf("%w: layout returned a nil chunk", ErrInvalid)
		}
		e.setChunk(box.l, ch)
		return err
	})
}

// settle charges the decoded chunks' real sizes to b, links them into
// the order o, marks them prefetched (counted in the prefetch budget
// until first used) and makes them resident, counting them in st.
func (p *prefetchState) settle(d *Dataset, es []*entry, o *policyLock, b *budget, st *counters) {
	o.Lock()
	for _, e := range es {
		ms := e.chunk.MemSize()
		if dlt := ms - e.size.Load(); dlt != 0 {
			e.size.Store(ms)
			d.size.Add(dlt)
			b.charge(dlt)
		}
		o.linkLocked(e)
	}
	o.Unlock()
	for _, e := range es {
		e.prefSize = e.size.Load()
		p.bytes.Add(e.prefSize)
		e.prefetched().Store(true)
		e.settle(stateResident, false)
	}
	st.prefetched.Add(int64(len(es)))
}

// evictClean frees up to need bytes by dropping idle clean chunks from the
// cold end of the order (honouring dataset minimums), for prefetch, which
// must never write or wait. Unused prefetched chunks are spared.
func (c *Cache) evictClean(need int64) {
	if need <= 0 {
		return
	}
	var victims, back []*entry
	var planned int64
	round := map[*Dataset]int64{}
	c.mu.Lock()
	c.mu.drainLocked(&c.access)
	c.mu.pol.Nominate(func(e *entry) verdict {
		if planned >= need {
			return stop
		}
		d := e.ds
		if m := d.min.Load(); m > 0 && d.size.Load()-round[d] <= m {
			return exhausted
		}
		if e.bypass || e.dirty.Load() || e.prefetched().Load() || !e.tryStartEvict() {
			return skip
		}
		if e.dirty.Load() { // dirtied between the check and the transition
			back = append(back, e)
			return skip
		}
		sz := e.size.Load()
		victims = append(victims, e)
		planned += sz
		round[d] += sz
		return take
	})
	c.mu.Unlock()
	for _, e := range back {
		c.budget.settleBack(e)
	}
	c.stats.evictions.Add(int64(len(victims)))
	// Evicted for lack of room like any other victim: adaptive sizing
	// counts a miss on them as a sign that a larger cache would help.
	c.sizes.noteEvicted(victims)
	c.remove(victims)
}
