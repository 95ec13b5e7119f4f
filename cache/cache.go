// Package cache is scc's shared chunk cache (SCC design, SCC requirements, SCC internal API):
// one memory budget serving every dataset of one or more files, with
// per-dataset minimum reservations, pluggable replacement policies, eviction
// that writes dirty victims with one vector write, loads with one vector
// read, and encode/decode on a bounded worker set.
//
// The cache never looks inside a chunk; it knows chunks through the
// callbacks of a layout.Layout (package cache/layout, the contract a
// storage layout implements) and the sizes they report.
//
// Concurrency: every exported method is safe for concurrent use. Finding a
// resident chunk takes no lock shared by all goroutines: the chunk table is
// a lock-free hash map, the entry is pinned with one CAS on its own state
// word, and the access is recorded in a lossy striped buffer
// (lockfree.Buffer) that a background goroutine applies to the
// replacement order in batches under the policy lock (replay.go). The
// caller (the engine's serialize module) keeps overlapping requests apart;
// the cache itself stays memory-safe and loses no acknowledged write even
// when they overlap, but concurrent overlapping writes land in some order.
//
// Memory: resident bytes (chunks plus reservations made before loading)
// stay under QuiescentBytes×ActiveMultiplier, except for one indivisible
// chunk admitted into an otherwise empty cache; a request that finds
// nothing to evict blocks until others release memory. A background
// goroutine trims back toward QuiescentBytes whenever no request runs.
// Those limits can change on a live cache: SetConfig (resize.go) and
// adaptive sizing (adaptive.go, Config.Adaptive: the size follows the
// working set between bounds, decided once per epoch of accesses) swap
// them atomically, Config.MaxMemoryBytes caps them, and a decrease is
// carried out by the normal eviction path, which writes dirty chunks
// back.
//
// Locks: the cache's lock order is written once, in the declaration of
// Cache.mu (cache.go); every other lock's declaration says what it guards
// and refers there.
package cache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/lockfree"
	"github.com/scc-dev/scc/pool"
	"github.com/scc-dev/scc/vfd"
)

var (
	// ErrClosed is returned by calls on a closed Cache or an unregistered File.
	ErrClosed = errors.New("cache: closed")
	// ErrNotRegistered is returned for requests on an unregistered dataset.
	ErrNotRegistered = errors.New("cache: dataset not registered")
	// ErrExists is returned when registering a dataset id that is registered.
	ErrExists = errors.New("cache: dataset already registered")
	// ErrInvalid is returned for malformed requests (nil dataset, wrong rank,
	// datasets of another Cache).
	ErrInvalid = errors.New("cache: invalid request")
	// ErrPanic wraps a panic raised by a layout callback on a worker.
	ErrPanic = errors.New("cache: layout callback panicked")
	// ErrFilesOpen is returned by Close while files are still registered:
	// their dirty chunks would be lost. The cache stays open and usable.
	ErrFilesOpen = errors.New("cache: files still registered")
	// ErrInUse is returned by File.Unregister and Discard when chunks of the
	// file stay in use (a request still running on it) past a bound with
	// no progress, or past the context's end.
	ErrInUse = errors.New("cache: chunks still in use")
)

type registry = *lockfree.Registry[uint64, *Dataset]

// Cache is the shared chunk cache (SCC design §2.4 H5SC_t). Create it with
// New; share it between files with RegisterFile.
//
// It is made of components, each a type with its own fields and methods
// in a file of its own, given the other components it works with when New
// builds it: the sizes in force and adaptive sizing (sizes: sizer,
// resize.go, adaptive.go), the registered files and datasets
// (registered), the encode/decode workers (workers), the memory budget's
// accounts (budget), the write-back of dirty chunks and the direct
// encodes (writer, writeback.go), the cache-image entries (images), which
// missing chunks go past the cache (intake, intake.go), the replacement
// order and its lock (mu: policyLock, order.go), the access records that
// feed it (access: accessRecording, replay.go), the counters (stats),
// admission control (admission) and the background jobs (background:
// trim, pre-encode in preencode.go, prefetch, split readers). The chunks
// themselves are in the chunk table. Cache keeps the orchestration: the
// requests' paths (io.go), loads, eviction and reservations.
type Cache struct {
	// cfg is the configuration given to New, defaults applied. The fields
	// SetConfig may change (resize.go) are read from sizes instead.
	cfg Config
	// sizes holds the sizes in force and adaptive sizing (resize.go,
	// adaptive.go).
	sizes sizer

	chunks     *chunkTable // table.go
	registered registrations
	workers    workers
	budget     budget
	writer     writer       // writeback.go
	images     imageEntries // imageentries.go
	intake     intake       // intake.go: which missing chunks go past the cache
	stored     storedImages // storedimages.go

	// The policy lock is written by every batch of access records; the
	// padding keeps it off the lines of the fields every hit reads
	// (chunks, access, stats, closed), which would otherwise bounce
	// between cores with it (false sharing).
	_ [64]byte
	// mu is the policy lock. It protects the policy's order structures,
	// the datasets' member lists and every field documented "guarded by
	// Cache.mu". It is never taken on the hit path (accesses are buffered)
	// and never held across I/O or layout callbacks.
	//
	// Lock order of the cache. This table is the one reference for the
	// cache's locks; the declarations say what each lock guards.
	// Outermost first: a goroutine holding a lock takes only locks below
	// it on its line. The cache has no single chain.
	//
	//	Cache.sizes.adaptive.mu (sizing decisions; epoch closers take it with TryLock)
	//	  → Cache.mu (only with TryLock, policyLock.advanceAge)
	//	  → Cache.admission.mu (limitChanged)
	//	File.mu (registration of a file's datasets)
	//	  → Cache.mu (Unregister's emptiness check)
	//	Cache.mu (the policy lock; never taken on the hit path, never held
	//	         across I/O or layout callbacks)
	//	  → entry.mu (an entry's state transitions and its waiters)
	//	File.pf (prefetches running on a file): never taken under File.mu
	//	Cache.background.preEncode.round (one pre-encode round at a time)
	//	  → Cache.mu, entry.latch
	//	entry.flushMu: taken with TryLock by flushers; a flusher waiting for a
	//	  busy entry holds no other flushMu
	//	entry.latch: serializes the layout callbacks on one chunk (Scatter,
	//	  Encode shared; Gather, Trim, Condense exclusive); held only while
	//	  the entry is pinned or evicting, and nobody waits for space while
	//	  holding a pin
	//	Cache.access.slots.drainMu (one drain of the read slots at a time):
	//	  taken under Cache.mu → read slots
	//	read slots: held for one Scatter and the hit's counters, taking only
	//	  leaf locks meanwhile, so evictors and writers may wait for them while
	//	  holding Cache.mu or a pin
	//	Cache.budget.meta (metadata accounts): never held with Cache.mu
	//	File.mu → Cache.stored.mu (stored images; storedimages.go), never held
	//	  across I/O → Cache.budget.space (an image freed)
	//	leaf locks (nothing is taken under them, never held across I/O):
	//	  Cache.images.mu (cache-image entries), a dataset's sequence detector
	//	  (seqState), the space waiters' channel (Cache.budget.space), the ghost
	//	  list's shards, the chunk table's buckets and resize, the split
	//	  readers' queue (Cache.background.split.mu)
	mu policyLock
	_  [64]byte
	// access records the hits that the replay goroutine applies to the
	// policy under mu (replay.go, latch.go).
	access accessRecording

	stats counters

	// admission carries the admission control the engine creates
	// (admission.go).
	admission admission

	// background is the background jobs: trim, pre-encode, prefetch and
	// the split readers' helpers (background.go, prefetch.go,
	// splitread.go).
	background backgroundWork

	closed atomic.Bool
}

// registrations counts what is registered: the files by serial, and the
// datasets. All atomic or lock-free; no lock.
type registrations struct {
	files  *lockfree.Registry[uint64, *File]
	serial atomic.Uint64 // last dataset/file serial handed out
	// datasets counts the registered datasets.
	datasets   atomic.Int64
	condensers atomic.Int64 // registered datasets whose layout is a Condenser
}

// workers runs encodes and decodes: the configured Runner, or the default
// pool (then pool is set, and Close closes it). No lock.
type workers struct {
	runner
	pool *pool.Pool
}

// backgroundWork is the background jobs: their goroutines' lifetime, and
// each job's configuration, queue and byte count, each guarded as its
// declaration says.
type backgroundWork struct {
	jobs      background
	trim      trimState
	preEncode preEncodeState
	prefetch  prefetchState
	// split is the helpers of large direct reads (splitread.go).
	split splitState
}

// New creates a Cache.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	raw := cfg
	cfg = cfg.withDefaults()
	c := &Cache{
		cfg:    cfg,
		chunks: newChunkTable(),
		stats:  newCounters(),
	}
	c.registered.files = lockfree.NewRegistry[uint64, *File]()
	c.access.buf = lockfree.NewBuffer[*entry](accessStripe)
	c.access.slots = newReadSlots()
	c.sizes.sizingDeps = sizingDeps{closed: &c.closed, stats: &c.stats, access: &c.access,
		order: &c.mu, admission: &c.admission, trim: &c.background.trim}
	c.sizes.init(raw, cfg.PreEncodeBytes > 0)
	if cfg.Runner != nil {
		c.workers.runner = userRunner{cfg.Runner}
	} else {
		p, err := pool.New(pool.Options{Workers: cfg.Workers})
		if err != nil {
			return nil, fmt.Errorf("%w: worker pool: %w", ErrInvalidConfig, err)
		}
		c.workers.pool = p
		c.workers.runner = poolRunner{p}
	}
	c.writer = writer{
		encodes: make(chan struct{}, max(cfg.Workers, 1)),
		workers: c.workers, budget: &c.budget, stats: &c.stats, sizes: &c.sizes,
		order: &c.mu, pre: &c.background.preEncode,
	}
	c.intake = intake{rereads: newRereadFilter(cfg.QuiescentBytes), admitOnReread: cfg.AdmitOnReread,
		directWriteBytes: cfg.DirectWriteBytes, budget: &c.budget}
	c.mu.pol = newPolicy(cfg.Policy, cfg.PartialSecondChance == SecondChanceOn)
	c.startBackground(cfg)
	return c, nil
}

// Close stops the background goroutines and drops every chunk without
// writing anything (SCC internal API H5SC_destroy: "does not flush chunks").
//
// Close refuses (ErrFilesOpen, nothing changed, the cache stays usable)
// while any file is still registered: dropping a registered file's chunks
// would silently lose its acknowledged writes, and flushing them here
// would hide a write error from the file's owner. Unregister every file
// first (File.Unregister writes its data; File.Discard drops it on
// purpose, after a failure the caller has already reported). Close is
// idempotent. A file registered concurrently with Close may end up
// registered with a closed cache; its calls then return ErrClosed.
func (c *Cache) Close() error {
	if c.closed.Load() {
		return nil
	}
	if n := c.registered.files.Len(); n > 0 {
		return fmt.Errorf("%w: %d file(s); unregister or discard them first", ErrFilesOpen, n)
	}
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	// A split read starting its helpers (splitread.go) has added them to
	// background.jobs.wg by the time this lock is free; later ones see closed.
	c.background.split.mu.Lock()
	c.background.split.mu.Unlock() //nolint:staticcheck // a barrier, not a critical section
	c.background.jobs.cancel()
	c.background.jobs.wg.Wait()
	if c.workers.pool != nil {
		defer c.workers.pool.Close()
	}
	c.budget.signalSpace() // wake reservations so they see ErrClosed
	var all []*entry
	c.chunks.Range(func(_ chunkKey, e *entry) bool {
		if e.tryStartEvict() {
			all = append(all, e)
		}
		return true
	})
	c.remove(all)
	return nil
}

// RegisterFile adds a file to the cache (SCC requirements §4.4). One Cache may serve
// many files; their chunks share the budget.
func (c *Cache) RegisterFile(drv vfd.Driver) (*File, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if drv == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrInvalid)
	}
	f := &File{c: c, serial: c.registered.serial.Add(1), drv: drv, datasets: lockfree.NewRegistry[uint64, *Dataset]()}
	c.registered.files.Set(f.serial, f)
	return f, nil
}

// RegisterDataset registers dataset id of f with its layout (SCC design §3.2,
// SCC requirements §4.7). Registering an id that was unregistered earlier re-attaches
// its still-cached chunks with the new Layout (warm reopen, SCC requirements §4.8).
func (f *File) RegisterDataset(id uint64, l layout.Layout, o DatasetOptions) (*Dataset, error) {
	c := f.c
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if l == nil {
		return nil, fmt.Errorf("%w: nil layout", ErrInvalid)
	}
	if o.MinBytes < -1 {
		return nil, fmt.Errorf("%w: MinBytes %d", ErrInvalidConfig, o.MinBytes)
	}
	dims := append([]uint64(nil), l.ChunkDims()...)
	for _, d := range dims {
		if d == 0 {
			return nil, fmt.Errorf("%w: zero chunk dimension", ErrInvalid)
		}
	}
	min := o.MinBytes
	switch {
	case min == 0:
		min = c.sizes.current().minBytes
	case min < 0:
		min = 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed || f.mu.unreg != nil {
		return nil, ErrClosed
	}
	box := newLayoutBox(l, dims)
	if d, ok := f.datasets.Get(id); ok {
		if d.registered.Load() {
			return nil, fmt.Errorf("%w: id %d", ErrExists, id)
		}
		if old := d.lay(); len(old.dims) != len(dims) {
			// A different rank cannot reuse the old chunks' keys.
			f.dropDataset(d)
		} else {
			c.registered.noteCondenser(d.lay().l, -1)
			c.registered.noteCondenser(l, 1)
			d.layout.Store(box)
			d.min.Store(min)
			d.noPrefetch.Store(false)
			d.registered.Store(true)
			c.registered.datasets.Add(1)
			return d, nil
		}
	}
	serial := c.registered.serial.Add(1)
	d := &Dataset{c: c, file: f, id: id, serial: serial, keys: newSerialKeys(serial)}
	d.layout.Store(box)
	d.min.Store(min)
	d.registered.Store(true)
	f.datasets.Set(id, d)
	c.registered.datasets.Add(1)
	c.registered.noteCondenser(l, 1)
	return d, nil
}

// noteCondenser counts datasets whose layout can condense, so eviction
// skips the condense step entirely when there are none. The count covers
// detached datasets too (their chunks can still be condensed).
func (r *registrations) noteCondenser(l layout.Layout, d int64) {
	if _, ok := l.(layout.Condenser); ok {
		r.condensers.Add(d)
	}
}

// dropDataset removes a detached dataset and its (clean) chunks at once.
// Caller holds f.mu.
func (f *File) dropDataset(d *Dataset) {
	f.c.drop(d, false)
	f.forget(d)
}

// forget removes d from the file's registry. Caller holds f.mu.
func (f *File) forget(d *Dataset) {
	if cur, ok := f.datasets.Get(d.id); ok && cur == d {
		f.datasets.Del(d.id)
		f.c.registered.noteCondenser(d.lay().l, -1)
	}
}

// drop evicts every idle chunk of d without writing: clean ones, and with
// discard dirty ones too. It returns how many chunks stayed because they
// were busy (pinned, loading, held by another evictor) and how many
// because they were dirty.
func (c *Cache) drop(d *Dataset, discard bool) (busy, dirty int) {
	var es []*entry
	var back []*entry
	c.mu.Lock()
	for e := d.members; e != nil; e = e.mnext {
		// Check dirty only once evicting: before that a writer could
		// dirty the entry between the check and the transition.
		switch {
		case !e.tryStartEvict():
			busy++
		case e.dirty.Load() && !discard:
			back = append(back, e)
			dirty++
		default:
			es = append(es, e)
		}
	}
	c.mu.Unlock()
	for _, e := range back {
		c.budget.settleBack(e)
	}
	c.remove(es)
	return busy, dirty
}

// dropAllSettled drops every chunk of d (with discard, dirty ones without
// writing them). A chunk that the background trimmer, pre-encoder or
// prefetcher holds at this moment cannot be dropped yet, but it will be
// released shortly: every release (unpin, settle back, removal once the
// dataset's count dropped) signals space, and this waits for that signal,
// not for a timer. A chunk a late writer left dirty signals nothing, so it
// is flushed at once. It gives up only when ctx ends or nothing has been
// released for settleTimeout, which would mean a request still running on
// a file being unregistered.
func (c *Cache) dropAllSettled(ctx context.Context, d *Dataset, discard bool) error {
	c.budget.spaceWaiters.Add(1)
	defer c.budget.spaceWaiters.Add(-1)
	last, since := -1, time.Now()
	for {
		// Take the channel before looking, so no release after the look
		// is missed.
		ch := c.budget.spaceWait()
		busy, dirty := c.drop(d, discard)
		if dirty > 0 {
			if err := c.writer.flushDatasets(ctx, []*Dataset{d}, true); err != nil {
				return err
			}
			continue
		}
		left := busy
		if left == 0 {
			// An eviction that unlinked a chunk just before may still be
			// releasing it: done once the dataset counts no chunks.
			if d.chunks.Load() == 0 {
				return nil
			}
			left = int(d.chunks.Load())
		}
		if left != last {
			last, since = left, time.Now()
		} else if time.Since(since) > settleTimeout {
			return fmt.Errorf("%w: %d chunks of dataset %d", ErrInUse, left, d.id)
		}
		t := time.NewTimer(settleTimeout - time.Since(since))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %d chunks of dataset %d: %w", ErrInUse, left, d.id, ctx.Err())
		}
		t.Stop()
	}
}

// settleTimeout is how long dropAllSettled waits without progress.
const settleTimeout = 10 * time.Second

// ID returns the id the dataset was registered with.
func (d *Dataset) ID() uint64 { return d.id }

// Unregister flushes the dataset's dirty chunks and detaches it, leaving its
// clean chunks cached for a warm reopen (SCC requirements §4.8); they age out
// through normal eviction. On a flush error the dataset stays registered.
//
// The flush runs without File.mu, so registering or unregistering the
// file's other datasets never waits for this dataset's I/O. As before, a
// write that races Unregister may leave a chunk dirty in the detached
// dataset; the file's next Flush writes it.
func (d *Dataset) Unregister(ctx context.Context) error {
	f := d.file
	if !d.registered.Load() {
		return ErrNotRegistered
	}
	if err := d.c.writer.flushDatasets(ctx, []*Dataset{d}, true); err != nil {
		return err
	}
	f.mu.Lock()
	if !d.registered.Load() {
		f.mu.Unlock()
		return ErrNotRegistered // a concurrent Unregister won
	}
	d.registered.Store(false)
	d.c.registered.datasets.Add(-1)
	f.mu.Unlock()
	// A prefetch that saw the dataset registered finishes before the
	// layout is handed back; later ones see it unregistered. Waited for
	// without File.mu: the prefetch does I/O.
	f.waitPrefetches(false)
	f.mu.Lock()
	defer f.mu.Unlock()
	if d.registered.Load() {
		return nil // registered again meanwhile: its chunks are in use
	}
	d.c.mu.Lock()
	empty := d.members == nil && d.chunks.Load() == 0
	d.c.mu.Unlock()
	if empty {
		f.forget(d)
	}
	return nil
}

// maybeExpire forgets a detached dataset whose last chunk left, so idle
// unregistered datasets cost nothing. It gives way (TryLock) to a
// registration in progress on the file, which then decides itself.
func (d *Dataset) maybeExpire() {
	if d.registered.Load() {
		return
	}
	f := d.file
	if !f.mu.TryLock() {
		return // a (re)registration is in progress; it decides
	}
	defer f.mu.Unlock()
	c := d.c
	c.mu.Lock()
	empty := d.members == nil && d.chunks.Load() == 0
	c.mu.Unlock()
	if empty && !d.registered.Load() {
		f.forget(d)
	}
}

// Flush writes every dirty chunk of the file's datasets (SCC requirements §4.5):
// encoded in parallel, inserted with one Layout.Insert per dataset, written
// with one vector write, then synced. Chunks written concurrently with the
// flush stay dirty. It returns nil only when every chunk that was dirty when
// Flush began is on disk and synced.
func (f *File) Flush(ctx context.Context) error {
	if f.c.closed.Load() {
		return ErrClosed
	}
	return f.c.writer.flushDatasets(ctx, f.registered(), true)
}

func (f *File) registered() []*Dataset {
	var ds []*Dataset
	f.datasets.ForEach(func(_ uint64, d *Dataset) bool {
		ds = append(ds, d)
		return true
	})
	return ds
}

// Unregister flushes the file, evicts all of its chunks and drops its
// datasets (SCC requirements §4.6). On a flush error nothing is dropped.
func (f *File) Unregister(ctx context.Context) error {
	if err := f.Flush(ctx); err != nil {
		return err
	}
	return f.unregister(ctx, false)
}

// Discard unregisters the file like Unregister but writes nothing: every
// chunk of its datasets, dirty ones included, is dropped. It is for an
// owner that has already reported a failed Flush or Unregister and gives
// the file up (so that the cache can then be closed); the dirty data is
// lost, which is why Cache.Close never does this on its own. New requests
// on the file's datasets fail with ErrNotRegistered from the start.
func (f *File) Discard(ctx context.Context) error {
	return f.unregister(ctx, true)
}

// unregister drops the file's chunks and datasets. It holds File.mu only
// to change registration state, never across the drops (which may flush
// chunks a late writer dirtied): File.mu.unreg marks the drop in progress,
// so registrations fail and a second unregister waits for the first.
func (f *File) unregister(ctx context.Context, discard bool) error {
	c := f.c
	f.waitPrefetches(true)
	var done chan struct{}
	for done == nil {
		f.mu.Lock()
		if f.mu.closed {
			f.mu.Unlock()
			return nil
		}
		if w := f.mu.unreg; w != nil {
			f.mu.Unlock()
			select {
			case <-w:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		done = make(chan struct{})
		f.mu.unreg = done
		if discard {
			for _, d := range f.registered() {
				if d.registered.CompareAndSwap(true, false) {
					c.registered.datasets.Add(-1)
				}
			}
		}
		f.mu.Unlock()
	}
	var err error
	for _, d := range f.registered() {
		if err = c.dropAllSettled(ctx, d, discard); err != nil {
			break
		}
	}
	f.mu.Lock()
	f.mu.unreg = nil
	if err == nil {
		for _, d := range f.registered() {
			if d.registered.CompareAndSwap(true, false) {
				c.registered.datasets.Add(-1)
			}
			f.forget(d)
		}
		f.mu.closed = true
		c.registered.files.Del(f.serial)
		f.releaseMetadata()
		f.DropPrefetched()
		c.stored.dropFile(f.serial)
	}
	f.mu.Unlock()
	close(done)
	return err
}

// Flush flushes every registered file.
func (c *Cache) Flush(ctx context.Context) error {
	if c.closed.Load() {
		return ErrClosed
	}
	var errs []error
	c.registered.files.ForEach(func(_ uint64, f *File) bool {
		if err := f.Flush(ctx); err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return errors.Join(errs...)
}

// reserve charges n bytes before a chunk is loaded or created (SCC internal API
// size_hint), evicting (and writing dirty victims) until they fit under the
// active limit. Memory is a promise: when nothing can be evicted the caller
// blocks until others release bytes. The only excess allowed is one
// indivisible reservation made into an empty cache.
//
// INVARIANT: callers hold no pins and no reservation while they wait here,
// so everyone they could wait for can finish.
func (c *Cache) reserve(ctx context.Context, n int64) error {
	for {
		if c.closed.Load() {
			return ErrClosed
		}
		cur := c.budget.resident.Load()
		limit := c.sizes.current().active
		// Metadata cannot be evicted, but the re-readable part of it can
		// be shed (external.go): do that when metadata alone keeps n from
		// fitting (evicting every chunk would not make room) and holds
		// more than half the limit, rather than letting it grow past the
		// limit. (A chunk about the size of the whole limit, or larger,
		// takes the allowance below: shedding a little metadata for it
		// would only have it read again at once.)
		if meta := c.budget.metadata.Load(); cur+n > limit && meta > limit/2 && meta+n > limit && meta > c.budget.shedAt.Load() {
			if c.budget.shedMetadata(c.registered.files, &c.stats) && c.budget.metadata.Load() < meta {
				continue
			}
		}
		// A cache holding nothing but metadata counts as empty for the
		// one-chunk allowance; otherwise index bytes over the limit would
		// block every load forever.
		if cur+n <= limit || cur <= c.budget.metadata.Load() {
			if c.budget.resident.CompareAndSwap(cur, cur+n) {
				c.budget.notePeak(cur + n)
				c.budget.addChunks(n)
				return nil
			}
			continue
		}
		c.background.preEncode.wake(cur, &c.sizes, &c.budget)
		freed, err := c.evict(ctx, cur+n-limit, 2)
		if err != nil {
			return err
		}
		if freed > 0 {
			continue
		}
		if h := testHookNothingEvicted; h != nil {
			h()
		}
		// Nothing evictable now: wait for bytes to be released or entries
		// to become evictable. Register first, then take the channel, then
		// look again, so that no release after the look can be missed: a
		// stored image released before the registration signals nobody,
		// so the look covers the stored images as well as the chunks.
		c.budget.spaceWaiters.Add(1)
		wait := c.budget.spaceWait()
		if c.budget.resident.Load() != cur || c.mu.evictableNow() || c.stored.evictableNow() {
			c.budget.spaceWaiters.Add(-1)
			continue
		}
		c.stats.spaceWaits.Add(1)
		select {
		case <-wait:
		case <-ctx.Done():
			c.budget.spaceWaiters.Add(-1)
			return ctx.Err()
		}
		c.budget.spaceWaiters.Add(-1)
	}
}

// testHookNothingEvicted, when set (tests only), runs in reserve after an
// eviction that freed nothing, before the request registers as a waiter.
var testHookNothingEvicted func()

// begin/end bracket every request that goes past the hit path, so the
// cache knows when it is quiescent (SCC design §2.4: the active size applies
// only while requests run; see serveHits for why hits are left out).
func (c *Cache) begin() error { return c.beginOn(c.stats.hot.Stripe()) }

func (c *Cache) end() { c.endOn(c.stats.hot.Stripe()) }

// beginOn and endOn are begin and end on a stripe the caller took once for
// both: the request's count goes up and down on the same line.
func (c *Cache) beginOn(st lockfree.Stripe) error {
	st.Add(hotActive, 1)
	if c.closed.Load() {
		c.endOn(st)
		return ErrClosed
	}
	return nil
}

func (c *Cache) endOn(st lockfree.Stripe) {
	st.Add(hotActive, -1)
	sz := c.sizes.current()
	if sz.ad != nil && c.sizes.adaptive.tick() {
		c.sizes.closeEpoch(false)
	}
	// Every request ending over the quiescent size pokes the trimmer, so the
	// last one to end always does; the trimmer decides whether the cache
	// is quiescent. The check reads a line hits never write.
	if r := c.budget.resident.Load(); r > sz.quiescent {
		select {
		case c.background.trim.kick <- struct{}{}:
		default:
		}
		c.background.preEncode.wake(r, &c.sizes, &c.budget)
	} else if r > sz.preHigh {
		c.background.preEncode.wake(r, &c.sizes, &c.budget)
	}
}
