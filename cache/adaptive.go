package cache

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Adaptive sizing (SCC requirements §2.2 item 5): the cache moves its quiescent
// size (and with it the active limit, QuiescentBytes × ActiveMultiplier)
// within [MinBytes, MaxBytes] to follow the working set, the way HDF5's
// metadata cache does (H5C_auto_size_ctl_t): an epoch is a number of chunk
// accesses; when one closes, its hit rate decides.
//
//   - Below LowerHitRate the cache grows by IncrementFactor (at most
//     MaxIncrementBytes) — but only if a larger cache would have helped:
//     the cache keeps the keys of the chunks it evicted, up to MaxBytes
//     minus the current size of them (a ghost list), and a miss on such a
//     key would have been a hit at MaxBytes. Growth needs at least MinGain
//     of the epoch's accesses to be such misses. A scan larger than
//     MaxBytes, whose misses never return, therefore does not grow the
//     cache, where HDF5's threshold rule would take it to the maximum.
//     It grows to its size plus the depth of the deepest such miss in the
//     ghost list (plus an eighth), bounded by IncrementFactor: by what
//     would have helped, not blindly.
//   - Above UpperHitRate the working set fits with room to spare. With
//     age-out (the default) the cache shrinks to the bytes of the chunks
//     accessed in the last AgeOutEpochs epochs plus an eighth kept empty
//     (adaptive_age.go), as HDF5's age-out-with-threshold decrement with
//     its empty reserve does; without, by DecrementFactor. Either way by
//     at most MaxDecrementBytes, and never below MinBytes.
//   - When both the hit rate and the would-be hits stay under MinGain the
//     cache serves almost nothing at any size up to MaxBytes (a scan):
//     it shrinks the same way.
//   - An epoch that sees no access at all for EpochTimeout is idle: the
//     cache shrinks.
//   - Flash increase: a request whose chunks need more than the active
//     limit grows the cache at once by FlashMultiple × those bytes (HDF5's
//     add-space flash increase), without waiting for the epoch's end.
//
// Never blocking the data path: hits and misses are counted by the
// cache's striped counters, as always; whichever request ends past the
// hit path (Cache.endOn, one shared atomic add per such request), a hit
// that makes its own stripe's count a multiple of hitCheckEvery, or the
// background adaptor's tick (idle epochs) looks at the counts, and the
// one that wins a TryLock closes the epoch.
// A decision only publishes a new sizing (resize.go); a decrease is then
// carried out by the normal eviction path — the background trimmer and
// every request's reservation — which writes dirty chunks back and never
// drops them. MaxMemoryBytes caps every decision.

// AdaptiveConfig configures adaptive sizing. The zero value is off; the
// zero value of each other field takes its documented default.
type AdaptiveConfig struct {
	// Enabled turns adaptive sizing on. Default off: the cache keeps
	// QuiescentBytes.
	Enabled bool
	// InitialBytes is the quiescent size the cache starts at. Default
	// Config.QuiescentBytes (its default when zero). Must lie in
	// [MinBytes, MaxBytes].
	InitialBytes int64
	// MinBytes is the smallest quiescent size. Default InitialBytes/4
	// (at least 1).
	MinBytes int64
	// MaxBytes is the largest quiescent size. Default 4 × InitialBytes.
	// Config.MaxMemoryBytes caps it further.
	MaxBytes int64
	// EpochAccesses is the epoch length in chunk accesses (hits plus
	// misses). Default 4096.
	EpochAccesses int64
	// EpochTimeout closes an epoch that has seen no access for this long
	// as idle, and the cache shrinks. Default 1s; negative: never (an idle
	// cache keeps its size).
	EpochTimeout time.Duration
	// LowerHitRate: an epoch below it grows the cache (when a larger
	// cache would have helped). Default 0.9. In (0, 1].
	LowerHitRate float64
	// UpperHitRate: an epoch above it shrinks the cache. Default 0.999.
	// In [LowerHitRate, 1]; 1 never shrinks on hit rate.
	UpperHitRate float64
	// IncrementFactor multiplies the size on growth. Default 2. In
	// [1, 1024]; 1 never grows at epoch ends.
	IncrementFactor float64
	// MaxIncrementBytes bounds one growth step. Default 0: no bound
	// (but MaxBytes).
	MaxIncrementBytes int64
	// DecrementFactor multiplies the size on a decrease that age-out does
	// not size (no-gain, idle, or AgeOutEpochs < 0). Default 0.9. In
	// (0, 1]; 1 never shrinks.
	DecrementFactor float64
	// MaxDecrementBytes bounds one decrease step. Default 0: no bound
	// (but MinBytes).
	MaxDecrementBytes int64
	// MinGain is the share of an epoch's accesses that must be misses on
	// recently evicted chunks (hits at MaxBytes) for a low hit rate to
	// grow the cache; an epoch whose hit rate and would-be hit rate are
	// both under it shrinks the cache. Default 0.01. In (0, 1].
	MinGain float64
	// AgeOutEpochs: a decrease on a high hit rate goes to the bytes of
	// the chunks accessed in the last AgeOutEpochs epochs plus an eighth.
	// Default 3; negative: no age-out (DecrementFactor instead); at most
	// 16.
	AgeOutEpochs int
	// FlashMultiple: a request needing more bytes than the active limit
	// grows the quiescent size at once by FlashMultiple × those bytes (up
	// to MaxBytes). Default 1; negative turns flash increases off. At most
	// 64. (The engine's admission cuts requests into batches of half the
	// active limit, so through the engine it is a chunk larger than the
	// limit that flashes.)
	FlashMultiple float64
}

// Defaults of AdaptiveConfig.
const (
	DefaultEpochAccesses   = 4096
	DefaultEpochTimeout    = time.Second
	DefaultLowerHitRate    = 0.9
	DefaultUpperHitRate    = 0.999
	DefaultIncrementFactor = 2.0
	DefaultDecrementFactor = 0.9
	DefaultMinGain         = 0.01
	DefaultFlashMultiple   = 1.0
	DefaultAgeOutEpochs    = 3
	maxAgeOutEpochs        = 16
)

// adaptiveParams is an AdaptiveConfig resolved (defaults applied). Never
// changes once made: a new configuration makes a new one.
type adaptiveParams struct {
	initial, min, max int64
	epoch             int64
	timeout           time.Duration // <= 0: no idle epochs
	lower, upper      float64
	incr, decr        float64
	maxIncr, maxDecr  int64 // math.MaxInt64 when unbounded
	minGain           float64
	flash             float64 // 0: off
	ageOut            int     // 0: no floor
}

// resolveAdaptive applies a's defaults; quiescent is Config.QuiescentBytes
// after defaults.
func resolveAdaptive(a AdaptiveConfig, quiescent int64) *adaptiveParams {
	p := &adaptiveParams{
		initial: a.InitialBytes, min: a.MinBytes, max: a.MaxBytes,
		epoch: a.EpochAccesses, timeout: a.EpochTimeout,
		lower: a.LowerHitRate, upper: a.UpperHitRate,
		incr: a.IncrementFactor, decr: a.DecrementFactor,
		maxIncr: a.MaxIncrementBytes, maxDecr: a.MaxDecrementBytes,
		minGain: a.MinGain, flash: a.FlashMultiple, ageOut: a.AgeOutEpochs,
	}
	if p.initial == 0 {
		p.initial = quiescent
	}
	if p.min == 0 {
		p.min = max(p.initial/4, 1)
	}
	if p.max == 0 {
		p.max = satMul(p.initial, 4)
	}
	if p.epoch == 0 {
		p.epoch = DefaultEpochAccesses
	}
	switch {
	case p.timeout == 0:
		p.timeout = DefaultEpochTimeout
	case p.timeout < 0:
		p.timeout = 0
	}
	if p.lower == 0 {
		p.lower = DefaultLowerHitRate
	}
	if p.upper == 0 {
		p.upper = max(DefaultUpperHitRate, p.lower)
	}
	if p.incr == 0 {
		p.incr = DefaultIncrementFactor
	}
	if p.decr == 0 {
		p.decr = DefaultDecrementFactor
	}
	if p.maxIncr == 0 {
		p.maxIncr = math.MaxInt64
	}
	if p.maxDecr == 0 {
		p.maxDecr = math.MaxInt64
	}
	if p.minGain == 0 {
		p.minGain = DefaultMinGain
	}
	switch {
	case p.flash == 0:
		p.flash = DefaultFlashMultiple
	case p.flash < 0:
		p.flash = 0
	}
	switch {
	case p.ageOut == 0:
		p.ageOut = DefaultAgeOutEpochs
	case p.ageOut < 0:
		p.ageOut = 0
	}
	return p
}

// satMul is a×b for non-negative operands, saturating at MaxInt64/2.
func satMul(a int64, b float64) int64 {
	v := float64(a) * b
	if !(v < math.MaxInt64/2) {
		return math.MaxInt64 / 2
	}
	return int64(v)
}

// validate checks a (when enabled) against the Config's QuiescentBytes
// after defaults.
func (a AdaptiveConfig) validate(quiescent int64) error {
	if !a.Enabled {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: Adaptive."+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	in := func(x, lo, hi float64) bool { return x >= lo && x <= hi } // false for NaN
	switch {
	case a.InitialBytes < 0:
		return bad("InitialBytes %d < 0", a.InitialBytes)
	case a.MinBytes < 0:
		return bad("MinBytes %d < 0", a.MinBytes)
	case a.MaxBytes < 0:
		return bad("MaxBytes %d < 0", a.MaxBytes)
	case a.EpochAccesses < 0 || a.EpochAccesses > 1<<40:
		return bad("EpochAccesses %d", a.EpochAccesses)
	case a.LowerHitRate != 0 && !in(a.LowerHitRate, math.SmallestNonzeroFloat64, 1):
		return bad("LowerHitRate %v not in (0, 1]", a.LowerHitRate)
	case a.UpperHitRate != 0 && !in(a.UpperHitRate, math.SmallestNonzeroFloat64, 1):
		return bad("UpperHitRate %v not in (0, 1]", a.UpperHitRate)
	case a.IncrementFactor != 0 && !in(a.IncrementFactor, 1, 1024):
		return bad("IncrementFactor %v not in [1, 1024]", a.IncrementFactor)
	case a.DecrementFactor != 0 && !in(a.DecrementFactor, math.SmallestNonzeroFloat64, 1):
		return bad("DecrementFactor %v not in (0, 1]", a.DecrementFactor)
	case a.MaxIncrementBytes < 0:
		return bad("MaxIncrementBytes %d < 0", a.MaxIncrementBytes)
	case a.MaxDecrementBytes < 0:
		return bad("MaxDecrementBytes %d < 0", a.MaxDecrementBytes)
	case a.MinGain != 0 && !in(a.MinGain, math.SmallestNonzeroFloat64, 1):
		return bad("MinGain %v not in (0, 1]", a.MinGain)
	case a.FlashMultiple != 0 && !(a.FlashMultiple < 0) && !in(a.FlashMultiple, 0, 64):
		return bad("FlashMultiple %v not in (0, 64]", a.FlashMultiple)
	case a.AgeOutEpochs > maxAgeOutEpochs:
		return bad("AgeOutEpochs %d > %d", a.AgeOutEpochs, maxAgeOutEpochs)
	}
	p := resolveAdaptive(a, quiescent)
	switch {
	case p.min < 1:
		return bad("MinBytes %d < 1", p.min)
	case p.min > p.max:
		return bad("MinBytes %d > MaxBytes %d", p.min, p.max)
	case p.initial < p.min || p.initial > p.max:
		return bad("InitialBytes %d not in [MinBytes %d, MaxBytes %d]", p.initial, p.min, p.max)
	case p.upper < p.lower:
		return bad("UpperHitRate %v < LowerHitRate %v", p.upper, p.lower)
	}
	return nil
}

// ResizeReason says why the size changed.
type ResizeReason string

const (
	ReasonLowHitRate  ResizeReason = "low-hit-rate"  // grew: hit rate under LowerHitRate, a larger cache would have helped
	ReasonHighHitRate ResizeReason = "high-hit-rate" // shrank: hit rate over UpperHitRate
	ReasonNoGain      ResizeReason = "no-gain"       // shrank: no size up to MaxBytes would serve the accesses
	ReasonIdle        ResizeReason = "idle"          // shrank: no access for EpochTimeout
	ReasonFlash       ResizeReason = "flash"         // grew at once: a request needed more than the active limit
	ReasonConfig      ResizeReason = "config"        // SetConfig or RestoreAdaptiveState
)

// ResizeDecision is one change of the cache's quiescent size.
type ResizeDecision struct {
	Epoch    int64   // the epoch whose end decided (for flash and config: the epoch in progress)
	Accesses int64   // chunk accesses in that epoch
	HitRate  float64 // hits/accesses in that epoch (0 with no access)
	GainRate float64 // misses on recently evicted chunks/accesses
	Depth    int64   // deepest of those misses in the ghost list (bytes a larger cache needed)
	Recent   int64   // bytes of the chunks accessed in the last AgeOutEpochs epochs (0 without age-out)
	OldBytes int64   // quiescent size before
	NewBytes int64   // quiescent size after (MaxMemoryBytes applied)
	Reason   ResizeReason
}

// resizeLogLen is how many recent decisions Stats.ResizeLog keeps.
const resizeLogLen = 32

// adaptState is adaptive sizing's state.
type adaptState struct {
	// mu serializes size changes (epoch decisions, flash increases,
	// SetConfig, RestoreAdaptiveState) and guards the epoch's counts and
	// the decision log. Epoch closers take it with TryLock: a request that
	// loses goes on at once. Never held across I/O. Lock order: the table
	// at Cache.mu.
	mu struct {
		sync.Mutex
		epoch                              int64 // epochs closed
		startHits, startMisses, startGhost int64 // counts when the epoch in progress began
		// lastTotal is the access count the adaptor saw last, lastAccess
		// when it last saw it change.
		lastTotal  int64
		lastAccess time.Time
		log        [resizeLogLen]ResizeDecision
		logged     int64 // decisions ever recorded; log holds the last min(logged, resizeLogLen)
	}

	// ticks counts requests that ended past the hit path; every
	// adaptCheckEvery-th looks at the epoch. It, depth and the ghost
	// list's shard locks are the shared writes adaptive sizing adds on the
	// miss path; a hit adds none, but for the TryLock of every
	// hitCheckEvery-th hit of its stripe.
	ticks atomic.Int64
	// depth is the deepest ghost hit of the epoch in progress.
	depth                   atomic.Int64
	grows, shrinks, flashes atomic.Int64
	epochs                  atomic.Int64
	// wake is a pending wake-up for the adaptor (configuration changed).
	wake  chan struct{}
	ghost ghostList
}

const adaptCheckEvery = 8

// hitCheckEvery: the hit path looks at the epoch on every hitCheckEvery-th
// hit counted on its own stripe of the hit counter, so a phase of hits
// only closes its epochs as fast as a phase of misses, without a shared
// write per hit.
const hitCheckEvery = 256

// reset starts a new epoch at the current counts, s being the sizing in
// force. Caller holds adaptive.mu (or is New).
func (z *sizer) reset(s *sizing) {
	a := &z.adaptive
	a.mu.startHits = z.stats.hits(z.access)
	a.mu.startMisses = z.stats.hot.Load(hotMisses)
	a.mu.startGhost = a.ghost.hits.Load()
	a.mu.lastTotal, a.mu.lastAccess = a.mu.startHits+a.mu.startMisses, time.Now()
	a.depth.Store(0)
	z.order.aging.Store(s.ad != nil && s.ad.ageOut > 0)
	if s.ad == nil {
		a.ghost.clear()
	}
}

// record appends d to the decision log. Caller holds sizes.adaptive.mu.
func (a *adaptState) record(d ResizeDecision) {
	a.mu.log[a.mu.logged%resizeLogLen] = d
	a.mu.logged++
}

// tick is called by every request that ends past the hit path while
// adaptive sizing is on; it reports whether it is time to look at the
// epoch (closeEpoch).
func (a *adaptState) tick() bool {
	return a.ticks.Add(1)%adaptCheckEvery == 0
}

// closeEpoch closes the epoch in progress if it is long enough (or, from
// the adaptor's timer, idle) and applies its decision. It gives way at
// once to any other size change in progress.
func (z *sizer) closeEpoch(timer bool) {
	if !z.adaptive.mu.TryLock() {
		return
	}
	defer z.adaptive.mu.Unlock()
	s := z.current()
	p := s.ad
	if p == nil || z.closed.Load() {
		return
	}
	hits := z.stats.hits(z.access) - z.adaptive.mu.startHits
	acc := hits + z.stats.hot.Load(hotMisses) - z.adaptive.mu.startMisses
	gain := z.adaptive.ghost.hits.Load() - z.adaptive.mu.startGhost
	now := time.Now()
	idle := false
	if timer {
		if total := z.adaptive.mu.startHits + z.adaptive.mu.startMisses + acc; total != z.adaptive.mu.lastTotal {
			z.adaptive.mu.lastTotal, z.adaptive.mu.lastAccess = total, now
		}
	}
	if acc < p.epoch {
		// Idle: no access at all for EpochTimeout (a partial epoch's
		// counts are dropped with it).
		if !timer || p.timeout <= 0 || now.Sub(z.adaptive.mu.lastAccess) < p.timeout {
			return
		}
		idle = true
	}
	var recent int64
	if p.ageOut > 0 {
		var ok bool
		if recent, ok = z.order.advanceAge(p.ageOut, z.access); !ok {
			return // the policy lock is busy: close at the next look
		}
	}
	if idle {
		z.adaptive.mu.lastAccess = now // the next idle decision after another timeout
	}
	d := p.decide(s.quiescent, hits, acc, gain, z.adaptive.depth.Swap(0), recent, idle)
	d.Epoch = z.adaptive.mu.epoch
	z.adaptive.mu.epoch++
	z.adaptive.epochs.Add(1)
	z.adaptive.mu.startHits += hits
	z.adaptive.mu.startMisses += acc - hits
	z.adaptive.mu.startGhost += gain
	if d.NewBytes == s.quiescent {
		return
	}
	ns := z.newSizing(s.raw, d.NewBytes)
	if ns.quiescent == s.quiescent {
		return // the hard cap (or the bounds) leave nothing to change
	}
	d.NewBytes = ns.quiescent
	if d.NewBytes > d.OldBytes {
		z.adaptive.grows.Add(1)
	} else {
		z.adaptive.shrinks.Add(1)
	}
	z.publishLocked(ns, d, true)
}

// decide is the policy: the new quiescent size after an epoch of acc
// accesses, hits of them hits and gain of them misses on recently evicted
// chunks (the deepest depth bytes into the ghost list), at size bytes,
// recent bytes having been accessed in the last AgeOutEpochs epochs.
func (p *adaptiveParams) decide(size, hits, acc, gain, depth, recent int64, idle bool) ResizeDecision {
	d := ResizeDecision{Accesses: acc, OldBytes: size, NewBytes: size, Depth: depth, Recent: recent}
	if acc > 0 {
		d.HitRate = float64(hits) / float64(acc)
		d.GainRate = float64(gain) / float64(acc)
	}
	switch {
	case idle:
		d.NewBytes, d.Reason = p.shrink(size), ReasonIdle
	case d.HitRate < p.lower && d.GainRate >= p.minGain:
		d.NewBytes, d.Reason = p.grow(size), ReasonLowHitRate
		if depth > 0 {
			d.NewBytes = max(min(d.NewBytes, size+depth+depth/8), size)
		}
	case d.HitRate > p.upper:
		d.NewBytes, d.Reason = p.shrink(size), ReasonHighHitRate
		if p.ageOut > 0 {
			d.NewBytes = p.shrinkTo(size, recent+recent/8)
		}
	case d.HitRate < p.minGain && d.GainRate < p.minGain:
		d.NewBytes, d.Reason = p.shrink(size), ReasonNoGain
	}
	return d
}

func (p *adaptiveParams) grow(size int64) int64 {
	n := satMul(size, p.incr)
	if size <= math.MaxInt64-p.maxIncr {
		n = min(n, size+p.maxIncr)
	}
	return max(min(n, p.max), size)
}

func (p *adaptiveParams) shrink(size int64) int64 {
	return p.shrinkTo(size, satMul(size, p.decr))
}

// shrinkTo is target bounded by MaxDecrementBytes and MinBytes, never
// above size.
func (p *adaptiveParams) shrinkTo(size, target int64) int64 {
	n := max(target, size-p.maxDecr)
	return min(max(n, p.min), size)
}

// flashFor returns the active limit a request's missing chunks (work) are
// split against, first growing the cache (flash increase) when they need
// more than the active limit and adaptive sizing allows it.
func (z *sizer) flashFor(work []*group) int64 {
	s := z.current()
	if s.ad == nil || s.ad.flash == 0 || len(work) == 0 {
		return s.active
	}
	var need int64
	for _, g := range work {
		need += g.hint()
	}
	if need <= s.active {
		return s.active
	}
	return z.flash(need)
}

// flash grows the quiescent size by FlashMultiple × need. It takes sizes.adaptive.mu
// (never held across I/O), so it waits at most for another decision's
// arithmetic.
func (z *sizer) flash(need int64) int64 {
	z.adaptive.mu.Lock()
	defer z.adaptive.mu.Unlock()
	s := z.current()
	if s.ad == nil || need <= s.active {
		return s.active
	}
	add := satMul(need, s.ad.flash)
	ns := z.newSizing(s.raw, min(s.quiescent+add, math.MaxInt64/2))
	if ns.quiescent <= s.quiescent {
		return s.active
	}
	hits := z.stats.hits(z.access) - z.adaptive.mu.startHits
	acc := hits + z.stats.hot.Load(hotMisses) - z.adaptive.mu.startMisses
	d := ResizeDecision{Epoch: z.adaptive.mu.epoch, Accesses: acc, OldBytes: s.quiescent, NewBytes: ns.quiescent, Reason: ReasonFlash}
	if acc > 0 {
		d.HitRate = float64(hits) / float64(acc)
	}
	z.adaptive.flashes.Add(1)
	z.publishLocked(ns, d, true)
	return ns.active
}

// wakeAdaptor wakes the adaptor goroutine if it sleeps.
func (a *adaptState) wakeAdaptor() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// adaptorPeriod is how often the adaptor looks at the epoch.
func adaptorPeriod(p *adaptiveParams) time.Duration {
	d := 100 * time.Millisecond
	if p.timeout > 0 {
		d = min(d, p.timeout/4)
	}
	return max(d, time.Millisecond)
}

// adaptor is the goroutine that closes epochs of hits only (no request
// passes endOn) and idle epochs, until jobs end. startBackground starts
// it.
func (z *sizer) adaptor(jobs *background) {
	defer jobs.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		if p := z.current().ad; p != nil {
			t.Reset(adaptorPeriod(p))
		}
		select {
		case <-jobs.ctx.Done():
			return
		case <-z.adaptive.wake:
			t.Stop()
		case <-t.C:
			z.closeEpoch(true)
		}
	}
}

// --- the ghost list -----------------------------------------------------------

// ghostShards spreads the ghost list over locks, so concurrent misses
// rarely meet.
const ghostShards = 16

// ghostMaxKeys bounds the keys the ghost list holds, whatever the sizes:
// about 100 bytes each (key, map slot, queue record), so at most about
// 13 MB, outside the cache's budget. With chunks so small that MaxBytes
// minus the size holds more keys, the list covers less than that gap and
// growth sees fewer would-be hits.
const ghostMaxKeys = 1 << 17

// ghostList remembers the keys of recently evicted chunks, up to MaxBytes
// minus the current size of them: a miss on one of them would have been
// a hit in a cache at MaxBytes.
type ghostList struct {
	shards [ghostShards]ghostShard
	hits   atomic.Int64 // misses that found their key here
}

type ghostShard struct {
	// mu guards the shard. Taken on misses and evictions only.
	mu sync.Mutex
	m  map[chunkKey]ghostRef // key → its live record in q
	q  []evictedRec          // FIFO; q[head:] are the records, oldest first
	// head indexes q's oldest record; bytes sums the sizes of q[head:].
	head  int
	bytes int64
	seq   uint64
	total int64 // bytes ever added
	_     [64]byte
}

// ghostRef is a key's live record: its sequence number and the shard's
// total when it was added.
type ghostRef struct {
	seq uint64
	at  int64
}

type evictedRec struct {
	key  chunkKey
	seq  uint64
	size int64
}

func (g *ghostList) shard(k chunkKey) *ghostShard {
	return &g.shards[k.hash(0x9e3779b97f4a7c15)%ghostShards]
}

func (g *ghostList) clear() {
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		s.m, s.q, s.head, s.bytes = nil, nil, 0, 0
		s.mu.Unlock()
	}
}

// noteEvicted remembers evicted entries' keys (called by evict before it
// removes them).
func (z *sizer) noteEvicted(es []*entry) {
	s := z.limits.Load()
	if s.ad == nil || len(es) == 0 {
		return
	}
	room := (s.ad.max - s.quiescent) / ghostShards
	for _, e := range es {
		z.adaptive.ghost.shard(e.key).add(e.key, e.size.Load(), room)
	}
}

// noteMiss counts a miss whose key was evicted recently.
func (z *sizer) noteMiss(k chunkKey) {
	if z.current().ad == nil {
		return
	}
	if depth, ok := z.adaptive.ghost.shard(k).take(k); ok {
		z.adaptive.ghost.hits.Add(1)
		for {
			d := z.adaptive.depth.Load()
			if depth <= d || z.adaptive.depth.CompareAndSwap(d, depth) {
				break
			}
		}
	}
}

func (s *ghostShard) add(k chunkKey, size, room int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if room <= 0 {
		s.m, s.q, s.head, s.bytes = nil, nil, 0, 0
		return
	}
	if s.m == nil {
		s.m = make(map[chunkKey]ghostRef)
	}
	s.seq++
	s.total += size
	s.m[k] = ghostRef{s.seq, s.total}
	s.q = append(s.q, evictedRec{key: k, seq: s.seq, size: size})
	s.bytes += size
	for s.head < len(s.q) && (s.bytes > room || len(s.q)-s.head > ghostMaxKeys/ghostShards) {
		r := &s.q[s.head]
		if s.m[r.key].seq == r.seq {
			delete(s.m, r.key)
		}
		s.bytes -= r.size
		*r = evictedRec{}
		s.head++
	}
	if s.head > len(s.q)/2 && s.head > 64 {
		s.q = append(s.q[:0], s.q[s.head:]...)
		s.head = 0
	}
}

// take removes k and returns how deep it was: the bytes evicted after it
// and its own, times the shards (each shard sees about 1/ghostShards of
// the evictions).
func (s *ghostShard) take(k chunkKey) (depth int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[k]
	if !ok {
		return 0, false
	}
	delete(s.m, k)
	return (s.total - r.at) * ghostShards, true
}

// --- stats --------------------------------------------------------------------

// fillStats fills the adaptive sizing part of a Stats snapshot.
func (a *adaptState) fillStats(st *Stats) {
	st.AdaptiveEpochs = a.epochs.Load()
	st.ResizeGrows = a.grows.Load()
	st.ResizeShrinks = a.shrinks.Load()
	st.FlashIncreases = a.flashes.Load()
	st.GhostHits = a.ghost.hits.Load()
	a.mu.Lock()
	n := min(a.mu.logged, resizeLogLen)
	if n > 0 {
		st.ResizeLog = make([]ResizeDecision, 0, n)
		for i := a.mu.logged - n; i < a.mu.logged; i++ {
			st.ResizeLog = append(st.ResizeLog, a.mu.log[i%resizeLogLen])
		}
	}
	st.Resizes = a.mu.logged
	a.mu.Unlock()
}
