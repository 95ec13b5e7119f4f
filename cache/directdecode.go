package cache

import (
	"context"
	"fmt"
	"math"
)

// Direct decodes: a read that covers a whole stored chunk of a filtered
// layout, which is not resident and which the cache would keep only by
// evicting something, decodes the stored image straight into the caller's
// buffer. The image is read as for a load (one vector read per file, split
// among helpers when large, readImages) into a pooled buffer, and the
// chunks are decoded on the workers in parallel; no entry is made, so the
// chunk costs the cache neither memory nor an eviction, and its bytes are
// written once, by the decoder, where the caller wants them.
//
// When (decodeWorthIt): the chunk is above the bypass threshold (the
// cached path would load it, serve it and drop it), or admitting it would
// take the resident bytes past the quiescent limit (the cache is full, and
// a one-pass scan would otherwise push it to the active limit and evict
// chunks that may be read again). A cache with room keeps the chunk: the
// decoder then writes into the cache's buffer, and the next read of it is
// a hit. BypassBytes -1 turns direct decodes off with the bypass.
//
// Coherence is that of direct reads (direct.go): only chunks missing from
// the table go this way, and a chunk absent from the table has no
// unpublished version.

// DirectDecoder is implemented by layouts whose chunks can be decoded
// straight into the caller's buffer.
type DirectDecoder interface {
	// DecodeTarget returns, for a read piece and the chunk's location, the
	// caller's bytes the decoded chunk maps onto exactly (the piece
	// selects the whole chunk, contiguous in the caller's buffer, in the
	// chunk's element order); ok false means "not directly".
	DecodeTarget(loc Location, p Piece) (dst []byte, ok bool)
	// DecodeInto verifies the stored image read from loc and decodes it
	// into dst, as Decode would into a chunk of its own. It owns image as
	// Decode does. A damaged image is an error wrapping the layout's
	// corruption sentinel; dst's contents are then undefined.
	DecodeInto(coord Coord, loc Location, image, dst []byte) error
}

// decodeWorthIt is the rule above for a chunk of n decoded bytes (its
// size hint), cached being what other chunks of the same read will add on
// the cached path.
func (c *Cache) decodeWorthIt(sz *sizing, n, cached int64) bool {
	if sz.bypass == math.MaxInt64 {
		return false
	}
	return n > sz.bypass || c.budget.resident.Load()+cached+n > sz.quiescent
}

// decodeDirect serves the groups of a read that decode directly (see
// above) and returns the others.
func (c *Cache) decodeDirect(ctx context.Context, reqs []Request, gs []*group) ([]*group, error) {
	var cand []*group
	var dsts [][]byte
	var rest []*group
	var cached int64
	sz := c.sizing()
	for _, g := range gs {
		dd, ok := g.d.lay().l.(DirectDecoder)
		if !ok || !g.loc.Exists() || len(g.reqs) != 1 || !c.decodeWorthIt(sz, g.hint(), cached) {
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		dst, ok := dd.DecodeTarget(g.loc, reqs[g.reqs[0]].Piece)
		if !ok {
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
	images, _, err := c.readImages(cand)
	if err != nil {
		return nil, err
	}
	decode := func(i int) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrPanic, r)
			}
		}()
		g := cand[i]
		if err := g.d.lay().l.(DirectDecoder).DecodeInto(g.coord, g.loc, images[i], dsts[i]); err != nil {
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
	return rest, nil
}
