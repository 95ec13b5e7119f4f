package cache

import (
	"context"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
	"sync"
	"sync/atomic"
)

// The cache runs background goroutines: the trimmer and the
// access replayer (always, replay.go), the pre-encoder
// (Config.PreEncodeBytes > 0) and the prefetcher (Config.Prefetch,
// prefetch.go), and the split readers' helpers (Config.SplitReadBytes,
// splitread.go). Each job's state is its own type below; what they share is
// background.

// background is the lifetime of the background goroutines.
type background struct {
	// ctx is cancelled by Close (cancel); every goroutine returns once it
	// sees ctx done, and ctx is the context of their I/O.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts running background goroutines. INVARIANT: Add(1) before
	// each go statement (in startBackground and what it calls, and in
	// startHelpers under split.mu, which Close takes after setting closed); Close waits on it after
	// cancel, so no goroutine outlives Close.
	wg sync.WaitGroup
}

// trimState is the trimmer's: it brings the cache back toward the
// quiescent size once no request is running (Cache.trimmer).
type trimState struct {
	// kick is a pending wake-up. Capacity 1, sent without blocking (by
	// endOn and File.ChargeMetadata when resident bytes are over the quiescent
	// size), so a burst of kicks while a trim runs collapses into one more
	// round. Never nil, never closed.
	kick chan struct{}
	// One trim round evicts at most sizing.trimRound bytes.
}

// preEncodeState is the pre-encoder's (see "Background pre-encode" below).
// Its configuration is fixed after New; only bytes changes.
type preEncodeState struct {
	// max caps the bytes of kept images: Config.PreEncodeBytes.
	// INVARIANT: 0 means pre-encode is off: kick is nil, preHigh is
	// math.MaxInt64, no goroutine runs and no image is ever kept.
	max int64
	// The resident level above which the pre-encoder works is
	// sizing.preHigh: 3/4 of the quiescent size (math.MaxInt64 when off,
	// so endOn's check fails).
	// batch is the most chunks one round encodes: 2 × Workers (>= 2 when
	// on), enough to keep the pool busy.
	batch int
	// bytes is the sum of the kept images' bytes. Each is also in its
	// entry's size, so in resident and (the chunk being dirty) in
	// dirtyBytes. INVARIANT: bytes <= max at every instant, and at rest
	// bytes = Σ images of cached entries (checked after every cache test).
	// preEncode reserves an image's bytes only under the entry's exclusive
	// latch, after finding the chunk unchanged, and only if they fit
	// (preEncodeState.reserve), so Stats never shows an image that is over the
	// budget or whose chunk changed; the one reservation that can still be
	// taken back (the memory limit refused the charge) is within max.
	bytes atomic.Int64
	// kick is a pending wake-up, capacity 1, sent without blocking by
	// preEncodeState.wake. nil when off.
	kick chan struct{}
	// round is held through each round, so rounds never overlap: the
	// goroutine's and the tests' (preEncodeNow). When a round that holds it keeps
	// nothing, no other attempt is in flight and the kept images are
	// settled until the chunks change. Only one goroutine runs rounds
	// outside tests, so it is uncontended there.
	round sync.Mutex
}

// startBackground sets up the background jobs' state from cfg (defaults
// applied) and starts their goroutines. Called once, from New.
func (c *Cache) startBackground(cfg Config) {
	c.background.jobs.ctx, c.background.jobs.cancel = context.WithCancel(context.Background())
	c.background.trim.kick = make(chan struct{}, 1)
	c.background.jobs.wg.Add(1)
	go c.trimmer()
	c.access.replay.kick = make(chan struct{}, 1)
	c.background.jobs.wg.Add(1)
	go c.replayer()
	c.sizes.adaptive.wake = make(chan struct{}, 1)
	c.background.jobs.wg.Add(1)
	go c.adaptor()
	if cfg.PreEncodeBytes > 0 {
		c.background.preEncode.max = cfg.PreEncodeBytes
		c.background.preEncode.batch = 2 * max(cfg.Workers, 1)
		c.background.preEncode.kick = make(chan struct{}, 1)
		c.background.jobs.wg.Add(1)
		go c.preEncoder()
	}
	if cfg.Prefetch {
		c.background.prefetch.max = cfg.PrefetchBytes
		c.background.prefetch.ahead = cfg.PrefetchChunks
		c.background.prefetch.jobs = make(chan prefetchJob, 16)
		c.background.jobs.wg.Add(1)
		go c.prefetcher()
	}
	c.background.split.start(cfg, &c.stats, &c.background.jobs, &c.closed) // the split readers' helpers (splitread.go)
}

// trimmer brings the cache back toward the quiescent size once no request
// is running. Errors (a dirty victim that cannot be written) leave the
// chunk dirty and cached; they surface on the next Flush.
func (c *Cache) trimmer() {
	defer c.background.jobs.wg.Done()
	for {
		select {
		case <-c.background.jobs.ctx.Done():
			return
		case <-c.background.trim.kick:
		}
		for c.stats.hot.Load(hotActive) <= 0 {
			sz := c.sizes.current()
			over := c.budget.resident.Load() - sz.quiescent
			if over <= 0 {
				break
			}
			// Bounded rounds: a round's victims stay evicting until their
			// one vector write is done, and a request that starts meanwhile
			// can neither use nor evict them. Small rounds let it find
			// other victims at once, and the loop stops trimming as soon
			// as it starts. A round still spans several chunks, which the
			// pool encodes in parallel.
			freed, err := c.evict(c.background.jobs.ctx, min(over, sz.trimRound), 1)
			if err != nil {
				c.stats.trimErrors.Add(1)
				break
			}
			if freed == 0 {
				// No chunk can go, and metadata alone is over the
				// quiescent size: its re-readable part can (external.go).
				if c.budget.metadata.Load() > sz.quiescent {
					c.shedMetadata()
				}
				break
			}
		}
	}
}

// Background pre-encode (SCC requirements §2.2 item 6: "preparing dirty chunks for
// flush when they become likely candidates for flush and/or eviction";
// SCC internal API "Data Formats": chunks "preemptively encoded as they near the
// conditions for eviction", a later write invalidating the image).
//
// When resident bytes pass the high-water mark (3/4 of QuiescentBytes: above
// it the next trim or the next request short of space evicts), one
// goroutine walks the cold end of the replacement order, pins up to a
// batch of dirty chunks that have no image yet, and encodes them on the
// worker pool under the shared latch, as a flush would. Each image is kept
// in its entry with the chunk version it encodes, and its bytes are charged
// to the entry (so to the memory budget: an image is added only if it fits
// under the active limit, and all images together stay under
// Config.PreEncodeBytes). writeBack then uses a kept image whose version
// still matches instead of encoding again; modifiedLocked drops the image
// of a chunk that is written to. Encode errors and panics here are ignored:
// the chunk simply stays without an image and the foreground encode
// reports them.

// wake wakes the pre-encoder if it has work (wanted); a few atomic loads
// when it has none.
func (p *preEncodeState) wake(resident int64, z *sizer, b *budget) {
	if !p.wanted(resident, z, b) {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// wanted reports whether the pre-encoder may find work at this
// resident level: pre-encoding is on, the cache is above its high mark (z),
// the kept images have room, and some dirty bytes have no image yet. The
// last test keeps a read-only workload above the mark (every request's
// end comes here) from waking the goroutine for nothing: that wake-up
// was 7 % of the caller's CPU in a 1-goroutine random read profile. A
// stale pair of loads can only skip or add one kick; the next request's
// end looks again.
func (p *preEncodeState) wanted(resident int64, z *sizer, b *budget) bool {
	return p.max > 0 && resident > z.current().preHigh && p.bytes.Load() < p.max &&
		b.dirty.Load() > p.bytes.Load()
}

func (c *Cache) preEncoder() {
	defer c.background.jobs.wg.Done()
	for {
		select {
		case <-c.background.jobs.ctx.Done():
			return
		case <-c.background.preEncode.kick:
		}
		for c.preEncodeRound(c.background.jobs.ctx) > 0 {
		}
	}
}

// preEncodeRound encodes one batch of cold dirty chunks and reports how
// many images it kept.
func (c *Cache) preEncodeRound(ctx context.Context) int {
	if c.closed.Load() || ctx.Err() != nil {
		return 0
	}
	c.background.preEncode.round.Lock()
	defer c.background.preEncode.round.Unlock()
	over := c.budget.resident.Load() - c.sizes.current().preHigh
	if over <= 0 || c.background.preEncode.bytes.Load() >= c.background.preEncode.max {
		return 0
	}
	// Look only at the chunks eviction would reach soon: the coldest
	// over+PreEncodeBytes bytes of the order.
	window := over + c.background.preEncode.max
	var cands []*entry
	var seen int64
	c.mu.Lock()
	c.mu.pol.Nominate(func(e *entry) verdict {
		if len(cands) >= c.background.preEncode.batch || seen >= window {
			return stop
		}
		sz := e.size.Load()
		seen += sz
		// An image is budgeted at its chunk's size until encoded, so a
		// cache whose image budget cannot hold one chunk pre-encodes
		// nothing (and leaves small caches' eviction order alone).
		if e.bypass || !e.dirty.Load() || e.encoded.Load() != nil || sz > c.background.preEncode.max-c.background.preEncode.bytes.Load() {
			return skip
		}
		if e.tryPin() {
			cands = append(cands, e)
		}
		return skip
	})
	c.mu.Unlock()
	if len(cands) == 0 {
		return 0
	}
	kept := make([]bool, len(cands))
	_ = c.workers.run(ctx, len(cands), func(i int) error {
		kept[i] = c.preEncode(cands[i])
		return nil
	})
	n := 0
	for i, e := range cands {
		if kept[i] {
			n++
		}
		c.budget.unpin(e)
	}
	return n
}

// preEncode encodes one pinned entry and keeps the image if the chunk did
// not change meanwhile and the image fits both budgets.
func (c *Cache) preEncode(e *entry) bool {
	enc, ver, ok := preEncodeImage(e)
	if !ok {
		return false
	}
	p := newPreImage(compactImage(enc), ver)
	n := p.bytes()
	// Check, reserve and charge under the exclusive latch: a reservation
	// made before the check would count, for a moment, an image of a
	// chunk that changed or was written meanwhile, or one past the budget.
	e.latch.Lock()
	if e.version.Load() != ver || !e.dirty.Load() || e.encoded.Load() != nil || !c.background.preEncode.reserve(n) {
		e.latch.Unlock()
		p.release()
		return false
	}
	if !c.budget.tryCharge(n, c.sizes.current().active) {
		c.background.preEncode.bytes.Add(-n)
		e.latch.Unlock()
		p.release()
		return false
	}
	e.encoded.Store(p)
	// Charged to the entry (evicting it releases the image) but not to
	// its dataset: minimum reservations are about chunks.
	e.size.Add(n)
	c.budget.dirty.Add(n) // dirty (checked above, under the latch)
	e.latch.Unlock()
	c.stats.preEncoded.Add(1)
	return true
}

// preEncodeImage encodes e's chunk under the shared latch if it is dirty
// and has no image, with the version it encodes. Errors and panics of
// Encode only mean no image (the foreground encode reports them); the
// latch is let go either way, or the chunk could never be written again.
func preEncodeImage(e *entry) (enc layout.Encoded, ver uint64, ok bool) {
	e.latch.RLock()
	defer e.latch.RUnlock()
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	ver = e.version.Load()
	if !e.dirty.Load() || e.encoded.Load() != nil {
		return layout.Encoded{}, 0, false
	}
	enc, err := e.ds.lay().l.Encode(e.coord, e.chunk)
	return enc, ver, err == nil
}

// reserve adds n to the kept images' bytes if the sum stays within
// Config.PreEncodeBytes; it never exceeds it, even for a moment.
func (p *preEncodeState) reserve(n int64) bool {
	for {
		cur := p.bytes.Load()
		if cur+n > p.max {
			return false
		}
		if p.bytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// dropImageLocked releases e's kept image, if any, after it was written,
// returning its bytes to b.
// Caller holds e.latch exclusively (or owns e as evicting).
func (p *preEncodeState) dropImageLocked(e *entry, b *budget) {
	img := e.encoded.Swap(nil)
	if img == nil {
		return
	}
	n := img.bytes()
	p.bytes.Add(-n)
	e.size.Add(-n)
	if e.dirty.Load() {
		b.dirty.Add(-n)
	}
	b.charge(-n)
	img.release()
}

// compactImage moves a pooled image into the smallest class that holds it:
// an encoder's buffer is sized for the worst case (the raw chunk), and a
// kept image is charged what its buffer costs.
func compactImage(enc layout.Encoded) layout.Encoded {
	if !enc.Pooled || bufpool.Cap(len(enc.Image)) >= cap(enc.Image) {
		return enc
	}
	b := bufpool.Get(len(enc.Image))
	copy(b, enc.Image)
	bufpool.Put(enc.Image)
	enc.Image = b
	return enc
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
