package cache

import (
	"context"
	"fmt"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/scc-dev/scc/lockfree"
	"github.com/scc-dev/scc/vfd"
)

// Request is the part of one read or write that falls in one chunk (SCC requirements
// §4.9: the (file, dataset, chunk, selections, buffer) tuple; the file is
// the dataset's).
// It is the cache's input, not part of the layout contract: it names a
// Dataset registered with this cache, and a layout sees only its Piece.
type Request struct {
	Dataset *Dataset
	Coord   layout.Coord
	// Full reports that Piece selects every element of the chunk: a full
	// write never loads the chunk, and a partial access gives the chunk a
	// second chance in eviction (SCC design §4.2).
	Full  bool
	Piece layout.Piece
	// Memo, if not nil, is the caller's memory of the last chunk a hit of
	// its found (see Memo): a hit on the chunk it names skips the chunk
	// table. The cache reads and writes it only while serving the request.
	Memo *Memo
}

// Memo remembers the entry of the last chunk a hit found, for a caller
// that reads the same chunk again and again (small reads walking through
// one chunk, a resident chunk polled): a hit on the chunk it names skips
// the chunk table's lookup (the key's interleaving, the hash and the
// probe).
//
// Why it is safe without a lock: an entry stands for one chunk all its
// life, and it is resident only while it is in the chunk table under that
// chunk's key (an entry leaves the table only loading or evicting, and
// then dies; see remove). So a memo's entry that is still resident is
// exactly what the lookup would find, and the hit path checks residency
// anyway (the read slot's or the pin's check, as for a looked-up entry);
// one that is not is forgotten and the table looked up. The memo holds
// its own copy of the coordinate it names, so that checking it reads only
// the caller's memory.
//
// A Memo is not safe for concurrent use: one goroutine's request at a
// time (the engine keeps one in each request scratch). Its zero
// value remembers nothing.
type Memo struct {
	e     *entry
	d     *Dataset
	rank  int
	coord [8]uint64
}

// get returns the remembered entry if it is for chunk coord of d.
func (m *Memo) get(d *Dataset, coord layout.Coord) *entry {
	if m.e == nil || m.d != d || m.rank != len(coord) {
		return nil
	}
	for i, c := range coord {
		if m.coord[i] != c {
			return nil
		}
	}
	return m.e
}

// set remembers e, found for chunk coord of d (ranks the memo cannot hold
// are not remembered).
func (m *Memo) set(d *Dataset, coord layout.Coord, e *entry) {
	if len(coord) > len(m.coord) {
		m.e = nil
		return
	}
	m.e, m.d, m.rank = e, d, len(coord)
	copy(m.coord[:], coord)
}

// Prune drops what m remembers unless it is a resident chunk: the cache
// holds those anyway, so a memo kept in a pool holds no chunk the cache
// has let go of (nor, through it, its dataset).
func (m *Memo) Prune() {
	if m.e != nil && m.e.state() != stateResident {
		*m = Memo{}
	}
}

type opKind uint8

const (
	opRead opKind = iota
	opWrite
	opTrim // internal: SetExtent's Layout.Trim on straddling chunks
	opLoad // internal: PrepareExtent makes stored chunks resident, changing nothing
)

type op struct {
	kind opKind
	dims []uint64 // opTrim: the new extent
	// shared: the requests are served on several goroutines at once
	// (serveHitsParallel), which leave the callers' memos alone (two
	// requests may share one).
	shared bool
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
// (SCC design §3.7): resident chunks first; missing chunks are looked up
// (one Layout.Lookup per dataset), split into sub-lists that fit the space
// eviction can free, and for each sub-list space is made (dirty victims
// written with one WriteV), existing chunks are read with one ReadV per
// file and decoded in parallel. Chunks that exist nowhere are served by
// Layout.ScatterFill without any I/O and without creating anything.
func (c *Cache) Read(ctx context.Context, reqs []Request) error {
	return c.do(ctx, op{kind: opRead}, reqs)
}

// Write applies per-chunk write requests (SCC design §3.6). A Full request
// never loads its chunk (Layout.NewChunk with fill false); a chunk that
// exists nowhere is created with fill true. Written chunks become dirty;
// they reach the disk on eviction or Flush. A whole chunk that is not
// resident and that the cache would not keep goes to the file directly
// instead, encoded from the caller's buffer if filtered (directwrite.go).
//
// On error each chunk holds all of its requests' pieces or none: the
// chunks served before the failure keep theirs, the others are as they
// were. A failure to make room (another chunk's write-back, a load)
// fails the chunks that needed it before any piece reaches them, and a
// bypass chunk whose own write-back fails is dropped unwritten
// (dropBypass), so a Write of one chunk that fails changed nothing.
func (c *Cache) Write(ctx context.Context, reqs []Request) error {
	return c.do(ctx, op{kind: opWrite}, reqs)
}

// ServeResident serves the leading requests whose chunks are resident,
// as Read (write false) or Write would, and stops at the first request
// that is anything else (a miss, a chunk being loaded or evicted). It
// returns how many requests it served; the caller passes the rest to Read
// or Write. It never loads, evicts, reserves memory or blocks (but for
// writing back a chunk its writes completed, which frees memory and
// needs none: completed.go), so a
// caller that admits requests against the cache's memory (the engine's
// resource module) can skip admission for the requests it served: a hit
// holds no memory beyond the pin it drops before returning.
func (c *Cache) ServeResident(ctx context.Context, write bool, reqs []Request) (int, error) {
	o := op{kind: opRead}
	if write {
		o.kind = opWrite
	}
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(reqs) == 1 {
		// One request (the engine's single-chunk read): serveHits' loop
		// and its parallel check are a frame the hit does not need, as
		// in do.
		if hit, err := c.tryHit(o, &reqs[0], 0); !hit || err != nil {
			return 0, err
		}
		return 1, nil
	}
	return c.serveHits(o, reqs)
}

// serveHits runs tryHit over the leading requests; it returns how many it
// served.
//
// Hits do not count as running requests (begin/end): a hit neither grows
// the cache nor waits for space, and the running count is there so that
// the background trim does not take memory from requests that need it.
// Leaving hits out saves the two writes of that count per request; the
// trimmer may then run while hits do, and it only evicts idle entries
// (never a pinned one) in replacement order, where hot chunks are last.
//
// Shared writes: a read hit that gets a read slot of its P (latch.go)
// writes only that slot: the CAS that publishes the entry, its counts and
// access record with plain writes while it holds the slot, and the store
// that releases it. Other hits (writes, or reads that found every slot of
// the P taken) write the entry's pin word and, for their counts, the
// stripe of the caller's P of c.stats.hot and of the dataset's counters
// (lockfree.Counters). Either way the lines a hit writes are private to
// its core unless goroutines read the same chunk. A slot reader's access
// record is deduplicated in its slot (pendingFilter, latch.go). Nothing
// the replayer writes when it applies the records is on the lines a hit
// reads (order.go, touchLocked).
func (c *Cache) serveHits(o op, reqs []Request) (int, error) {
	i := 0
	if o.kind == opRead && len(reqs) > 1 {
		n, err := c.serveHitsParallel(reqs)
		if err != nil {
			return n, err
		}
		i = n
	}
	for ; i < len(reqs); i++ {
		hit, err := c.tryHit(o, &reqs[i], i)
		if err != nil {
			return i, err
		}
		if !hit {
			break
		}
	}
	return i, nil
}

// serveHitsParallel serves a read's leading requests on the workers when
// their chunks are resident and hold at least parallelApplyBytes: the
// copies out of the chunks are all of such a read's work, and on the
// caller's goroutine alone they would leave the other cores idle. It
// returns how many leading requests it served (0, having done nothing,
// for a read too small to be worth the hand-off: serveHits then serves it
// on the caller's goroutine, allocating nothing).
//
// The requests are cut into shares of consecutive requests, one task
// each, and every task serves its share with tryHit, in order, stopping
// at its first request that is not a plain hit (a chunk evicted or being
// loaded since residentPrefix saw it). The served prefix ends at the
// first share that stopped; requests of later shares that were served
// are served again by the caller's next step, which for a read rewrites
// the same bytes (the engine's serializer keeps writers of the region
// out meanwhile). Hits never block, so the tasks do not see the caller's
// cancellation: a read that started copying finishes its shares.
func (c *Cache) serveHitsParallel(reqs []Request) (int, error) {
	n, bytes := c.residentPrefix(reqs)
	if n < 2 || bytes < parallelApplyBytes {
		return 0, nil
	}
	// Shares of at least half the threshold, a few per core so that a
	// core slowed by other work does not hold the read back.
	shares := int(min(int64(n), int64(4*runtime.GOMAXPROCS(0)), bytes/(parallelApplyBytes/2)))
	type share struct {
		stop int // first request not served
		err  error
	}
	res := make([]share, shares)
	for s := range res {
		res[s].stop = s * n / shares
	}
	_ = c.workers.run(context.Background(), shares, func(s int) error {
		hi := (s + 1) * n / shares
		i := s * n / shares
		defer func() {
			if r := recover(); r != nil {
				res[s] = share{i, fmt.Errorf("%w: %v", ErrPanic, r)}
			}
		}()
		for ; i < hi; i++ {
			hit, err := c.tryHit(op{kind: opRead, shared: true}, &reqs[i], i)
			if err != nil || !hit {
				res[s] = share{i, err}
				return nil
			}
		}
		res[s].stop = hi
		return nil
	})
	for s := range res {
		if r := res[s]; r.err != nil || r.stop < (s+1)*n/shares {
			return r.stop, r.err
		}
	}
	return n, nil
}

// residentPrefix returns how many leading requests have their chunk in
// the table (resident, or on its way in or out: tryHit decides) and the
// bytes charged for those chunks. A request tryHit would refuse ends the
// prefix; tryHit reports it.
func (c *Cache) residentPrefix(reqs []Request) (n int, bytes int64) {
	for ; n < len(reqs); n++ {
		r := &reqs[n]
		d := r.Dataset
		if d == nil || d.c != c || !d.registered.Load() || len(r.Coord) != len(d.lay().dims) {
			break
		}
		e, ok := c.chunks.lookupIn(d, r.Coord)
		if !ok {
			break
		}
		bytes += e.size.Load()
	}
	return n, bytes
}

// do runs one Read/Write/trim. Leading requests whose chunks are resident
// are served inline on the caller's goroutine by serveHits, without the
// scratch pool, maps or defers the miss path needs; the first request that
// is not a plain hit hands it and every later request to doSlow, which
// runs as a counted request (begin/end).
func (c *Cache) do(ctx context.Context, o op, reqs []Request) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	i := 0
	switch {
	case len(reqs) == 1 && (o.kind == opRead || o.kind == opWrite):
		// One request (the usual small read): serveHits' loop and its
		// parallel check are a frame the hit does not need.
		hit, err := c.tryHit(o, &reqs[0], 0)
		if hit || err != nil {
			return err
		}
	case o.kind == opRead || o.kind == opWrite:
		n, err := c.serveHits(o, reqs)
		if err != nil {
			return err
		}
		i = n
	}
	if i == len(reqs) {
		return nil
	}
	st := c.stats.hot.Stripe()
	if err := c.beginOn(st); err != nil {
		return err
	}
	err := c.doSlow(ctx, o, reqs[i:], i)
	c.endOn(st)
	return err
}

// valid is validate's answer for a valid request, small enough for the
// compiler to inline into the hit path; validate builds the error.
func (r *Request) valid(c *Cache) bool {
	d := r.Dataset
	return d != nil && d.c == c && d.registered.Load() && len(r.Coord) == len(d.lay().dims)
}

// validate checks request i (numbered from the caller's first request).
func (r *Request) validate(c *Cache, i int) error {
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

// tryHit serves r if its chunk is resident and can be held without a
// lock (the hit path: a table lookup, a hold, the piece, a release and a
// lossy access record). A read holds the entry through a read slot, or
// failing that a light pin, and runs Scatter without the latch (latch.go);
// a write, or a read that finds a writer at work, pins as before and takes
// the latch. It reports false, having done nothing, for anything else: a
// miss, or an entry that is loading or being evicted (doSlow waits for
// those and counts them).
func (c *Cache) tryHit(o op, r *Request, i int) (bool, error) {
	if !r.valid(c) {
		return false, r.validate(c, i)
	}
	d := r.Dataset
	var e *entry
	memo := r.Memo
	if o.shared {
		memo = nil
	}
	if memo != nil {
		e = memo.get(d, r.Coord)
	}
	if e == nil || e.state() != stateResident {
		// chunkTable.lookupIn, by hand: too large for the compiler to
		// inline, and a frame of its own is a few percent of a hit.
		var ok bool
		if k, short := d.keys.shortKeyIn(d.serial, r.Coord); short {
			e, ok = c.chunks.short.Load(k)
		} else {
			e, ok = c.chunks.long.Load(makeKey(d.serial, r.Coord))
		}
		if !ok {
			return false, nil
		}
		if memo != nil {
			memo.set(d, r.Coord, e)
		}
	}
	var err error
	var n int64 // this hit's number on its stripe or slot
	var slot *readSlot
	if o.kind == opRead {
		slot = c.access.slots.enter(e)
	}
	switch {
	case slot != nil:
		// lightRead, by hand (as lookupIn above).
		if e.partial().Load() == r.Full {
			e.partial().Store(!r.Full) // store only on change: keeps the line shared
		}
		// entry.scatter, by hand: two interface calls are past the
		// inliner's budget, and its frame was a few percent of a hit.
		if box := e.ds.lay(); e.flat != nil && box.flat != nil {
			err = box.flat.ScatterFlat(unsafe.Slice((*byte)(e.flat), e.flatLen), r.Piece)
		} else {
			err = box.l.Scatter(e.chunk, r.Piece)
		}
		n = c.slotHit(slot, e)
		slot.release()
		if n%hitCheckEvery == 0 && c.sizes.current().ad != nil {
			c.sizes.closeEpoch(false)
		}
		return true, err
	case o.kind == opRead && e.tryPinRead():
		n = c.stats.countHit(e, &c.background.prefetch)
		err = lightRead(e, r)
		e.unpinRead()
		if c.budget.spaceWaiters.Load() > 0 {
			c.budget.signalSpace() // as in unpin: a waiter may want this entry
		}
	case e.tryPin():
		n = c.stats.countHit(e, &c.background.prefetch)
		err = c.apply(o, e, r)
		c.budget.unpin(e)
		if e.complete().Load() {
			c.writeCompleted([]*entry{e})
		}
	default:
		return false, nil
	}
	c.access.record(e)
	if n%hitCheckEvery == 0 && c.sizes.current().ad != nil {
		c.sizes.closeEpoch(false) // adaptive.go: epochs of hits close without waiting for the adaptor
	}
	return true, err
}

// slotHit counts a hit on e and records the access in slot s, which the
// caller holds (latch.go: accounting in the slot): plain writes to the
// caller's own lines. It returns the slot's count of hits ever, which
// paces the look at adaptive sizing's epoch as countHit's stripe count
// does (not the count foldSlots resets: a caller of Stats every few hits
// would keep that from ever reaching hitCheckEvery).
func (c *Cache) slotHit(s *readSlot, e *entry) int64 {
	s.hits++
	s.seen++
	s.countDataset(e.ds)
	if e.prefetched().Load() {
		c.background.prefetch.used(e, &c.stats)
	}
	if s.note(e) {
		c.access.kickReplay()
	}
	return s.seen
}

// countHit counts a hit on e, pinned by the caller. It returns the hit's
// number on its stripe of the cache's hit counter, which paces the look at
// adaptive sizing's epoch (every hitCheckEvery-th) without a shared write.
// A prefetched chunk's first hit is pf's (prefetchState.used).
func (st *counters) countHit(e *entry, pf *prefetchState) (n int64) {
	p := lockfree.ProcHint()
	n = st.hot.AddAt(p, hotHits, 1)
	e.ds.counters().AddAt(p, dsHits, 1)
	if e.prefetched().Load() {
		pf.used(e, st)
	}
	return n
}

// lightRead is apply's read for a light pin: no latch (latch.go).
func lightRead(e *entry, r *Request) error {
	if e.partial().Load() == r.Full {
		e.partial().Store(!r.Full) // store only on change: keeps the line shared
	}
	return e.scatter(e.ds.lay(), r.Piece)
}

// doSlow is the general path: misses, coalescing with loads and evictions
// in progress, and SetExtent's trims. base numbers reqs[0] in errors.
func (c *Cache) doSlow(ctx context.Context, o op, reqs []Request, base int) error {
	sc := scratchPool.Get().(*scratch)
	defer sc.put()
	keys := sc.keys(len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if err := r.validate(c, base+i); err != nil {
			return err
		}
		keys[i] = makeKey(r.Dataset.serial, r.Coord)
	}
	counted := sc.counted[:len(reqs)]
	count := func(i int, hit bool) {
		if counted[i] || o.kind == opTrim || o.kind == opLoad {
			return
		}
		counted[i] = true
		d := reqs[i].Dataset
		if hit {
			c.stats.hot.Add(hotHits, 1)
			d.counters().Add(dsHits, 1)
		} else {
			c.stats.hot.Add(hotMisses, 1)
			d.counters().Add(dsMisses, 1)
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
					c.stats.coalesced.Add(1)
				}
				continue
			}
			count(i, true)
			if e.prefetched().Load() {
				c.background.prefetch.used(e, &c.stats)
			}
			err := c.apply(o, e, &reqs[i])
			c.budget.unpin(e)
			c.access.record(e)
			if e.complete().Load() {
				c.writeCompleted([]*entry{e})
			}
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
		if e.partial().Load() == r.Full {
			e.partial().Store(!r.Full) // store only on change: keeps the line shared
		}
		err := l.Scatter(e.chunk, r.Piece)
		e.latch.RUnlock()
		return err
	case opLoad:
		return nil
	case opWrite:
		e.lockChunk()
		e.partial().Store(!r.Full)
		err := l.Gather(e.chunk, r.Piece)
		// Even a failed Gather may have changed part of the chunk: treat it
		// as modified so nothing is silently dropped.
		c.budget.modifiedLocked(e, &c.background.preEncode, &c.stats)
		c.noteWrite(e, r)
		e.unlockChunk()
		return err
	default:
		e.lockChunk()
		changed, err := l.Trim(e.coord, e.chunk, o.dims)
		if changed || err != nil {
			c.budget.modifiedLocked(e, &c.background.preEncode, &c.stats)
		}
		e.unlockChunk()
		return err
	}
}

// group is one missing chunk with every request that touches it.
type group struct {
	key    chunkKey
	d      *Dataset
	coord  layout.Coord
	reqs   []int
	oneReq [1]int // backs reqs for the common one-request group
	full   bool   // every request is Full
	// slabbed: coord is part of one request's slab (missing), which
	// entries must not keep.
	slabbed bool
	loc     layout.Location
	epoch   uint64 // d.relocs when loc was looked up
	e       *entry
}

func (g *group) hint() int64 {
	if g.loc.SizeHint > 0 {
		return g.loc.SizeHint
	}
	return 1
}

// materialize decodes a loaded group's image (load; sum, if not nil, is
// the image's split read, splitload.go) or creates its chunk, storing it
// in g.e.chunk. A panic in the layout comes back as ErrPanic.
func materialize(g *group, image []byte, load bool, sum *directRead) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	var ch layout.Chunk
	if load {
		if ch, err = decodeChunk(g, image, sum); err != nil {
			return err
		}
	} else if ch, err = g.d.lay().l.NewChunk(g.coord, !g.full); err != nil {
		return fmt.Errorf("cache: creating chunk %v: %w", g.coord, err)
	}
	g.e.setChunk(g.d.lay().l, ch)
	g.e.created = !load // completed.go
	return nil
}

// decodeChunk decodes g's stored image (sum as for materialize). The
// layout owns image afterwards.
func decodeChunk(g *group, image []byte, sum *directRead) (ch layout.Chunk, err error) {
	if sum != nil && sum.summed {
		ch, err = sum.summer.(layout.SummedDecoder).DecodeSummed(g.coord, g.loc, image, sum.sum)
	} else {
		ch, err = g.d.lay().l.Decode(g.coord, g.loc, image)
	}
	if err != nil {
		return nil, fmt.Errorf("cache: decoding chunk %v: %w", g.coord, err)
	}
	if ch == nil {
		return nil, fmt.Errorf("%w: layout returned a nil chunk for %v", ErrInvalid, g.coord)
	}
	return ch, nil
}

// entriesOf returns the entries of groups.
func entriesOf(gs []*group) []*entry {
	es := make([]*entry, len(gs))
	for i, g := range gs {
		es[i] = g.e
	}
	return es
}

// lookup fills loc for groups (one Layout.Lookup per dataset).
func lookup(ctx context.Context, gs []*group) error {
	if len(gs) == 0 {
		return nil
	}
	if sameDataset(gs) {
		return lookupDS(ctx, gs[0].d, gs)
	}
	byDS := map[*Dataset][]*group{}
	var order []*Dataset
	for _, g := range gs {
		if _, ok := byDS[g.d]; !ok {
			order = append(order, g.d)
		}
		byDS[g.d] = append(byDS[g.d], g)
	}
	for _, d := range order {
		if err := lookupDS(ctx, d, byDS[d]); err != nil {
			return err
		}
	}
	return nil
}

func sameDataset(gs []*group) bool {
	for _, g := range gs[1:] {
		if g.d != gs[0].d {
			return false
		}
	}
	return true
}

// lookupDS is one Layout.Lookup for groups of dataset d.
func lookupDS(ctx context.Context, d *Dataset, list []*group) error {
	coords := make([]layout.Coord, len(list))
	locs := make([]layout.Location, len(list))
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
	return nil
}

// missing handles requests whose chunks were not in the table. It returns
// requests to retry (their chunk was claimed by someone else meanwhile).
//
// Phases: group the requests by chunk (groupMissing), look the chunks up
// (lookup), serve the chunks with no stored image (storedOnly), send the
// chunks that can go around the cache straight to the caller or the file
// (routeDirect), and load or create the rest in sub-lists that fit the
// space eviction can make (loadSubLists).
func (c *Cache) missing(ctx context.Context, o op, reqs []Request, keys []chunkKey, idx []int) ([]int, error) {
	// One missing chunk (a small read at one goroutine: the common miss)
	// needs no map nor slice to group its requests.
	var oneG [1]*group
	gs := groupMissing(oneG[:0], reqs, keys, idx)
	if o.kind == opRead && c.background.prefetch.max > 0 {
		for _, g := range gs {
			c.background.prefetch.noteReadMiss(g.d, g.coord)
		}
	}
	if err := lookup(ctx, gs); err != nil {
		return nil, err
	}
	work, err := storedOnly(o, reqs, gs)
	if err != nil {
		return nil, err
	}
	work, later, err := c.routeDirect(ctx, o, reqs, work)
	if err != nil {
		return later, err
	}
	return c.loadSubLists(ctx, o, reqs, work, later)
}

// groupMissing groups the requests idx by chunk, appending one group per
// chunk to gs (which the single-chunk case passes with room for one).
func groupMissing(gs []*group, reqs []Request, keys []chunkKey, idx []int) []*group {
	var byKey map[chunkKey]*group
	if len(idx) > 1 {
		byKey = map[chunkKey]*group{}
	}
	// Several chunks' groups and coordinates come from one slab each: a
	// read of many chunks allocates nothing per chunk here. Entries copy
	// the coordinates they keep (claim).
	var slab []group
	var coords []uint64
	if len(idx) > 1 {
		n := 0
		for _, i := range idx {
			n += len(reqs[i].Coord)
		}
		slab, coords = make([]group, 0, len(idx)), make([]uint64, 0, n)
		gs = make([]*group, 0, len(idx))
	}
	for _, i := range idx {
		var g *group
		if byKey != nil {
			g = byKey[keys[i]]
		}
		if g == nil {
			r := &reqs[i]
			if slab == nil {
				g = &group{key: keys[i], d: r.Dataset, coord: append(layout.Coord(nil), r.Coord...), full: true}
			} else {
				at := len(coords)
				coords = append(coords, r.Coord...)
				slab = append(slab, group{key: keys[i], d: r.Dataset, coord: coords[at:len(coords):len(coords)], full: true, slabbed: true})
				g = &slab[len(slab)-1]
			}
			g.reqs = g.oneReq[:0]
			if byKey != nil {
				byKey[keys[i]] = g
			}
			gs = append(gs, g)
		}
		g.reqs = append(g.reqs, i)
		g.full = g.full && reqs[i].Full
	}
	return gs
}

// storedOnly returns the groups whose chunk needs the cache: a chunk with
// no stored image is served by its fill value on a read (ScatterFill) and
// needs nothing for other non-write operations; a write creates it.
func storedOnly(o op, reqs []Request, gs []*group) ([]*group, error) {
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
	return work, nil
}

// routeDirect serves the groups that go around the cache and returns the
// others, plus the requests to retry (a direct write's chunk claimed by
// someone else first).
func (c *Cache) routeDirect(ctx context.Context, o op, reqs []Request, work []*group) (_ []*group, later []int, err error) {
	switch o.kind {
	case opRead: // whole unfiltered chunks go straight to the caller (direct.go), parts of chunks above the bypass threshold by their blocks (directpart.go), whole filtered ones the cache has no room for are decoded there (directdecode.go)
		// ...except those with a prefetched image entry, which
		// readImages serves without a read (imageentries.go).
		var pre []*group
		if c.images.bytes.Load() > 0 {
			rest := work[:0:0]
			for _, g := range work {
				if g.loc.Exists() && g.d.file.HasPrefetched(g.loc.Addr) {
					pre = append(pre, g)
				} else {
					rest = append(rest, g)
				}
			}
			work = rest
		}
		if work, err = c.readDirect(ctx, reqs, work); err != nil {
			return nil, nil, err
		}
		work = append(work, pre...)
		// Whole filtered chunks the cache would keep only by evicting
		// others are decoded into the caller's buffer (directdecode.go).
		if work, err = c.decodeDirect(ctx, reqs, work); err != nil {
			return nil, nil, err
		}
	case opWrite: // whole chunks the cache would not keep go straight to the file: unfiltered ones as they are, filtered ones encoded from the caller's buffer (directwrite.go, directwrite_encode.go)
		if work, later, err = c.writeDirect(ctx, reqs, work); err != nil {
			return nil, later, err
		}
	}
	return work, later, nil
}

// loadSubLists loads or creates work in sub-lists whose chunks fit the
// space eviction can make (SCC design §3.6): the active limit minus what
// other requests hold in flight. It returns later with the requests to
// retry added.
func (c *Cache) loadSubLists(ctx context.Context, o op, reqs []Request, work []*group, later []int) ([]int, error) {
	s := c.sizes.flashFor(work) - c.budget.inflight.Load()
	for start := 0; start < len(work); {
		rest := work[start:]
		end := start + cut(s, len(rest), func(i int) int64 { return rest[i].hint() })
		more, err := c.subList(ctx, o, reqs, work[start:end])
		later = append(later, more...)
		if err != nil {
			return later, err
		}
		start = end
	}
	return later, nil
}

// cut is the project's one splitting rule (resource.Cut, documented in
// package resource): of the items [0, n) whose sizes size reports, the
// first sub-list is the longest prefix totalling at most budget, never
// empty (an item larger than budget forms a sub-list alone); cut returns
// its end. A negative size counts as 0, a budget below 1 as 1. cache may
// not import resource, so this is a copy; TestCutIsResourceCut checks that
// the two agree. The cache cuts with it the sub-lists a request loads at
// once (budget S, below) and the rounds of a write-back (writeBackRounds).
func cut(budget int64, n int, size func(i int) int64) (end int) {
	budget = max(budget, 1)
	var sum int64
	for end < n {
		s := max(size(end), 0)
		if end > 0 && s > budget-sum { // sum+s > budget without overflow
			break
		}
		sum += s
		end++
	}
	return end
}

// subList claims, reserves, loads or creates, and applies one sub-list
// (SCC design §3.6-3.7). The steps, each its own method:
//
//  1. claim: publish a loading entry per chunk (others wait on it); a
//     chunk someone else claimed first is retried later.
//  2. reserve: re-look-up stale locations, charge the size hints, evicting
//     for space (may block; nothing is pinned yet).
//  3. materialize: one vector read per file for existing chunks, decode
//     or create each (inline for one chunk, on the pool for several).
//  4. publish: charge the real sizes, link the cached entries, settle them
//     resident and pinned for us.
//  5. apply the requests' pieces; unpin.
//  6. dropBypass: write and drop the chunks served without staying
//     resident.
//
// On an error before step 4 every claimed entry is removed, as if never
// claimed; from step 4 on the chunks stay (an error applying a piece is
// returned, the chunk is kept), except a bypass chunk of a write whose
// write-back in step 6 fails (see dropBypass).
func (c *Cache) subList(ctx context.Context, o op, reqs []Request, gs []*group) (later []int, err error) {
	mine, later := c.claim(gs)
	if len(mine) == 0 {
		return later, nil
	}
	n, err := c.reserveFor(ctx, mine)
	if err != nil {
		c.remove(entriesOf(mine))
		return later, err
	}
	defer c.budget.inflight.Add(-n)
	if err := c.materializeAll(ctx, o, reqs, mine); err != nil {
		c.remove(entriesOf(mine))
		return later, err
	}
	bypass := c.publish(mine)
	var firstErr error
	if o.kind != opRead { // a read's pieces were served as its chunks were decoded
		firstErr = c.applyGroups(ctx, o, reqs, mine)
	}
	var done []*entry
	for _, g := range mine {
		if !g.e.bypass {
			c.budget.unpin(g.e)
			if g.e.complete().Load() {
				done = append(done, g.e)
			}
		}
	}
	c.writeCompleted(done) // one write-back for every chunk the request completed
	if err := c.dropBypass(ctx, o, bypass); err != nil && firstErr == nil {
		firstErr = err
	}
	return later, firstErr
}

// parallelApplyBytes is the size of a sub-list's chunks (their hints)
// from which applyGroups hands them to the workers: below it the pool's
// hand-off costs more than the copies it spreads.
const parallelApplyBytes = 256 << 10

// applyGroups applies every request of the published groups mine, each
// chunk's requests in order, and returns the first error. A sub-list of
// many chunks runs on the workers, one task per chunk: the copies between
// the caller's buffer and the chunks are most of a large request's work,
// and on one goroutine they would leave the other cores idle.
//
// Every chunk gets all of its requests even when another chunk's fail
// (as the serial order did): a created chunk's contents are unspecified
// until its pieces are gathered, so no task may be skipped, which is why
// the tasks return nil, errors are kept per chunk and the run does not
// see the caller's cancellation.
func (c *Cache) applyGroups(ctx context.Context, o op, reqs []Request, mine []*group) error {
	var n int64
	for _, g := range mine {
		n += g.hint()
	}
	if len(mine) < 2 || n < parallelApplyBytes {
		var firstErr error
		for _, g := range mine {
			if err := c.applyGroup(o, g, reqs); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		return firstErr
	}
	errs := make([]error, len(mine))
	err := c.workers.run(context.WithoutCancel(ctx), len(mine), func(i int) error {
		errs[i] = c.applyGroup(o, mine[i], reqs)
		return nil
	})
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return err
}

// applyGroup applies g's requests to its chunk, pinned or owned by the
// caller, in order; it returns the first error, having applied the rest.
// A panic in the layout comes back as ErrPanic (on a worker it would
// otherwise cut the run short).
func (c *Cache) applyGroup(o op, g *group, reqs []Request) (firstErr error) {
	defer func() {
		if r := recover(); r != nil {
			firstErr = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	for _, i := range g.reqs {
		if err := c.apply(o, g.e, &reqs[i]); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// claim publishes a loading entry for each group; it returns the groups
// it claimed and the requests of those someone else claimed first.
func (c *Cache) claim(gs []*group) (mine []*group, later []int) {
	for _, g := range gs {
		coord := g.coord
		if g.slabbed {
			coord = slices.Clone(coord) // do not keep the request's slab alive
		}
		e := &entry{key: g.key, coord: coord, ds: g.d}
		e.initLoading()
		if _, loaded := c.chunks.LoadOrStore(e); loaded {
			later = append(later, g.reqs...)
			continue
		}
		g.d.chunks.Add(1)
		g.e = e
		mine = append(mine, g)
		c.sizes.noteMiss(g.key)
	}
	return mine, later
}

// reserveFor looks up again the locations that went stale since the
// lookup (the cache inserted or deleted chunks of the dataset after it),
// then charges the claimed chunks' size hints (reserve) and counts them
// in flight. It returns the bytes added to c.budget.inflight; the caller removes
// them when the sub-list is done. On error nothing is charged.
func (c *Cache) reserveFor(ctx context.Context, mine []*group) (int64, error) {
	var stale []*group
	for _, g := range mine {
		if g.d.relocs.Load() != g.epoch {
			stale = append(stale, g)
		}
	}
	if err := lookup(ctx, stale); err != nil {
		return 0, err
	}
	var n int64
	bypass := c.sizes.current().bypass
	for _, g := range mine {
		n += g.hint()
		g.e.bypass = g.loc.SizeHint > bypass
		g.e.loc = g.loc
	}
	if err := c.reserve(ctx, n); err != nil {
		return 0, err
	}
	c.budget.inflight.Add(n)
	for _, g := range mine {
		h := g.hint()
		g.e.size.Store(h)
		g.d.size.Add(h)
	}
	return n, nil
}

// materializeAll loads existing chunks with one vector read per file and
// decodes them, and creates the rest (a write that covers a chunk, or a
// chunk that exists nowhere), filling g.e.chunk for every group.
//
// A read serves its pieces from each chunk in the same task that decoded
// it: the chunks of a read of many run decode and scatter on the workers
// in parallel, each chunk's scatter following its decode while the bytes
// are still in the core's cache. The entries are still loading, so
// nothing else reaches the chunks yet; a failed scatter fails the load
// like a failed decode (the entries are removed, which a read can afford:
// it changed no chunk).
func (c *Cache) materializeAll(ctx context.Context, o op, reqs []Request, mine []*group) error {
	var loads, creates []*group
	for _, g := range mine {
		if o.kind == opWrite && (g.full || !g.loc.Exists()) {
			creates = append(creates, g)
		} else {
			loads = append(loads, g)
		}
	}
	images, sums, err := c.readImages(loads)
	if err != nil {
		return err
	}
	// One chunk (a small read's miss) is decoded or created right here:
	// no hand-off to the pool, and no closure to allocate for it.
	switch n := len(loads) + len(creates); {
	case n == 1 && len(loads) == 1:
		err = c.load(o, reqs, loads[0], images[0], sumOf(sums, 0))
	case n == 1:
		err = materialize(creates[0], nil, false, nil)
	default:
		err = c.workers.run(ctx, n, func(i int) error {
			if i < len(loads) {
				return c.load(o, reqs, loads[i], images[i], sumOf(sums, i))
			}
			return materialize(creates[i-len(loads)], nil, false, nil)
		})
	}
	if err != nil {
		return err
	}
	for _, g := range mine {
		if g.e.chunk == nil {
			return fmt.Errorf("%w: layout returned a nil chunk for %v", ErrInvalid, g.coord)
		}
	}
	c.stats.loads.Add(int64(len(loads)))
	c.stats.creates.Add(int64(len(creates)))
	return nil
}

// load decodes g's image (materialize) and, for a read, serves g's
// pieces from the chunk (materializeAll).
func (c *Cache) load(o op, reqs []Request, g *group, image []byte, sum *directRead) error {
	if err := materialize(g, image, true, sum); err != nil || o.kind != opRead {
		return err
	}
	return c.applyGroup(o, g, reqs)
}

// readImages reads the stored images of loads, with one vector read per
// file; a large read of one file may be split among helpers
// (splitload.go), which then also returns each summable image's checksum
// (sums nil otherwise).
func (c *Cache) readImages(loads []*group) (images [][]byte, sums []directRead, err error) {
	images = make([][]byte, len(loads))
	// Loads of one file (always, unless files share the cache) need no map.
	var byFile map[*File][]vfd.Extent
	var oneFile []vfd.Extent
	var files []*File
	for i, g := range loads {
		f := g.d.file
		// A prefetched image entry of this very block skips the read
		// (imageentries.go; Cache image RFC §2 "prefetched entries").
		if b, ok := f.TakePrefetched(g.loc.Addr, g.loc.Size, g.loc.Sum); ok {
			images[i] = b
			continue
		}
		images[i] = bufpool.GetFull(int(g.loc.Size)) // Decode owns it (bufpool.go)
		x := vfd.Extent{Off: g.loc.Addr, Buf: images[i]}
		switch {
		case byFile == nil && (len(files) == 0 || files[0] == f):
			if len(files) == 0 {
				files = append(files, f)
			}
			oneFile = append(oneFile, x)
		default:
			if byFile == nil {
				byFile = map[*File][]vfd.Extent{files[0]: oneFile}
			}
			if _, ok := byFile[f]; !ok {
				files = append(files, f)
			}
			byFile[f] = append(byFile[f], x)
		}
	}
	if byFile == nil && len(oneFile) == len(loads) && len(loads) > 0 {
		if sums, err = c.background.split.readImages(files[0], loads, oneFile); err != nil {
			return nil, nil, fmt.Errorf("cache: reading %d chunks: %w", len(oneFile), err)
		}
		return images, sums, nil
	}
	for _, f := range files {
		exts := oneFile
		if byFile != nil {
			exts = byFile[f]
		}
		if err := f.readV(exts); err != nil {
			return nil, nil, fmt.Errorf("cache: reading %d chunks: %w", len(exts), err)
		}
	}
	return images, nil, nil
}

// publish charges the chunks' real sizes (replacing the hints), links the
// cached entries into the policy and settles them resident, pinned for the
// caller. Bypass entries stay loading, so others wait for us; they are
// returned for dropBypass.
func (c *Cache) publish(mine []*group) (bypass []*entry) {
	for _, g := range mine {
		e := g.e
		ms := e.chunk.MemSize()
		if d := ms - e.size.Load(); d != 0 {
			e.size.Store(ms)
			g.d.size.Add(d)
			c.budget.charge(d)
		}
	}
	c.mu.Lock()
	for _, g := range mine {
		if !g.e.bypass {
			c.mu.linkLocked(g.e)
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
	return bypass
}

// dropBypass writes the dirty bypass chunks and drops them all.
//
// If the write fails, the error is returned, and what happens to the
// chunks still dirty depends on what dirtied them. A Write's: they are
// dropped unwritten, so that the Write that fails has not been applied to
// them. Each was claimed by this request, from a state where it was not
// resident, and only this request changed it since; a failed write-back
// publishes nothing (the layout keeps the previous image), so dropping it
// leaves the chunk exactly as it was before the Write, and the error the
// Write returns is true of it. Kept dirty instead, it was committed by the
// next Flush: a Write that reported failure became durable. (Chunks of the
// same write-back that were written are clean and published: the Write
// was applied to them, atomically per chunk.) Any other change (a trim):
// they are kept, dirty, in the cache (no data loss).
func (c *Cache) dropBypass(ctx context.Context, o op, bypass []*entry) error {
	if len(bypass) == 0 {
		return nil
	}
	c.stats.bypasses.Add(int64(len(bypass)))
	var dirty []*entry
	for _, e := range bypass {
		if e.dirty.Load() {
			dirty = append(dirty, e)
		}
	}
	if err := c.writer.writeBack(ctx, dirty, false); err != nil {
		if o.kind == opWrite {
			c.remove(bypass)
			return err
		}
		c.mu.Lock()
		for _, e := range bypass {
			e.bypass = false
			c.mu.linkLocked(e)
		}
		c.mu.Unlock()
		for _, e := range bypass {
			c.budget.settleBack(e)
		}
		return err
	}
	c.remove(bypass)
	return nil
}

// readV is one vector read of chunk images from f, counted in the stats.
func (f *File) readV(exts []vfd.Extent) error {
	var b int64
	for _, x := range exts {
		b += int64(len(x.Buf))
	}
	f.c.stats.vectorReads.Add(1)
	f.c.stats.vectorReadBytes.Add(b)
	return f.drv.ReadV(exts)
}
