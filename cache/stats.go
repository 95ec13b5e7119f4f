package cache

import (
	"sync/atomic"

	"github.com/scc-dev/scc/lockfree"
)

// Slots of counters.hot, the counts every request bumps.
const (
	hotActive = iota // running requests (Cache.begin/end)
	hotHits
	hotMisses
	numHot
)

// Slots of Dataset.hot.
const (
	dsHits = iota
	dsMisses
	numDSHot
)

// counters are the cache-wide event counts. The ones every request bumps
// (hot) are striped per P and share each stripe's line, so a hit writes
// one line of its own core for all of them; the rest are rarer.
type counters struct {
	hot                                                *lockfree.Counters
	loads, creates, evictions, dirtyEvictions          atomic.Int64
	bytesFlushed, chunksFlushed                        atomic.Int64
	vectorReads, vectorReadBytes                       atomic.Int64
	vectorWrites, vectorWriteBytes                     atomic.Int64
	bypasses, spaceWaits, trimErrors, coalesced, syncs atomic.Int64
	directWrites, directEncodes, metadataSheds         atomic.Int64
	directDecodes, completedChunks                     atomic.Int64
	preEncoded, preHits, preWasted                     atomic.Int64
	prefetched, prefetchHits, prefetchWasted           atomic.Int64
	// extentScans counts SetExtent scans of a dataset's cached chunks
	// (tests check that growth does none).
	extentScans atomic.Int64
}

func newCounters() counters {
	return counters{hot: lockfree.NewCounters(numHot)}
}

// Stats is a value snapshot of the cache's counters and gauges. Counters
// only grow; use Sub to get the activity between two snapshots.
type Stats struct {
	Hits             int64 // chunk requests served by a resident chunk
	Misses           int64 // chunk requests that found no resident chunk
	Loads            int64 // chunks read from disk and decoded
	Creates          int64 // chunks created with Layout.NewChunk
	Coalesced        int64 // misses that waited for another goroutine's load
	Evictions        int64 // chunks dropped to make room
	DirtyEvictions   int64 // of those, written back first
	BytesFlushed     int64 // encoded bytes written (flush, eviction, bypass)
	ChunksFlushed    int64
	VectorReads      int64 // vfd ReadV calls
	VectorReadBytes  int64
	VectorWrites     int64 // vfd WriteV calls
	VectorWriteBytes int64
	Syncs            int64
	Bypasses         int64 // chunks served without staying resident
	DirectWrites     int64 // whole chunks written from the caller's buffer (directwrite.go)
	DirectEncodes    int64 // of those, encoded from it (filtered chunks)
	DirectDecodes    int64 // whole chunks decoded straight into the caller's buffer (directdecode.go)
	CompletedChunks  int64 // chunks written back and dropped once writes in parts completed them (completed.go)
	SpaceWaits       int64 // times a request blocked for memory
	TrimErrors       int64 // background trims that failed to write a victim
	MetadataSheds    int64 // times the files' metadata shedders ran (external.go)
	AccessDrops      int64 // accesses the lossy buffer dropped
	PreEncoded       int64 // images encoded ahead of time and kept (background.go)
	PreEncodeHits    int64 // writes (eviction, flush) that used a kept image instead of encoding
	PreEncodeWasted  int64 // kept images dropped unused (the chunk was written to, or dropped)
	Prefetched       int64 // chunks loaded ahead of a sequential reader (not in Loads)
	PrefetchHits     int64 // prefetched chunks later used by a request
	PrefetchWasted   int64 // prefetched chunks dropped before any use
	SplitReads       int64 // direct reads split among helper goroutines (splitread.go)
	SplitShares      int64 // shares of those read by helpers
	LateSums         int64 // direct writes whose checksums were handed to a helper (latesum.go)
	// Adaptive sizing (adaptive.go).
	AdaptiveEpochs int64 // epochs closed
	Resizes        int64 // size changes recorded in the decision log (all reasons, SetConfig included)
	ResizeGrows    int64 // epoch decisions that grew the cache
	ResizeShrinks  int64 // epoch decisions that shrank it
	FlashIncreases int64 // flash increases
	GhostHits      int64 // misses on chunks evicted recently (hits in a cache at Adaptive.MaxBytes)

	// Gauges.
	ResidentBytes     int64 // bytes charged (resident chunks, kept images, reservations)
	PreEncodedBytes   int64 // bytes of kept pre-encoded images (part of ResidentBytes)
	PrefetchBytes     int64 // bytes of prefetched chunks not used yet
	DirtyBytes        int64
	PeakResidentBytes int64 // highest ResidentBytes seen
	// PeakChunkBytes is the highest ResidentBytes less MetadataBytes
	// seen: chunks, kept images and reservations, which the cache keeps
	// under ActiveLimit (but for one indivisible chunk into an empty
	// cache). Metadata cannot be evicted and is charged on top.
	PeakChunkBytes int64
	// EncodingBytes is the bytes of encoded images not yet written, which
	// are outside ResidentBytes: those of whole chunks encoded straight
	// from callers' buffers (at most Config.Workers images at once,
	// directwrite_encode.go) and those of write-back rounds (eviction,
	// Flush, bypass), except kept pre-encoded images (in ResidentBytes)
	// and images that are the chunk's own buffer (BorrowingEncoder).
	EncodingBytes     int64
	PeakEncodingBytes int64 // highest EncodingBytes seen
	MetadataBytes     int64 // unevictable bytes charged by File.ChargeMetadata (part of ResidentBytes)
	QuiescentLimit    int64 // the quiescent size in force (adaptive sizing moves it)
	ActiveLimit       int64
	MaxMemoryBytes    int64 // the hard cap (math.MaxInt64/2 when none)
	Chunks            int64 // entries in the chunk table
	Datasets          int64 // registered datasets
	// ResizeLog holds the most recent size changes (up to 32), oldest
	// first; Sub keeps s's.
	ResizeLog []ResizeDecision
}

// Sub returns the counters of s minus those of o; gauges keep s's values.
func (s Stats) Sub(o Stats) Stats {
	r := s
	r.Hits -= o.Hits
	r.Misses -= o.Misses
	r.Loads -= o.Loads
	r.Creates -= o.Creates
	r.Coalesced -= o.Coalesced
	r.Evictions -= o.Evictions
	r.DirtyEvictions -= o.DirtyEvictions
	r.BytesFlushed -= o.BytesFlushed
	r.ChunksFlushed -= o.ChunksFlushed
	r.VectorReads -= o.VectorReads
	r.VectorReadBytes -= o.VectorReadBytes
	r.VectorWrites -= o.VectorWrites
	r.VectorWriteBytes -= o.VectorWriteBytes
	r.Syncs -= o.Syncs
	r.Bypasses -= o.Bypasses
	r.DirectWrites -= o.DirectWrites
	r.DirectEncodes -= o.DirectEncodes
	r.DirectDecodes -= o.DirectDecodes
	r.CompletedChunks -= o.CompletedChunks
	r.SpaceWaits -= o.SpaceWaits
	r.TrimErrors -= o.TrimErrors
	r.MetadataSheds -= o.MetadataSheds
	r.AccessDrops -= o.AccessDrops
	r.PreEncoded -= o.PreEncoded
	r.PreEncodeHits -= o.PreEncodeHits
	r.PreEncodeWasted -= o.PreEncodeWasted
	r.Prefetched -= o.Prefetched
	r.PrefetchHits -= o.PrefetchHits
	r.PrefetchWasted -= o.PrefetchWasted
	r.SplitReads -= o.SplitReads
	r.SplitShares -= o.SplitShares
	r.LateSums -= o.LateSums
	r.AdaptiveEpochs -= o.AdaptiveEpochs
	r.Resizes -= o.Resizes
	r.ResizeGrows -= o.ResizeGrows
	r.ResizeShrinks -= o.ResizeShrinks
	r.FlashIncreases -= o.FlashIncreases
	r.GhostHits -= o.GhostHits
	return r
}

// hits returns the cache's hit count, with the hits a's read slots hold.
func (st *counters) hits(a *accessRecording) int64 {
	a.foldSlots(st)
	return st.hot.Load(hotHits)
}

// Stats returns a snapshot.
func (c *Cache) Stats() Stats {
	sz := c.sizes.current()
	c.access.foldSlots(&c.stats)
	s := Stats{
		Hits:              c.stats.hot.Load(hotHits),
		Misses:            c.stats.hot.Load(hotMisses),
		Loads:             c.stats.loads.Load(),
		Creates:           c.stats.creates.Load(),
		Coalesced:         c.stats.coalesced.Load(),
		Evictions:         c.stats.evictions.Load(),
		DirtyEvictions:    c.stats.dirtyEvictions.Load(),
		BytesFlushed:      c.stats.bytesFlushed.Load(),
		ChunksFlushed:     c.stats.chunksFlushed.Load(),
		VectorReads:       c.stats.vectorReads.Load(),
		VectorReadBytes:   c.stats.vectorReadBytes.Load(),
		VectorWrites:      c.stats.vectorWrites.Load(),
		VectorWriteBytes:  c.stats.vectorWriteBytes.Load(),
		Syncs:             c.stats.syncs.Load(),
		Bypasses:          c.stats.bypasses.Load(),
		DirectWrites:      c.stats.directWrites.Load(),
		DirectEncodes:     c.stats.directEncodes.Load(),
		DirectDecodes:     c.stats.directDecodes.Load(),
		CompletedChunks:   c.stats.completedChunks.Load(),
		SpaceWaits:        c.stats.spaceWaits.Load(),
		TrimErrors:        c.stats.trimErrors.Load(),
		MetadataSheds:     c.stats.metadataSheds.Load(),
		AccessDrops:       c.access.buf.Drops() + c.access.slotDrops.Load(),
		PreEncoded:        c.stats.preEncoded.Load(),
		PreEncodeHits:     c.stats.preHits.Load(),
		PreEncodeWasted:   c.stats.preWasted.Load(),
		Prefetched:        c.stats.prefetched.Load(),
		PrefetchHits:      c.stats.prefetchHits.Load(),
		PrefetchWasted:    c.stats.prefetchWasted.Load(),
		SplitReads:        c.background.split.reads.Load(),
		SplitShares:       c.background.split.shares.Load(),
		LateSums:          c.background.split.seals.Load(),
		PreEncodedBytes:   c.background.preEncode.bytes.Load(),
		PrefetchBytes:     c.background.prefetch.bytes.Load(),
		ResidentBytes:     c.budget.resident.Load(),
		DirtyBytes:        c.budget.dirty.Load(),
		PeakResidentBytes: c.budget.peak.Load(),
		PeakChunkBytes:    c.budget.chunkPeak.Load(),
		EncodingBytes:     c.writer.encoding.Load(),
		PeakEncodingBytes: c.writer.encodingPeak.Load(),
		MetadataBytes:     c.budget.metadata.Load(),
		QuiescentLimit:    sz.quiescent,
		ActiveLimit:       sz.active,
		MaxMemoryBytes:    sz.hardCap,
		Chunks:            int64(c.chunks.Len()),
		Datasets:          c.registered.datasets.Load(),
	}
	c.sizes.adaptive.fillStats(&s)
	return s
}

// DatasetStats is a snapshot of one dataset's header.
type DatasetStats struct {
	ResidentBytes int64 // curr_dset_size
	Chunks        int64 // its entries in the chunk table
	Hits, Misses  int64
	MinBytes      int64 // its minimum reservation
}

// counters returns d's hit and miss counters, made on first use.
func (d *Dataset) counters() *lockfree.Counters {
	if c := d.hot.Load(); c != nil {
		return c
	}
	c := lockfree.NewCounters(numDSHot)
	if d.hot.CompareAndSwap(nil, c) {
		return c
	}
	return d.hot.Load()
}

// Stats returns the dataset's snapshot.
func (d *Dataset) Stats() DatasetStats {
	d.c.access.foldSlots(&d.c.stats)
	var hits, misses int64
	if c := d.hot.Load(); c != nil {
		hits, misses = c.Load(dsHits), c.Load(dsMisses)
	}
	return DatasetStats{
		ResidentBytes: d.size.Load(),
		Chunks:        d.chunks.Load(),
		Hits:          hits,
		Misses:        misses,
		MinBytes:      d.min.Load(),
	}
}
