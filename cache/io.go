package cache

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/scc-dev/scc/vfd"
)

// Request is the part of one read or write that falls in one chunk (seed 001
// §4.9: the (file, dataset, chunk, selections, buffer) tuple; the file is
// the dataset's).
type Request struct {
	Dataset *Dataset
	Coord   Coord
	// Full reports that Piece selects every element of the chunk: a full
	// write never loads the chunk, and a partial access gives the chunk a
	// second chance in eviction (seed 000 §4.2).
	Full  bool
	Piece Piece
}

type opKind uint8

const (
	opRead opKind = iota
	opWrite
	opTrim // internal: SetExtent's Layout.Trim on straddling chunks
)

type op struct {
	kind opKind
	dims []uint64 // opTrim: the new extent
}

// maxStored bounds the stored image size the cache will allocate a buffer
// for: twice the decoded size plus 1 MiB of slack covers filter overhead
// (incompressible data, checksums, sparse headers). Sizes come from the
// layout's own checksummed index; this is the last guard against an
// allocation driven by a damaged location.
func maxStored(sizeHint int64) int64 {
	if sizeHint > 1<<50 {
		return 1 << 51
	}
	return 2*sizeHint + 1<<20
}

// Read serves per-chunk read requests, which may span datasets and files
// (seed 000 §3.7): resident chunks first; missing chunks are looked up
// (one Layout.Lookup per dataset), split into sub-lists that fit the space
// eviction can free, and for each sub-list space is made (dirty victims
// written with one WriteV), existing chunks are read with one ReadV per
// file and decoded in parallel. Chunks that exist nowhere are served by
// Layout.ScatterFill without any I/O and without creating anything.
func (c *Cache) Read(ctx context.Context, reqs []Request) error {
	return c.do(ctx, op{kind: opRead}, reqs)
}

// Write applies per-chunk write requests (seed 000 §3.6). A Full request
// never loads its chunk (Layout.NewChunk with fill false); a chunk that
// exists nowhere is created with fill true. Written chunks become dirty;
// they reach the disk on eviction or Flush.
func (c *Cache) Write(ctx context.Context, reqs []Request) error {
	return c.do(ctx, op{kind: opWrite}, reqs)
}

// do runs one Read/Write/trim. Leading requests whose chunks are resident
// are served inline on the caller's goroutine by tryHit, without the
// scratch pool, maps or defers the miss path needs; the first request that
// is not a plain hit hands it and every later request to doSlow.
func (c *Cache) do(ctx context.Context, o op, reqs []Request) error {
	if err := c.begin(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		c.end()
		return err
	}
	i := 0
	if o.kind != opTrim {
		for ; i < len(reqs); i++ {
			hit, err := c.tryHit(o, &reqs[i], i)
			if err != nil {
				c.end()
				return err
			}
			if !hit {
				break
			}
		}
	}
	var err error
	if i < len(reqs) {
		err = c.doSlow(ctx, o, reqs[i:], i)
	}
	c.end()
	return err
}

// validate checks request i (numbered from the caller's first request).
func (c *Cache) validate(r *Request, i int) error {
	d := r.Dataset
	if d == nil || d.c != c {
		return fmt.Errorf("%w: request %d: dataset of another cache or nil", ErrInvalid, i)
	}
	if !d.registered.Load() {
		return fmt.Errorf("%w: dataset %d", ErrNotRegistered, d.id)
	}
	if len(r.Coord) != len(d.lay().dims) {
		return fmt.Errorf("%w: request %d: coordinate rank %d, dataset rank %d", ErrInvalid, i, len(r.Coord), len(d.lay().dims))
	}
	return nil
}

// tryHit serves r if its chunk is resident and can be pinned with one CAS
// (the hit path: a table lookup, a pin, the piece under the latch mode the
// layout contract asks for, an unpin and a lossy access record). It reports
// false, having done nothing, for anything else: a miss, or an entry that
// is loading or being evicted (doSlow waits for those and counts them).
func (c *Cache) tryHit(o op, r *Request, i int) (bool, error) {
	if err := c.validate(r, i); err != nil {
		return false, err
	}
	d := r.Dataset
	e, ok := c.chunks.Load(makeKey(d.serial, r.Coord))
	if !ok || !e.tryPin() {
		return false, nil
	}
	c.st.hits.Inc()
	d.hits.Add(1)
	if e.prefetched.Load() {
		c.prefetchUsed(e)
	}
	err := c.apply(o, e, r)
	c.unpin(e)
	c.recordAccess(e)
	return true, err
}

// doSlow is the general path: misses, coalescing with loads and evictions
// in progress, and SetExtent's trims. base numbers reqs[0] in errors.
func (c *Cache) doSlow(ctx context.Context, o op, reqs []Request, base int) error {
	sc := scratchPool.Get().(*scratch)
	defer sc.put()
	keys := sc.keys(len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if err := c.validate(r, base+i); err != nil {
			return err
		}
		keys[i] = makeKey(r.Dataset.serial, r.Coord)
	}
	counted := sc.counted[:len(reqs)]
	count := func(i int, hit bool) {
		if counted[i] || o.kind == opTrim {
			return
		}
		counted[i] = true
		d := reqs[i].Dataset
		if hit {
			c.st.hits.Inc()
			d.hits.Add(1)
		} else {
			c.st.misses.Inc()
			d.misses.Add(1)
		}
	}
	todo := sc.todo[:len(reqs)]
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		var miss, later []int
		var waits []chan struct{}
		for _, i := range todo {
			e, ok := c.chunks.Load(keys[i])
			if !ok {
				count(i, false)
				miss = append(miss, i)
				continue
			}
			pinned, ch := e.pin()
			if !pinned {
				// Loading or being evicted by someone else: wait for it
				// holding nothing, then look again (miss coalescing).
				count(i, false)
				later = append(later, i)
				if ch != nil {
					waits = append(waits, ch)
					c.st.coalesced.Add(1)
				}
				continue
			}
			count(i, true)
			if e.prefetched.Load() {
				c.prefetchUsed(e)
			}
			err := c.apply(o, e, &reqs[i])
			c.unpin(e)
			c.recordAccess(e)
			if err != nil {
				return err
			}
		}
		if len(miss) > 0 {
			more, err := c.missing(ctx, o, reqs, keys, miss)
			if err != nil {
				return err
			}
			later = append(later, more...)
		}
		for _, ch := range waits {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(later) > 0 && len(waits) == 0 {
			runtime.Gosched() // an entry on its way out of the table
		}
		todo = later
	}
	return nil
}

// scratch holds do's per-call slices; pooled because the hit path would
// otherwise allocate three slices per call.
type scratch struct {
	k       []chunkKey
	counted []bool
	todo    []int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) keys(n int) []chunkKey {
	if cap(s.k) < n {
		s.k = make([]chunkKey, n)
		s.counted = make([]bool, n)
		s.todo = make([]int, n)
	}
	clear(s.counted[:n])
	return s.k[:n]
}

func (s *scratch) put() {
	if cap(s.k) > 1024 {
		return // do not keep huge request scratch alive
	}
	clear(s.k)
	scratchPool.Put(s)
}

// apply runs one request's piece against a pinned (or owned) entry under
// the latch mode the layout contract asks for.
func (c *Cache) apply(o op, e *entry, r *Request) error {
	l := e.ds.lay().l
	// No defers: this is the hit path.
	switch o.kind {
	case opRead:
		e.latch.RLock()
		if e.partial.Load() == r.Full {
			e.partial.Store(!r.Full) // store only on change: keeps the line shared
		}
		err := l.Scatter(e.chunk, r.Piece)
		e.latch.RUnlock()
		return err
	case opWrite:
		e.latch.Lock()
		e.partial.Store(!r.Full)
		err := l.Gather(e.chunk, r.Piece)
		// Even a failed Gather may have changed part of the chunk: treat it
		// as modified so nothing is silently dropped.
		c.modifiedLocked(e)
		e.latch.Unlock()
		return err
	default:
		e.latch.Lock()
		changed, err := l.Trim(e.coord, e.chunk, o.dims)
		if changed || err != nil {
			c.modifiedLocked(e)
		}
		e.latch.Unlock()
		return err
	}
}

// modifiedLocked records a modification of e's chunk: new size, dirty,
// version bump, pre-encoded image invalidated. Caller holds e.latch
// exclusively.
func (c *Cache) modifiedLocked(e *entry) {
	// The image's bytes are part of old; dropping it here releases them
	// with the size update below.
	var img int64
	if p := e.encoded.Swap(nil); p != nil {
		img = p.bytes()
		c.preBytes.Add(-img)
		c.st.preWasted.Add(1)
		p.release()
	}
	old := e.size.Load()
	ms := e.chunk.MemSize()
	if ms != old {
		e.size.Store(ms)
		c.charge(ms - old)
	}
	if dd := ms - (old - img); dd != 0 {
		e.ds.size.Add(dd) // the dataset's size never held the image
	}
	e.version.Add(1)
	if !e.dirty.Swap(true) {
		c.dirtyBytes.Add(ms)
	} else {
		c.dirtyBytes.Add(ms - old)
	}
}

// group is one missing chunk with every request that touches it.
type group struct {
	key   chunkKey
	d     *Dataset
	coord Coord
	reqs  []int
	full  bool // every request is Full
	loc   Location
	epoch uint64 // d.relocs when loc was looked up
	e     *entry
}

func (g *group) hint() int64 {
	if g.loc.SizeHint > 0 {
		return g.loc.SizeHint
	}
	return 1
}

// lookup fills loc for groups (one Layout.Lookup per dataset).
func lookup(ctx context.Context, gs []*group) error {
	byDS := map[*Dataset][]*group{}
	var order []*Dataset
	for _, g := range gs {
		if _, ok := byDS[g.d]; !ok {
			order = append(order, g.d)
		}
		byDS[g.d] = append(byDS[g.d], g)
	}
	for _, d := range order {
		list := byDS[d]
		coords := make([]Coord, len(list))
		locs := make([]Location, len(list))
		for i, g := range list {
			coords[i] = g.coord
		}
		epoch := d.relocs.Load()
		if err := d.lay().l.Lookup(ctx, coords, locs); err != nil {
			return fmt.Errorf("cache: Layout.Lookup: %w", err)
		}
		for i, g := range list {
			if locs[i].Size < 0 || locs[i].SizeHint < 0 || locs[i].Size > maxStored(locs[i].SizeHint) {
				return fmt.Errorf("%w: Lookup returned size %d, hint %d", ErrInvalid, locs[i].Size, locs[i].SizeHint)
			}
			g.loc, g.epoch = locs[i], epoch
		}
	}
	return nil
}

// missing handles requests whose chunks were not in the table. It returns
// requests to retry (their chunk was claimed by someone else meanwhile).
func (c *Cache) missing(ctx context.Context, o op, reqs []Request, keys []chunkKey, idx []int) ([]int, error) {
	byKey := map[chunkKey]*group{}
	var gs []*group
	for _, i := range idx {
		g := byKey[keys[i]]
		if g == nil {
			r := &reqs[i]
			g = &group{key: keys[i], d: r.Dataset, coord: append(Coord(nil), r.Coord...), full: true}
			byKey[keys[i]] = g
			gs = append(gs, g)
		}
		g.reqs = append(g.reqs, i)
		g.full = g.full && reqs[i].Full
	}
	if o.kind == opRead && c.prefMax > 0 {
		for _, g := range gs {
			c.noteReadMiss(g.d, g.coord)
		}
	}
	if err := lookup(ctx, gs); err != nil {
		return nil, err
	}
	var work []*group
	for _, g := range gs {
		if !g.loc.Exists() && o.kind != opWrite {
			if o.kind == opRead {
				l := g.d.lay().l
				for _, i := range g.reqs {
					if err := l.ScatterFill(reqs[i].Piece); err != nil {
						return nil, err
					}
				}
			}
			continue
		}
		work = append(work, g)
	}
	if o.kind == opRead { // whole unfiltered chunks go straight to the caller (direct.go)
		var err error
		if work, err = c.readDirect(reqs, work); err != nil {
			return nil, err
		}
	}
	// Sub-lists whose chunks fit the space eviction can make (seed 000
	// §3.6): the active limit minus what other requests hold in flight.
	var later []int
	s := c.activeLimit - c.inflight.Load()
	for start := 0; start < len(work); {
		end, sum := start, int64(0)
		for end < len(work) && (end == start || sum+work[end].hint() <= s) {
			sum += work[end].hint()
			end++
		}
		more, err := c.subList(ctx, o, reqs, work[start:end])
		later = append(later, more...)
		if err != nil {
			return later, err
		}
		start = end
	}
	return later, nil
}

// subList claims, reserves, loads or creates, and applies one sub-list.
func (c *Cache) subList(ctx context.Context, o op, reqs []Request, gs []*group) (later []int, err error) {
	var mine []*group
	for _, g := range gs {
		e := &entry{key: g.key, coord: g.coord, ds: g.d}
		e.initLoading()
		if _, loaded := c.chunks.LoadOrStore(g.key, e); loaded {
			later = append(later, g.reqs...)
			continue
		}
		g.d.chunks.Add(1)
		g.e = e
		mine = append(mine, g)
	}
	if len(mine) == 0 {
		return later, nil
	}
	// A location looked up before the claim is stale if the cache inserted
	// or deleted chunks of the dataset since: look those up again.
	var stale []*group
	for _, g := range mine {
		if g.d.relocs.Load() != g.epoch {
			stale = append(stale, g)
		}
	}
	all := func() []*entry {
		es := make([]*entry, len(mine))
		for i, g := range mine {
			es[i] = g.e
		}
		return es
	}
	if err := lookup(ctx, stale); err != nil {
		c.remove(all())
		return later, err
	}
	var n int64
	for _, g := range mine {
		n += g.hint()
		g.e.bypass = g.loc.SizeHint > c.bypassBytes
		g.e.loc = g.loc
	}
	if err := c.reserve(ctx, n); err != nil {
		c.remove(all())
		return later, err
	}
	c.inflight.Add(n)
	defer c.inflight.Add(-n)
	for _, g := range mine {
		h := g.hint()
		g.e.size.Store(h)
		g.d.size.Add(h)
	}

	// Load existing chunks with one vector read per file; create the rest.
	var loads, creates []*group
	for _, g := range mine {
		if o.kind == opWrite && (g.full || !g.loc.Exists()) {
			creates = append(creates, g)
		} else {
			loads = append(loads, g)
		}
	}
	images := make([][]byte, len(loads))
	byFile := map[*File][]vfd.Extent{}
	var files []*File
	for i, g := range loads {
		images[i] = GetBuf(int(g.loc.Size)) // Decode owns it (bufpool.go)
		f := g.d.file
		if _, ok := byFile[f]; !ok {
			files = append(files, f)
		}
		byFile[f] = append(byFile[f], vfd.Extent{Off: g.loc.Addr, Buf: images[i]})
	}
	for _, f := range files {
		exts := byFile[f]
		var b int64
		for _, x := range exts {
			b += int64(len(x.Buf))
		}
		c.st.vectorReads.Add(1)
		c.st.vectorReadBytes.Add(b)
		if err := f.drv.ReadV(exts); err != nil {
			c.remove(all())
			return later, fmt.Errorf("cache: reading %d chunks: %w", len(exts), err)
		}
	}
	err = c.run.run(ctx, len(loads)+len(creates), func(i int) (err error) {
		var g *group
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrPanic, r)
			}
		}()
		if i < len(loads) {
			g = loads[i]
			ch, err := g.d.lay().l.Decode(g.coord, g.loc, images[i])
			if err != nil {
				return fmt.Errorf("cache: decoding chunk %v: %w", g.coord, err)
			}
			g.e.chunk = ch
			return nil
		}
		g = creates[i-len(loads)]
		ch, err := g.d.lay().l.NewChunk(g.coord, !g.full)
		if err != nil {
			return fmt.Errorf("cache: creating chunk %v: %w", g.coord, err)
		}
		g.e.chunk = ch
		return nil
	})
	if err == nil {
		for _, g := range mine {
			if g.e.chunk == nil {
				err = fmt.Errorf("%w: layout returned a nil chunk for %v", ErrInvalid, g.coord)
				break
			}
		}
	}
	if err != nil {
		c.remove(all())
		return later, err
	}
	c.st.loads.Add(int64(len(loads)))
	c.st.creates.Add(int64(len(creates)))
	for _, g := range mine {
		e := g.e
		ms := e.chunk.MemSize()
		if d := ms - e.size.Load(); d != 0 {
			e.size.Store(ms)
			g.d.size.Add(d)
			c.charge(d)
		}
	}

	// Make the cached ones resident (pinned for us); bypass entries stay
	// loading, so others wait for us, and are dropped below.
	var bypass []*entry
	c.mu.Lock()
	for _, g := range mine {
		if !g.e.bypass {
			c.linkLocked(g.e)
		}
	}
	c.mu.Unlock()
	for _, g := range mine {
		if g.e.bypass {
			bypass = append(bypass, g.e)
		} else {
			g.e.settle(stateResident, true)
		}
	}
	var firstErr error
	for _, g := range mine {
		for _, i := range g.reqs {
			if err := c.apply(o, g.e, &reqs[i]); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		if !g.e.bypass {
			c.unpin(g.e)
		}
	}
	if len(bypass) > 0 {
		c.st.bypasses.Add(int64(len(bypass)))
		var dirty []*entry
		for _, e := range bypass {
			if e.dirty.Load() {
				dirty = append(dirty, e)
			}
		}
		if err := c.writeBack(ctx, dirty, false); err != nil {
			// Not written: keep the chunks, dirty, in the cache.
			c.mu.Lock()
			for _, e := range bypass {
				e.bypass = false
				c.linkLocked(e)
			}
			c.mu.Unlock()
			for _, e := range bypass {
				c.settleBack(e)
			}
			if firstErr == nil {
				firstErr = err
			}
		} else {
			c.remove(bypass)
		}
	}
	return later, firstErr
}
