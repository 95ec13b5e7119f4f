package cache

import (
	"context"
)

// Background pre-encode (seed 001 §2.2 item 6: "preparing dirty chunks for
// flush when they become likely candidates for flush and/or eviction";
// seed 002 "Data Formats": chunks "preemptively encoded as they near the
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

// kickPreEncode wakes the pre-encoder if it has work; two atomic loads
// when it has none.
func (c *Cache) kickPreEncode(resident int64) {
	if c.preMax <= 0 || resident <= c.preHigh || c.preBytes.Load() >= c.preMax {
		return
	}
	select {
	case c.preCh <- struct{}{}:
	default:
	}
}

func (c *Cache) preEncoder() {
	defer c.bgWG.Done()
	for {
		select {
		case <-c.bgCtx.Done():
			return
		case <-c.preCh:
		}
		for c.preEncodeRound(c.bgCtx) > 0 {
		}
	}
}

// preEncodeRound encodes one batch of cold dirty chunks and reports how
// many images it kept.
func (c *Cache) preEncodeRound(ctx context.Context) int {
	if c.closed.Load() || ctx.Err() != nil {
		return 0
	}
	over := c.resident.Load() - c.preHigh
	if over <= 0 || c.preBytes.Load() >= c.preMax {
		return 0
	}
	// Look only at the chunks eviction would reach soon: the coldest
	// over+PreEncodeBytes bytes of the order.
	window := over + c.preMax
	var cands []*entry
	var seen int64
	c.mu.Lock()
	c.mu.pol.nominate(func(e *entry) verdict {
		if len(cands) >= c.preBatch || seen >= window {
			return stop
		}
		sz := e.size.Load()
		seen += sz
		// An image is budgeted at its chunk's size until encoded, so a
		// cache whose image budget cannot hold one chunk pre-encodes
		// nothing (and leaves small caches' eviction order alone).
		if e.bypass || !e.dirty.Load() || e.encoded.Load() != nil || sz > c.preMax-c.preBytes.Load() {
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
	_ = c.run.run(ctx, len(cands), func(i int) error {
		kept[i] = c.preEncode(cands[i])
		return nil
	})
	n := 0
	for i, e := range cands {
		if kept[i] {
			n++
		}
		c.unpin(e)
	}
	return n
}

// preEncode encodes one pinned entry and keeps the image if the chunk did
// not change meanwhile and the image fits both budgets.
func (c *Cache) preEncode(e *entry) (kept bool) {
	defer func() {
		if r := recover(); r != nil {
			kept = false // the foreground Encode will report it
		}
	}()
	e.latch.RLock()
	ver := e.version.Load()
	if !e.dirty.Load() || e.encoded.Load() != nil {
		e.latch.RUnlock()
		return false
	}
	enc, err := e.ds.lay().l.Encode(e.coord, e.chunk)
	e.latch.RUnlock()
	if err != nil {
		return false
	}
	p := newPreImage(compactImage(enc), ver)
	n := p.bytes()
	if c.preBytes.Add(n) > c.preMax {
		c.preBytes.Add(-n)
		p.release()
		return false
	}
	if !c.tryCharge(n) {
		c.preBytes.Add(-n)
		p.release()
		return false
	}
	e.latch.Lock()
	if e.version.Load() != ver || !e.dirty.Load() || e.encoded.Load() != nil {
		e.latch.Unlock()
		c.preBytes.Add(-n)
		c.charge(-n)
		p.release()
		return false
	}
	e.encoded.Store(p)
	// Charged to the entry (evicting it releases the image) but not to
	// its dataset: minimum reservations are about chunks.
	e.size.Add(n)
	c.dirtyBytes.Add(n) // dirty (checked above, under the latch)
	e.latch.Unlock()
	c.st.preEncoded.Add(1)
	return true
}

// dropImageLocked releases e's kept image, if any, after it was written.
// Caller holds e.latch exclusively (or owns e as evicting).
func (c *Cache) dropImageLocked(e *entry) {
	p := e.encoded.Swap(nil)
	if p == nil {
		return
	}
	n := p.bytes()
	c.preBytes.Add(-n)
	e.size.Add(-n)
	if e.dirty.Load() {
		c.dirtyBytes.Add(-n)
	}
	c.charge(-n)
	p.release()
}

// compactImage moves a pooled image into the smallest class that holds it:
// an encoder's buffer is sized for the worst case (the raw chunk), and a
// kept image is charged what its buffer costs.
func compactImage(enc Encoded) Encoded {
	if !enc.Pooled || BufCap(len(enc.Image)) >= cap(enc.Image) {
		return enc
	}
	b := GetBuf(len(enc.Image))
	copy(b, enc.Image)
	PutBuf(enc.Image)
	enc.Image = b
	return enc
}

// tryCharge charges n bytes only if they fit under the active limit;
// background work never makes a request wait for memory.
func (c *Cache) tryCharge(n int64) bool {
	for {
		cur := c.resident.Load()
		if cur+n > c.activeLimit {
			return false
		}
		if c.resident.CompareAndSwap(cur, cur+n) {
			c.notePeak(cur + n)
			return true
		}
	}
}

// preEncodeNow runs pre-encode rounds until one keeps nothing (tests).
func (c *Cache) preEncodeNow() int {
	total := 0
	for {
		n := c.preEncodeRound(c.bgCtx)
		if n == 0 {
			return total
		}
		total += n
	}
}
