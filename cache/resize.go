package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
)

// Runtime configuration (SCC requirements §4.2 "Configure Chunk Cache": get and
// set the configuration of an existing cache) and the hard memory cap
// (SCC design §4.3 "maximum available").
//
// The sizes in force live in one immutable sizing value behind an atomic
// pointer (Cache.sizes.limits). SetConfig and adaptive sizing build a new value and
// swap it in under Cache.sizes.adaptive.mu, so every reader sees one consistent set of
// limits, a reader on the data path pays one atomic load, and nobody on
// the data path ever waits for a resize. A smaller limit is enforced by the
// normal eviction path: SetConfig evicts down itself (writing dirty chunks
// back, never dropping them), an adaptive decrease wakes the background
// trimmer, and every request's reservation evicts to fit the active limit
// it reads.

// ErrImmutableConfig is returned (wrapped, together with ErrInvalidConfig)
// by SetConfig when the new configuration changes a field that only New
// can set.
var ErrImmutableConfig = errors.New("cache: field cannot change on a live cache")

// sizer is the sizes in force and adaptive sizing's state.
type sizer struct {
	// limits holds the quiescent and active limits, bypass threshold and
	// what derives from them (resize.go). Replaced whole by SetConfig and
	// adaptive sizing, so a reader sees one consistent set; every
	// replacement calls limitChanged so that admission follows.
	limits atomic.Pointer[sizing]
	// adaptive is adaptive sizing's state (adaptive.go); its mu
	// serializes every size change.
	adaptive adaptState
	// preEncode is whether the pre-encoder runs (Config.PreEncodeBytes >
	// 0, which SetConfig cannot change): only then do sizings have a
	// pre-encode mark. Set once, before the first sizing.
	preEncode bool

	sizingDeps
}

// sizingDeps is what sizing reads (the hit and miss counts, the order's
// age ring) and tells (admission, the trimmer), set by New.
type sizingDeps struct {
	closed    *atomic.Bool // the cache's
	stats     *counters
	access    *accessRecording
	order     *policyLock
	admission *admission
	trim      *trimState
}

// sizing is the set of sizes in force. Immutable once published.
type sizing struct {
	// raw is the configuration as last given to New or SetConfig (zero
	// fields mean default); Config returns it.
	raw Config
	// quiescent is the resident budget when no request runs: the size
	// adaptive sizing resizes (or QuiescentBytes), capped by hardCap.
	quiescent int64
	// active is quiescent × ActiveMultiplier, capped by hardCap.
	active int64
	// hardCap is Config.MaxMemoryBytes resolved: math.MaxInt64/2 if none.
	hardCap int64
	// bypass is the bypass threshold (math.MaxInt64 when bypass is off);
	// the default follows the quiescent size.
	bypass int64
	// trimRound bounds the bytes one background trim round evicts:
	// quiescent/16, >= 1.
	trimRound int64
	// preHigh is the level above which the pre-encoder works: 3/4 of
	// quiescent, math.MaxInt64 when pre-encode is off.
	preHigh int64
	// minBytes is the default per-dataset minimum for datasets registered
	// from now on.
	minBytes int64
	// ad is the adaptive sizing policy resolved, nil when off.
	ad *adaptiveParams
}

func (z *sizer) current() *sizing { return z.limits.Load() }

// newSizing resolves raw (validated) at the given quiescent size; size < 0
// means "the size raw asks for" (QuiescentBytes, or the adaptive initial
// size).
func (z *sizer) newSizing(raw Config, size int64) *sizing {
	d := raw.withDefaults()
	s := &sizing{raw: raw, hardCap: math.MaxInt64 / 2, minBytes: d.MinBytes}
	if raw.MaxMemoryBytes > 0 {
		s.hardCap = raw.MaxMemoryBytes
	}
	if raw.Adaptive.Enabled {
		s.ad = resolveAdaptive(raw.Adaptive, d.QuiescentBytes)
	}
	if size < 0 {
		size = d.QuiescentBytes
		if s.ad != nil {
			size = s.ad.initial
		}
	}
	if s.ad != nil {
		size = min(max(size, s.ad.min), s.ad.max)
	}
	s.quiescent = min(size, s.hardCap)
	s.active = int64(math.Min(float64(s.quiescent)*d.ActiveMultiplier, float64(s.hardCap)))
	s.bypass = d.BypassBytes
	switch {
	case raw.BypassBytes < 0:
		s.bypass = math.MaxInt64
	case raw.BypassBytes == 0:
		s.bypass = s.quiescent / 4
	}
	s.trimRound = max(s.quiescent/16, 1)
	s.preHigh = math.MaxInt64
	if z.preEncode {
		s.preHigh = s.quiescent / 4 * 3
	}
	return s
}

// init publishes the first sizing of raw (validated); preEncode is
// whether the pre-encoder runs. Called once, from New, with the
// collaborators set.
func (z *sizer) init(raw Config, preEncode bool) {
	z.preEncode = preEncode
	s := z.newSizing(raw, -1)
	z.limits.Store(s)
	z.reset(s)
}

// Config returns the cache's configuration as last given to New or
// SetConfig, zero fields standing for their defaults. The size in force
// (which adaptive sizing moves) is Stats.QuiescentLimit, not
// Config().QuiescentBytes.
func (c *Cache) Config() Config { return c.sizes.current().raw }

// SetConfig changes the configuration of a live cache (SCC requirements §4.2).
// These fields may change: QuiescentBytes, ActiveMultiplier, MinBytes
// (for datasets registered afterwards), BypassBytes, MaxMemoryBytes and
// Adaptive; every other field must equal the current one (compare with
// Config), or SetConfig fails with ErrImmutableConfig. Runner may be nil,
// meaning the current one (a Runner of a non-comparable type can only be
// kept that way). An invalid cfg
// fails with ErrInvalidConfig. On either error nothing changes.
//
// The new configuration takes effect atomically: requests see either the
// old limits or the new ones. The new size is QuiescentBytes when adaptive
// sizing is off; with it on, it is Adaptive.InitialBytes when that (or
// Enabled) changed, else the current size clamped into the new
// [MinBytes, MaxBytes]; MaxMemoryBytes caps it in every case. An adaptive
// epoch in progress starts over.
//
// When the active limit shrinks below the resident bytes, SetConfig then
// evicts down to it through the normal eviction path (dirty chunks are
// written back first, never dropped). If those writes fail or ctx ends,
// SetConfig returns that error, the new configuration stays in force, and
// the chunks that could not be written stay resident and dirty for the
// next request or Flush to write.
func (c *Cache) SetConfig(ctx context.Context, cfg Config) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	s, err := c.sizes.configure(cfg)
	if err != nil {
		return err
	}
	return c.shrinkTo(ctx, s.active)
}

// configure puts cfg (validated) in force for SetConfig and returns the
// new sizing; a field only New can set that cfg changes fails it with
// nothing changed.
func (z *sizer) configure(cfg Config) (*sizing, error) {
	z.adaptive.mu.Lock()
	old := z.current()
	runnerGiven := cfg.Runner != nil
	if !runnerGiven {
		cfg.Runner = old.raw.Runner
	}
	if err := immutableChanged(old.raw, cfg, runnerGiven); err != nil {
		z.adaptive.mu.Unlock()
		return nil, err
	}
	size := int64(-1) // what cfg asks for
	if cfg.Adaptive.Enabled && old.raw.Adaptive.Enabled && cfg.Adaptive.InitialBytes == old.raw.Adaptive.InitialBytes {
		size = old.quiescent
	}
	s := z.newSizing(cfg, size)
	z.publishLocked(s, ResizeDecision{
		Epoch: z.adaptive.mu.epoch, OldBytes: old.quiescent, NewBytes: s.quiescent, Reason: ReasonConfig,
	}, old.quiescent != s.quiescent)
	z.reset(s)
	z.adaptive.mu.Unlock()
	z.adaptive.wakeAdaptor()
	return s, nil
}

// shrinkTo evicts until resident bytes fit under limit (or nothing more
// can be evicted now), through Cache.evict.
func (c *Cache) shrinkTo(ctx context.Context, limit int64) error {
	for {
		over := c.budget.resident.Load() - limit
		if over <= 0 {
			return nil
		}
		freed, err := c.evict(ctx, over, 2)
		if err != nil {
			return fmt.Errorf("cache: shrinking to %d bytes: %w", limit, err)
		}
		if freed == 0 {
			// Everything left is pinned, loading or metadata: the requests
			// holding it release it, and their reservations evict to the
			// new limit.
			return nil
		}
	}
}

// immutableChanged reports the first field that differs between the live
// configuration and the proposed one among those only New can set.
func immutableChanged(cur, next Config, runnerGiven bool) error {
	bad := func(name string) error {
		return fmt.Errorf("%w: %w: %s", ErrInvalidConfig, ErrImmutableConfig, name)
	}
	switch {
	case cur.Policy != next.Policy:
		return bad("Policy")
	case cur.PartialSecondChance != next.PartialSecondChance:
		return bad("PartialSecondChance")
	case cur.NoDirectWrites != next.NoDirectWrites:
		return bad("NoDirectWrites")
	case cur.DirectWriteBytes != next.DirectWriteBytes:
		return bad("DirectWriteBytes")
	case cur.Workers != next.Workers:
		return bad("Workers")
	case runnerGiven && !sameRunner(cur.Runner, next.Runner):
		return bad("Runner")
	case cur.PreEncodeBytes != next.PreEncodeBytes:
		return bad("PreEncodeBytes")
	case cur.Prefetch != next.Prefetch:
		return bad("Prefetch")
	case cur.PrefetchBytes != next.PrefetchBytes:
		return bad("PrefetchBytes")
	case cur.PrefetchChunks != next.PrefetchChunks:
		return bad("PrefetchChunks")
	}
	return nil
}

// sameRunner compares two Runners without panicking on values whose
// dynamic type is not comparable (those are never "the same").
func sameRunner(a, b Runner) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}

// publishLocked swaps in s and tells admission; with logged it records d
// in the decision log. A smaller quiescent size wakes the trimmer, which
// evicts down once no request runs. Caller holds z.adaptive.mu.
func (z *sizer) publishLocked(s *sizing, d ResizeDecision, logged bool) {
	old := z.limits.Swap(s)
	if logged {
		z.adaptive.record(d)
	}
	if old == nil || old.active != s.active {
		z.admission.limitChanged(z)
	}
	if old != nil && s.quiescent < old.quiescent {
		select {
		case z.trim.kick <- struct{}{}:
		default:
		}
	}
}
