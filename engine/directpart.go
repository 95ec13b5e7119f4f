package engine

import (
	"github.com/scc-dev/scc/cache/layout"
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
