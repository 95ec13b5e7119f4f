package cache

// Metadata charged from outside the cache: a container's
// chunk index blocks stay in memory so that a hot lookup does no I/O, and
// they are counted inside the cache's budget so that resident chunks plus
// index bytes stay under the limit. The bytes are unevictable: charging
// them makes the next reservation (and the background trimmer) evict
// chunks instead.

// metaAccounts is the metadata each registered file has charged.
//
// INVARIANT: a file's entry is absent once File.Unregister released it, and
// ChargeMetadata adds to a file's entry only while the file is registered;
// both run under mu, so a charge racing Unregister is either released by it
// or ignored, never leaked.
type metaAccounts struct {
	byFile map[uint64]int64 // file serial → bytes charged (guarded by Cache.budget.meta)
}

// ChargeMetadata adds delta (may be negative) bytes of the file's metadata
// to the cache's resident total, as bytes no eviction can free. Callers
// charge differences of a figure they track, so the file's total stays the
// sum of its deltas. A charge on an unregistered file is ignored. Charging
// never blocks and does no I/O; when it takes the cache over the quiescent
// size it wakes the background trimmer, and the next request evicts chunks
// to get back under the active limit.
//
// Safe for concurrent use.
func (f *File) ChargeMetadata(delta int64) {
	if delta == 0 {
		return
	}
	c := f.c
	if delta > 0 {
		// Admit against the budget: make room first by dropping idle
		// clean chunks (no I/O, no waiting), so the charge does not take
		// resident bytes past the active limit where that can be avoided.
		if over := c.budget.resident.Load() + delta - c.sizes.current().active; over > 0 {
			c.evictClean(over)
		}
	}
	c.budget.meta.Lock()
	if _, ok := c.registered.files.Get(f.serial); !ok {
		c.budget.meta.Unlock()
		return
	}
	if c.budget.meta.byFile == nil {
		c.budget.meta.byFile = make(map[uint64]int64)
	}
	c.budget.meta.byFile[f.serial] += delta
	c.budget.chargeMetadata(delta)
	c.budget.meta.Unlock()
	if delta > 0 && c.budget.resident.Load() > c.sizes.current().quiescent {
		select {
		case c.background.trim.kick <- struct{}{}:
		default:
		}
	}
}

// MetadataBytes reports the metadata bytes the file has charged.
func (f *File) MetadataBytes() int64 {
	c := f.c
	c.budget.meta.Lock()
	defer c.budget.meta.Unlock()
	return c.budget.meta.byFile[f.serial]
}

// releaseMetadata uncharges everything f charged. File.Unregister calls it
// after removing f from the registered files, so no later charge lands.
func (f *File) releaseMetadata() {
	c := f.c
	c.budget.meta.Lock()
	defer c.budget.meta.Unlock()
	if n, ok := c.budget.meta.byFile[f.serial]; ok {
		delete(c.budget.meta.byFile, f.serial)
		c.budget.chargeMetadata(-n)
	}
}

// Shedding metadata. Charged metadata cannot be evicted, but the part a
// file can read again (clean chunk index blocks) can be given back: the
// file's owner installs a shedder, and the cache calls it when it is over
// its limit and no chunk can be evicted — by the trimmer when quiescent,
// and by a request that would otherwise wait for space. A shedder drops
// what it can and uncharges it with ChargeMetadata; it may wait briefly
// for the file's own work (an index flush in progress), never for the
// cache, so a request calling it cannot deadlock.

// SetMetadataShedder installs fn as the file's shedder (nil removes it).
// Safe for concurrent use.
func (f *File) SetMetadataShedder(fn func()) {
	if fn == nil {
		f.shed.Store(nil)
		return
	}
	f.shed.Store(&fn)
}
