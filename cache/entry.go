package cache

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/lockfree"
	"github.com/scc-dev/scc/vfd"
)

// Waiting rules. Several paths wait for another goroutine (for space, for
// an entry to settle, for a pinned entry to be released). They cannot
// deadlock because of these rules:
//
//   - Pins are held only for bounded work: applying pieces, or a flush's
//     encode/write/sync. Nobody waits for space while holding a pin.
//   - A request waits for space (reserve) holding only entries it claimed
//     in the loading state, which carry no bytes; whoever waits for those
//     holds nothing itself.
//   - Entries in the evicting state are settled by work that waits on no
//     other entry (an evictor's write, SetExtent's Lookup/Delete of that
//     one entry, a drop). Flushers may therefore wait for evicting entries
//     while keeping their own pins.
//   - Flushers take entries' flushMu with TryLock and come back to busy
//     ones one at a time, holding no other flushMu.
//   - Slot readers (latch.go) hold their read slot for one Scatter and
//     the hit's counters, and meanwhile take only leaf locks (a first
//     use of a prefetched chunk updates the dataset's sequence detector)
//     and wait for nothing else, so tryStartEvict and lockChunk may wait
//     for them while holding Cache.mu (evictors nominate under it) or a
//     pin.
//   - Everything that can make room wakes space waiters: released bytes,
//     unpins, evictions that were reverted. A waiter registers itself
//     (Cache.budget.spaceWaiters) and takes the wake-up channel before it looks a
//     last time, so no wake-up is lost (TestUnpinWakesSpaceWaiter).
//
// entryState is where an entry is in its life (SCC design §2.2, extended with
// the transient states the multi-threaded cache needs, SCC design §5.1).
//
//	loading ──► resident ◄──► evicting ──► dead
//	   └──────────────────────────────────► dead   (load failed or bypass)
//
// Only the goroutine that created a loading entry moves it out of loading;
// only the goroutine that moved an entry to evicting moves it on. Waiters
// for either transition wait on settled and then look the key up again.
type entryState uint8

const (
	stateLoading entryState = iota
	stateResident
	stateEvicting
	stateDead
)

// entry is one chunk in the cache (SCC design §2.2 H5SC_chunk_t).
type entry struct {
	// The fields a hit reads or writes come first, so that they share the
	// entry's first cache line (the allocation's size class, 320 bytes,
	// is a multiple of 64, so the struct starts on a line): with 4096 or
	// more resident entries a hit's entry is rarely in the core's cache,
	// and every further line it touches is another miss (once the
	// pin word, the chunk and the prefetched flag were on three lines).
	// Policy and bookkeeping fields follow, away from the pin word that
	// concurrent hits write.

	// word packs the entry's state (bits 32-39) and its pin count (bits
	// 0-31) so that pinning a resident entry is one CAS, without a lock;
	// the bits above hold the light readers (latch.go).
	// INVARIANT: an entry moves to evicting only when pins == 0 (one CAS
	// from resident|0), and is pinned only while resident, so a pinned
	// entry is never evicted.
	word atomic.Uint64
	ds   *Dataset
	// flat is the first byte of the chunk's buffer when its layout keeps
	// one (layout.FlatScatterer), nil otherwise, and flatLen its length: a
	// read hit copies out of it without loading the chunk's header, a
	// line of its own elsewhere (the chunk's struct). Set with chunk
	// (setChunk), under the same rules.
	flat unsafe.Pointer
	// flags holds the entry's one-bit states (flagPartial,
	// flagPrefetched, flagSlotRead), read and written through the
	// accessors partial(), prefetched() and slotRead() like atomic.Bools:
	// one word instead of three keeps them and key.k on the first line.
	flags   atomic.Uint32
	flatLen uint32

	// key names the chunk; its short form (key.k) is on the first line,
	// where the chunk table compares it before the hit reads word
	// (entrytable.go).
	key chunkKey
	// chunk is the decoded chunk (cache memory format). Written under latch
	// exclusive (or before the entry becomes resident), through setChunk.
	// A hit reads it only for a layout without flat buffers: it starts
	// the second line.
	chunk layout.Chunk
	coord layout.Coord

	mu struct {
		sync.Mutex // per-entry; taken only on state transitions and by waiters
		// settled is closed when the entry leaves loading or evicting. It
		// is made by the first waiter (most loads and evictions have none,
		// and a channel per chunk would be garbage per chunk), and taken
		// and closed by settle. Both happen under mu together with reading
		// or changing the state bits of word, so a waiter holding mu gets
		// the channel that belongs to the state it saw.
		settled chan struct{}
	}

	// latch serializes the layout callbacks on this chunk (package layout
	// contract): Scatter and Encode take it shared; Gather and Trim take it
	// exclusive (through lockChunk, which also keeps out the light readers
	// that run Scatter under a light pin instead of the latch: latch.go).
	// Held only while pinned or evicting.
	latch sync.RWMutex
	// encoded is the pre-encoded disk image (SCC internal API "Data Formats": chunks
	// near eviction are encoded early; SCC requirements §2.2 item 6), filled by the
	// background pre-encoder (background.go). Its bytes are part of size and
	// of Cache.background.preEncode.bytes. Set and cleared under latch exclusive (or by the
	// goroutine that owns an evicting entry); read under latch shared.
	// INVARIANT: a non-nil image was encoded from the chunk as it is now:
	// every modification drops it (modifiedLocked) before the version bump.
	encoded  atomic.Pointer[preImage]
	prefSize int64 // bytes added to Cache.background.prefetch.bytes; written before prefetched is set, read by whoever clears it

	// flushMu makes encode→Insert→write→mark-clean of this entry exclusive
	// between flushers; loc is guarded by it (or by the entry being loading
	// or evicting, when no flusher can hold it).
	flushMu sync.Mutex
	loc     layout.Location

	size    atomic.Int64  // bytes charged to the cache for this entry
	dirty   atomic.Bool   // differs from its stored image
	version atomic.Uint64 // bumped by every modification; lets a flush detect concurrent writes
	bypass  bool          // set at creation: served and dropped, never resident
	// created is set when the chunk was made in memory rather than loaded
	// (materialize), and written counts the bytes writes have put into it
	// since (completed.go). Guarded by latch exclusive, or by owning
	// the entry (loading, evicting).
	created bool
	// linked: on its dataset's member list and known to the policy.
	// Guarded by Cache.mu like the fields below; kept here, in the
	// padding after created, so that the entry stays in its size class.
	linked  bool
	written int64

	// Fields below are guarded by Cache.mu (the policy lock).
	mnext, mprev *entry // dataset member list
	pnext, pprev *entry // policy order list
	counter      int32  // policy counter (SCC design §2.2 chunk_counter)
	visited      bool   // SIEVE visited bit
	// age is adaptive sizing's record of the epoch of the last access
	// (adaptive_age.go).
	age ageStamp
}

// setChunk makes ch, made or decoded by l, the entry's chunk (nil: none),
// and keeps its flat buffer's address if l has one (layout.FlatScatterer).
// The caller may change the chunk: it owns the entry (loading, evicting)
// or holds the latch exclusively (lockChunk).
func (e *entry) setChunk(l layout.Layout, ch layout.Chunk) {
	e.chunk = ch
	e.flat, e.flatLen = nil, 0
	if ch == nil {
		return
	}
	if fs, ok := l.(layout.FlatScatterer); ok {
		if b := fs.FlatBytes(ch); len(b) > 0 && len(b) <= math.MaxUint32 {
			e.flat, e.flatLen = unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))
		}
	}
}

// scatter runs the layout's Scatter of piece p out of the entry's chunk,
// through the flat buffer when the entry has one (setChunk) and box's
// layout takes it. The caller holds the chunk as Scatter requires.
func (e *entry) scatter(box *layoutBox, p layout.Piece) error {
	if e.flat != nil && box.flat != nil {
		return box.flat.ScatterFlat(unsafe.Slice((*byte)(e.flat), e.flatLen), p)
	}
	return box.l.Scatter(e.chunk, p)
}

// Bits of entry.flags.
const (
	// flagPartial: the last access was a partial read/write (SCC design
	// §2.2 partial_io).
	flagPartial uint32 = 1 << iota
	// flagPrefetched: loaded by the prefetcher (prefetch.go) and not used
	// yet; its bytes are counted in Cache.background.prefetch.bytes until the first use
	// or removal clears the flag.
	flagPrefetched
	// flagSlotRead is set, once, by the first slot reader (latch.go) and
	// never cleared: a writer or evictor of an entry no slot reader ever
	// held skips the scan of the read slots.
	flagSlotRead
	// flagComplete: writes completed the chunk and it is due to be written
	// back and dropped (completed.go).
	flagComplete
)

// flagBit is one bit of an entry's flags, used like an atomic.Bool.
type flagBit struct {
	w   *atomic.Uint32
	bit uint32
}

func (e *entry) partial() flagBit    { return flagBit{&e.flags, flagPartial} }
func (e *entry) prefetched() flagBit { return flagBit{&e.flags, flagPrefetched} }
func (e *entry) slotRead() flagBit   { return flagBit{&e.flags, flagSlotRead} }
func (e *entry) complete() flagBit   { return flagBit{&e.flags, flagComplete} }

func (f flagBit) Load() bool { return f.w.Load()&f.bit != 0 }

func (f flagBit) Store(v bool) {
	if v {
		f.w.Or(f.bit)
	} else {
		f.w.And(^f.bit)
	}
}

// Swap sets the bit to v and returns its previous value.
func (f flagBit) Swap(v bool) bool {
	if v {
		return f.w.Or(f.bit)&f.bit != 0
	}
	return f.w.And(^f.bit)&f.bit != 0
}

// CompareAndSwap sets the bit to new if it is old.
func (f flagBit) CompareAndSwap(old, new bool) bool {
	if old == new {
		return f.Load() == old
	}
	return f.Swap(new) == old // a bit that was new already is left as it was
}

// preImage is a pre-encoded disk image and the chunk version it encodes.
type preImage struct {
	enc layout.Encoded
	ver uint64
	// refs counts its holders: the entry while the image is kept, and each
	// writeBack writing it. A modification can drop the image from the
	// entry while a flush's vector write still reads it; the buffer goes
	// back to the pool only when the last holder lets go (internal/bufpool).
	refs atomic.Int32
}

func newPreImage(enc layout.Encoded, ver uint64) *preImage {
	p := &preImage{enc: enc, ver: ver}
	p.refs.Store(1)
	return p
}

// bytes is what the image costs: a pooled buffer's whole capacity.
func (p *preImage) bytes() int64 {
	if p.enc.Pooled {
		return int64(cap(p.enc.Image))
	}
	return int64(len(p.enc.Image))
}

// release drops one hold on p.
func (p *preImage) release() {
	if p.refs.Add(-1) == 0 {
		releaseImage(p.enc)
	}
}

const pinMask = 1<<32 - 1

func packWord(st entryState, pins uint64) uint64 { return uint64(st)<<32 | pins }

// stateOf masks off the light-reader bits above the state (latch.go).
func stateOf(w uint64) entryState { return entryState(w >> 32 & 0xff) }

// initLoading prepares a new entry, before it is published, as loading.
func (e *entry) initLoading() {
	e.word.Store(packWord(stateLoading, 0))
}

// settledLocked returns the channel closed when e leaves its current
// (loading or evicting) state, making it if no one waits yet. Caller holds
// e.mu.
func (e *entry) settledLocked() chan struct{} {
	if e.mu.settled == nil {
		e.mu.settled = make(chan struct{})
	}
	return e.mu.settled
}

// pin makes e usable by the caller if it is resident; otherwise it returns
// the channel to wait on (nil if the entry is dead and gone).
func (e *entry) pin() (ok bool, wait chan struct{}) {
	for {
		w := e.word.Load()
		if stateOf(w) == stateResident {
			if e.word.CompareAndSwap(w, w+1) {
				return true, nil
			}
			continue
		}
		e.mu.Lock()
		st := stateOf(e.word.Load())
		if st == stateResident {
			e.mu.Unlock() // settled meanwhile: pin it
			continue
		}
		var ch chan struct{}
		if st != stateDead {
			ch = e.settledLocked()
		}
		e.mu.Unlock()
		return false, ch
	}
}

// tryPin pins e if it is resident, with CAS only (the hit path); it never
// takes e.mu and reports false for any other state.
func (e *entry) tryPin() bool {
	for {
		w := e.word.Load()
		if stateOf(w) != stateResident || w&pinMask == pinMask {
			return false
		}
		if e.word.CompareAndSwap(w, w+1) {
			return true
		}
	}
}

func (e *entry) unpin() {
	w := e.word.Add(^uint64(0))
	if invariants && (w+1)&pinMask == 0 {
		broken("unpin of entry %v with no pins (state %d)", e.coord, stateOf(w+1))
	}
}

// tryStartEvict moves an idle resident entry to evicting, and returns once
// no slot reader (latch.go) still copies out of its chunk.
func (e *entry) tryStartEvict() bool {
	if e.word.Load() != packWord(stateResident, 0) {
		return false // fast refusal, no lock
	}
	e.mu.Lock()
	ok := e.word.CompareAndSwap(packWord(stateResident, 0), packWord(stateEvicting, 0))
	e.mu.Unlock()
	if ok {
		e.waitSlotReaders()
	}
	return ok
}

// settle moves e from loading or evicting to st and wakes waiters. With
// pinned it also pins e for the caller (only when st is resident).
func (e *entry) settle(st entryState, pinned bool) {
	e.mu.Lock()
	for {
		w := e.word.Load()
		if invariants && stateOf(w) != stateLoading && stateOf(w) != stateEvicting {
			e.mu.Unlock()
			broken("settle of entry %v from state %d, not loading or evicting", e.coord, stateOf(w))
		}
		pins := w & pinMask
		if pinned {
			pins++
		}
		if e.word.CompareAndSwap(w, packWord(st, pins)) {
			break
		}
	}
	ch := e.mu.settled
	e.mu.settled = nil
	e.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

func (e *entry) state() entryState { return stateOf(e.word.Load()) }

// waitInfo returns the state and, for loading or evicting, the channel
// closed when it settles.
func (e *entry) waitInfo() (entryState, chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.state()
	if st == stateLoading || st == stateEvicting {
		return st, e.settledLocked()
	}
	return st, nil
}

// Dataset is a registered dataset's header (SCC design §2.3
// H5SC_dset_header_t). It stays in its file's registry after Unregister
// while it still has cached chunks, so that registering the same id again
// re-attaches them (warm reopen, SCC requirements §4.8).
type Dataset struct {
	c      *Cache
	file   *File
	id     uint64
	serial uint64     // identity in chunk keys; unique in the Cache
	keys   serialKeys // serial's part of its chunks' short keys (key.go)

	layout atomic.Pointer[layoutBox] // the current Layout and its chunk shape
	min    atomic.Int64              // minimum reservation (min_dset_size)
	size   atomic.Int64              // curr_dset_size: bytes charged to its entries
	chunks atomic.Int64              // its entries in the chunk table
	// hot holds the hit and miss counts (dsHits, dsMisses), written on
	// every request: striped per P so that concurrent hits on one dataset
	// do not share a line; made on first use (Dataset.counters), so an
	// idle open dataset does not pay a stripe per P.
	hot atomic.Pointer[lockfree.Counters]
	// seq detects sequential reads for prefetch (prefetch.go).
	seq seqState
	// noPrefetch turns the prefetcher off for this dataset alone
	// (SetPrefetch); a registration resets it.
	noPrefetch atomic.Bool
	// relocs counts Insert and Delete calls the cache made for this
	// dataset: a location looked up before a claim is re-read when it moved.
	relocs atomic.Uint64
	// registered is false after Unregister (chunks kept for a warm reopen).
	registered atomic.Bool

	// The fields below change with every batch of access records (the
	// two-stage LRU's lists); the padding keeps them off the line of
	// registered and relocs, which every hit reads.
	_ [64]byte

	// Fields below are guarded by Cache.mu.
	members      *entry // head of the member list (every linked entry, any order)
	dnext, dprev *Dataset
	onList       bool      // on the two-stage LRU's dataset list
	exhausted    bool      // SCC design §2.3 evict_exhausted: sits out the current round
	lru          entryList // two-stage LRU: this dataset's chunk LRU (head = MRU)
}

// layoutBox lets the layout and its chunk shape be swapped atomically on a
// warm reopen.
type layoutBox struct {
	l    layout.Layout
	dims []uint64
	// flat is l as a layout.FlatScatterer, nil if it is not one.
	flat layout.FlatScatterer
}

func newLayoutBox(l layout.Layout, dims []uint64) *layoutBox {
	fs, _ := l.(layout.FlatScatterer)
	return &layoutBox{l: l, dims: dims, flat: fs}
}

func (d *Dataset) lay() *layoutBox { return d.layout.Load() }

// File is one file registered with a Cache (SCC requirements §4.4).
type File struct {
	c      *Cache
	serial uint64
	drv    vfd.Driver

	// mu is never held across I/O or while waiting for chunks: Unregister
	// marks its drop with unreg and works unlocked.
	// Lock order: the table at Cache.mu.
	mu struct {
		sync.Mutex      // serializes registration changes of the file's datasets
		closed     bool // set by Unregister
		// unreg is non-nil while Unregister or Discard drops the file's
		// chunks, and closed when it ends: registrations fail meanwhile and
		// a second Unregister waits on it.
		unreg chan struct{}
	}
	// pf counts prefetches running on the file, so that unregistering
	// waits for them instead of finding their chunks in use (prefetch.go).
	pf struct {
		sync.Mutex
		n       int
		closing bool       // File.Unregister began: no new prefetch
		cond    *sync.Cond // created by the first waiter
	}
	// shed is the file's metadata shedder (external.go), nil if none.
	shed atomic.Pointer[func()]
	// datasets maps dataset id → header. Registrations are long lived and
	// removals rare (file unregister, expiry of a detached dataset), which is
	// the usage haxmap handles correctly (see package lockfree).
	datasets registry
}
