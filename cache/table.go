package cache

import (
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/lockfree"
)

// chunkTable is the cache's chunk table: chunkKey → entry, safe for
// concurrent use (reads never block, writers lock one bucket).
//
// It is split in two so that every hit looks up a fixed-size comparable
// key. Short keys (key.go: the dataset serial and the coordinates
// interleaved into 120 bits, the rank in the top byte — every chunk of a
// rank ≤ 2 dataset whose coordinates fit 40 bits, and most others) are
// looked up by their 128-bit Key alone: one multiply to hash, two words to
// compare, in a table that keeps the entries themselves in its buckets
// (entrytable.go). Keys in the exact long form (huge coordinates or rank) go to a
// second table keyed by the whole chunkKey, whose string would otherwise
// make hashing and equality slow for every key. The two forms never
// describe the same chunk (makeKey picks one per chunk), so a key is in at
// most one of the tables.
type chunkTable struct {
	short *entryTable
	long  *lockfree.Map[chunkKey, *entry]
}

func newChunkTable() *chunkTable {
	return &chunkTable{
		short: newEntryTable(),
		long:  lockfree.NewMapWithHasher[chunkKey, *entry](chunkKey.hash),
	}
}

// hashKey hashes a short key (wyhash's multiply-fold; the key's bits are
// already spread by the interleaving).
func hashKey(k Key, seed uint64) uint64 { return mix(k.Lo^seed, k.Hi) }

// Load returns the entry stored for k.
func (t *chunkTable) Load(k chunkKey) (*entry, bool) {
	if k.long == "" {
		return t.short.Load(k.k)
	}
	return t.long.Load(k)
}

// lookupIn is Load of makeKey(d.serial, coord) for the hit path, without
// building the whole chunkKey for a short key, whose serial part d has
// precomputed.
func (t *chunkTable) lookupIn(d *Dataset, coord layout.Coord) (*entry, bool) {
	if k, ok := d.keys.shortKeyIn(d.serial, coord); ok {
		return t.short.Load(k)
	}
	return t.long.Load(makeKey(d.serial, coord))
}

// LoadOrStore returns the entry stored for e.key if there is one;
// otherwise it stores e and returns it with loaded false.
func (t *chunkTable) LoadOrStore(e *entry) (*entry, bool) {
	if e.key.long == "" {
		return t.short.LoadOrStore(e)
	}
	return t.long.LoadOrStore(e.key, e)
}

// CompareAndDelete removes k only if its entry satisfies same.
func (t *chunkTable) CompareAndDelete(k chunkKey, same func(*entry) bool) bool {
	if k.long == "" {
		return t.short.CompareAndDelete(k.k, same)
	}
	return t.long.CompareAndDelete(k, same)
}

// Range calls f for every entry of both tables until f returns false.
// Entries added or removed meanwhile may or may not be visited.
func (t *chunkTable) Range(f func(chunkKey, *entry) bool) {
	more := true
	t.short.Range(func(e *entry) bool {
		more = f(e.key, e)
		return more
	})
	if more {
		t.long.Range(f)
	}
}

// Len reports the number of entries.
func (t *chunkTable) Len() int { return t.short.Len() + t.long.Len() }
