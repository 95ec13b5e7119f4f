package cache

import (
	"errors"
	"fmt"
	"runtime"
)

// PolicyKind selects the replacement policy (SCC design §4.2, §4.2.1; SCC requirements
// §2.2 item 4). The zero value is the default two-stage LRU.
type PolicyKind int

const (
	// PolicyTwoStageLRU is SCC design §4.2: the least recently used dataset
	// nominates its least recently used chunks until it reaches its minimum,
	// then the next dataset; partially read or written chunks get a second
	// pass.
	PolicyTwoStageLRU PolicyKind = iota
	// PolicyLRU is one global LRU over all chunks (minimums still honoured).
	PolicyLRU
	// PolicyMRU evicts the most recently used chunk first: right for cyclic
	// scans larger than the cache.
	PolicyMRU
	// PolicyLFU evicts the least frequently used chunk first (SCC design
	// §4.2.1 "frequency-based policies can use the integer counter").
	PolicyLFU
	// PolicyRandom evicts chunks in random order (SCC requirements §3.3: random
	// reads for machine learning).
	PolicyRandom
	// PolicySIEVE is the scan-resistant SIEVE policy: a FIFO with one
	// visited bit per chunk and a hand that spares visited chunks once.
	PolicySIEVE
	// PolicyS3FIFO is S3-FIFO (Yang et al., SOSP 2023): a small FIFO of
	// about 10% of the chunks filters one-time accesses, a main FIFO with
	// 2-bit frequencies keeps the reused ones, and a ghost FIFO of evicted
	// keys sends returning chunks straight to main. Scan resistant; a hit
	// only bumps a counter.
	PolicyS3FIFO
	numPolicies
)

func (k PolicyKind) String() string {
	switch k {
	case PolicyTwoStageLRU:
		return "two-stage-lru"
	case PolicyLRU:
		return "lru"
	case PolicyMRU:
		return "mru"
	case PolicyLFU:
		return "lfu"
	case PolicyRandom:
		return "random"
	case PolicySIEVE:
		return "sieve"
	case PolicyS3FIFO:
		return "s3fifo"
	}
	return fmt.Sprintf("PolicyKind(%d)", int(k))
}

// SecondChance is a tri-state switch whose zero value means "default (on)".
type SecondChance int

const (
	SecondChanceDefault SecondChance = iota // on
	SecondChanceOn                          // partially used chunks get a second pass
	SecondChanceOff                         // plain recency order
)

// Config configures a Cache. The zero Config is valid: every zero field
// takes the documented default.
type Config struct {
	// QuiescentBytes is the budget for resident chunk bytes when no request
	// is running (SCC design §2.4 SCC_quiescent_size). Default 256 MiB.
	QuiescentBytes int64
	// ActiveMultiplier scales QuiescentBytes into the limit that holds while
	// requests run (SCC design §2.4 SCC_active_size). Default 2; must be >= 1.
	ActiveMultiplier float64
	// MinBytes is the default per-dataset minimum reservation (SCC design §2.3
	// min_dset_size): a dataset holding no more than this does not nominate
	// eviction candidates while others can. Default 10 MiB; -1 means none.
	// DatasetOptions.MinBytes overrides it per dataset.
	MinBytes int64
	// Policy selects the replacement policy. Default PolicyTwoStageLRU.
	Policy PolicyKind
	// PartialSecondChance gives partially read or written chunks a second
	// pass before eviction (SCC design §4.2). Default on.
	PartialSecondChance SecondChance
	// BypassBytes: chunks whose in-memory size (Location.SizeHint) exceeds
	// this skip the cache: loaded or created, served, written back if
	// modified, and dropped at once (SCC internal API "Skip Cache"). Default 0 means
	// QuiescentBytes/4; -1 means never bypass. A write covering such a
	// chunk whole, of a layout that offers it (DirectWriter), goes from the
	// caller's buffer to the file without a copy (directwrite.go), and so
	// does one of a smaller chunk that is not resident once the cache is
	// full (admitting it would pass QuiescentBytes); a read
	// of part of one, of a layout that offers it (PartReader), reads only
	// the checksummed blocks it needs (directpart.go).
	BypassBytes int64
	// DirectWriteBytes: a write covering a whole chunk at least this large
	// (in-memory size) that is not resident, of a layout that offers it
	// (DirectWriter), goes from the caller's buffer to the file
	// (directwrite.go) even while the cache has room: from about this size
	// on, the cached path's copies (the caller's bytes into a chunk buffer,
	// the chunk into its image at write-back) cost more than the write
	// itself, and reading the chunk back costs one pread at page-cache
	// speed. engine BenchmarkDirectWriteBytes (64 MiB of whole chunks,
	// NoSync, tmpfs, GOMAXPROCS 2): direct 1.34-1.89x the cached path at 64
	// KiB to 1 MiB chunks, 1.01-1.04x at 16 KiB. Default 0 means 64 KiB; -1
	// leaves only the bypass and
	// full-cache rules. Ignored when direct writes are off (NoDirectWrites,
	// BypassBytes -1). A resident or dirty copy still takes the write; a
	// chunk this large that writes in parts completed is written back and
	// dropped then (completed.go).
	DirectWriteBytes int64
	// LateSumBytes: a direct write (directwrite.go) of whole chunks of at
	// least this many bytes each, of a layout whose frame can carry its
	// checksum late (layout.LateFramer), has the checksums computed by a
	// helper goroutine (splitread.go's, on a core likely idle) while the
	// caller writes the chunks' bytes, and writes their tails after them
	// in a second vector write; the write-back of a chunk whose image
	// borrows its buffer (layout.LateBorrower) does the same from four
	// times this size (latesum.go says why). Default 0
	// means 1 MiB (see defaultLateSumBytes); -1 computes every checksum
	// before the write, on the writing goroutine, and so does GOMAXPROCS
	// 1.
	LateSumBytes int64
	// NoDirectWrites turns the direct write path off (directwrite.go):
	// whole-chunk writes above BypassBytes are then created, gathered,
	// encoded, written and dropped like any bypassed chunk, and smaller
	// ones into a full cache evict others. For comparison
	// and benchmarks; the default (false) is the direct path.
	NoDirectWrites bool
	// SplitReadBytes: a direct read (a whole unfiltered chunk read
	// straight into the caller's buffer, direct.go), or a load of chunk
	// images into the cache (splitload.go), of at least this many
	// bytes is read in shares of at least SplitReadBytes/2 by helper
	// goroutines while the caller reads the first, when fewer requests run
	// than GOMAXPROCS (a core is likely idle) and a helper is free
	// (splitread.go); each goroutine checksums the pieces it read when the
	// layout allows (DirectSummer, SummedDecoder), the caller checks every
	// chunk. Up to
	// min(GOMAXPROCS-1, 7) helpers run per cache; one that finished a
	// share polls for the next for 100 µs (yielding its P) before it
	// parks.
	// Default 0 means 512 KiB (engine BenchmarkSplitRead at GOMAXPROCS 2:
	// splitting 512 KiB and 1 MiB chunks was 1.1-1.3x faster than one
	// pass, 128 and 256 KiB ones 0.7-0.9x); -1 turns splitting off (no
	// helpers run). No helper runs when GOMAXPROCS is 1.
	SplitReadBytes int64
	// Workers bounds how many encode/decode calls run at once. Default
	// GOMAXPROCS. Ignored when Runner is set, except that it also bounds,
	// in every case, the images of whole chunks encoded straight from
	// callers' buffers that are in flight at once (directwrite_encode.go).
	// With it the memory of a round trip (R requests each reading one
	// whole chunk of one dataset and writing it to another) is at most
	// Q + P + max(R×(C+E) + W×E, ⌈(A/8)/C⌉×E): Q QuiescentBytes, A the
	// active limit, P PreEncodeBytes, C a chunk in memory, E the buffer of
	// its encoded or stored image, W Workers (the formula is explained in
	// directwrite_encode.go).
	Workers int
	// Runner, if set, runs encode/decode work instead of the cache's own
	// bounded worker set (for example the engine's shared pool).
	Runner Runner

	// PreEncodeBytes caps the bytes of disk images the cache encodes ahead
	// of time for dirty chunks near eviction and keeps until they are
	// written (SCC requirements §2.2 item 6, SCC internal API "Data Formats"). The images
	// count against the memory budget. Default 0 means QuiescentBytes/8;
	// -1 turns background pre-encoding off.
	PreEncodeBytes int64
	// Prefetch turns on loading the next chunks ahead of sequential
	// readers in the background (SCC requirements §2.2 item 6). Default off.
	Prefetch bool
	// PrefetchBytes caps the bytes of prefetched chunks not yet read.
	// Default 0 means QuiescentBytes/4: the default BypassBytes, so that
	// a stream of the largest chunks the cache keeps can still run one
	// ahead (an eighth would never admit a chunk of a quarter). Used only
	// with Prefetch.
	PrefetchBytes int64
	// AdmitOnReread keeps a stored chunk that a read misses only when the
	// chunk was missed recently before, within the last QuiescentBytes of
	// misses (rereads.go; a loop over more than the cache is never kept,
	// as it would be evicted before its next read): the first read of a
	// chunk decodes it for the caller without keeping it (directdecode.go),
	// into the caller's buffer when the read covers it whole, and a read
	// of it again loads it into the cache. A one-pass scan then leaves the
	// cache as it was and touches no new memory per chunk, at the price of
	// one more decode for every chunk that is read twice. Writes follow
	// the same rule: a whole chunk of a filtering layout that is not
	// resident is encoded from the caller's buffer and written
	// (directwrite.go) unless it was accessed within that window, so a
	// one-pass stream of writes is not copied into the cache either.
	// Default off: every chunk a read misses is kept while the cache has
	// room.
	AdmitOnReread bool
	// PrefetchChunks is how many chunks ahead of a sequential reader are
	// loaded. Default 4. Used only with Prefetch.
	PrefetchChunks int

	// MaxMemoryBytes is the hard cap (SCC design §4.3 "maximum available"):
	// the quiescent size and the active limit never exceed it, whatever
	// QuiescentBytes, ActiveMultiplier, adaptive sizing or SetConfig ask
	// (so resident bytes stay under it, but for the one indivisible chunk
	// any cache admits when empty). Default 0: no cap.
	MaxMemoryBytes int64
	// Adaptive configures automatic resizing of the quiescent size to the
	// working set (adaptive.go). Off by default.
	Adaptive AdaptiveConfig
}

// ErrInvalidConfig is returned (wrapped) by Validate and New.
var ErrInvalidConfig = errors.New("cache: invalid config")

func (c Config) withDefaults() Config {
	if c.QuiescentBytes == 0 {
		c.QuiescentBytes = 256 << 20
	}
	if c.ActiveMultiplier == 0 {
		c.ActiveMultiplier = 2
	}
	if c.MinBytes == 0 {
		c.MinBytes = 10 << 20
	}
	if c.MinBytes < 0 {
		c.MinBytes = 0
	}
	if c.PartialSecondChance == SecondChanceDefault {
		c.PartialSecondChance = SecondChanceOn
	}
	if c.BypassBytes == 0 {
		c.BypassBytes = c.QuiescentBytes / 4
	}
	if c.DirectWriteBytes == 0 {
		c.DirectWriteBytes = 64 << 10
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	switch {
	case c.PreEncodeBytes == 0:
		c.PreEncodeBytes = c.QuiescentBytes / 8
	case c.PreEncodeBytes < 0:
		c.PreEncodeBytes = 0
	}
	if c.PrefetchBytes == 0 {
		c.PrefetchBytes = c.QuiescentBytes / 4
	}
	if c.PrefetchChunks == 0 {
		c.PrefetchChunks = 4
	}
	switch {
	case c.LateSumBytes == 0:
		c.LateSumBytes = defaultLateSumBytes
	case c.LateSumBytes < 0:
		c.LateSumBytes = 0
	}
	switch {
	case c.SplitReadBytes == 0:
		c.SplitReadBytes = defaultSplitReadBytes
	case c.SplitReadBytes < 0:
		c.SplitReadBytes = 0
	}
	return c
}

// Validate reports whether c (after defaults) is usable.
func (c Config) Validate() error {
	d := c.withDefaults()
	switch {
	case d.QuiescentBytes < 0:
		return fmt.Errorf("%w: QuiescentBytes %d < 0", ErrInvalidConfig, c.QuiescentBytes)
	case d.ActiveMultiplier < 1:
		return fmt.Errorf("%w: ActiveMultiplier %v < 1", ErrInvalidConfig, c.ActiveMultiplier)
	case c.MinBytes < -1:
		return fmt.Errorf("%w: MinBytes %d < -1", ErrInvalidConfig, c.MinBytes)
	case d.Policy < 0 || d.Policy >= numPolicies:
		return fmt.Errorf("%w: unknown policy %v", ErrInvalidConfig, c.Policy)
	case d.PartialSecondChance < SecondChanceDefault || d.PartialSecondChance > SecondChanceOff:
		return fmt.Errorf("%w: PartialSecondChance %d", ErrInvalidConfig, c.PartialSecondChance)
	case c.BypassBytes < -1:
		return fmt.Errorf("%w: BypassBytes %d < -1", ErrInvalidConfig, c.BypassBytes)
	case c.DirectWriteBytes < -1:
		return fmt.Errorf("%w: DirectWriteBytes %d < -1", ErrInvalidConfig, c.DirectWriteBytes)
	case d.Workers < 0:
		return fmt.Errorf("%w: Workers %d < 0", ErrInvalidConfig, c.Workers)
	case c.PreEncodeBytes < -1:
		return fmt.Errorf("%w: PreEncodeBytes %d < -1", ErrInvalidConfig, c.PreEncodeBytes)
	case c.PrefetchBytes < 0:
		return fmt.Errorf("%w: PrefetchBytes %d < 0", ErrInvalidConfig, c.PrefetchBytes)
	case c.PrefetchChunks < 0 || c.PrefetchChunks > 1<<16:
		return fmt.Errorf("%w: PrefetchChunks %d", ErrInvalidConfig, c.PrefetchChunks)
	case c.LateSumBytes < -1:
		return fmt.Errorf("%w: LateSumBytes %d < -1", ErrInvalidConfig, c.LateSumBytes)
	case c.SplitReadBytes < -1:
		return fmt.Errorf("%w: SplitReadBytes %d < -1", ErrInvalidConfig, c.SplitReadBytes)
	case c.MaxMemoryBytes < 0:
		return fmt.Errorf("%w: MaxMemoryBytes %d < 0", ErrInvalidConfig, c.MaxMemoryBytes)
	}
	return c.Adaptive.validate(d.QuiescentBytes)
}

// DatasetOptions configures one registered dataset.
type DatasetOptions struct {
	// MinBytes is this dataset's minimum reservation (SCC design §2.3
	// min_dset_size): 0 takes Config.MinBytes, -1 means none.
	MinBytes int64
}
