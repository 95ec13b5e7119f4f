package engine

import (
	"fmt"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
)

var _ layout.DirectEncoder = (*denseLayout)(nil)

// EncodeSource lets a write of a whole filtered chunk that the cache would
// not keep be encoded straight from the caller's buffer
// (cache/directwrite_encode.go), under the conditions of DecodeTarget,
// its read-side mirror: the chunk's elements are one contiguous run of the
// caller's buffer. Unfiltered chunks go by DirectSource instead (written
// as they are); chunks under directMin stay on the cached path, where
// keeping them is cheap.
func (l *denseLayout) EncodeSource(_ layout.Coord, p layout.Piece) ([]byte, bool) {
	if l.s.unfiltered || l.s.chunkBytes < directMin {
		return nil, false
	}
	return l.wholeRun(p)
}

// EncodeFrom is Encode of a chunk whose buffer is src, the caller's bytes
// of the whole chunk (EncodeSource): Encode only reads the chunk, into an
// image of its own (pooled, owned by the cache), so the caller's bytes are
// neither kept nor changed.
func (l *denseLayout) EncodeFrom(coord layout.Coord, src []byte) (layout.Encoded, error) {
	if int64(len(src)) != l.s.chunkBytes {
		return layout.Encoded{}, fmt.Errorf("%w: chunk %v of %q: direct encode of %d bytes, chunk has %d", cache.ErrInvalid, []uint64(coord), l.s.name, len(src), l.s.chunkBytes)
	}
	return l.Encode(coord, &denseChunk{buf: src})
}
