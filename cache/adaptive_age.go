package cache

// Age-out (HDF5's H5C_decr__age_out_with_threshold): a decrease never
// gives up bytes the working set used lately. Every access the policy
// applies (a new chunk linked, a buffered hit drained: both under
// Cache.mu, never on the hit path itself) stamps the entry with the
// current epoch and moves its bytes into that epoch's slot of a ring; a
// decrease then stops at the bytes of the chunks accessed in the last
// AgeOutEpochs epochs. Kept incrementally, so closing an epoch costs O(1)
// under Cache.mu, never a walk over the entries.

// ageSlots is the ring's length: epochs whose bytes are still told apart.
const ageSlots = maxAgeOutEpochs + 1

// ageStamp is an entry's last stamped epoch (plus one: 0 means never)
// and the bytes it put into that epoch's slot. Guarded by Cache.mu.
type ageStamp struct {
	epoch int64
	bytes int64
}

// ageRing is the bytes of the entries last accessed in each of the last
// ageSlots epochs. Guarded by Cache.mu.
type ageRing struct {
	cur   int64 // the epoch in progress (counts from 0)
	slots [ageSlots]int64
}

// valid reports whether stamp's slot still holds its epoch's bytes.
func (r *ageRing) valid(stamp int64) bool {
	return stamp > 0 && r.cur-(stamp-1) < ageSlots
}

// advance closes the epoch in progress and returns the bytes of the
// chunks accessed in the last n epochs, the closed one included. Caller
// holds Cache.mu.
func (r *ageRing) advance(n int) (recent int64) {
	for j := 0; j < n && int64(j) <= r.cur; j++ {
		recent += r.slots[(r.cur-int64(j))%ageSlots]
	}
	r.cur++
	r.slots[r.cur%ageSlots] = 0
	return recent
}
