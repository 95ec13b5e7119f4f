package filter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// codec is one filter's transform. Implementations are stateless or hold
// only shared, concurrency-safe state.
type codec interface {
	// encodeCap is the capacity of the dst buffer encode needs for an
	// n-byte input. Optional codecs get n-1: an output that does not fit is
	// not smaller than the input and the filter is skipped.
	encodeCap(n int) int
	// encode writes the filtered form of src into dst[:0] and returns it.
	// ok=false (only from optional codecs) means "not smaller, skip me".
	// The result may live in a new array when the library had to grow it.
	encode(dst, src []byte) (out []byte, ok bool)
	// claimedLen returns the decoded length the encoded src declares in its
	// own header, or -1 when only decoding reveals it. The pipeline checks a
	// claim against its bounds before allocating anything.
	claimedLen(src []byte) (int, error)
	// decode writes the decoded form of src into dst[:0] without ever
	// producing more than cap(dst) bytes, and returns it.
	decode(dst, src []byte) ([]byte, error)
	// maxOutput bounds the decoded length of any valid n-byte input by the
	// format's maximum expansion, or returns -1 when the format has no
	// useful bound. It keeps a tiny hostile image from costing a buffer
	// of the whole chunk.
	maxOutput(n int) int
	// overrun is how many bytes past the decoded length decode may write
	// into dst before it notices a lie; the pipeline adds it to the
	// capacity it passes, so a lie never makes the library grow dst.
	overrun() int
}

// trustingDecoder is implemented by codecs whose stream carries its own
// checksum (zstd's frame checksum): decodeTrusted is decode without
// verifying it, for images whose stored bytes a verified checksum already
// covers. Every other check stays.
type trustingDecoder interface {
	decodeTrusted(dst, src []byte) ([]byte, error)
}

// boundedDecoder is implemented by codecs with an overrun that can bound
// their output from the stream's framing alone: outputBound(src) is the
// most decode can write for src (after claimedLen accepted it), so a dst
// with that much capacity needs no overrun room.
type boundedDecoder interface {
	outputBound(src []byte) int
}

// viewDecoder is implemented by codecs whose decoded form is a sub-slice of
// the input (CRC32C strips a trailer): intermediate stages skip the copy.
type viewDecoder interface {
	decodeView(src []byte) ([]byte, error)
}

func newCodec(s Spec, elemSize int) (codec, error) {
	switch s.ID {
	case Shuffle:
		return shuffleCodec{elemSize: elemSize}, nil
	case Deflate:
		return deflateCodecs[s.Level], nil
	case Zlib:
		return zlibCodecs[s.Level], nil
	case Zstd:
		return zstdCodec{level: int(s.Level), speed: zstd.EncoderLevelFromZstd(int(s.Level))}, nil
	case LZ4:
		return lz4Codec{}, nil
	case CRC32C:
		return crcCodec{}, nil
	}
	return nil, fmt.Errorf("%w: unknown filter id %d", ErrInvalid, uint16(s.ID))
}

// ---- shuffle ----

type shuffleCodec struct{ elemSize int }

func (c shuffleCodec) encodeCap(n int) int { return n }

func (c shuffleCodec) encode(dst, src []byte) ([]byte, bool) {
	dst = dst[:len(src)]
	shuffle(dst, src, c.elemSize)
	return dst, true
}

func (c shuffleCodec) claimedLen(src []byte) (int, error) { return len(src), nil }

func (shuffleCodec) overrun() int        { return 0 }
func (shuffleCodec) maxOutput(n int) int { return n }

func (c shuffleCodec) decode(dst, src []byte) ([]byte, error) {
	if cap(dst) < len(src) {
		return nil, fmt.Errorf("%w: shuffle: %d bytes exceed the bound %d", ErrCorrupt, len(src), cap(dst))
	}
	dst = dst[:len(src)]
	unshuffle(dst, src, c.elemSize)
	return dst, nil
}

// ---- crc32c ----

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const crcLen = 4

type crcCodec struct{}

func (crcCodec) encodeCap(n int) int { return n + crcLen }

func (crcCodec) overrun() int        { return 0 }
func (crcCodec) maxOutput(n int) int { return max(n-crcLen, 0) }

func (crcCodec) encode(dst, src []byte) ([]byte, bool) {
	dst = append(dst[:0], src...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(src, castagnoli)), true
}

func (crcCodec) claimedLen(src []byte) (int, error) {
	if len(src) < crcLen {
		return 0, fmt.Errorf("%w: crc32c: %d bytes, shorter than the checksum", ErrCorrupt, len(src))
	}
	return len(src) - crcLen, nil
}

func (c crcCodec) decodeView(src []byte) ([]byte, error) {
	n, err := c.claimedLen(src)
	if err != nil {
		return nil, err
	}
	want := binary.LittleEndian.Uint32(src[n:])
	if got := crc32.Checksum(src[:n], castagnoli); got != want {
		return nil, fmt.Errorf("%w: crc32c mismatch: stored %08x, computed %08x", ErrCorrupt, want, got)
	}
	return src[:n], nil
}

func (c crcCodec) decode(dst, src []byte) ([]byte, error) {
	v, err := c.decodeView(src)
	if err != nil {
		return nil, err
	}
	if cap(dst) < len(v) {
		return nil, fmt.Errorf("%w: crc32c: %d bytes exceed the bound %d", ErrCorrupt, len(v), cap(dst))
	}
	return append(dst[:0], v...), nil
}

// ---- deflate ----

// deflateCodec is raw DEFLATE (RFC 1951, no zlib or gzip wrapper: the
// pipeline has its own checksum filter). Writers are expensive to build and
// hold per-level state, readers hold a 32 KiB window, so both are pooled.
type deflateCodec struct {
	level   int
	writers sync.Pool // *flate.Writer at this level
}

// deflateCodecs is indexed by level; built once so every pipeline using a
// level shares its writer pool.
var deflateCodecs = func() (cs [DeflateMaxLevel + 1]*deflateCodec) {
	for l := DeflateMinLevel; l <= DeflateMaxLevel; l++ {
		cs[l] = &deflateCodec{level: l}
	}
	return cs
}()

// errTooBig stops a compressor whose output has reached its input's size.
var errTooBig = errors.New("output not smaller than input")

// boundedWriter appends to buf and fails instead of growing past cap(buf),
// so a deflate of incompressible data stops early and never reallocates.
type boundedWriter struct{ buf []byte }

func (w *boundedWriter) Write(p []byte) (int, error) {
	if len(p) > cap(w.buf)-len(w.buf) {
		return 0, errTooBig
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (c *deflateCodec) encodeCap(n int) int { return max(n-1, 0) }

func (c *deflateCodec) encode(dst, src []byte) ([]byte, bool) {
	if len(src) == 0 {
		return nil, false
	}
	bw := &boundedWriter{buf: dst[:0]}
	var fw *flate.Writer
	if v := c.writers.Get(); v != nil {
		fw = v.(*flate.Writer)
		fw.Reset(bw)
	} else {
		var err error
		if fw, err = flate.NewWriter(bw, c.level); err != nil {
			// Unreachable: levels are validated by NewPipeline. Storing
			// the chunk raw is still correct.
			return nil, false
		}
	}
	_, err := fw.Write(src)
	if err == nil {
		err = fw.Close()
	}
	// Reset before pooling: it clears a sticky errTooBig and drops the
	// writer's reference to dst's buffer.
	fw.Reset(io.Discard)
	c.writers.Put(fw)
	if err != nil {
		return nil, false
	}
	return bw.buf, true
}

func (c *deflateCodec) claimedLen([]byte) (int, error) { return -1, nil }

// overrun is 0: decode reads into dst[:cap(dst)] and stops there.
func (c *deflateCodec) overrun() int { return 0 }

// maxOutput: DEFLATE's densest code is a 1-bit length symbol for 258 bytes
// and a 1-bit distance, 2 bits per 258 bytes, so at most 1032 bytes per
// input byte; the margin covers rounding at the ends.
func (c *deflateCodec) maxOutput(n int) int { return expansionBound(n, 1032) }

// expansionBound returns ratio*(n+1) + 1024, or -1 if that overflows.
func expansionBound(n, ratio int) int {
	if n > (math.MaxInt-1024)/ratio-1 {
		return -1
	}
	return ratio*(n+1) + 1024
}

// decode inflates with the build's inflater (inflate.go).
func (c *deflateCodec) decode(dst, src []byte) ([]byte, error) { return inflateRaw(dst, src) }

// ---- zstd ----

// zstdCodec writes one Zstandard frame with the content size in its header
// (EncodeAll always records it, and numcodecs needs it to size its output),
// so decoding can check the claim before allocating. The frame carries no
// checksum of its own: the chunk frame's CRC32C already covers the stored
// bytes and is verified before anything is decoded (FORMAT.md, chunk
// frame), so a second hash per chunk would buy nothing.
//
// A cgo build encodes and decodes with libzstd (zstd_libzstd.go), a
// CGO_ENABLED=0 build with klauspost/compress (zstd_go.go, this file's
// zstdEncodeGo and zstdDecodeGo); the frames of either decode with the other.
type zstdCodec struct {
	level int               // zstd's level, as libzstd takes it
	speed zstd.EncoderLevel // the pure-Go encoder's speed for that level
}

// zstdWindow is the encoders' window (see init).
const zstdWindow = 2 << 20

// One encoder per speed and one decoder per checksum policy for the
// process, built on first use: EncodeAll and DecodeAll are safe for
// concurrent use, but run at most as many calls at once as the states they
// were built with. Left at the library's default that is GOMAXPROCS at
// first use — 1 if the first chunk is encoded under GOMAXPROCS=1 — and every
// later caller queues on it. zstdStates sizes them for the machine instead.
var (
	zstdEncoders [zstd.SpeedBestCompression + 1]func() (*zstd.Encoder, error)
	// zstdDecoder verifies a frame checksum when the frame has one (frames
	// written before checksums were dropped, or copied in from elsewhere);
	// zstdTrustingDecoder skips it, for images whose stored bytes a
	// verified CRC32C already covers (Pipeline.DecodeVerifiedTo).
	zstdDecoder         = sync.OnceValues(func() (*zstd.Decoder, error) { return newZstdDecoder(false) })
	zstdTrustingDecoder = sync.OnceValues(func() (*zstd.Decoder, error) { return newZstdDecoder(true) })
)

func newZstdDecoder(ignoreChecksum bool) (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(zstdStates()),
		// Bound every DecodeAll by the capacity of the dst we pass:
		// that is how the pipeline's size bound reaches the decoder
		// without a decoder per bound.
		zstd.WithDecodeAllCapLimit(true),
		// The pure-Go encoder's frames are single-segment (window =
		// content size, checked against the bound); libzstd's carry
		// their level's window, 128 MiB at most (levels 20–22 on
		// large chunks), libzstd's own default limit. A frame asking
		// for more is not ours.
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
		zstd.IgnoreChecksum(ignoreChecksum),
	)
}

const zstdMaxWindow = 128 << 20

// zstdStates is how many zstd calls may run at once: every CPU, or more if
// GOMAXPROCS was raised above that.
func zstdStates() int { return max(runtime.NumCPU(), runtime.GOMAXPROCS(0)) }

func init() {
	for l := zstd.SpeedFastest; l <= zstd.SpeedBestCompression; l++ {
		zstdEncoders[l] = sync.OnceValues(func() (*zstd.Encoder, error) {
			return zstd.NewWriter(nil,
				// Each of the zstdStates() encoders keeps a history of
				// twice its window: 16 MiB at the library's default 8 MiB
				// window, per CPU, for as long as the process lives. The
				// reference zstd uses 512 KiB to 2 MiB windows at these
				// levels; matches further back than that are rare in a
				// chunk. Set before the level, so that the level does
				// not pick its own window and, with it, a block size:
				// SpeedFastest's would be 64 KiB, and only frames of
				// whole 128 KiB blocks bound their output tightly enough
				// to decode straight into a chunk (zstdCodec.outputBound).
				zstd.WithWindowSize(zstdWindow),
				zstd.WithEncoderLevel(l),
				zstd.WithEncoderConcurrency(zstdStates()),
				// And with low memory, a window plus one block instead of
				// two windows: a chunk up to the window is encoded in one
				// pass either way, so only larger chunks pay (a shift of
				// the history per block beyond the window).
				zstd.WithLowerEncoderMem(true),
				// Always record the content size (a frame under 256
				// bytes otherwise omits it) so decode can check it
				// before allocating. Single-segment frames are bounded
				// by that size, not by the decoder's window limit.
				zstd.WithSingleSegment(true),
				// No frame checksum: see zstdCodec.
				zstd.WithEncoderCRC(false),
				// Noisy scientific data often has no matches yet a
				// skewed byte histogram; the fast levels would store
				// such blocks raw without this.
				zstd.WithAllLitEntropyCompression(true),
			)
		})
	}
}

func (c zstdCodec) encodeCap(n int) int { return max(n-1, 0) }

func (c zstdCodec) encode(dst, src []byte) ([]byte, bool) {
	if len(src) == 0 {
		return nil, false
	}
	out, ok := zstdEncode(c, dst, src)
	if !ok || len(out) >= len(src) {
		return nil, false
	}
	return out, true
}

// zstdEncodeGo encodes with klauspost/compress; ok=false if the encoder
// could not be built (storing raw is always correct).
func zstdEncodeGo(speed zstd.EncoderLevel, dst, src []byte) ([]byte, bool) {
	enc, err := zstdEncoders[speed]()
	if err != nil {
		return nil, false
	}
	return enc.EncodeAll(src, dst[:0]), true
}

// Zstandard frame layout (RFC 8878 §3.1.1): header, then blocks each with
// a 3-byte little-endian header (bit 0 last, bits 1-2 type, bits 3-23
// size), then a 4-byte checksum if the descriptor's bit 2 is set.
const (
	zstdBlockHeaderLen = 3
	zstdMaxBlock       = 128 << 10 // Block_Maximum_Size
	zstdChecksumLen    = 4
	// zstdOverrun: the decoder checks the frame's size after each block, so
	// a frame that lies about its content size can write up to one block
	// past it (plus the library's 16-byte over-allocation) before failing.
	zstdOverrun = zstdMaxBlock + 64
)

// claimedLen checks that src is exactly one frame with a content size, and
// returns that size. Walking the block headers (no decoding) is what makes
// zstdOverrun a real bound: with a single frame, output before each block
// is at most the content size, and a block adds at most zstdMaxBlock.
func (c zstdCodec) claimedLen(src []byte) (int, error) {
	claim, _, err := zstdWalk(src)
	return claim, err
}

// outputBound is the most a decode of src (a frame claimedLen accepted)
// can write: raw and RLE blocks produce exactly their size, a compressed
// block at most zstdMaxBlock. A frame whose bound fits the destination
// cannot make the decoder grow it, lie or not, so the destination needs no
// overrun room.
func (c zstdCodec) outputBound(src []byte) int {
	_, bound, err := zstdWalk(src)
	if err != nil {
		return math.MaxInt
	}
	return bound
}

// zstdWalk checks that src is one frame with a content size and returns
// that size and the bound on its output (see outputBound).
func zstdWalk(src []byte) (claim, bound int, err error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return 0, 0, fmt.Errorf("%w: zstd header: %v", ErrCorrupt, err)
	}
	if h.Skippable || !h.HasFCS {
		return 0, 0, fmt.Errorf("%w: zstd frame without content size", ErrCorrupt)
	}
	if h.FrameContentSize > math.MaxInt {
		return 0, 0, fmt.Errorf("%w: zstd frame claims %d bytes", ErrCorrupt, h.FrameContentSize)
	}
	pos := h.HeaderSize
	for {
		if len(src)-pos < zstdBlockHeaderLen {
			return 0, 0, fmt.Errorf("%w: zstd frame truncated in a block header", ErrCorrupt)
		}
		bh := uint32(src[pos]) | uint32(src[pos+1])<<8 | uint32(src[pos+2])<<16
		pos += zstdBlockHeaderLen
		size := int(bh >> 3)
		if size > zstdMaxBlock {
			return 0, 0, fmt.Errorf("%w: zstd block of %d bytes", ErrCorrupt, size)
		}
		out := size
		switch (bh >> 1) & 3 {
		case 0: // raw: size bytes follow
		case 1: // RLE: one byte repeated size times
			size = 1
		case 2: // compressed: size bytes follow
			out = zstdMaxBlock
		default:
			return 0, 0, fmt.Errorf("%w: reserved zstd block type", ErrCorrupt)
		}
		if len(src)-pos < size {
			return 0, 0, fmt.Errorf("%w: zstd frame truncated in a block", ErrCorrupt)
		}
		pos += size
		// Cannot overflow: every block costs at least 3 input bytes.
		bound += out
		if bh&1 != 0 {
			break
		}
	}
	if src[4]&4 != 0 { // Content_Checksum_flag of the frame descriptor
		pos += zstdChecksumLen
	}
	if pos != len(src) {
		return 0, 0, fmt.Errorf("%w: zstd frame is %d bytes of %d", ErrCorrupt, pos, len(src))
	}
	return int(h.FrameContentSize), bound, nil
}

// overrun is the build's decoder's: zstdOverrun for klauspost's, 0 for
// libzstd, which stops at the capacity it is given.
func (zstdCodec) overrun() int { return zstdDecodeOverrun }

// maxOutput is -1: an RLE block turns 4 bytes into 128 KiB, so the
// expansion bound is useless; the frame's checked content size bounds it.
func (zstdCodec) maxOutput(int) int { return -1 }

func (c zstdCodec) decode(dst, src []byte) ([]byte, error) { return zstdDecode(dst, src, false) }

func (c zstdCodec) decodeTrusted(dst, src []byte) ([]byte, error) { return zstdDecode(dst, src, true) }

// zstdDecodeGo decodes with klauspost/compress into dst[:0], never past
// cap(dst); trusted skips a frame checksum.
func zstdDecodeGo(dst, src []byte, trusted bool) ([]byte, error) {
	get := zstdDecoder
	if trusted {
		get = zstdTrustingDecoder
	}
	dec, err := get()
	if err != nil {
		return nil, fmt.Errorf("filter: zstd decoder: %w", err)
	}
	out, err := dec.DecodeAll(src, dst[:0])
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	if len(out) > cap(dst) {
		return nil, fmt.Errorf("%w: zstd: %d bytes exceed the bound %d", ErrCorrupt, len(out), cap(dst))
	}
	return out, nil
}

// ---- lz4 ----

// lz4Codec stores a uint32 little-endian decoded length and then one LZ4
// block. The block format does not record its decoded size, so the prefix
// is what lets decode allocate exactly once, after checking it.
type lz4Codec struct{}

const (
	lz4PrefixLen = 4
	// lz4MaxInput is LZ4's block input limit (LZ4_MAX_INPUT_SIZE); larger
	// chunks are stored without this filter.
	lz4MaxInput = 0x7E000000
)

var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

func (lz4Codec) encodeCap(n int) int { return max(n-1, 0) }

// overrun is 0: the block is decoded into exactly the claimed length.
func (lz4Codec) overrun() int { return 0 }

// maxOutput: in an LZ4 block every 255 bytes of output past a sequence's
// first 19 cost at least one input byte, and a sequence's 3 fixed bytes
// yield at most 19 + 15, so no input byte yields more than 255.
func (lz4Codec) maxOutput(n int) int { return expansionBound(max(n-lz4PrefixLen, 0), 255) }

func (lz4Codec) encode(dst, src []byte) ([]byte, bool) {
	if len(src) <= lz4PrefixLen+1 || len(src) > lz4MaxInput {
		return nil, false
	}
	dst = binary.LittleEndian.AppendUint32(dst[:0], uint32(len(src)))
	c := lz4Compressors.Get().(*lz4.Compressor)
	// A block that does not fit in len(src)-1-prefix bytes is not worth
	// keeping; the compressor then reports 0 or an error.
	n, err := c.CompressBlock(src, dst[lz4PrefixLen:cap(dst)])
	lz4Compressors.Put(c)
	if err != nil || n == 0 {
		return nil, false
	}
	return dst[:lz4PrefixLen+n], true
}

func (lz4Codec) claimedLen(src []byte) (int, error) {
	if len(src) < lz4PrefixLen {
		return 0, fmt.Errorf("%w: lz4: %d bytes, shorter than the length prefix", ErrCorrupt, len(src))
	}
	n := binary.LittleEndian.Uint32(src)
	if n > lz4MaxInput {
		return 0, fmt.Errorf("%w: lz4 claims %d bytes", ErrCorrupt, n)
	}
	return int(n), nil
}

func (c lz4Codec) decode(dst, src []byte) ([]byte, error) {
	n, err := c.claimedLen(src)
	if err != nil {
		return nil, err
	}
	if n > cap(dst) {
		return nil, fmt.Errorf("%w: lz4: %d bytes exceed the bound %d", ErrCorrupt, n, cap(dst))
	}
	out := dst[:n]
	m, err := lz4.UncompressBlock(src[lz4PrefixLen:], out)
	if err != nil {
		return nil, fmt.Errorf("%w: lz4: %v", ErrCorrupt, err)
	}
	if m != n {
		return nil, fmt.Errorf("%w: lz4: block decodes to %d bytes, prefix says %d", ErrCorrupt, m, n)
	}
	return out, nil
}
