package cache

import (
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/lockfree"
)

// budget holds the memory accounts. The counters are atomic; meta and
// space have locks of their own, each guarding only its own fields.
type budget struct {
	resident atomic.Int64 // bytes charged: entries plus reservations in flight
	metadata atomic.Int64 // unevictable bytes charged by ChargeMetadata (also in resident)
	shedding atomic.Bool  // shedMetadata is running (external.go)
	// shedAt is the metadata left by the last shed: a load sheds again
	// only once metadata has grown past it, so that metadata that cannot
	// be shed (dirty index blocks) does not cost every load a walk.
	shedAt atomic.Int64
	// meta tracks ChargeMetadata per file (external.go). Never held with
	// Cache.mu or across I/O.
	meta struct {
		sync.Mutex
		metaAccounts
	}
	// chunks is resident less metadata (entries, kept images and
	// reservations: what eviction and waiting keep under the active
	// limit), kept apart so that its peak is exact; metadata is charged
	// on top of it and may pass the limit (reserve).
	chunks    atomic.Int64
	dirty     atomic.Int64 // bytes of dirty entries
	peak      atomic.Int64 // highest resident
	chunkPeak atomic.Int64 // highest chunks
	inflight  atomic.Int64 // bytes reserved by sub-lists being loaded/applied
	// spaceWaiters counts requests blocked in reserve; when non-zero,
	// unpins and reverted evictions signal space.
	spaceWaiters atomic.Int32
	// space wakes the requests blocked in reserve. A leaf lock.
	space struct {
		sync.Mutex
		ch chan struct{} // closed (and cleared) whenever bytes are released
	}
}

// raise sets *peak to v if v is higher.
func raise(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// notePeak raises the peak of resident bytes to v.
func (b *budget) notePeak(v int64) { raise(&b.peak, v) }

// addChunks adds d bytes charged to resident for chunks, images or
// reservations to their own total.
func (b *budget) addChunks(d int64) {
	v := b.chunks.Add(d)
	if invariants && v < 0 {
		broken("chunk bytes %d after adding %d", v, d)
	}
	if d > 0 {
		raise(&b.chunkPeak, v)
	}
}

// charge adds d bytes (may be negative) of chunks, images or reservations
// to the resident total.
func (b *budget) charge(d int64) {
	b.addChunks(d)
	b.chargeResident(d)
}

// chargeMetadata adds d bytes (may be negative) of metadata to the
// resident total. Caller holds budget.meta.
func (b *budget) chargeMetadata(d int64) {
	b.metadata.Add(d)
	b.chargeResident(d)
}

func (b *budget) chargeResident(d int64) {
	v := b.resident.Add(d)
	if invariants && v < 0 {
		broken("resident bytes %d after charging %d", v, d)
	}
	if d > 0 {
		b.notePeak(v)
	} else if d < 0 {
		b.signalSpace()
	}
}

// spaceWait returns the channel closed at the next release of bytes.
func (b *budget) spaceWait() chan struct{} {
	b.space.Lock()
	defer b.space.Unlock()
	if b.space.ch == nil {
		b.space.ch = make(chan struct{})
	}
	return b.space.ch
}

// signalSpace wakes the requests waiting for space.
func (b *budget) signalSpace() {
	b.space.Lock()
	ch := b.space.ch
	b.space.ch = nil
	b.space.Unlock()
	if ch != nil {
		close(ch)
	}
}

// unpin releases a pin. A request waiting for space may have found
// nothing to evict only because this entry was pinned, so it is woken; the
// check costs one atomic load when nobody waits.
func (b *budget) unpin(e *entry) {
	e.unpin()
	if b.spaceWaiters.Load() > 0 {
		b.signalSpace()
	}
}

// settleBack returns an entry that was being evicted (or dropped) to the
// resident state, and wakes space waiters for the same reason as unpin.
func (b *budget) settleBack(e *entry) {
	e.settle(stateResident, false)
	if b.spaceWaiters.Load() > 0 {
		b.signalSpace()
	}
}

// modifiedLocked records a modification of e's chunk: new size, dirty,
// version bump, pre-encoded image invalidated (given back to pre, the
// waste counted in st). Caller holds e.latch exclusively.
func (b *budget) modifiedLocked(e *entry, pre *preEncodeState, st *counters) {
	// The image's bytes are part of old; dropping it here releases them
	// with the size update below.
	var img int64
	if p := e.encoded.Swap(nil); p != nil {
		img = p.bytes()
		pre.bytes.Add(-img)
		st.preWasted.Add(1)
		p.release()
	}
	old := e.size.Load()
	ms := e.chunk.MemSize()
	if ms != old {
		e.size.Store(ms)
		b.charge(ms - old)
	}
	if dd := ms - (old - img); dd != 0 {
		e.ds.size.Add(dd) // the dataset's size never held the image
	}
	e.version.Add(1)
	if !e.dirty.Swap(true) {
		b.dirty.Add(ms)
	} else {
		b.dirty.Add(ms - old)
	}
}

// tryCharge charges n bytes only if they fit under limit (the active
// limit); background work never makes a request wait for memory.
func (b *budget) tryCharge(n, limit int64) bool {
	for {
		cur := b.resident.Load()
		if cur+n > limit {
			return false
		}
		if b.resident.CompareAndSwap(cur, cur+n) {
			b.notePeak(cur + n)
			b.addChunks(n)
			return true
		}
	}
}

// redirty marks a pinned entry dirty again after its write could not be
// made durable.
func (b *budget) redirty(e *entry) {
	e.latch.Lock()
	if !e.dirty.Swap(true) {
		b.dirty.Add(e.size.Load())
	}
	e.latch.Unlock()
}

// shedMetadata runs the metadata shedder of every file of files
// (external.go), unless another goroutine is running them: its result
// serves both. It counts the shed in st and reports whether it ran them.
func (b *budget) shedMetadata(files *lockfree.Registry[uint64, *File], st *counters) bool {
	if b.metadata.Load() <= 0 || !b.shedding.CompareAndSwap(false, true) {
		return false
	}
	defer func() {
		b.shedAt.Store(b.metadata.Load())
		b.shedding.Store(false)
	}()
	st.metadataSheds.Add(1)
	files.ForEach(func(_ uint64, f *File) bool {
		if fn := f.shed.Load(); fn != nil {
			(*fn)()
		}
		return true
	})
	return true
}
