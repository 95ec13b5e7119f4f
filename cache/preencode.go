package cache

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
)

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

	preEncodeDeps
}

// preEncodeDeps is what the pre-encoder works with, set by start.
type preEncodeDeps struct {
	closed  *atomic.Bool // the cache's
	sizes   *sizer
	budget  *budget
	order   *policyLock
	workers workers
	stats   *counters
}

// start configures the pre-encoder from cfg (defaults applied) and, when
// Config.PreEncodeBytes > 0, starts its goroutine under jobs.
func (p *preEncodeState) start(cfg Config, jobs *background, deps preEncodeDeps) {
	p.preEncodeDeps = deps
	if cfg.PreEncodeBytes <= 0 {
		return
	}
	p.max = cfg.PreEncodeBytes
	p.batch = 2 * max(cfg.Workers, 1)
	p.kick = make(chan struct{}, 1)
	jobs.wg.Add(1)
	go p.run(jobs)
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
// Config.PreEncodeBytes). writer.writeBack then uses a kept image whose version
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

// run is the pre-encoder's goroutine: a round per wake-up, and more
// while rounds keep images.
func (p *preEncodeState) run(jobs *background) {
	defer jobs.wg.Done()
	for {
		select {
		case <-jobs.ctx.Done():
			return
		case <-p.kick:
		}
		for p.encodeRound(jobs.ctx) > 0 {
		}
	}
}

// encodeRound encodes one batch of cold dirty chunks and reports how
// many images it kept.
func (p *preEncodeState) encodeRound(ctx context.Context) int {
	if p.closed.Load() || ctx.Err() != nil {
		return 0
	}
	p.round.Lock()
	defer p.round.Unlock()
	over := p.budget.resident.Load() - p.sizes.current().preHigh
	if over <= 0 || p.bytes.Load() >= p.max {
		return 0
	}
	// Look only at the chunks eviction would reach soon: the coldest
	// over+PreEncodeBytes bytes of the order.
	window := over + p.max
	var cands []*entry
	var seen int64
	p.order.Lock()
	p.order.pol.Nominate(func(e *entry) verdict {
		if len(cands) >= p.batch || seen >= window {
			return stop
		}
		sz := e.size.Load()
		seen += sz
		// An image is budgeted at its chunk's size until encoded, so a
		// cache whose image budget cannot hold one chunk pre-encodes
		// nothing (and leaves small caches' eviction order alone).
		if e.bypass || !e.dirty.Load() || e.encoded.Load() != nil || sz > p.max-p.bytes.Load() {
			return skip
		}
		if e.tryPin() {
			cands = append(cands, e)
		}
		return skip
	})
	p.order.Unlock()
	if len(cands) == 0 {
		return 0
	}
	kept := make([]bool, len(cands))
	_ = p.workers.run(ctx, len(cands), func(i int) error {
		kept[i] = p.keep(cands[i])
		return nil
	})
	n := 0
	for i, e := range cands {
		if kept[i] {
			n++
		}
		p.budget.unpin(e)
	}
	return n
}

// keep encodes one pinned entry and keeps the image if the chunk did
// not change meanwhile and the image fits both budgets.
func (p *preEncodeState) keep(e *entry) bool {
	enc, ver, ok := preEncodeImage(e)
	if !ok {
		return false
	}
	img := newPreImage(compactImage(enc), ver)
	n := img.bytes()
	// Check, reserve and charge under the exclusive latch: a reservation
	// made before the check would count, for a moment, an image of a
	// chunk that changed or was written meanwhile, or one past the budget.
	e.latch.Lock()
	if e.version.Load() != ver || !e.dirty.Load() || e.encoded.Load() != nil || !p.reserve(n) {
		e.latch.Unlock()
		img.release()
		return false
	}
	if !p.budget.tryCharge(n, p.sizes.current().active) {
		p.bytes.Add(-n)
		e.latch.Unlock()
		img.release()
		return false
	}
	e.encoded.Store(img)
	// Charged to the entry (evicting it releases the image) but not to
	// its dataset: minimum reservations are about chunks.
	e.size.Add(n)
	p.budget.dirty.Add(n) // dirty (checked above, under the latch)
	e.latch.Unlock()
	p.stats.preEncoded.Add(1)
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
