package engine

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/engine/filter"
)

// WriteChunkRawZlib stores a foreign zlib stream (an HDF5 deflate chunk, a
// numcodecs Zlib chunk) as the chunk at coords without inflating it, for
// importers whose whole cost would otherwise be that inflate.
//
// WriteChunkRaw verifies by decoding; this call defers that check to every
// later decode, which is sound only because of what it requires, all
// checked here without inflating (ErrInvalid otherwise, nothing stored):
//
//   - the dataset's pipeline is Zlib, optionally after Shuffle (the stages
//     before Zlib keep the chunk's size, so the stream must decode to
//     exactly ChunkBytes bytes), and filterMask is 0;
//   - data is a zlib stream by its framing (filter.CheckZlibHeader: method
//     8, window ≤ 32 KiB, header check bits, no preset dictionary) and is
//     shorter than the chunk, as a kept optional compressor must be;
//   - the chunk is not an edge chunk: the engine keeps an edge chunk's
//     elements outside the extent at the fill value, which only a decode
//     can check, so edge chunks take WriteChunkRaw's verifying path here.
//
// What is left unchecked until the chunk is read is the DEFLATE body, and
// that is covered by the Adler-32 inside the stream (RFC 1950), which the
// Zlib filter checks on every decode along with the exact decoded size: a
// damaged stream reads as ErrCorrupt, never as wrong elements. verified
// reports whether this call decoded the chunk (an edge chunk) or not.
// Coherence with the cache is WriteChunkRaw's (rawchunk.go).
func (d *Dataset) WriteChunkRawZlib(ctx context.Context, coords []uint64, data []byte, filterMask uint32) (verified bool, err error) {
	if err := d.checkRaw(true, "WriteChunkRawZlib"); err != nil {
		return false, err
	}
	s := d.s
	specs := s.pipeline.Specs()
	n := len(specs)
	if n == 0 || specs[n-1].ID != filter.Zlib || (n == 2 && specs[0].ID != filter.Shuffle) || n > 2 {
		return false, fmt.Errorf("%w: raw zlib write needs a [shuffle+]zlib pipeline; %q has %s", ErrInvalid, s.name, s.pipeline)
	}
	if filterMask != 0 {
		return false, fmt.Errorf("%w: raw zlib write with filter mask %#x, want 0", ErrInvalid, filterMask)
	}
	if err := filter.CheckZlibHeader(data); err != nil {
		return false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if int64(len(data)) >= s.chunkBytes {
		return false, fmt.Errorf("%w: zlib stream of %d bytes does not shrink the %d-byte chunk", ErrInvalid, len(data), s.chunkBytes)
	}
	if _, err := s.chunkRegion(coords); err != nil {
		return false, err
	}
	if s.isEdge(coords) {
		return true, d.writeRaw(ctx, coords, data, filterMask, rawWrite{})
	}
	return false, d.writeRaw(ctx, coords, data, filterMask, rawWrite{undecoded: true})
}
