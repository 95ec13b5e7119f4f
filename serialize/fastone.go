package serialize

// TryFastReadDataset is TryFastRead for a request known to be one
// non-empty region of dataset ds: the caller has already checked what
// TryFastRead checks of the regions (the engine's single-chunk read,
// engine/ioone.go, whose region is one chunk), so only the shard's writer
// count and the per-P reader count are touched. The same contract holds:
// the hold covers only short work that never blocks.
func (s *Serializer) TryFastReadDataset(ds uint64) (h Hold, ok bool) {
	k := shardOf(ds)
	sh := &s.shards[k]
	if sh.writers.Load() != 0 {
		return Hold{}, false // skip the store that would only be undone
	}
	slot := s.readers.slot(k)
	slot.Add(1)
	if sh.writers.Load() != 0 {
		slot.Add(-1)
		sh.wakeDrain() // a writer may have counted us before we left
		return Hold{}, false
	}
	return Hold{slot: slot, sh: sh}, true
}
