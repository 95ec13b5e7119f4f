package engine

import (
	"github.com/scc-dev/scc/engine/internal/selection"
)

// pieceArena holds the pieces of one multi-chunk request (prepare's Split
// path) in blocks reused from request to request through ioScratch, so a
// read of many chunks, such as a contiguous read of a run of pieces that
// goes directly (directpart.go, cache/direct.go), allocates nothing per
// chunk in steady state. Pieces live until the request ends (ioScratch.put
// resets the arena); the cache copies what it keeps (coordinates).
//
// Not safe for concurrent use: it belongs to one request's scratch.
type pieceArena struct {
	blocks []*pieceBlock
	used   int               // pieces handed out since the last reset
	slabs  [][]selection.Run // backing of the pieces' runs
	slab   int               // slab being filled
	off    int               // runs used in slabs[slab]
}

const (
	pieceBlockN   = 64   // pieces per block
	arenaRank     = 8    // ranks above this are cloned (rare)
	arenaSlabRuns = 1024 // runs per slab, at least
	arenaMaxKeep  = 16   // blocks kept across requests (1024 pieces)
)

type pieceBlock struct {
	pcs   [pieceBlockN]piece
	sels  [pieceBlockN]selection.Piece
	coord [pieceBlockN][arenaRank]uint64
	runs  [pieceBlockN][arenaRank][]selection.Run
}

// clone is p.Clone() wrapped in a read/write piece of buf, from the arena.
func (a *pieceArena) clone(p *selection.Piece, buf []byte, bufShape []uint64) *piece {
	r := len(p.Coord)
	if r > arenaRank || len(p.Runs) != r {
		cp := p.Clone()
		return &piece{p: &cp, buf: buf, bufShape: bufShape}
	}
	b, i := a.used/pieceBlockN, a.used%pieceBlockN
	if b == len(a.blocks) {
		a.blocks = append(a.blocks, new(pieceBlock))
	}
	a.used++
	blk := a.blocks[b]
	sel := &blk.sels[i]
	sel.Coord = append(blk.coord[i][:0:r], p.Coord...)
	sel.Runs = blk.runs[i][:r:r]
	sel.N = p.N
	for d, rs := range p.Runs {
		sel.Runs[d] = a.runsLike(rs)
	}
	pc := &blk.pcs[i]
	*pc = piece{p: sel, buf: buf, bufShape: bufShape}
	return pc
}

// runsLike returns a copy of rs in the arena's slabs.
func (a *pieceArena) runsLike(rs []selection.Run) []selection.Run {
	n := len(rs)
	for {
		if a.slab == len(a.slabs) {
			a.slabs = append(a.slabs, make([]selection.Run, max(n, arenaSlabRuns)))
		}
		if s := a.slabs[a.slab]; a.off+n <= len(s) {
			out := s[a.off : a.off+n : a.off+n]
			copy(out, rs)
			a.off += n
			return out
		}
		a.slab++
		a.off = 0
	}
}

// reset drops the pieces' references to the caller's buffer, keeping the
// blocks for the next request unless this one was huge.
func (a *pieceArena) reset() {
	for k := 0; k < a.used; k++ {
		a.blocks[k/pieceBlockN].pcs[k%pieceBlockN] = piece{}
	}
	if len(a.blocks) > arenaMaxKeep {
		a.blocks = nil
	}
	if len(a.slabs) > arenaMaxKeep {
		a.slabs = nil
	}
	a.used, a.slab, a.off = 0, 0, 0
}

// piece is the engine's layout.Piece: one chunk's part of a request.
type piece struct {
	p        *selection.Piece
	buf      []byte   // the caller's packed buffer (whole request)
	bufShape []uint64 // shape of buf
	kind     pieceKind
	out      *definedOut // pieceDefined, pieceValues: the piece's result
	vals     [][]byte    // pieceVlen: one sequence per element of the whole request
	// rows, when set, is the byte-level plan of this piece's copy out of
	// a dense chunk (readOne, ioone.go); the dense Scatter runs it.
	rows *rowCopy
}

// pieceKind says what a request does with its piece. The zero value is a
// plain Read or Write.
type pieceKind uint8
