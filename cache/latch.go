package cache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/scc-dev/scc/lockfree"
)

// Light readers: a cache hit that reads pins the entry and copies out of
// the chunk without touching the latch.
//
// Why: the latch is a sync.RWMutex, and RLock/RUnlock are two atomic adds on
// a word every reader of the chunk shares. With the pin's CAS and the
// unpin that made four contended RMWs per read of a hot chunk, and a
// chunk read by several goroutines at once got slower with each goroutine
// added. A light reader does the pin and the unpin only: the pin word is
// the only shared word it writes.
//
// How writers stay exclusive: the pin word (entry.word) carries, above the
// state byte, a writer bit and a count of light readers:
//
//	bits  0-31  pins (heavy: flushers, evictor candidates, writers, readers
//	            that fell back to the latch)
//	bits 32-39  state
//	bit  40     writer: someone holds the latch exclusively to change the
//	            chunk (lockChunk)
//	bits 41-56  light readers
//
// A light reader pins with one CAS that succeeds only if the entry is
// resident and the writer bit is clear; it then reads e.chunk and runs
// Scatter, and unpins with one atomic add. A goroutine that changes the
// chunk (Gather, Trim, Condense) takes the latch exclusively, which keeps
// out other writers and latch readers (Encode), then sets the writer bit —
// from then on no light reader can pin — and waits for the light readers
// already in to leave. Both sides update the same word, so its
// modification order decides: a reader whose CAS came before the writer's
// Or is counted, one that came after sees the bit and falls back to a
// heavy pin and the latch, where it waits for the writer like before.
//
// The writer waits by yielding: light readers hold their pin only for one
// Scatter, a bounded copy that never blocks, and no light reader waits for
// anything while pinned, so the wait is short and cannot deadlock.
//
// INVARIANT: light readers exist only while the state is resident; they
// count as pins everywhere pins matter, because every "idle" test compares
// the whole word with packWord(stateResident, 0) (tryStartEvict,
// evictableNow), so a light-read entry is never evicted and its chunk is
// never released under the reader. settle() rebuilds the word from the
// state and heavy pins; it runs only on loading or evicting entries, which
// have no light readers and no writer bit.
const (
	writerBit  = 1 << 40
	lightShift = 41
	lightOne   = 1 << lightShift
	lightMask  = (1<<16 - 1) << lightShift
)

// tryPinRead pins a resident entry for a light read; false if it is not
// resident, a writer is changing it, or the light count is saturated.
func (e *entry) tryPinRead() bool {
	for {
		w := e.word.Load()
		if stateOf(w) != stateResident || w&writerBit != 0 || w&lightMask == lightMask {
			return false
		}
		if e.word.CompareAndSwap(w, w+lightOne) {
			return true
		}
	}
}

// unpinRead releases a light pin.
func (e *entry) unpinRead() { e.word.Add(^uint64(lightOne - 1)) }

// lockChunk takes the latch exclusively and waits out light readers and
// slot readers (below), for a change of e.chunk or its contents. The
// caller holds a pin or owns the entry (loading or evicting).
func (e *entry) lockChunk() {
	e.latch.Lock()
	if e.word.Or(writerBit)&lightMask != 0 {
		for e.word.Load()&lightMask != 0 {
			runtime.Gosched()
		}
	}
	e.waitSlotReaders()
}

// Slot readers: a read hit that writes no line of the entry.
//
// Why: a light pin is still two atomic read-modify-writes of the entry's
// word, and when goroutines on several cores read the same chunk (a hot
// chunk; the resident-read benchmark, where every read hits one
// chunk) that word's cache line moves between the cores twice per read.
// A slot reader instead publishes the entry in a read slot of its own P
// (a line no other core writes while it is held) and only loads the
// entry's word, so the entry's line stays shared by every reading core.
//
// Protocol (the hazard-pointer handshake): the reader stores e in a free
// slot, then loads e.word and proceeds only if e is resident with the
// writer bit clear; otherwise it clears the slot and falls back to a light
// pin. Whoever is about to change or release e's chunk first changes the
// word (lockChunk sets the writer bit; tryStartEvict moves resident to
// evicting), then waits until no slot holds e (waitOut). Go's atomics are
// sequentially consistent, so of a reader's store-then-load and a
// writer's change-then-scan at least one sees the other: either the reader
// sees the change and backs off, or the writer sees the slot and waits for
// the reader's clearing store, which orders the reader's Scatter before
// anything the writer does next (also for the race detector).
//
// Slot readers hold their slot only for one Scatter, a bounded copy that
// never blocks, and wait for nothing while holding it, so waitOut's
// yielding loop is short and cannot deadlock. Entries are never reused for
// another chunk (each load makes a new one), so a slot naming e can only
// mean e.
//
// Unlike light readers, slot readers do not keep an entry out of evicting:
// eviction moves the entry to evicting at once and then waits for the
// copy in flight, which the reader finishes.
//
// Accounting in the slot (the counters folded into the lossy access
// buffers). While a goroutine holds a slot, the slot's other
// fields are its own: the slot's e word is the lock, taken by the CAS
// from nil and released by the Store of nil, which order every holder's
// plain accesses for the next holder (and the race detector). A slot
// reader therefore counts its hit (the cache's and the dataset's) and
// appends its access record with plain writes to a line no other core
// writes, instead of three atomic read-modify-writes (two counter
// stripes, the access buffer's lock and unlock). Whoever needs the
// counts or the records takes the slot the same way, with slotHeld in
// place of an entry (never in any table, so waitOut never waits for it
// and no reader mistakes it for its entry): foldSlots moves the counts
// into the shared counters before anything reads them, readSlots.drain swaps
// the record array for its spare as lockfree.Buffer.Drain does. Holders
// never wait while they hold a slot, so taking one means waiting at most
// for one Scatter.
//
// Departure from DESIGN.md, which puts the access buffers in package
// lockfree: a read hit's records live in its read slot, because the slot is
// what makes them free (its owner writes them plainly). lockfree.Buffer
// still records the hits that take a pin (writes, and reads that found
// their P's slots taken).
type readSlots struct {
	slots []readSlot
	mask  int
	// Every hit reads slots and mask; the drainer writes what follows.
	_ [64 - 32]byte
	// drainMu serializes readSlots.drain: it guards every slot's spare.
	// Lock order: the table at Cache.mu.
	drainMu sync.Mutex
	// waits counts the yields of drains and folds that found a slot held
	// by a reader and waited for it (tests).
	waits atomic.Int64
}

// readSlot is one published entry and its holder's counts and records,
// alone on its cache lines.
type readSlot struct {
	// e is the published entry's address (slotAddr), 0 when the slot is
	// free.
	e atomic.Uintptr
	// Owned by the slot's holder (see above).
	hits   int64    // cache hits not yet in Cache.stats.hot
	seen   int64    // hits ever counted here (never folded): paces adaptive epochs
	ds     *Dataset // the dataset dsHits counts for
	dsHits int64    // ds's hits not yet in its counters
	drops  int64    // records dropped (rec full), not yet in Cache.slotDrops
	rec    []*entry // access records; cap accessStripe once made
	// spare is the array readSlots.drain swaps in for rec; guarded by
	// readSlots.drainMu.
	spare []*entry
	// pending remembers entries recorded in rec since the last drain.
	pending pendingFilter
	_       [384 - 96 - 8*pendingWays]byte
}

// pendingFilter deduplicates access records: a hit on an entry whose
// record still waits in the same slot's rec adds none (a hot chunk read
// again and again costs one record per replay, as before; the record
// moves it to the front just the same).
//
// Why in the slot and not a flag on the entry (the queued flag it
// replaced): a flag is a write to the entry's first line by the reader on
// every recorded hit and another by the replayer, so that line, which
// every hit reads, was written from both cores whenever goroutines on
// two cores recorded hits (uniform keys: most hits). The filter is
// the slot's own memory. It is direct-mapped and small, so it forgets:
// two entries that map to one place both get recorded, which only costs
// a second record (one more move to the front, one more count for the
// frequency policies, as two goroutines racing on the flag did).
type pendingFilter [pendingWays]*entry

const (
	pendingBits = 5
	pendingWays = 1 << pendingBits
)

// add reports whether e needs a record: false when e is remembered as
// pending; otherwise it remembers e.
func (f *pendingFilter) add(e *entry) bool {
	p := &f[pendingWay(e)]
	if *p == e {
		return false
	}
	*p = e
	return true
}

// forget drops e (its record was dropped, not kept).
func (f *pendingFilter) forget(e *entry) {
	if p := &f[pendingWay(e)]; *p == e {
		*p = nil
	}
}

// pendingWay is e's place in a pendingFilter: its address, hashed (entries
// are 320 bytes apart, so the low bits alone would use few places).
func pendingWay(e *entry) uint64 {
	return uint64(uintptr(unsafe.Pointer(e))) * 0x9e3779b97f4a7c15 >> (64 - pendingBits)
}

// slotHeld marks a slot held for its accounting rather than for a read.
var slotHeld = new(entry)

// slotAddr is what a read slot holds for e: its address, not a pointer.
//
// Why: the pointer atomics (atomic.Pointer's CompareAndSwap and Store)
// are calls into the runtime, for the GC's write barrier, where the
// integer ones are single instructions; a slot's CAS and release were two
// such calls on every read hit. Why it is safe: the goroutine that
// publishes e keeps its own pointer to e until it has cleared the slot,
// so e cannot be freed, nor its address reused by another object, while
// a slot holds it; everyone else only compares a slot's word with the
// address of an entry they hold themselves. (slotHeld is never freed.)
func slotAddr(e *entry) uintptr { return uintptr(unsafe.Pointer(e)) }

// release frees the held slot s (the Store that ends a hold, read or
// accounting).
func (s *readSlot) release() { s.e.Store(0) }

// slotsPerP is the slots of one P: a goroutine preempted while holding its
// slot leaves the next goroutine on that P another one.
const slotsPerP = 4

func newReadSlots() readSlots {
	n := slotsPerP * lockfree.Stripes()
	return readSlots{slots: make([]readSlot, n), mask: n - 1}
}

// enter publishes e for a read and returns its slot, held, or nil when e is
// not resident, a writer is changing it, or the P's slots are all taken
// (the caller falls back to a light pin). The caller releases the slot
// with s.release().
func (rs *readSlots) enter(e *entry) *readSlot {
	if !e.slotRead().Load() {
		e.slotRead().Store(true) // before the slot: see waitSlotReaders
	}
	base := lockfree.ProcHint() * slotsPerP
	for k := 0; k < slotsPerP; k++ {
		s := &rs.slots[(base+k)&rs.mask]
		if s.e.Load() != 0 || !s.e.CompareAndSwap(0, slotAddr(e)) {
			continue
		}
		if w := e.word.Load(); stateOf(w) == stateResident && w&writerBit == 0 {
			return s
		}
		s.release()
		return nil
	}
	return nil
}

// hold takes slot s for its accounting, waiting for a reader that holds it
// (one Scatter at most). It looks before it writes: a failed CAS would
// take the reader's line away from it on every try.
func (s *readSlot) hold(rs *readSlots) {
	for !s.tryHold() {
		rs.waits.Add(1)
		runtime.Gosched()
	}
}

// tryHold takes slot s for its accounting if no reader holds it.
func (s *readSlot) tryHold() bool {
	return s.e.Load() == 0 && s.e.CompareAndSwap(0, slotAddr(slotHeld))
}

// holdSoon takes slot s if its reader lets it go within a few looks (a
// reader holds it for one Scatter, then runs the rest of its request
// without it), and reports whether it did. It never yields.
func (s *readSlot) holdSoon() bool {
	for range holdLooks {
		if s.tryHold() {
			return true
		}
	}
	return false
}

// holdLooks bounds holdSoon's looks at a held slot: each is a load of the
// reader's line, cheap next to the wait of a yield.
const holdLooks = 64

// note records an access to e in the held slot unless its record waits
// there already (pendingFilter), and reports whether the record brought
// the slot to the replayer's mark (record). A full slot (a replayer that
// has not kept up: hits on every core, none spare) counts the drop and
// nothing else: the filter's hashing and its two stores, which would
// remember e only to forget it again, are work for a record that is not
// kept, and they made the filter forget the entry e's place held.
//
// Small enough to inline: a hit whose record waits (a hot chunk read
// again and again) costs no call; the rest is noteNew.
func (s *readSlot) note(e *entry) (ready bool) {
	if s.pending[pendingWay(e)] == e {
		return false // its record waits: nothing to add, nothing dropped
	}
	return s.noteNew(e)
}

// noteNew is note for an entry not remembered as pending.
func (s *readSlot) noteNew(e *entry) (ready bool) {
	p := &s.pending[pendingWay(e)] // e's place in the filter
	if s.rec != nil && len(s.rec) == cap(s.rec) {
		s.drops++
		return false
	}
	*p = e
	kept, ready := s.record(e)
	if !kept {
		s.pending.forget(e) // dropped: let it be recorded again
	}
	return ready
}

// record appends e to the held slot's records; ready is true for the
// record that brought them to half their capacity (the replayer's mark).
// A full slot drops the record and reports kept false.
func (s *readSlot) record(e *entry) (kept, ready bool) {
	if s.rec == nil {
		s.rec = make([]*entry, 0, accessStripe)
	}
	if len(s.rec) == cap(s.rec) {
		s.drops++
		return false, false
	}
	s.rec = append(s.rec, e)
	return true, len(s.rec) == max(cap(s.rec)/2, 1)
}

// countDataset counts a hit on d in the held slot, first folding the
// counts of the dataset it counted for before, if another.
func (s *readSlot) countDataset(d *Dataset) {
	if s.ds != d {
		s.foldDataset()
		s.ds = d
	}
	s.dsHits++
}

// foldDataset moves the held slot's dataset hits into the dataset's
// counters.
func (s *readSlot) foldDataset() {
	if s.ds != nil && s.dsHits != 0 {
		s.ds.counters().AddAt(0, dsHits, s.dsHits)
	}
	s.ds, s.dsHits = nil, 0
}

// foldSlots moves every slot's counts into the shared counters, so that a
// read of those that follows includes every hit counted before the call.
func (a *accessRecording) foldSlots(st *counters) {
	rs := &a.slots
	for i := range rs.slots {
		s := &rs.slots[i]
		s.hold(rs)
		if s.hits != 0 {
			st.hot.AddAt(0, hotHits, s.hits)
			s.hits = 0
		}
		s.foldDataset()
		if s.drops != 0 {
			a.slotDrops.Add(s.drops)
			s.drops = 0
		}
		s.release()
	}
}

// drain calls f with every slot's records and empties them. With wait it
// waits for a reader holding a slot (one Scatter) rather than pass it by:
// the replayer's sleep (replay.go) relies on a drain taking every record
// appended before it, or a reader that passed its mark while the
// replayer polled would never wake it. Without, a slot whose reader
// keeps it past a few looks (holdSoon) is passed by, and skipped reports
// it: the replayer's polls drain that way, so that a reader that hits
// without pause is never made to hand its slot's line to a drainer that
// spins on it (at one goroutine that spin took a core and slowed every
// hit); the poll after takes the records. f must not keep the slice.
func (rs *readSlots) drain(f func([]*entry), wait bool) (skipped bool) {
	rs.drainMu.Lock()
	defer rs.drainMu.Unlock()
	for i := range rs.slots {
		s := &rs.slots[i]
		if wait {
			s.hold(rs)
		} else if !s.holdSoon() {
			skipped = true
			continue
		}
		batch := s.rec
		if len(batch) == 0 {
			s.release()
			continue
		}
		if s.spare == nil {
			s.spare = make([]*entry, 0, cap(batch)) // once per slot
		}
		s.rec = s.spare
		clear(s.pending[:]) // what it remembered is in batch now
		s.release()
		f(batch)
		clear(batch)
		s.spare = batch[:0]
	}
	return skipped
}

// waitSlotReaders returns once no slot reader holds e. The caller has
// already made the change (writer bit, evicting) that keeps new slot
// readers out. An entry no slot reader ever entered skips the scan of every
// slot (a cost that grows with GOMAXPROCS, for every write hit): a reader
// sets slotRead before it publishes its slot and loads the word after, the
// writer changes the word before it loads slotRead, so a writer that finds
// slotRead clear is one whose change that reader will see.
func (e *entry) waitSlotReaders() {
	if e.slotRead().Load() {
		e.ds.c.access.slots.waitOut(e)
	}
}

// waitOut returns once no slot reader holds e. The caller has already made
// the change (writer bit, evicting) that keeps new slot readers out.
func (rs *readSlots) waitOut(e *entry) {
	for i := range rs.slots {
		for rs.slots[i].e.Load() == slotAddr(e) {
			runtime.Gosched()
		}
	}
}

// unlockChunk ends lockChunk.
func (e *entry) unlockChunk() {
	e.word.And(^uint64(writerBit))
	e.latch.Unlock()
}
