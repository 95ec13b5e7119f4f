package cache

import "sync/atomic"

// rereadFilter remembers which chunks were missed recently, by a read or
// by a write of the whole chunk (a miss, for this filter): when the cache
// is full (or with Config.AdmitOnReread), a miss of a chunk it does not
// remember serves the chunk without keeping it and remembers it; a later
// miss of a remembered chunk keeps it (goesDirect, directdecode.go). It
// is a direct-mapped table of key hashes, written and read with single
// atomic operations, so misses on every core use it without a lock.
//
// Recent means within the cache's size: each slot holds, beside the
// key's hash, the bytes of all misses when the key was missed (a
// clock), and a miss counts as a re-read only if fewer bytes than the
// quiescent limit were missed since. That is a ghost list the size of the
// cache (as in ARC or 2Q), kept as a clock: a chunk read again within
// what the cache holds would have been a hit had it been kept, and is
// kept now; one read again only after more than the cache holds was
// missed (a loop over more than the cache, such as repeated whole scans)
// would be evicted before its next read whatever the order, and keeping
// it would only cost a copy into fresh cache memory and evict chunks that
// may be hits. Such chunks keep being decoded for the caller directly.
//
// Forgetting is also by collision: a chunk's slot is taken over by the
// next missed chunk that hashes there (newRereadFilter sizes the table at
// twice the chunks of 64 KiB the quiescent limit holds). Every way of
// being wrong costs only time: a chunk forgotten too early is decoded once
// more before it is kept, and two chunks whose 24-bit tags agree in one
// slot make one of them kept early.
type rereadFilter struct {
	// missed is the clock: bytes of the chunks missed so far, in units
	// of clockUnit. Slots keep its low clockBits bits, which wrap after
	// 64 TiB of misses; a slot older than that may look recent once,
	// which costs one admission.
	missed atomic.Uint64
	// slots hold a key's tag above clockBits and the clock at its miss
	// below; 0 is an empty slot.
	slots []atomic.Uint64
}

const (
	// clockUnit is the granularity of the miss clock: a chunk smaller
	// than it advances the clock by one unit.
	clockUnit = 64
	clockBits = 40
	clockMask = 1<<clockBits - 1
)

// rereadSeed keys the hashes the filter stores; any fixed value works.
const rereadSeed = 0x5851f42d4c957f2d

func newRereadFilter(quiescent int64) *rereadFilter {
	n := min(max(2*quiescent/(64<<10), 4096), 1<<20)
	return &rereadFilter{slots: make([]atomic.Uint64, n)}
}

// missedBefore reports whether k, a chunk of n bytes, was missed within
// the last window bytes of misses, and remembers this miss of it.
func (f *rereadFilter) missedBefore(k chunkKey, n, window int64) bool {
	h := k.hash(rereadSeed)
	tag := (h>>clockBits | 1) << clockBits // never 0, so a used slot is never 0
	s := &f.slots[h%uint64(len(f.slots))]
	units := uint64(max(n/clockUnit, 1))
	now := f.missed.Add(units) & clockMask
	old := s.Load()
	s.Store(tag | now)
	if old&^clockMask != tag {
		return false
	}
	// Bytes missed since k's last miss, k's own excluded.
	since := (now - old&clockMask) & clockMask
	return since <= units || (since-units)*clockUnit <= uint64(window)
}
