package cache

import (
	"context"
	"slices"
)

// Prefetched entries (seed 004 §2 "prefetched entries", §4.3): blocks a
// cache image brought into memory at open, held in their on-disk (encoded)
// form only, and turned into regular entries — decoded by whoever owns them
// — on their first request, which then skips its read. The owner of the
// file (the engine) decides what an image holds (chunk frames and its own
// metadata blocks); the cache holds the bytes, charges them to its budget,
// hands them out, and drops them under memory pressure or when they are
// never requested.
//
// Identity: a prefetched entry answers a request only for exactly its
// address, size and checksum, the checksum being what the requester's
// parent records for the block it wants (an index entry's chunk checksum, a
// catalog entry's header checksum, ...). A stale image (space reused since
// it was written) therefore never answers for another block: the mismatch
// drops the entry and the request reads the file, as without an image.
//
// Budget: the entries' bytes (their buffers' capacities) count in the
// cache's resident total. Loading never evicts a chunk to make room: the
// hottest entries that fit under the quiescent size are kept, the rest
// dropped. Eviction drops prefetched entries before any chunk, coldest
// (highest rank) first: an entry never requested since open is the least
// recently used thing in the cache. This departs from seed 004, which puts
// prefetched entries into the LRU at their recorded places; here their
// recorded rank orders them among themselves only. Prefetched entries are
// never dirty, so a flush never writes one (seed 004 §2 item 2 concerns
// dirty ones, which this engine never images: Close commits first).
//
// Concurrency: safe for concurrent use. Cache.img guards every file's
// entries; it is a leaf lock, and only misses and eviction take it (a hit
// never does; a miss with no image anywhere pays one atomic load).

// PrefetchedBlock is one block of a cache image, in its on-disk form.
type PrefetchedBlock struct {
	// Kind is the owner's code for what the block is; opaque to the cache.
	Kind uint8
	// Age counts the images the block appeared in without being requested
	// (seed 004 §4.2 "Age").
	Age uint8
	// Rank is the block's place in the image's replacement order (0 the
	// most recently used).
	Rank uint32
	Addr int64
	// Sum is the checksum the block's parent records for it.
	Sum uint32
	// Image is the block's bytes. From TakePrefetched the caller owns it (a
	// buffer from GetBuf); from PrefetchedBlocks it is shared and read-only.
	Image []byte
}

// PrefetchedStats counts a file's prefetched entries.
type PrefetchedStats struct {
	Loaded  int64 // entries created from an image
	Skipped int64 // image blocks not loaded for want of budget
	Taken   int64 // requested: served without a read
	Evicted int64 // dropped for space before any request
	Stale   int64 // dropped because a request at their address wanted other bytes
	Bytes   int64 // bytes held now (buffer capacities)
	Entries int   // entries held now
}

// prefetchedState is a file's prefetched entries, guarded by Cache.img.
type prefetchedState struct {
	// byAddr holds the entries not yet requested, evicted or found stale.
	byAddr map[int64]*PrefetchedBlock
	bytes  int64 // sum of cap(Image) over byAddr; also in Cache.resident and Cache.imgBytes

	loaded, skipped, taken, evicted, stale int64
}

// imgLocked returns f's prefetched state, made when create is set (nil
// otherwise when f has none). Caller holds c.img.
func (f *File) imgLocked(create bool) *prefetchedState {
	c := f.c
	st := c.img.byFile[f.serial]
	if st == nil && create {
		if c.img.byFile == nil {
			c.img.byFile = make(map[uint64]*prefetchedState)
		}
		st = &prefetchedState{byAddr: make(map[int64]*PrefetchedBlock)}
		c.img.byFile[f.serial] = st
	}
	return st
}

// LoadPrefetched installs blocks (in rank order, hottest first) as
// prefetched entries of f, copying their bytes. Blocks that do not fit
// under the cache's quiescent size, beside what it holds, are skipped
// rather than evicting anything. It returns how many were kept. Blocks at
// an address f already holds replace the old entry.
func (f *File) LoadPrefetched(blocks []PrefetchedBlock) int {
	c := f.c
	kept := 0
	c.img.Lock()
	defer c.img.Unlock()
	if _, ok := c.files.Get(f.serial); !ok {
		return 0 // unregistered: nothing may be charged to it any more
	}
	st := f.imgLocked(true)
	for i := range blocks {
		b := blocks[i]
		n := int64(BufCap(len(b.Image)))
		if c.resident.Load()+n > c.quiescent {
			st.skipped += int64(len(blocks) - i)
			break
		}
		buf := GetBuf(len(b.Image))
		copy(buf, b.Image)
		b.Image = buf
		if old := st.byAddr[b.Addr]; old != nil {
			f.dropLocked(st, old)
			PutBuf(old.Image)
		}
		st.byAddr[b.Addr] = &b
		st.bytes += n
		c.imgBytes.Add(n)
		c.charge(n)
		st.loaded++
		kept++
	}
	return kept
}

// dropLocked removes e and uncharges its bytes; the caller disposes of
// e.Image. Caller holds c.img.
func (f *File) dropLocked(st *prefetchedState, e *PrefetchedBlock) {
	delete(st.byAddr, e.Addr)
	n := int64(cap(e.Image))
	st.bytes -= n
	f.c.imgBytes.Add(-n)
	f.c.charge(-n)
}

// TakePrefetched returns the prefetched block at addr if it has exactly
// size bytes and checksum sum, removing it from the cache: the caller owns
// the bytes (a GetBuf buffer) and decodes them as if it had read them. An
// entry at addr that does not match is stale and is dropped; the caller
// reads the file.
func (f *File) TakePrefetched(addr, size int64, sum uint32) ([]byte, bool) {
	if f.c.imgBytes.Load() == 0 {
		return nil, false // no image anywhere: one atomic load
	}
	f.c.img.Lock()
	defer f.c.img.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return nil, false
	}
	e := st.byAddr[addr]
	if e == nil {
		return nil, false
	}
	f.dropLocked(st, e)
	if int64(len(e.Image)) != size || e.Sum != sum {
		st.stale++
		PutBuf(e.Image)
		return nil, false
	}
	st.taken++
	return e.Image, true
}

// HasPrefetched reports whether f holds a prefetched block at addr.
func (f *File) HasPrefetched(addr int64) bool {
	if f.c.imgBytes.Load() == 0 {
		return false
	}
	f.c.img.Lock()
	defer f.c.img.Unlock()
	st := f.imgLocked(false)
	return st != nil && st.byAddr[addr] != nil
}

// PrefetchedBlocks returns copies of the descriptors of f's prefetched
// entries never requested, in rank order; their Image bytes are shared
// and must not be changed. The engine carries them into the next image
// with their age raised (seed 004 §2 "entry_ageout").
func (f *File) PrefetchedBlocks() []PrefetchedBlock {
	f.c.img.Lock()
	defer f.c.img.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return nil
	}
	out := make([]PrefetchedBlock, 0, len(st.byAddr))
	for _, e := range st.byAddr {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b PrefetchedBlock) int { return cmpRank(a.Rank, b.Rank) })
	return out
}

func cmpRank(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// DropPrefetched releases every prefetched entry of f (File.Unregister
// does; so may an owner that no longer wants them).
func (f *File) DropPrefetched() {
	f.c.img.Lock()
	defer f.c.img.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return
	}
	for _, e := range st.byAddr {
		f.dropLocked(st, e)
		PutBuf(e.Image)
	}
	if _, ok := f.c.files.Get(f.serial); !ok {
		delete(f.c.img.byFile, f.serial)
	}
}

// PrefetchedStats reports f's prefetched-entry counters.
func (f *File) PrefetchedStats() PrefetchedStats {
	f.c.img.Lock()
	defer f.c.img.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return PrefetchedStats{}
	}
	return PrefetchedStats{
		Loaded: st.loaded, Skipped: st.skipped, Taken: st.taken, Evicted: st.evicted, Stale: st.stale,
		Bytes: st.bytes, Entries: len(st.byAddr),
	}
}

// evictPrefetched drops prefetched entries, coldest first, until need
// bytes are freed or none is left; it returns the bytes freed. Called
// first by eviction: an entry never requested since open is colder than
// any chunk in use.
func (c *Cache) evictPrefetched(need int64) int64 {
	if c.imgBytes.Load() == 0 {
		return 0
	}
	c.img.Lock()
	defer c.img.Unlock()
	var freed int64
	for _, st := range c.img.byFile {
		if freed >= need {
			break
		}
		freed += c.evictPrefetchedLocked(st, need-freed)
	}
	return freed
}

func (c *Cache) evictPrefetchedLocked(st *prefetchedState, need int64) int64 {
	if len(st.byAddr) == 0 {
		return 0
	}
	es := make([]*PrefetchedBlock, 0, len(st.byAddr))
	for _, e := range st.byAddr {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *PrefetchedBlock) int { return cmpRank(b.Rank, a.Rank) }) // coldest first
	var freed int64
	for _, e := range es {
		if freed >= need {
			break
		}
		freed += int64(cap(e.Image))
		delete(st.byAddr, e.Addr)
		st.bytes -= int64(cap(e.Image))
		c.imgBytes.Add(-int64(cap(e.Image)))
		c.charge(-int64(cap(e.Image)))
		PutBuf(e.Image)
		st.evicted++
	}
	return freed
}

// HotChunk is one clean cached chunk of a file in its encoded form, for a
// cache image.
type HotChunk struct {
	// Rank is the chunk's place in the replacement order, 0 the hottest.
	Rank uint32
	Loc  Location
	// Image is the encoded chunk, valid only during the callback.
	Image []byte
}

// HotChunks calls fn for f's clean resident chunks that are stored in the
// file, hottest first by the replacement policy's order, until fn returns
// false. Each is encoded again (Layout.Encode) under its latch; a chunk
// whose new encoding is not the stored one (its checksum differs from the
// location's, as a non-deterministic filter could make it) is left out, so
// an image never carries bytes the index does not name. Busy chunks (being
// flushed, loaded or evicted) are left out. Safe for concurrent use; meant
// for a file being closed, after its last flush.
func (f *File) HotChunks(ctx context.Context, fn func(HotChunk) bool) error {
	c := f.c
	var order []*entry
	c.mu.Lock()
	c.drainLocked()
	c.mu.pol.nominate(func(e *entry) verdict {
		if e.ds.file == f && !e.bypass {
			order = append(order, e)
		}
		return skip
	})
	c.mu.Unlock()
	rank := uint32(0)
	for i := len(order) - 1; i >= 0; i-- { // nominate offers the coldest first
		if err := ctx.Err(); err != nil {
			return err
		}
		e := order[i]
		if !e.tryPin() {
			continue
		}
		hc, ok, err := c.encodeClean(e)
		c.unpin(e)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		hc.Rank = rank
		rank++
		more := fn(hc.HotChunk)
		releaseImage(hc.enc)
		if !more {
			return nil
		}
	}
	return nil
}

type hotEncoded struct {
	HotChunk
	enc Encoded
}

// encodeClean encodes a pinned entry if it is clean and stored.
func (c *Cache) encodeClean(e *entry) (hotEncoded, bool, error) {
	if !e.flushMu.TryLock() {
		return hotEncoded{}, false, nil // a flusher has it
	}
	defer e.flushMu.Unlock()
	e.latch.RLock()
	defer e.latch.RUnlock()
	loc := e.loc
	if e.dirty.Load() || !loc.Exists() {
		return hotEncoded{}, false, nil
	}
	enc, err := e.ds.lay().l.Encode(e.coord, e.chunk)
	if err != nil {
		return hotEncoded{}, false, err
	}
	if int64(len(enc.Image)) != loc.Size || enc.Sum != loc.Sum {
		releaseImage(enc)
		return hotEncoded{}, false, nil
	}
	return hotEncoded{HotChunk: HotChunk{Loc: loc, Image: enc.Image}, enc: enc}, true, nil
}
