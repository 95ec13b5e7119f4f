package cache

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// entryTable is the chunk table for short keys (table.go): Key → *entry,
// safe for concurrent use. Reads never lock or write; writers lock one
// bucket chain; a resize locks them all.
//
// Why not lockfree.Map (xsync.MapOf), which it replaced for short keys:
// MapOf keeps a pointer to a separate {key, value} record in its buckets,
// so a hit went bucket → record → entry, three cache lines in three
// places, and with thousands of resident chunks each was likely a cache
// miss (a CPU profile of bench/peers' BenchmarkLookup at 1 goroutine, no
// in-repo benchmark prints it: the table lookup and the entry's first
// line were about half of a hit). This table keeps the *entry itself in the
// bucket and compares the key in the entry's first line (entry.key.k),
// which the hit reads next anyway: bucket → entry, two lines.
//
// Layout: a power-of-two array of 64-byte buckets (one line each), a
// bucket's overflow chain linked by next. A bucket holds bucketSlots
// entries and a meta word whose byte i is slot i's tag (the hash's top 7
// bits with the high bit set; 0 for a free slot), so a lookup compares
// the key only in slots whose tag matches.
//
// Concurrency:
//   - A reader loads the current array, the bucket's meta, the matching
//     slots' entries and next pointers, all with atomic loads, and
//     compares keys (immutable after the entry is published).
//   - A writer (LoadOrStore, CompareAndDelete) locks the root bucket's
//     mutex, re-checks that the array is still current (a resize may have
//     replaced it while the writer waited), and changes the chain: an
//     insert stores the entry before setting its tag, a delete clears the
//     tag before the slot. A reader that sees a tag without its entry, or
//     with another entry (a slot reused), compares and moves on; an entry
//     that stays in the table stays in its slot, so no reader misses it.
//   - A resize (resizeMu: one at a time) locks every root bucket of the
//     current array, copies the entries into a new array, publishes it and
//     unlocks. The old array is never changed after that: readers still in
//     it see the table as it was at the publish, and writers that were
//     waiting on its locks find it replaced and start over in the new one.
//
// Departure from DESIGN.md, which puts the concurrent maps in package
// lockfree: this table lives here because what makes it fast is specific to
// the cache — it stores *entry and compares the key inside the entry — and
// a generic lockfree version would need a key callback on every probe.
// lockfree.Map still holds the long keys and everything else.
//
// The count is one atomic word: it is written only by inserts and deletes
// (chunk loads and evictions, never hits).
type entryTable struct {
	cur      atomic.Pointer[entryArray]
	count    atomic.Int64
	resizeMu sync.Mutex // one resize at a time
}

// Sizing: the array doubles when the count exceeds 3/4 of its slots and
// halves when it falls below 1/8 of them (after halving the load is 1/4,
// after doubling 3/8: away from both marks, so a count moving around one
// mark does not resize back and forth).
const (
	bucketSlots = 6
	minBuckets  = 8 // the smallest array; a table never shrinks below it
	tagHigh     = 0x80
)

func tooFull(n int64, buckets int) bool { return n > int64(buckets)*bucketSlots*3/4 }
func tooEmpty(n int64, buckets int) bool {
	return buckets > minBuckets && n < int64(buckets)*bucketSlots/8
}

type entryArray struct {
	buckets []tableBucket
	locks   []sync.Mutex // locks[i] guards the chain rooted at buckets[i]
	mask    uint64
	// seed is this array's hash seed (random per array, so that no fixed
	// set of keys collides in every table).
	seed uint64
}

// tableBucket is one cache line: meta, bucketSlots entries, next.
type tableBucket struct {
	meta atomic.Uint64
	ents [bucketSlots]atomic.Pointer[entry]
	next atomic.Pointer[tableBucket]
}

func newEntryTable() *entryTable {
	t := &entryTable{}
	t.cur.Store(newEntryArray(minBuckets))
	return t
}

func newEntryArray(n int) *entryArray {
	return &entryArray{buckets: make([]tableBucket, n), locks: make([]sync.Mutex, n), mask: uint64(n - 1), seed: rand.Uint64()}
}

// tagOf is the tag of hash h: its top 7 bits with the high bit set, so a
// tag is never 0 (a free slot).
func tagOf(h uint64) uint64 { return h>>57 | tagHigh }

// matchTag returns a word with the high bit of byte i set for each byte of
// meta equal to tag (bytes past bucketSlots are always 0, never a tag).
func matchTag(meta, tag uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	x := meta ^ (tag * lo)
	return (x - lo) &^ x & hi
}

// freeSlot returns the first free slot of a bucket with this meta, or -1.
func freeSlot(meta uint64) int {
	for s := 0; s < bucketSlots; s++ {
		if meta>>(8*s)&0xff == 0 {
			return s
		}
	}
	return -1
}

// Load returns the entry stored for k.
func (t *entryTable) Load(k Key) (*entry, bool) {
	a := t.cur.Load()
	h := hashKey(k, a.seed)
	tag := tagOf(h)
	for b := &a.buckets[h&a.mask]; b != nil; b = b.next.Load() {
		for m := matchTag(b.meta.Load(), tag); m != 0; m &= m - 1 {
			if e := b.ents[bits.TrailingZeros64(m)>>3].Load(); e != nil && e.key.k == k {
				return e, true
			}
		}
	}
	return nil, false
}

// lockChain locks the chain k hashes to in the current array and returns
// the array, k's hash in it and the chain's root; the caller unlocks
// a.locks[i].
func (t *entryTable) lockChain(k Key) (a *entryArray, h, i uint64) {
	for {
		a = t.cur.Load()
		h = hashKey(k, a.seed)
		i = h & a.mask
		a.locks[i].Lock()
		if t.cur.Load() == a {
			return a, h, i
		}
		a.locks[i].Unlock() // resized while we waited: start over
	}
}

// LoadOrStore returns the entry stored for e.key.k if there is one;
// otherwise it stores e and returns it with loaded false.
func (t *entryTable) LoadOrStore(e *entry) (actual *entry, loaded bool) {
	k := e.key.k
	a, h, i := t.lockChain(k)
	tag := tagOf(h)
	var free *tableBucket
	slot := 0
	last := &a.buckets[i]
	for b := last; b != nil; b = b.next.Load() {
		meta := b.meta.Load()
		for m := matchTag(meta, tag); m != 0; m &= m - 1 {
			if x := b.ents[bits.TrailingZeros64(m)>>3].Load(); x.key.k == k {
				a.locks[i].Unlock()
				return x, true
			}
		}
		if free == nil {
			if s := freeSlot(meta); s >= 0 {
				free, slot = b, s
			}
		}
		last = b
	}
	if free == nil {
		free, slot = new(tableBucket), 0
		last.next.Store(free) // empty: readers find nothing in it yet
	}
	free.ents[slot].Store(e) // the entry before its tag
	free.meta.Store(free.meta.Load() | tag<<(8*slot))
	a.locks[i].Unlock()
	if tooFull(t.count.Add(1), len(a.buckets)) {
		t.resize()
	}
	return e, false
}

// CompareAndDelete removes k only if its entry satisfies same.
func (t *entryTable) CompareAndDelete(k Key, same func(*entry) bool) bool {
	a, h, i := t.lockChain(k)
	tag := tagOf(h)
	for b := &a.buckets[i]; b != nil; b = b.next.Load() {
		meta := b.meta.Load()
		for m := matchTag(meta, tag); m != 0; m &= m - 1 {
			s := bits.TrailingZeros64(m) >> 3
			x := b.ents[s].Load()
			if x.key.k != k {
				continue
			}
			if !same(x) {
				a.locks[i].Unlock()
				return false
			}
			b.meta.Store(meta &^ (0xff << (8 * s))) // the tag before the entry
			b.ents[s].Store(nil)
			a.locks[i].Unlock()
			if tooEmpty(t.count.Add(-1), len(a.buckets)) {
				t.resize()
			}
			return true
		}
	}
	a.locks[i].Unlock()
	return false
}

// resize rebuilds the array at the size the count asks for, if it still
// asks for another size once the resize lock is held.
func (t *entryTable) resize() {
	t.resizeMu.Lock()
	defer t.resizeMu.Unlock()
	a := t.cur.Load()
	for i := range a.locks {
		a.locks[i].Lock()
	}
	n, want := t.count.Load(), len(a.buckets)
	for tooFull(n, want) {
		want *= 2
	}
	for tooEmpty(n, want) {
		want /= 2
	}
	if want != len(a.buckets) {
		na := newEntryArray(want)
		for i := range a.buckets {
			for b := &a.buckets[i]; b != nil; b = b.next.Load() {
				for s := range b.ents {
					if e := b.ents[s].Load(); e != nil {
						na.insertUnpublished(e)
					}
				}
			}
		}
		t.cur.Store(na)
	}
	for i := range a.locks {
		a.locks[i].Unlock()
	}
}

// insertUnpublished adds e to an array no other goroutine can see yet.
func (a *entryArray) insertUnpublished(e *entry) {
	h := hashKey(e.key.k, a.seed)
	b := &a.buckets[h&a.mask]
	for {
		meta := b.meta.Load()
		if s := freeSlot(meta); s >= 0 {
			b.ents[s].Store(e)
			b.meta.Store(meta | tagOf(h)<<(8*s))
			return
		}
		next := b.next.Load()
		if next == nil {
			next = new(tableBucket)
			b.next.Store(next)
		}
		b = next
	}
}

// Range calls f for every entry of the current array until f returns
// false. Entries added or removed meanwhile may or may not be visited.
func (t *entryTable) Range(f func(*entry) bool) {
	a := t.cur.Load()
	for i := range a.buckets {
		for b := &a.buckets[i]; b != nil; b = b.next.Load() {
			for s := range b.ents {
				if e := b.ents[s].Load(); e != nil && !f(e) {
					return
				}
			}
		}
	}
}

// Len reports the number of entries.
func (t *entryTable) Len() int { return int(t.count.Load()) }
