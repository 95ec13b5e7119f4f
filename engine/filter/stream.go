package filter

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Streamed decodes: a chunk that is decoded only to be scattered into a
// caller's buffer (a read of many chunks that the cache does not keep) can
// be decoded a piece at a time into one small buffer and each piece
// scattered while it is in the core's cache, instead of being decoded into
// a chunk-sized buffer (larger than the caches for chunks of many MiB) and
// read back from memory by the scatter. Only zstd frames stream (libzstd
// keeps the frame's window itself), and only with a small window: a
// window of the whole chunk would cost a decoder buffer of the chunk's
// size anyway. engine/filter BenchmarkZstdScatter measures both ways.

// zstdStreamWindow is the largest frame window a streamed decode takes
// (the decoder's context holds that much): level 3's 2 MiB with room
// (libzstd levels up to 12 stay within it), where a single-segment frame's
// window is its whole content.
const zstdStreamWindow = 8 << 20

// StreamsVerified reports whether DecodeVerifiedStream decodes image:
// zstd is the only filter applied to it (mask), and its frame has a window
// of at most 8 MiB (a single-segment frame: its content). It reads the
// frame's header only.
func (p *Pipeline) StreamsVerified(image []byte, mask uint32) bool {
	_, ok := p.StreamWindow(image, mask)
	return ok
}

// StreamWindow is StreamsVerified that also returns the frame's window:
// the memory the decoder holds while it streams.
func (p *Pipeline) StreamWindow(image []byte, mask uint32) (int64, bool) {
	if !zstdStreams || mask>>len(p.codecs) != 0 {
		return 0, false
	}
	applied := 0
	for i, s := range p.specs {
		if mask&(1<<i) != 0 {
			continue
		}
		if s.ID != Zstd {
			return 0, false
		}
		applied++
	}
	if applied != 1 {
		return 0, false
	}
	var h zstd.Header
	if err := h.Decode(image); err != nil {
		return 0, false
	}
	window := h.WindowSize
	if h.SingleSegment {
		window = h.FrameContentSize // the decoder keeps all of it
	}
	if window > zstdStreamWindow {
		return 0, false
	}
	return int64(window), true
}

// DecodeVerifiedStream is DecodeVerifiedTo for an image StreamsVerified
// takes, handing the chunk over in order as it decodes: emit gets each
// piece b of the chunk with its offset off, b valid only during the call
// and at most len(piece) bytes (piece is the buffer the pieces are decoded
// into). The frame must claim exactly decodedSize bytes and decode to
// them; nothing past decodedSize is ever emitted. On an error some pieces
// may have been emitted. Errors wrap ErrCorrupt for a bad image and
// ErrInvalid for an image StreamsVerified refuses or no piece buffer.
func (p *Pipeline) DecodeVerifiedStream(image []byte, mask uint32, decodedSize int, piece []byte, emit func(off int, b []byte)) error {
	if decodedSize < 0 || decodedSize > MaxChunkSize {
		return fmt.Errorf("%w: decoded size %d not in [0, %d]", ErrInvalid, decodedSize, MaxChunkSize)
	}
	if len(piece) == 0 || !p.StreamsVerified(image, mask) {
		return fmt.Errorf("%w: image does not stream", ErrInvalid)
	}
	claim, _, err := zstdWalk(image)
	if err != nil {
		return err
	}
	if claim != decodedSize {
		return fmt.Errorf("%w: zstd: frame claims %d bytes, want %d", ErrCorrupt, claim, decodedSize)
	}
	off := 0
	n, err := zstdDecodeStream(image, piece, func(b []byte) error {
		if len(b) > decodedSize-off {
			return fmt.Errorf("%w: zstd: frame decodes past its %d bytes", ErrCorrupt, decodedSize)
		}
		emit(off, b)
		off += len(b)
		return nil
	})
	if err != nil {
		return err
	}
	if n != decodedSize {
		return fmt.Errorf("%w: zstd: frame decoded to %d bytes, claims %d", ErrCorrupt, n, decodedSize)
	}
	return nil
}
