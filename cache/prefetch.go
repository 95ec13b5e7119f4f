package cache

import (
	"context"
	"fmt"
	"github.com/scc-dev/scc/internal/bufpool"
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
// a prefetch takes memory only if it fits under the active limit, after
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
	// bytes is the sum of prefSize over the cached entries still marked
	// prefetched (unused). Added when a prefetch settles its entries,
	// taken back by whoever clears the mark: the first use
	// (prefetchUsed) or removal. INVARIANT: 0 <= bytes. A job loads only
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
	from Coord
	dim  int
}

// seqState is a dataset's sequential-read detector. Guarded by its mutex;
// touched only on misses and on the first use of a prefetched chunk.
type seqState struct {
	sync.Mutex
	last Coord
	dim  int // dimension of the current stream
	run  int // consecutive steps along dim
}

// stepDim returns the dimension along which b is the chunk after a, or -1.
func stepDim(a, b Coord) int {
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
func (c *Cache) noteReadMiss(d *Dataset, coord Coord) {
	if c.background.prefetch.max <= 0 {
		return
	}
	s := &d.seq
	s.Lock()
	k := stepDim(s.last, coord)
	if k >= 0 && (s.run == 0 || k == s.dim) {
		s.run++
		s.dim = k
	} else {
		s.run = 0
	}
	s.last = append(s.last[:0], coord...)
	start := s.run >= 1
	dim := s.dim
	s.Unlock()
	if start {
		c.background.prefetch.queue(d, coord, dim)
	}
}

// prefetchUsed is called when a request finds e still marked prefetched:
// it counts the hit and continues the stream from e.
func (c *Cache) prefetchUsed(e *entry) {
	if !e.prefetched().CompareAndSwap(true, false) {
		return
	}
	c.background.prefetch.bytes.Add(-e.prefSize)
	c.stats.prefetchHits.Add(1)
	d := e.ds
	d.seq.Lock()
	dim := d.seq.dim
	d.seq.last = append(d.seq.last[:0], e.coord...)
	d.seq.Unlock()
	c.background.prefetch.queue(d, e.coord, dim)
}

// queue hands a job to the prefetcher without ever blocking.
func (p *prefetchState) queue(d *Dataset, from Coord, dim int) {
	if d.noPrefetch.Load() {
		return
	}
	if p.bytes.Load() >= p.max {
		return
	}
	select {
	case p.jobs <- prefetchJob{d: d, from: append(Coord(nil), from...), dim: dim}:
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
// them. Its phases: pick the chunks (prefetchCoords), look them up, claim
// table slots for those that fit (claimPrefetch), charge the budget
// (chargePrefetch), read and decode them (readPrefetch, decodePrefetch),
// and make them resident (settlePrefetch). Whatever ends the job early
// removes the claimed entries, so a demand read loads them.
func (c *Cache) prefetch(ctx context.Context, j prefetchJob) error {
	d := j.d
	box := d.lay()
	if j.dim < 0 || j.dim >= len(box.dims) || len(j.from) != len(box.dims) {
		return nil
	}
	coords := c.prefetchCoords(j)
	if len(coords) == 0 {
		return nil
	}
	epoch := d.relocs.Load()
	locs := make([]Location, len(coords))
	if err := box.l.Lookup(ctx, coords, locs); err != nil {
		return err
	}
	es, total := c.claimPrefetch(d, coords, locs)
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
	c.settlePrefetch(d, es)
	return nil
}

// prefetchCoords returns the next Config.PrefetchChunks chunks after
// j.from along j.dim that are not cached.
func (c *Cache) prefetchCoords(j prefetchJob) []Coord {
	var coords []Coord
	for k := 1; k <= c.cfg.PrefetchChunks; k++ {
		x := append(Coord(nil), j.from...)
		x[j.dim] += uint64(k)
		if x[j.dim] < j.from[j.dim] {
			break // overflow
		}
		if _, ok := c.chunks.Load(makeKey(j.d.serial, x)); ok {
			continue
		}
		coords = append(coords, x)
	}
	return coords
}

// claimPrefetch puts a loading entry into the chunk table for each chunk
// of coords that is stored, loadable without bypass, and fits the
// prefetch budget's room, in order until one does not fit. It returns the
// entries (counted in d) and the sum of their size hints.
func (c *Cache) claimPrefetch(d *Dataset, coords []Coord, locs []Location) (es []*entry, total int64) {
	room := c.background.prefetch.max - c.background.prefetch.bytes.Load()
	for i, x := range coords {
		loc := locs[i]
		if !loc.Exists() || loc.Size < 0 || loc.SizeHint <= 0 || loc.Size > maxStored(loc.SizeHint) || loc.SizeHint > c.sizing().bypass {
			continue
		}
		if total+loc.SizeHint > room {
			break
		}
		e := &entry{key: makeKey(d.serial, x), coord: x, ds: d, loc: loc}
		e.initLoading()
		if _, loaded := c.chunks.LoadOrStore(e); loaded {
			continue
		}
		d.chunks.Add(1)
		es = append(es, e)
		total += loc.SizeHint
	}
	return es, total
}

// chargePrefetch charges total bytes if they fit under the active limit,
// after evicting clean cold chunks to make room (evictClean); it never
// waits.
func (c *Cache) chargePrefetch(total int64) bool {
	if c.budget.tryCharge(total, c.sizing().active) {
		return true
	}
	c.evictClean(total - (c.sizing().active - c.budget.resident.Load()))
	return c.budget.tryCharge(total, c.sizing().active)
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
		e.chunk = ch
		return err
	})
}

// settlePrefetch charges the decoded chunks' real sizes, links them into
// the policy, marks them prefetched (counted in the prefetch budget until
// first used) and makes them resident.
func (c *Cache) settlePrefetch(d *Dataset, es []*entry) {
	c.mu.Lock()
	for _, e := range es {
		ms := e.chunk.MemSize()
		if dlt := ms - e.size.Load(); dlt != 0 {
			e.size.Store(ms)
			d.size.Add(dlt)
			c.charge(dlt)
		}
		c.linkLocked(e)
	}
	c.mu.Unlock()
	for _, e := range es {
		e.prefSize = e.size.Load()
		c.background.prefetch.bytes.Add(e.prefSize)
		e.prefetched().Store(true)
		e.settle(stateResident, false)
	}
	c.stats.prefetched.Add(int64(len(es)))
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
	c.drainLocked()
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
		c.settleBack(e)
	}
	c.stats.evictions.Add(int64(len(victims)))
	// Evicted for lack of room like any other victim: adaptive sizing
	// counts a miss on them as a sign that a larger cache would help.
	c.sizes.noteEvicted(victims)
	c.remove(victims)
}
