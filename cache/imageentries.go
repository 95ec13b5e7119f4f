package cache

import (
	"cmp"
	"context"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
	"slices"
	"sync"
	"sync/atomic"
)

// Prefetched entries (Cache image RFC §2 "prefetched entries", §4.3): blocks a
// cache image brought into memory at open, held in their on-disk (encoded)
// form only, and turned into regular entries — decoded by whoever owns them
// — on their first request, which then skips its read. The owner of the
// file (the engine) decides what an image holds (chunk frames and its own
// metadata blocks); the cache holds the bytes, charges them to its budget,
// hands them out, and drops them under memory pressure.
//
// Identity: a prefetched entry answers a request only for exactly its
// address, size and checksum, the checksum being what the requester's
// parent records for the block it wants (an index entry's chunk checksum, a
// catalog entry's header checksum, ...). A stale image (space reused since
// it was written) therefore never answers for another block: the mismatch
// drops the entry and the request reads the file, as without an image.
//
// Memory: one image's entries are one set sharing the image's buffer (no
// copy per entry at open: a reader that uses a few of an image's blocks
// pays for the one read and nothing per unused block). A request copies
// its entry out; the buffer goes back when the set's last entry is taken
// or dropped. The buffer's bytes count in the cache's resident total.
// Loading never evicts a chunk to make room: when the whole buffer does
// not fit under the quiescent size beside what the cache holds, the
// hottest entries that fit are copied into a smaller buffer and the rest
// are skipped. Eviction drops prefetched sets before any chunk, a whole
// set at a time (its memory is one buffer), oldest first: entries never
// requested since open are the coldest things in the cache. This departs
// from Cache image RFC, which puts prefetched entries into the LRU at their
// recorded places; here the recorded rank orders an image's entries among
// themselves (what the budget keeps, what an image carries forward).
// Prefetched entries are never dirty, so a flush never writes one (seed
// 004 §2 item 2 concerns dirty ones, which this engine never images: Close
// commits first).
//
// Concurrency: safe for concurrent use. Cache.images.mu guards every
// file's sets; it is a leaf lock, taken only by misses and eviction (a hit
// never does; a miss with no image anywhere pays one atomic load).

// imageEntries is the cache-image entries of every file.
type imageEntries struct {
	// bytes is the entries' bytes, every file (also in the budget's
	// resident bytes).
	bytes atomic.Int64
	// mu guards byFile, the files' entries by file serial. A leaf lock,
	// never held across I/O.
	mu struct {
		sync.Mutex
		byFile map[uint64]*prefetchedState
	}
}

// PrefetchedBlock is one block of a cache image, in its on-disk form.
type PrefetchedBlock struct {
	// Kind is the owner's code for what the block is; opaque to the cache.
	Kind uint8
	// Age counts the images the block appeared in without being requested
	// (Cache image RFC §4.2 "Age").
	Age uint8
	// Rank is the block's place in the image's replacement order (0 the
	// most recently used).
	Rank uint32
	Addr int64
	// Sum is the checksum the block's parent records for it.
	Sum uint32
	// Image is the block's bytes (shared and read-only; see
	// LoadPrefetched and TakePrefetched for ownership).
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

// prefetchedSet is one image's entries, in address order, sharing buf.
type prefetchedSet struct {
	buf    []byte // owned by the set; from bufpool.Get (Put ignores other capacities)
	ents   []PrefetchedBlock
	gone   []bool // taken or dropped
	left   int    // entries not gone
	charge int64  // cap(buf), charged to the cache
}

// prefetchedState is a file's prefetched sets, guarded by Cache.images.mu.
type prefetchedState struct {
	sets []*prefetchedSet // oldest first

	loaded, skipped, taken, evicted, stale int64
}

// imgLocked returns f's prefetched state, made when create is set (nil
// otherwise when f has none). Caller holds c.images.mu.
func (f *File) imgLocked(create bool) *prefetchedState {
	c := f.c
	st := c.images.mu.byFile[f.serial]
	if st == nil && create {
		if c.images.mu.byFile == nil {
			c.images.mu.byFile = make(map[uint64]*prefetchedState)
		}
		st = &prefetchedState{}
		c.images.mu.byFile[f.serial] = st
	}
	return st
}

// LoadPrefetched installs blocks (in increasing address order, none
// overlapping the next: an image's order) as prefetched entries of f,
// taking the slice. Their Images alias buf, which the cache owns from
// then on (a pooled buffer goes back to the pool when the last entry
// leaves); the caller must not touch either again. It returns how many
// entries were kept.
func (f *File) LoadPrefetched(blocks []PrefetchedBlock, buf []byte) int {
	c := f.c
	c.images.mu.Lock()
	defer c.images.mu.Unlock()
	if _, ok := c.registered.files.Get(f.serial); !ok || len(blocks) == 0 {
		bufpool.Put(buf)
		return 0 // unregistered: nothing may be charged to it any more
	}
	st := f.imgLocked(true)
	room := c.sizes.current().quiescent - c.budget.resident.Load()
	set := &prefetchedSet{buf: buf, ents: blocks}
	if int64(cap(buf)) > room {
		// The hottest that fit, copied into one buffer of their own.
		byRank := slices.Clone(blocks)
		slices.SortStableFunc(byRank, func(a, b PrefetchedBlock) int { return cmp.Compare(a.Rank, b.Rank) })
		n, size := 0, int64(0)
		for n < len(byRank) && size+int64(len(byRank[n].Image)) <= room {
			size += int64(len(byRank[n].Image))
			n++
		}
		st.skipped += int64(len(blocks) - n)
		kept := byRank[:n]
		slices.SortFunc(kept, func(a, b PrefetchedBlock) int { return cmp.Compare(a.Addr, b.Addr) })
		set.buf, set.ents = bufpool.Get(int(size)), kept
		off := 0
		for i := range set.ents {
			m := copy(set.buf[off:], set.ents[i].Image)
			set.ents[i].Image = set.buf[off : off+m : off+m]
			off += m
		}
		bufpool.Put(buf)
		if n == 0 {
			bufpool.Put(set.buf)
			return 0
		}
	}
	set.gone = make([]bool, len(set.ents))
	set.left = len(set.ents)
	set.charge = int64(cap(set.buf))
	st.sets = append(st.sets, set)
	st.loaded += int64(set.left)
	c.images.bytes.Add(set.charge)
	c.budget.charge(set.charge)
	return set.left
}

// find returns the index of the live entry at addr, or -1.
func (s *prefetchedSet) find(addr int64) int {
	i, ok := slices.BinarySearchFunc(s.ents, addr, func(e PrefetchedBlock, a int64) int { return cmp.Compare(e.Addr, a) })
	if !ok || s.gone[i] {
		return -1
	}
	return i
}

// dropLocked marks entry i gone and releases the set when it was the
// last. It returns the bytes released, which the caller uncharges from
// the budget. Caller holds m.mu.
func (m *imageEntries) dropLocked(st *prefetchedState, s *prefetchedSet, i int) int64 {
	s.gone[i] = true
	s.left--
	if s.left == 0 {
		return m.releaseSetLocked(st, s)
	}
	return 0
}

// releaseSetLocked gives s's buffer back and removes it. It returns the
// bytes released (s's charge), which the caller uncharges from the
// budget. Caller holds m.mu.
func (m *imageEntries) releaseSetLocked(st *prefetchedState, s *prefetchedSet) int64 {
	n := s.charge
	m.bytes.Add(-n)
	bufpool.Put(s.buf)
	s.buf, s.ents, s.left = nil, nil, 0
	st.sets = slices.DeleteFunc(st.sets, func(x *prefetchedSet) bool { return x == s })
	return n
}

// TakePrefetched returns the prefetched block at addr if it has exactly
// size bytes and checksum sum, removing it from the cache: the caller owns
// the returned copy (a pooled buffer) and decodes it as if it had read it.
// An entry at addr that does not match is stale and is dropped; the
// caller reads the file.
func (f *File) TakePrefetched(addr, size int64, sum uint32) ([]byte, bool) {
	if f.c.images.bytes.Load() == 0 {
		return nil, false // no image anywhere: one atomic load
	}
	c := f.c
	c.images.mu.Lock()
	defer c.images.mu.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return nil, false
	}
	for _, s := range st.sets {
		i := s.find(addr)
		if i < 0 {
			continue
		}
		e := s.ents[i]
		if int64(len(e.Image)) != size || e.Sum != sum {
			st.stale++
			c.budget.charge(-c.images.dropLocked(st, s, i))
			return nil, false
		}
		b := bufpool.Get(len(e.Image))
		copy(b, e.Image)
		st.taken++
		c.budget.charge(-c.images.dropLocked(st, s, i))
		return b, true
	}
	return nil, false
}

// HasPrefetched reports whether f holds a prefetched block at addr.
func (f *File) HasPrefetched(addr int64) bool {
	if f.c.images.bytes.Load() == 0 {
		return false
	}
	f.c.images.mu.Lock()
	defer f.c.images.mu.Unlock()
	if st := f.imgLocked(false); st != nil {
		for _, s := range st.sets {
			if s.find(addr) >= 0 {
				return true
			}
		}
	}
	return false
}

// PrefetchedBlocks returns copies of f's prefetched entries never
// requested, in rank order (the engine carries them into the image its
// closing commit writes, Cache image RFC entry_ageout).
func (f *File) PrefetchedBlocks() []PrefetchedBlock {
	f.c.images.mu.Lock()
	defer f.c.images.mu.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return nil
	}
	var out []PrefetchedBlock
	for _, s := range st.sets {
		for i, e := range s.ents {
			if !s.gone[i] {
				// A copy: a concurrent take may release the set's buffer.
				e.Image = slices.Clone(e.Image)
				out = append(out, e)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b PrefetchedBlock) int { return cmp.Compare(a.Rank, b.Rank) })
	return out
}

// DropPrefetched releases every prefetched entry of f (File.Unregister
// does; so may an owner that no longer wants them).
func (f *File) DropPrefetched() {
	c := f.c
	c.images.mu.Lock()
	defer c.images.mu.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return
	}
	var freed int64
	for len(st.sets) > 0 {
		freed += c.images.releaseSetLocked(st, st.sets[0])
	}
	c.budget.charge(-freed)
	if _, ok := c.registered.files.Get(f.serial); !ok {
		delete(c.images.mu.byFile, f.serial)
	}
}

// PrefetchedStats reports f's prefetched-entry counters.
func (f *File) PrefetchedStats() PrefetchedStats {
	f.c.images.mu.Lock()
	defer f.c.images.mu.Unlock()
	st := f.imgLocked(false)
	if st == nil {
		return PrefetchedStats{}
	}
	out := PrefetchedStats{Loaded: st.loaded, Skipped: st.skipped, Taken: st.taken, Evicted: st.evicted, Stale: st.stale}
	for _, s := range st.sets {
		out.Bytes += s.charge
		out.Entries += s.left
	}
	return out
}

// evict drops prefetched sets, oldest first, until need bytes are freed
// or none is left; it returns the bytes freed, which the caller uncharges
// from the budget. Called first by eviction.
func (m *imageEntries) evict(need int64) int64 {
	if m.bytes.Load() == 0 {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var freed int64
	for _, st := range m.mu.byFile {
		for freed < need && len(st.sets) > 0 {
			s := st.sets[0]
			st.evicted += int64(s.left)
			freed += m.releaseSetLocked(st, s)
		}
		if freed >= need {
			break
		}
	}
	return freed
}

// HotChunk is one clean cached chunk of a file in its encoded form, for a
// cache image.
type HotChunk struct {
	// Rank is the chunk's place in the replacement order, 0 the hottest.
	Rank uint32
	Loc  layout.Location
	// Image is the encoded chunk, valid only during the callback.
	Image []byte
}

// HotChunks calls fn for f's clean resident chunks that are stored in the
// file, hottest first by the replacement policy's order, until fn returns
// false. Each is encoded again (Layout.Encode) under its latch; a chunk
// whose new encoding is not the stored one (its checksum differs from the
// location's, as a non-deterministic filter could make it) is left out, so
// an image never carries bytes the index does not name; so is a chunk the
// layout cannot encode at all (a read-only view of another dataset's
// stored chunks, whose Encode refuses): an image is a hint, and no chunk
// in it may fail the commit that writes it. Busy chunks (being flushed,
// loaded or evicted) are left out. The only error is ctx's. Safe for
// concurrent use; meant for a file being closed, after its last flush.
func (f *File) HotChunks(ctx context.Context, fn func(HotChunk) bool) error {
	c := f.c
	var order []*entry
	c.mu.Lock()
	c.mu.drainLocked(&c.access)
	c.mu.pol.Nominate(func(e *entry) verdict {
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
		hc, ok := encodeClean(e)
		c.budget.unpin(e)
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
	enc layout.Encoded
}

// encodeClean encodes a pinned entry if it is clean, stored, and encodes
// to the stored image.
func encodeClean(e *entry) (hotEncoded, bool) {
	if !e.flushMu.TryLock() {
		return hotEncoded{}, false // a flusher has it
	}
	defer e.flushMu.Unlock()
	e.latch.RLock()
	defer e.latch.RUnlock()
	loc := e.loc
	if e.dirty.Load() || !loc.Exists() {
		return hotEncoded{}, false
	}
	enc, err := e.ds.lay().l.Encode(e.coord, e.chunk)
	if err != nil {
		return hotEncoded{}, false // not reproducible: not imaged (HotChunks)
	}
	if int64(len(enc.Image)) != loc.Size || enc.Sum != loc.Sum {
		releaseImage(enc)
		return hotEncoded{}, false
	}
	return hotEncoded{HotChunk: HotChunk{Loc: loc, Image: enc.Image}, enc: enc}, true
}
