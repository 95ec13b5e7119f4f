package cache

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/cache/layout"
)

// Direct decodes: a read of a filtered chunk that is not resident and
// that the cache would keep only by evicting something is served without
// making the chunk resident. The image is read as for a load (one vector
// read per file, split among helpers when large, readImages) into a
// pooled buffer, and the chunks are decoded on the workers in parallel; no
// entry is made, so the chunk costs the cache neither memory nor an
// eviction. Two ways, per chunk:
//
//   - into the caller's buffer: the read covers the whole chunk and its
//     bytes lie contiguous in the caller's buffer in the chunk's element
//     order (DirectDecoder); they are written once, by the decoder, where
//     the caller wants them;
//   - transient: otherwise (a part of the chunk, a box of many chunks whose
//     rows interleave in the caller's buffer, several pieces), the chunk is
//     decoded into a chunk of the layout's own, its pieces are scattered
//     from it on the same worker, and it goes straight back to the layout
//     (Evicter), whose buffer pool hands it to the next decode. A one-call
//     read of many chunks then decodes and scatters them on every worker
//     at once, and touches no more fresh memory than one chunk per worker.
//     The budget holds room for the chunks decoding at once (reserved
//     before they start), and a chunk over the bypass size goes as a bypass
//     entry instead, so that its reservation can grow an adaptive cache.
//
// When (goesDirect): the chunk is above the bypass threshold (the
// cached path would load it, serve it and drop it), or it was not
// accessed recently (rereads.go: missed by a read, or written whole while
// not resident) and either admitting it would take the resident bytes
// past the quiescent limit (the cache is full, and a one-pass scan would
// otherwise push it to the active limit and evict chunks that may be read
// again) or the cache keeps only chunks read again
// (Config.AdmitOnReread). A chunk accessed recently is kept, evicting
// others if need be: that is how a full cache takes in a new working set. A
// cache with room keeps every chunk by default: the decoder then writes
// into the cache's buffer, and the next read of it is a hit. BypassBytes
// -1 turns direct decodes off with the bypass.
//
// Coherence is that of direct reads (direct.go): only chunks missing from
// the table go this way, and a chunk absent from the table has no
// unpublished version.

// decodeDirect serves the groups of a read that decode directly (see
// above) and returns the others.
func (c *Cache) decodeDirect(ctx context.Context, reqs []Request, gs []*group) ([]*group, error) {
	var cand []*group
	var dsts [][]byte // nil: transient
	var rest []*group
	var cached int64
	sz := c.sizes.current()
	for _, g := range gs {
		if !g.loc.Exists() || !c.intake.goesDirect(sz, g, g.hint(), cached) {
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		var dst []byte
		if dd, ok := g.d.lay().l.(layout.DirectDecoder); ok && len(g.reqs) == 1 {
			dst, _ = dd.DecodeTarget(g.loc, reqs[g.reqs[0]].Piece)
		}
		if dst == nil && g.hint() > sz.bypass {
			// A chunk over the bypass size goes as a bypass entry,
			// whose reservation is what grows an adaptive cache for
			// it (a flash increase).
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		cand = append(cand, g)
		dsts = append(dsts, dst)
	}
	if len(cand) == 0 {
		return gs, nil
	}
	defer c.shedAfterDirect()
	images, sums, err := c.readImages(cand)
	if err != nil {
		return nil, err
	}
	// Transient chunks are memory like any chunk's: the budget holds
	// room for as many as decode at once (at most one per worker and the
	// caller), reserved here, before any worker waits on it, and given
	// back when the last is done; slots keeps to that number whatever the
	// runner. A chunk the layout streams (ScatterHolder, told by its image)
	// holds its decoder's window and buffer, not the chunk: on the Zarr
	// benchmark's 32 MiB zstd chunks about 2 MiB, so a one-call read
	// reserves a few MiB rather than a chunk per worker, evicting nothing
	// for it.
	var slots chan struct{}
	var transient, largest int64
	var pieces [][]layout.Piece // of the transient chunks, for decodeTransient
	for i, dst := range dsts {
		if dst != nil {
			continue
		}
		if pieces == nil {
			pieces = make([][]layout.Piece, len(cand))
		}
		g := cand[i]
		pieces[i] = make([]layout.Piece, len(g.reqs))
		for j, r := range g.reqs {
			pieces[i][j] = reqs[r].Piece
		}
		hold := g.hint()
		if sh, ok := g.d.lay().l.(layout.ScatterHolder); ok {
			if n, ok := sh.ScatterHold(g.loc, images[i], pieces[i]); ok {
				hold = min(n, hold)
			}
		}
		transient++
		largest = max(largest, hold)
	}
	if transient > 0 {
		k := min(transient, int64(max(c.cfg.Workers, 1))+1)
		held := k * largest
		if err := c.reserve(ctx, held); err != nil {
			return nil, err // the images are the collector's
		}
		defer c.budget.charge(-held)
		slots = make(chan struct{}, k)
	}
	decode := func(i int) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrPanic, r)
			}
		}()
		g := cand[i]
		if dsts[i] == nil {
			slots <- struct{}{}
			defer func() { <-slots }()
			return decodeTransient(g, reqs, pieces[i], images[i], sumOf(sums, i))
		}
		if err := g.d.lay().l.(layout.DirectDecoder).DecodeInto(g.coord, g.loc, images[i], dsts[i]); err != nil {
			return fmt.Errorf("cache: decoding chunk %v directly: %w", g.coord, err)
		}
		return nil
	}
	if len(cand) == 1 {
		err = decode(0)
	} else {
		err = c.workers.run(ctx, len(cand), decode)
	}
	if err != nil {
		return nil, err
	}
	// A transient decode is a load and a bypass, as a chunk the cached
	// path loads, serves and drops would be.
	c.stats.directDecodes.Add(int64(len(cand)) - transient)
	c.stats.loads.Add(transient)
	c.stats.bypasses.Add(transient)
	return rest, nil
}

// decodeTransient decodes g's image into a chunk no entry holds, serves
// g's pieces from it and gives it back to the layout.
func decodeTransient(g *group, reqs []Request, pieces []layout.Piece, image []byte, sum *directRead) error {
	if sd, ok := g.d.lay().l.(layout.ScatterDecoder); ok {
		// A chunk the layout streams is scattered piece by piece as it
		// decodes; no chunk buffer is made.
		var s uint32
		summed := sum != nil && sum.summed
		if summed {
			s = sum.sum
		}
		if done, err := sd.DecodeScatter(g.coord, g.loc, image, pieces, summed, s); done {
			if err != nil {
				return fmt.Errorf("cache: decoding chunk %v: %w", g.coord, err)
			}
			return nil
		}
	}
	ch, err := decodeChunk(g, image, sum)
	if err != nil {
		return err
	}
	l := g.d.lay().l
	for _, i := range g.reqs {
		if err = l.Scatter(ch, reqs[i].Piece); err != nil {
			break
		}
	}
	if ev, ok := l.(layout.Evicter); ok {
		ev.Evict(g.coord, ch)
	}
	return err
}
