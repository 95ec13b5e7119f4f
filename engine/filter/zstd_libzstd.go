//go:build cgo

package filter

import (
	"errors"
	"fmt"

	"github.com/scc-dev/scc/engine/filter/internal/libzstd"
)

// The libzstd codec: every cgo build compiles the reference zstd library
// (internal/libzstd, through github.com/DataDog/zstd's bundled sources), so
// it needs no system package; CGO_ENABLED=0 builds use klauspost/compress
// (zstd_go.go).
//
// Why: encoding is most of a zstd chunk write's CPU, and libzstd's level 3
// compresses a 512 KiB uint16 sample chunk about 1.8-1.9x as fast as
// klauspost's SpeedDefault and decodes it 1.2-1.35x as fast
// (BenchmarkZstdCodecs prints both; over a whole array of less
// compressible chunks the encode gain was nearer 1.4x). With
// libzstd a level also means exactly zstd's level rather than one of four
// speeds. Both decoders read both encoders' frames (the tests cross-decode
// every level), so files do not depend on the build that wrote them; only
// the compressed bytes differ.

// ZstdCodec names the zstd implementation this build uses.
const ZstdCodec = "libzstd"

// ZstdVersion is the linked libzstd's release, as MAJOR.MINOR.RELEASE.
func ZstdVersion() string {
	v := libzstd.LibraryVersion()
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

// zstdEncode writes the kind of frame zstdEncodeGo writes: one frame with
// its content size and no checksum, in blocks of at most 128 KiB (zstdWalk's
// bound holds). Its window is the level's (libzstd.Compress says why), where
// the pure-Go encoder's frames are single-segment with a 2 MiB window of
// matches; each build decodes the other's. It writes into dst[:cap(dst)]
// and fails rather than grow it: a frame that does not fit is not smaller.
func zstdEncode(c zstdCodec, dst, src []byte) ([]byte, bool) {
	if len(src) > libzstd.MaxInput {
		// Beyond libzstd's largest window: the pure-Go encoder.
		return zstdEncodeGo(c.speed, dst, src)
	}
	n, err := libzstd.Compress(dst[:0], src, c.level)
	if errors.Is(err, libzstd.ErrNoMemory) {
		return zstdEncodeGo(c.speed, dst, src)
	}
	if err != nil {
		if len(src) <= zstdSmallInput {
			// libzstd stores blocks this small raw, where the pure-Go
			// encoder's entropy-coded literals still shrink some: a
			// tiny chunk is then stored compressed in either build.
			return zstdEncodeGo(c.speed, dst, src)
		}
		return nil, false // did not fit, or libzstd refused: store raw
	}
	return dst[:n], true
}

// zstdSmallInput is the largest input a libzstd frame that does not
// shrink is tried again with the pure-Go encoder for; a second attempt
// costs nothing worth counting below it.
const zstdSmallInput = 1 << 10

// zstdDecodeOverrun is 0: libzstd never writes past the capacity it is
// given, so a destination of exactly the claimed size needs no room for a
// lie, and the pipeline decodes straight into it.
const zstdDecodeOverrun = 0

// zstdDecode decodes the one frame in src into dst[:0], never past cap(dst)
// and never allocating: a frame claiming more than cap(dst) fails before
// decoding, and libzstd stops at cap(dst) if the claim is a lie. trusted
// skips a frame checksum; otherwise one present is verified.
func zstdDecode(dst, src []byte, trusted bool) ([]byte, error) {
	// Exactly one frame with its content size, as claimedLen accepts:
	// libzstd alone would also decode concatenated and skippable frames.
	claim, _, err := zstdWalk(src)
	if err != nil {
		return nil, err
	}
	if claim > cap(dst) {
		return nil, fmt.Errorf("%w: zstd: frame claims %d bytes, over the bound %d", ErrCorrupt, claim, cap(dst))
	}
	n, err := libzstd.Decompress(dst[:0], src, trusted)
	if errors.Is(err, libzstd.ErrNoMemory) {
		// The pure-Go decoder reads the same frames to the same bytes:
		// a slower path, not a different answer.
		return zstdDecodeGo(dst, src, trusted)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	if n != claim {
		// libzstd checks the content size itself; checked again because
		// a wrong n would hand the caller bytes it did not decode.
		return nil, fmt.Errorf("%w: zstd: frame decoded to %d bytes, claims %d", ErrCorrupt, n, claim)
	}
	return dst[:n], nil
}

// zstdStreams: libzstd decodes a frame piece by piece (stream.go).
const zstdStreams = true

// zstdDecodeStream decodes the one frame in src (zstdWalk has checked it)
// through piece, calling emit with each decoded piece in order, trusting
// the frame (its checksum is not verified: the image was). When libzstd
// cannot allocate a context it decodes the whole frame with the pure-Go
// decoder and emits it as one piece: a slower path, not a different
// answer.
func zstdDecodeStream(src, piece []byte, emit func([]byte) error) (int, error) {
	n, err := libzstd.DecompressStream(src, piece, true, emit)
	if errors.Is(err, libzstd.ErrNoMemory) {
		claim, _, werr := zstdWalk(src)
		if werr != nil {
			return 0, werr
		}
		out, derr := zstdDecodeGo(make([]byte, 0, claim+zstdOverrun), src, true)
		if derr != nil {
			return 0, derr
		}
		return len(out), emit(out)
	}
	var le *libzstd.Error
	if errors.As(err, &le) {
		return n, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	return n, err // emit's own error, or nil
}
