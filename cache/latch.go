package cache

import "runtime"

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

// lockChunk takes the latch exclusively and waits out light readers, for a
// change of e.chunk or its contents. The caller holds a pin or owns the
// entry (loading or evicting).
func (e *entry) lockChunk() {
	e.latch.Lock()
	if e.word.Or(writerBit)&lightMask == 0 {
		return
	}
	for e.word.Load()&lightMask != 0 {
		runtime.Gosched()
	}
}

// unlockChunk ends lockChunk.
func (e *entry) unlockChunk() {
	e.word.And(^uint64(writerBit))
	e.latch.Unlock()
}
