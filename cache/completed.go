package cache

import (
	"math"

	"github.com/scc-dev/scc/cache/layout"
)

// Write-back of completed chunks. A chunk written whole in one request
// goes from the caller's buffer to the file when it is large
// (directwrite.go); a chunk written whole in several requests (h5perf's
// transfers smaller than the chunk, rows of an image, any box that cuts
// chunks) used to stay dirty in the cache until Flush or eviction. Then
// every chunk's buffer was new memory, and the write-back copied it to the
// file long after the bytes had left the processor's caches: on 1 MiB
// chunks written in quarters the cached path ran at 0.5-0.7x a pwrite of
// the same bytes. Now, when the writes a chunk made in memory (created,
// not loaded) has received add up to its size, the request that completed
// it writes it back and drops it at once, as the whole-chunk write would
// have: the image is encoded (and checksummed) from bytes still in cache,
// and the buffer goes back to the pool for the next chunk.
//
// Rule (noteWrite): the layout counts written bytes (layout.WriteCounter:
// unfiltered chunks whose image borrows the chunk, so the write-back needs
// no memory of its own, which lets ServeResident's writes, admitted
// without memory, do it), the chunk was created in memory, and it is as
// large as a direct write (intake.completes: above BypassBytes or at least
// DirectWriteBytes; never with direct writes off). A loaded chunk is not
// counted: rewriting stored chunks in parts is the workload that keeps
// them resident. Overlapping writes count twice, so a chunk may be
// written back before all of it was written: that costs a write and a
// later load, never a byte, since writing back a dirty chunk early is
// what eviction does.
//
// The write-back is eviction's (writer.writeBack on entries moved to
// evicting): a chunk another request holds is left for later (the flag
// stays; the next write that completes, or Flush, writes it). A failed
// write-back keeps the chunk resident and dirty, with its count restarted,
// and is not the writer's error: the bytes are safe in the cache, and
// Flush writes them again and reports a failure, as for the trimmer.

// completes reports whether chunks of n bytes are written back once complete: the size
// test of a whole unfiltered direct write (intake.worthIt) for a chunk
// the cache holds already.
func (t *intake) completes(sz *sizing, n int64) bool {
	if sz.bypass == math.MaxInt64 {
		return false
	}
	return n > sz.bypass || (t.directWriteBytes > 0 && n >= t.directWriteBytes)
}

// noteWrite counts r's piece, just gathered into e's chunk under e's latch
// held exclusive, and flags e once the chunk is complete.
func (c *Cache) noteWrite(e *entry, r *Request) {
	if !e.created || c.cfg.NoDirectWrites {
		return
	}
	wc, ok := e.ds.lay().l.(layout.WriteCounter)
	if !ok {
		e.created = false
		return
	}
	n, whole, ok := wc.WrittenBytes(r.Piece)
	if !ok || !c.intake.completes(c.sizes.current(), whole) {
		e.created = false // stop counting: this chunk stays
		return
	}
	if r.Full {
		n = whole
	}
	e.written += n
	if e.written >= whole {
		e.complete().Store(true)
	}
}

// writeCompleted writes back and drops the flagged entries of es that nobody
// holds (see above). es are entries the caller touched and no longer pins.
func (c *Cache) writeCompleted(es []*entry) {
	var mine []*entry
	for _, e := range es {
		if e == nil || !e.complete().Load() || !e.tryStartEvict() {
			continue
		}
		e.complete().Store(false)
		if mine == nil {
			mine = make([]*entry, 0, len(es))
		}
		mine = append(mine, e)
	}
	if len(mine) == 0 {
		return
	}
	// The cache's own context: the write-back is the cache's business, not
	// the request's (whose cancellation must not fail a write that
	// succeeded), and Close cancels it.
	_ = c.writer.writeBack(c.background.jobs.ctx, mine, false)
	var gone []*entry
	for _, e := range mine {
		if e.dirty.Load() {
			e.written = 0 // failed: count again rather than retry at every write
			c.budget.settleBack(e)
			continue
		}
		gone = append(gone, e)
	}
	c.stats.completedChunks.Add(int64(len(gone)))
	c.remove(gone)
}
