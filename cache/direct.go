package cache

import (
	"fmt"

	"github.com/scc-dev/scc/vfd"
)

// Direct reads (issue 10 §2; seed 001 §3.2.1-2, the direct paths of seed
// 002): a read that covers a whole stored chunk which is not resident, of a
// layout whose stored image is the chunk's bytes plus a small trailer, goes
// by one vector read straight into the caller's buffer and the trailer into
// a side buffer; the layout then verifies the checksum on those bytes. The
// chunk is not made resident, so a one-pass read of a large dataset costs
// the cache neither memory nor evictions, and the bytes are copied once (by
// the kernel).
//
// Coherence: only chunks missing from the table go direct. A resident copy
// (dirty or clean) is served from memory, and an entry being loaded or
// evicted is waited for (doSlow), so a dirty copy always wins. A chunk
// absent from the table has no unpublished version: eviction publishes a
// chunk's new location before it removes the entry. A write that makes the
// chunk dirty after the table was consulted overlaps the read, and the
// engine's serializer orders overlapping requests; at the cache level the
// checksum and the index's Sum catch any torn image as corruption.

// DirectReader is implemented by layouts whose stored images can be read
// straight into the caller's buffer.
type DirectReader interface {
	// DirectTarget returns, for a read piece and the chunk's location,
	// the caller's bytes the chunk's stored bytes map onto exactly (the
	// piece selects the whole chunk, contiguous in the caller's buffer, and
	// the image is the chunk without filters) and the length of the
	// trailer stored after them; ok false means "not directly".
	DirectTarget(loc Location, p Piece) (dst []byte, trailer int, ok bool)
	// VerifyDirect checks the bytes read into dst and the trailer against
	// each other and against loc, returning an error wrapping the layout's
	// corruption sentinel on a mismatch. dst's contents are then undefined.
	VerifyDirect(coord Coord, loc Location, dst, trailer []byte) error
}

// readDirect serves the groups of a read that can go directly (see above)
// and returns the others.
func (c *Cache) readDirect(reqs []Request, gs []*group) ([]*group, error) {
	type direct struct {
		g       *group
		dst     []byte
		trailer []byte
	}
	var ds []direct
	rest := gs[:0:0]
	for _, g := range gs {
		dr, ok := g.d.lay().l.(DirectReader)
		if !ok || len(g.reqs) != 1 || !g.loc.Exists() {
			rest = append(rest, g)
			continue
		}
		dst, tl, ok := dr.DirectTarget(g.loc, reqs[g.reqs[0]].Piece)
		if !ok || tl < 0 || int64(len(dst)+tl) != g.loc.Size {
			rest = append(rest, g)
			continue
		}
		ds = append(ds, direct{g: g, dst: dst, trailer: make([]byte, tl)})
	}
	if len(ds) == 0 {
		return gs, nil
	}
	byFile := map[*File][]vfd.Extent{}
	var files []*File
	for _, x := range ds {
		f := x.g.d.file
		if _, ok := byFile[f]; !ok {
			files = append(files, f)
		}
		byFile[f] = append(byFile[f], vfd.Extent{Off: x.g.loc.Addr, Buf: x.dst})
		if len(x.trailer) > 0 {
			byFile[f] = append(byFile[f], vfd.Extent{Off: x.g.loc.Addr + int64(len(x.dst)), Buf: x.trailer})
		}
	}
	for _, f := range files {
		exts := byFile[f]
		if err := c.readV(f, exts); err != nil {
			return nil, fmt.Errorf("cache: reading %d chunks directly: %w", len(exts), err)
		}
	}
	for _, x := range ds {
		dr := x.g.d.lay().l.(DirectReader)
		if err := dr.VerifyDirect(x.g.coord, x.g.loc, x.dst, x.trailer); err != nil {
			return nil, fmt.Errorf("cache: chunk %v read directly: %w", x.g.coord, err)
		}
	}
	return rest, nil
}
