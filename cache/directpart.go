package cache

import (
	"fmt"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
)

// Direct reads in part (SCC internal API "selection read" and "vector read"; issue
// 12 item 5): a read of part of a chunk that is not resident, of a layout
// whose stored chunk is made of blocks that each carry their own checksum
// (a structured chunk's sections, a contiguous extent's pieces), reads
// only the blocks the read needs, with the rest of the read's direct
// chunks in one vector read per file (readVerify), into pooled buffers;
// the layout verifies each block on the bytes read and serves the pieces
// from them. Nothing is made resident.
//
// Rule: the chunk is missing from the table (as for whole chunks: a
// resident copy, clean or dirty, serves the read, and a load or eviction
// in progress is waited for), and it is larger than Config.BypassBytes
// (Location.SizeHint): the rule directwrite.go uses, for the chunks the
// cached path would load, serve and drop at once (dropBypass) or, kept,
// would only evict others. A chunk the cache would keep goes through it,
// so the next part of it is a hit. BypassBytes -1 turns the path off.
//
// Coherence is that of the whole-chunk direct read (direct.go): a chunk
// absent from the table has no unpublished version; a write that
// overlaps the read is ordered by the engine's serializer, and at the
// cache level the blocks' checksums catch a torn read as corruption.

// partRead is one chunk read in part: its blocks and their buffers.
type partRead struct {
	pr     layout.PartReader
	coord  layout.Coord
	loc    layout.Location
	pieces []layout.Piece
	blocks []layout.Block
	bufs   [][]byte // nil once handed to ReadPart or released
}

// planPart returns g's part read, or nil when g does not go that way.
func (g *group) planPart(reqs []Request, bypass int64) *partRead {
	pr, ok := g.d.lay().l.(layout.PartReader)
	if !ok {
		return nil
	}
	if pf, first := pr.(layout.PartFirst); g.loc.SizeHint <= bypass && (!first || !pf.PartFirst()) {
		return nil
	}
	pieces := make([]layout.Piece, len(g.reqs))
	for i, r := range g.reqs {
		pieces[i] = reqs[r].Piece
	}
	blocks, ok := pr.PartBlocks(g.coord, g.loc, pieces)
	if !ok || len(blocks) == 0 {
		return nil
	}
	var end, total int64
	for _, b := range blocks {
		// In order and inside the image: a layout's mistake must not
		// become a read of someone else's bytes or a huge buffer.
		if b.Len <= 0 || b.Off < end || b.Off > g.loc.Size-b.Len {
			return nil
		}
		end = b.Off + b.Len
		total += b.Len
	}
	if total > maxStored(g.loc.SizeHint) {
		return nil
	}
	p := &partRead{pr: pr, coord: g.coord, loc: g.loc, pieces: pieces, blocks: blocks, bufs: make([][]byte, len(blocks))}
	for i, b := range blocks {
		p.bufs[i] = bufpool.GetFull(int(b.Len))
	}
	return p
}

func (p *partRead) bytes() int64 {
	var n int64
	for _, b := range p.blocks {
		n += b.Len
	}
	return n
}

// serve hands the blocks read to the layout.
func (p *partRead) serve() (err error) {
	bufs := p.bufs
	p.bufs = nil
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	return p.pr.ReadPart(p.coord, p.loc, p.pieces, p.blocks, bufs)
}

// release gives back the buffers of a part read never served. nil-safe.
func (p *partRead) release() {
	if p == nil {
		return
	}
	for _, b := range p.bufs {
		bufpool.Put(b)
	}
	p.bufs = nil
}
