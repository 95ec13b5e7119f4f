package cache

import "sync/atomic"

// rereadFilter remembers which chunks reads missed recently: when the
// cache is full (or with Config.AdmitOnReread), a read that misses a
// chunk it does not remember serves the chunk without keeping it and
// remembers it; a later miss of a remembered chunk keeps it
// (directdecode.go). It is a direct-mapped table of key hashes,
// written and read with single atomic operations, so misses on every core
// use it without a lock.
//
// Forgetting is by collision: a chunk's slot is taken over by the next
// missed chunk that hashes there, so a chunk is remembered for about as
// many misses of other chunks as there are slots (newRereadFilter sizes
// them at twice the chunks of 64 KiB the quiescent limit holds). Both
// ways of being wrong cost only time: a chunk forgotten too early is
// decoded once more before it is kept, and two chunks whose 64-bit hashes
// agree (about never) make one of them kept on its first read.
type rereadFilter struct {
	slots []atomic.Uint64
}

// rereadSeed keys the hashes the filter stores; any fixed value works.
const rereadSeed = 0x5851f42d4c957f2d

func newRereadFilter(quiescent int64) *rereadFilter {
	n := min(max(2*quiescent/(64<<10), 4096), 1<<20)
	return &rereadFilter{slots: make([]atomic.Uint64, n)}
}

// missedBefore reports whether k was missed recently, and remembers this
// miss of it.
func (f *rereadFilter) missedBefore(k chunkKey) bool {
	h := k.hash(rereadSeed) | 1 // 0 marks an empty slot
	s := &f.slots[h%uint64(len(f.slots))]
	if s.Load() == h {
		return true
	}
	s.Store(h)
	return false
}
