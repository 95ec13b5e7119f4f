package cache

import (
	"runtime"
	"sync/atomic"

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
// chunk; issue 10's resident-read benchmark, where every read hits one
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
type readSlots struct {
	slots []readSlot
	mask  int
}

// readSlot is one published entry, alone on its cache line.
type readSlot struct {
	e atomic.Pointer[entry]
	_ [56]byte
}

// slotsPerP is the slots of one P: a goroutine preempted while holding its
// slot leaves the next goroutine on that P another one.
const slotsPerP = 4

func newReadSlots() readSlots {
	n := slotsPerP * lockfree.Stripes()
	return readSlots{slots: make([]readSlot, n), mask: n - 1}
}

// enter publishes e for a read and returns the slot to clear when done, or
// nil when e is not resident, a writer is changing it, or the P's slots
// are all taken (the caller falls back to a light pin).
func (rs *readSlots) enter(e *entry) *atomic.Pointer[entry] {
	if !e.slotRead.Load() {
		e.slotRead.Store(true) // before the slot: see waitSlotReaders
	}
	base := lockfree.ProcHint() * slotsPerP
	for k := 0; k < slotsPerP; k++ {
		s := &rs.slots[(base+k)&rs.mask].e
		if s.Load() != nil || !s.CompareAndSwap(nil, e) {
			continue
		}
		if w := e.word.Load(); stateOf(w) == stateResident && w&writerBit == 0 {
			return s
		}
		s.Store(nil)
		return nil
	}
	return nil
}

// waitSlotReaders returns once no slot reader holds e. The caller has
// already made the change (writer bit, evicting) that keeps new slot
// readers out. An entry no slot reader ever entered skips the scan of every
// slot (a cost that grows with GOMAXPROCS, for every write hit): a reader
// sets slotRead before it publishes its slot and loads the word after, the
// writer changes the word before it loads slotRead, so a writer that finds
// slotRead clear is one whose change that reader will see.
func (e *entry) waitSlotReaders() {
	if e.slotRead.Load() {
		e.ds.c.readSlots.waitOut(e)
	}
}

// waitOut returns once no slot reader holds e. The caller has already made
// the change (writer bit, evicting) that keeps new slot readers out.
func (rs *readSlots) waitOut(e *entry) {
	for i := range rs.slots {
		for rs.slots[i].e.Load() == e {
			runtime.Gosched()
		}
	}
}

// unlockChunk ends lockChunk.
func (e *entry) unlockChunk() {
	e.word.And(^uint64(writerBit))
	e.latch.Unlock()
}
