package engine

import (
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/internal/bufpool"
)

// The direct paths for part of a chunk (SCC internal API
// "selection read", "vector read"; cache/directpart.go decides when): a
// read of chunks the cache would not keep reads only the blocks it needs
// (each verifiable by its own checksum) straight from the file into pooled
// buffers and serves the pieces from them, without making anything
// resident.
//
//   - contiguous: a piece's checksum covers the piece, so the block is the
//     whole piece; a read of part of it (a column slab of a 2-D extent, a
//     few rows) reads that piece with the read's other pieces in one
//     vector read. Whole pieces contiguous in the caller's buffer go
//     straight into it (DirectTarget).
//   - sparse: a read that only asks where elements are defined
//     (DefinedElements, through the selection view) reads the frame header
//     and the selection section alone; a read of values reads the whole
//     frame (both sections are needed, each checked against its own
//     checksum).
//   - variable-length: the whole frame (the fixed section locates values
//     anywhere in the heap, which is filtered as one section).
//
// Writes of part of a chunk never go directly: the stored checksum covers
// a whole piece or section, so a partial write is a read-modify-write of
// it, and writing it in place would overwrite the committed copy
// (DESIGN.md "No data loss"). Whole contiguous pieces are written directly
// (DirectSource) into the working extent, which no commit references.

var (
	_ layout.PartReader   = (*contigLayout)(nil)
	_ layout.DirectWriter = (*contigLayout)(nil)
	_ layout.PartReader   = (*sparseLayout)(nil)
	_ layout.PartReader   = (*vlenLayout)(nil)
	_ layout.PartReader   = (*sparseSelView)(nil)
	_ layout.RowReader    = (*denseLayout)(nil)
)

// RowTarget lets a read of a whole unfiltered chunk that is not resident,
// whose bytes are not one run of the caller's buffer (DirectTarget), go
// straight into the caller's buffer by rows (cache/directrows.go): the
// piece selects the whole chunk, the chunk's trailing dimensions that
// span the buffer's whole extent fold into one row, and the others are
// walked. The conditions on the chunk are DirectTarget's.
func (l *denseLayout) RowTarget(loc layout.Location, p layout.Piece) (layout.Rows, int, bool) {
	if !l.s.unfiltered || l.s.chunkBytes < directMin || loc.Mask != 0 || loc.Size != l.s.chunkBytes+format.ChunkFrameOverhead {
		return layout.Rows{}, 0, false
	}
	pc, ok := p.(*piece)
	if !ok || pc.kind != pieceData {
		return layout.Rows{}, 0, false
	}
	runs, shape, chunk := pc.p.Runs, pc.bufShape, l.s.chunk
	r := len(chunk)
	if r == 0 || len(runs) != r || len(shape) != r {
		return layout.Rows{}, 0, false
	}
	// The buffer's byte stride along each dimension, and the first
	// element's offset; the piece must select the whole chunk.
	stride := make([]uint64, r)
	s := uint64(l.s.elemSize)
	var first uint64
	for d := r - 1; d >= 0; d-- {
		if len(runs[d]) != 1 || runs[d][0].Chunk != 0 || runs[d][0].Len != chunk[d] {
			return layout.Rows{}, 0, false
		}
		stride[d] = s
		first += runs[d][0].Buf * s
		s *= shape[d]
	}
	k := r - 1
	row := chunk[k] * uint64(l.s.elemSize)
	for k > 0 && chunk[k] == shape[k] {
		k--
		row *= chunk[k]
	}
	return layout.Rows{Buf: pc.buf, First: first, Len: row, Count: chunk[:k:k], Step: stride[:k:k]}, format.ChunkFrameOverhead, true
}

// SumRow continues the frame's plain checksum over b (layout.RowReader):
// the checksum of a chunk's rows taken in order is the checksum of its
// bytes (VerifyDirectSum binds it to the chunk).
func (l *denseLayout) SumRow(sum uint32, b []byte) uint32 { return l.s.csum.Update(sum, b) }

// readPieces reports whether every piece is a *piece of one of kinds.
func readPieces(pieces []layout.Piece, kinds ...pieceKind) bool {
	for _, p := range pieces {
		pc, ok := p.(*piece)
		if !ok {
			return false
		}
		found := false
		for _, k := range kinds {
			found = found || pc.kind == k
		}
		if !found {
			return false
		}
	}
	return true
}

// PartBlocks reads a whole piece for any part of it: its checksum covers
// all of it. The last piece, shorter than the piece shape when the rows do
// not divide, stays on the cached path (Scatter works on a full piece).
func (l *contigLayout) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	if loc.Size != l.s.chunkBytes || !readPieces(pieces, pieceData) {
		return nil, false
	}
	return []layout.Block{{Len: loc.Size}}, true
}

// ReadPart verifies the piece read and copies the parts the pieces select
// to the caller's buffer.
func (l *contigLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	b := bufs[0]
	defer bufpool.Put(b)
	if err := l.VerifyDirect(coord, loc, b, nil); err != nil {
		return err
	}
	for _, p := range pieces {
		pc := p.(*piece)
		selection.Scatter(pc.buf, pc.bufShape, b, l.s.chunk, pc.p, l.s.elemSize)
	}
	return nil
}

// DirectSource lets a write of a whole piece, contiguous in the caller's
// buffer, go from it to the file (cache/directwrite.go decides when: pieces
// above the cache's bypass threshold). Insert places it in the working
// extent, never the committed one, so a crash before the commit leaves the
// committed extent as it was. The short last piece stays on the cached path.
func (l *contigLayout) DirectSource(coord layout.Coord, p layout.Piece) ([]byte, bool) {
	if coord[0] >= l.pieces {
		return nil, false
	}
	if _, size := l.piece(coord[0]); size != l.s.chunkBytes {
		return nil, false
	}
	if pc, ok := p.(*piece); !ok || pc.kind != pieceData {
		return nil, false
	}
	return (&denseLayout{indexedStorage{l.s}}).wholeRun(p)
}

// DirectFrame: a stored piece is its bytes, with no frame; its checksum
// goes to the working table (Publish).
func (l *contigLayout) DirectFrame(_ layout.Coord, src []byte) (head, tail []byte, sum uint32) {
	return nil, nil, format.Checksum(src)
}

// PartBlocks reads the whole frame: values need both sections. (Reads
// that only ask where elements are defined go to the selection view,
// below, which reads the header and selection section alone.)
func (l *sparseLayout) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	return wholeFrame(loc, pieces, pieceData, pieceDefined, pieceValues)
}

// ReadPart decodes the frame read (Decode checks each section against its
// own checksum and the frame against the index's) and serves the pieces;
// nothing is kept.
func (l *sparseLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	return decodeServe(l, coord, loc, pieces, bufs[0])
}

// PartBlocks: the selection view's stored image is already the frame's
// header and selection section (Lookup), read whole.
func (v *sparseSelView) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	return wholeFrame(loc, pieces, pieceDefined)
}

// ReadPart decodes the selection read (Decode verifies it) and serves
// the pieces; nothing is kept.
func (v *sparseSelView) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	return decodeServe(v, coord, loc, pieces, bufs[0])
}

// PartBlocks reads the whole frame of a variable-length chunk.
func (l *vlenLayout) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	return wholeFrame(loc, pieces, pieceVlen)
}

// ReadPart decodes the frame read (Decode verifies it) and serves the
// pieces; nothing is kept.
func (l *vlenLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	return decodeServe(l, coord, loc, pieces, bufs[0])
}

// wholeFrame is PartBlocks for layouts whose part reads take the whole
// stored frame (its checksums cover all of it): one block, if every piece
// is of one of kinds.
func wholeFrame(loc layout.Location, pieces []layout.Piece, kinds ...pieceKind) ([]layout.Block, bool) {
	if !readPieces(pieces, kinds...) {
		return nil, false
	}
	return []layout.Block{{Len: loc.Size}}, true
}

// decodeServe is ReadPart for those layouts: decode (and so verify) the
// frame read into img, which the decoder takes, serve the pieces, keep
// nothing.
func decodeServe(l interface {
	Decode(layout.Coord, layout.Location, []byte) (layout.Chunk, error)
	Scatter(layout.Chunk, layout.Piece) error
}, coord layout.Coord, loc layout.Location, pieces []layout.Piece, img []byte) error {
	ch, err := l.Decode(coord, loc, img)
	if err != nil {
		return err
	}
	for _, p := range pieces {
		if err := l.Scatter(ch, p); err != nil {
			return err
		}
	}
	return nil
}
