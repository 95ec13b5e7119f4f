package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/scc-dev/scc/vfd"
)

// Stored images: chunks' stored (encoded) frames kept in memory for readers
// that want the bytes as stored, not the chunk decoded (a server handing
// chunks to clients that decode them themselves). Many such readers asking
// for the same chunks would otherwise read the file once per request, each
// into a buffer of its own, with nothing bounding the total.
//
// Identity: an image is keyed by its file and stored address, and answers
// only a request whose location (looked up in the layout's index at the
// time of the request) has the same size and checksum. A rewritten chunk
// has a new location, so its old image is never served for it; an image
// whose address now holds other bytes is stale and dropped at the first
// request that finds it so. (Prefetched entries use the same rule.)
//
// Sharing: concurrent requests for one chunk share one read (the first
// loads, the others wait for it), and every request holds a reference to
// the one image until it releases it: the bytes are never copied.
//
// Memory: an image's buffer (its pooled capacity) is charged to the
// cache's budget by reserve, like a chunk load, so images and chunks share
// one limit, and a request waits for room when referenced images fill it.
// Eviction drops unreferenced images before any chunk, least recently
// used first: an image costs one read to bring back, and no decode. A
// referenced image is never dropped; one found stale, or dropped with its
// file, is freed when its last reference goes.
//
// Concurrency: storedImages.mu guards the table, the list and every
// image's refs; it is a leaf lock, never held across I/O or a wait.

// storedKey names a stored frame: its file and address.
type storedKey struct {
	file uint64
	addr int64
}

// storedImages is the cache's stored images.
type storedImages struct {
	bytes  atomic.Int64 // charged bytes of the images (also in the budget)
	hits   atomic.Int64 // requests answered by an image in memory
	loads  atomic.Int64 // images read from the file
	shared atomic.Int64 // of the hits, those that waited for a load in flight
	evicts atomic.Int64 // images dropped for room
	mu     struct {
		sync.Mutex
		m    map[storedKey]*StoredImage
		head StoredImage // sentinel of the LRU list: head.next the most recent
	}
}

// StoredImage is one chunk's stored frame held by the cache, shared by
// the requests holding a reference to it. Its bytes are read-only.
type StoredImage struct {
	c      *Cache
	key    storedKey
	size   int64
	sum    uint32
	buf    []byte // the frame (size bytes of a pooled buffer)
	charge int64  // cap of the buffer, charged to the budget
	ready  chan struct{}
	err    error // set before ready closes when the load failed
	// Guarded by storedImages.mu.
	refs       int
	dropped    bool // out of the table: freed at the last release
	prev, next *StoredImage
}

// Bytes returns the stored frame, valid until Release.
func (im *StoredImage) Bytes() []byte { return im.buf }

// Release gives the reference back; the image must not be used after.
func (im *StoredImage) Release() {
	if im == nil {
		return
	}
	s := &im.c.stored
	s.mu.Lock()
	im.refs--
	free := im.refs == 0 && im.dropped
	s.mu.Unlock()
	switch {
	case free:
		im.free()
	case im.c.budget.spaceWaiters.Load() > 0:
		// A request waiting for room may find this image evictable now.
		im.c.budget.signalSpace()
	}
}

// free returns the image's buffer and uncharges it. Called once, by the
// last holder of an image out of the table.
func (im *StoredImage) free() {
	c := im.c
	if im.buf != nil {
		bufpool.Put(im.buf)
		im.buf = nil
	}
	if im.charge > 0 {
		c.stored.bytes.Add(-im.charge)
		c.budget.charge(-im.charge)
		im.charge = 0
	}
}

// StoredStats counts the stored images (all files).
type StoredStats struct {
	Hits    int64 // requests answered from memory (Shared of them waited for a load)
	Shared  int64
	Loads   int64 // images read from the file
	Evicted int64 // dropped for room
	Bytes   int64 // charged now
	Images  int   // held now (referenced or not)
}

// StoredStats reports the stored images' counters.
func (c *Cache) StoredStats() StoredStats {
	s := &c.stored
	s.mu.Lock()
	n := len(s.mu.m)
	s.mu.Unlock()
	return StoredStats{Hits: s.hits.Load(), Shared: s.shared.Load(), Loads: s.loads.Load(),
		Evicted: s.evicts.Load(), Bytes: s.bytes.Load(), Images: n}
}

// ReadStored returns a reference to the stored frame of the chunk at
// coord, as DirectRead reads it (a dirty cached copy is written back
// first), and the chunk's location; the caller releases the image. A chunk
// that is not stored returns a nil image and a location that does not
// exist. verify checks a frame read from the file (its checksum) before any
// request is given it; its error fails every request that waited for that
// read, and nothing is kept.
func (d *Dataset) ReadStored(ctx context.Context, coord layout.Coord, verify func(loc layout.Location, frame []byte) error) (*StoredImage, layout.Location, error) {
	c := d.c
	if err := c.begin(); err != nil {
		return nil, layout.Location{}, err
	}
	defer c.end()
	if err := d.writeBackOne(ctx, coord); err != nil {
		return nil, layout.Location{}, err
	}
	var locs [1]layout.Location
	if err := d.lay().l.Lookup(ctx, []layout.Coord{coord}, locs[:]); err != nil {
		return nil, layout.Location{}, err
	}
	loc := locs[0]
	if !loc.Exists() {
		return nil, loc, nil
	}
	if loc.Size > maxStored(loc.SizeHint) {
		return nil, loc, fmt.Errorf("%w: stored size %d", ErrInvalid, loc.Size)
	}
	key := storedKey{file: d.file.serial, addr: loc.Addr}
	for {
		im, load := c.stored.get(c, key, loc)
		if load {
			return im, loc, c.loadStored(ctx, d, im, loc, verify)
		}
		select {
		case <-im.ready:
		case <-ctx.Done():
			im.Release()
			return nil, loc, ctx.Err()
		}
		if im.err == nil {
			return im, loc, nil
		}
		err := im.err
		im.Release()
		// The loader's own cancellation is not this request's failure:
		// it loads again.
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, loc, err
		}
		if ctx.Err() != nil {
			return nil, loc, ctx.Err()
		}
	}
}

// get returns the image of loc at key with a reference taken, made (and
// to be loaded by the caller: load) when there is none or the one there
// is stale.
func (s *storedImages) get(c *Cache, key storedKey, loc layout.Location) (im *StoredImage, load bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.m == nil {
		s.mu.m = make(map[storedKey]*StoredImage)
		s.mu.head.next, s.mu.head.prev = &s.mu.head, &s.mu.head
	}
	if im := s.mu.m[key]; im != nil {
		if im.size == loc.Size && im.sum == loc.Sum {
			im.refs++
			s.unlinkLocked(im)
			s.pushLocked(im)
			s.hits.Add(1)
			select {
			case <-im.ready:
			default:
				s.shared.Add(1)
			}
			return im, false
		}
		// Other bytes at that address now: the old frame is stale.
		s.dropLocked(im)
	}
	im = &StoredImage{c: c, key: key, size: loc.Size, sum: loc.Sum, ready: make(chan struct{}), refs: 1}
	s.mu.m[key] = im
	s.pushLocked(im)
	return im, true
}

// loadStored reads and verifies im's frame, charged to the budget, and
// publishes it. On failure im leaves the table with the error for its
// waiters, and the caller's reference is released.
func (c *Cache) loadStored(ctx context.Context, d *Dataset, im *StoredImage, loc layout.Location, verify func(layout.Location, []byte) error) error {
	err := c.readStored(ctx, d, im, loc, verify)
	if err != nil {
		im.err = err
		c.stored.mu.Lock()
		if !im.dropped {
			c.stored.dropLocked(im)
		}
		c.stored.mu.Unlock()
	}
	close(im.ready)
	if err != nil {
		im.Release()
	}
	return err
}

func (c *Cache) readStored(ctx context.Context, d *Dataset, im *StoredImage, loc layout.Location, verify func(layout.Location, []byte) error) error {
	charge := int64(bufpool.Cap(int(loc.Size)))
	if err := c.reserve(ctx, charge); err != nil {
		return err
	}
	c.stored.bytes.Add(charge)
	im.charge = charge
	buf := bufpool.Get(int(loc.Size))[:loc.Size]
	im.buf = buf
	c.stats.vectorReads.Add(1)
	c.stats.vectorReadBytes.Add(loc.Size)
	if err := d.file.drv.ReadV([]vfd.Extent{{Off: loc.Addr, Buf: buf}}); err != nil {
		return err
	}
	if verify != nil {
		if err := verify(loc, buf); err != nil {
			return err
		}
	}
	c.stored.loads.Add(1)
	return nil
}

// pushLocked puts im at the head of the list (most recent).
func (s *storedImages) pushLocked(im *StoredImage) {
	h := &s.mu.head
	im.prev, im.next = h, h.next
	h.next.prev = im
	h.next = im
}

func (s *storedImages) unlinkLocked(im *StoredImage) {
	im.prev.next, im.next.prev = im.next, im.prev
	im.prev, im.next = nil, nil
}

// dropLocked takes im out of the table and the list; it is freed now if
// nobody holds it, else by its last Release. Caller holds mu.
func (s *storedImages) dropLocked(im *StoredImage) {
	delete(s.mu.m, im.key)
	s.unlinkLocked(im)
	im.dropped = true
	if im.refs == 0 {
		im.free()
	}
}

// evict drops unreferenced images, least recently used first, until need
// bytes are freed or none is left; it returns the bytes freed, which it
// has uncharged already. Called by eviction before any chunk goes.
func (s *storedImages) evict(need int64) int64 {
	if s.bytes.Load() == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var freed int64
	h := &s.mu.head
	for im := h.prev; im != h && freed < need; {
		prev := im.prev
		if im.refs == 0 {
			freed += im.charge
			s.evicts.Add(1)
			s.dropLocked(im)
		}
		im = prev
	}
	return freed
}

// evictableNow reports whether evict would free an image now (one that
// nobody references).
func (s *storedImages) evictableNow() bool {
	if s.bytes.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.mu.head
	for im := h.prev; im != h; im = im.prev {
		if im.refs == 0 {
			return true
		}
	}
	return false
}

// dropFile drops every image of the file with serial f (its
// unregistration); referenced ones are freed by their last Release.
func (s *storedImages) dropFile(f uint64) {
	if s.bytes.Load() == 0 {
		s.mu.Lock()
		empty := len(s.mu.m) == 0
		s.mu.Unlock()
		if empty {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, im := range s.mu.m {
		if k.file == f {
			s.dropLocked(im)
		}
	}
}
