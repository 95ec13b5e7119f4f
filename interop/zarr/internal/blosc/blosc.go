// Package blosc decodes Blosc 1.x frames, the format numcodecs' "blosc"
// codec writes (c-blosc 1.x, frame format version 2), in pure Go.
//
// API:
//
//	ParseHeader(src []byte) (Header, error)
//	DecodedSize(src []byte) (int, error)
//	Decode(dst, src []byte, limit int) ([]byte, error)
//
// DecodedSize checks the 16-byte header and returns the frame's decoded
// size (its nbytes field) without decoding anything. Decode decodes the
// whole frame; the result has exactly that size and lives in dst's storage
// when cap(dst) is large enough (dst's contents are ignored), otherwise in
// a new slice. A frame claiming more than limit bytes is refused with
// ErrTooLarge before anything is allocated, so limit is the caller's bound
// on memory: for a Zarr chunk, the chunk's size in bytes.
//
// Errors wrap one of three sentinels: ErrCorrupt (the frame is damaged or
// inconsistent), ErrUnsupported (a valid frame this package does not
// decode: another format version, reserved flags, an unknown compressor),
// ErrTooLarge (nbytes over the limit). Decode never panics and does work
// bounded by len(src) and the limit.
//
// What is decoded: every compressor c-blosc 1.x ships (BloscLZ, LZ4 and
// LZ4HC, Snappy, Zlib, Zstd), byte shuffle and bit shuffle, split and
// unsplit blocks, and memcpyed frames (clevel 0 and incompressible data).
// Bytes after the frame's cbytes are ignored, as c-blosc does.
package blosc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
)

var (
	// ErrCorrupt: the frame is damaged: a field out of range, an offset
	// outside the frame, a stream that does not decode to its block.
	ErrCorrupt = errors.New("blosc: corrupt frame")
	// ErrUnsupported: the frame is of a kind this package does not decode.
	ErrUnsupported = errors.New("blosc: unsupported frame")
	// ErrTooLarge: the frame decodes to more bytes than the caller allows.
	ErrTooLarge = errors.New("blosc: frame exceeds the size limit")
)

// HeaderSize is the size of a Blosc 1.x frame header.
const HeaderSize = 16

// Header flag bits.
const (
	FlagShuffle    = 0x01 // byte shuffle applied to each block
	FlagMemcpyed   = 0x02 // the blocks are stored uncompressed after the header
	FlagBitShuffle = 0x04 // bit shuffle applied to each block
	flagReserved   = 0x08 // must be zero in format version 2
	FlagDontSplit  = 0x10 // blocks are not split into one stream per byte of an element
)

// Compressor codes, the top three bits of the flags byte.
const (
	CodecBloscLZ = 0
	CodecLZ4     = 1 // LZ4 and LZ4HC share one stream format
	CodecSnappy  = 2
	CodecZlib    = 3
	CodecZstd    = 4
)

const (
	formatVersion = 2 // the only frame version c-blosc 1.x writes and reads
	codecVersion  = 1 // the stream format version of every compressor it ships
	// Limits c-blosc enforces on what it writes and reads.
	maxTypeSize  = 255
	maxBuffer    = math.MaxInt32 - HeaderSize
	maxBlockSize = (math.MaxInt32 - maxTypeSize*4) / 3
	// A block is split into typesize streams only when typesize is at most
	// maxSplits and the block holds at least minSplitElems elements.
	maxSplits     = 16
	minSplitElems = 128
)

var codecNames = [...]string{"blosclz", "lz4", "snappy", "zlib", "zstd"}

// Header is a Blosc 1.x frame header.
type Header struct {
	Version   uint8 // frame format version (2)
	VersionLZ uint8 // version of the compressor's format
	Flags     uint8
	TypeSize  int // bytes per element that shuffling works on
	NBytes    int // decoded size
	BlockSize int // decoded size of every block but the last
	CBytes    int // frame size, header included
}

// Codec is the compressor code (CodecBloscLZ ... CodecZstd, or higher for
// a compressor unknown to c-blosc 1.x).
func (h Header) Codec() int { return int(h.Flags >> 5) }

// CodecName names the compressor, as numcodecs spells it ("lz4" also
// stands for LZ4HC, whose frames are the same).
func (h Header) CodecName() string {
	if c := h.Codec(); c < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("compressor %d", h.Codec())
}

// ParseHeader reads and checks a frame's header: every field in range and
// consistent with the others and with len(src), as far as that can be
// known without decoding.
func ParseHeader(src []byte) (Header, error) {
	if len(src) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorrupt, len(src), HeaderSize)
	}
	h := Header{
		Version:   src[0],
		VersionLZ: src[1],
		Flags:     src[2],
		TypeSize:  int(src[3]),
		NBytes:    u32(src[4:]),
		BlockSize: u32(src[8:]),
		CBytes:    u32(src[12:]),
	}
	switch {
	case h.Version != formatVersion:
		return h, fmt.Errorf("%w: format version %d (only Blosc 1.x frames, version %d, are read)", ErrUnsupported, h.Version, formatVersion)
	case h.Flags&flagReserved != 0:
		// Blosc2 sets this bit for its extended header; c-blosc 1.x refuses it.
		return h, fmt.Errorf("%w: reserved flag 0x08 set (flags 0x%02x)", ErrUnsupported, h.Flags)
	case h.CBytes < HeaderSize || h.CBytes > len(src):
		return h, fmt.Errorf("%w: cbytes %d, frame holds %d bytes", ErrCorrupt, h.CBytes, len(src))
	case h.NBytes > maxBuffer:
		return h, fmt.Errorf("%w: nbytes %d exceeds Blosc's maximum %d", ErrCorrupt, h.NBytes, maxBuffer)
	case h.NBytes == 0:
		return h, nil // c-blosc decodes an empty frame without looking further
	case h.TypeSize == 0:
		return h, fmt.Errorf("%w: typesize 0", ErrCorrupt)
	case h.BlockSize <= 0 || h.BlockSize > h.NBytes || h.BlockSize > maxBlockSize:
		return h, fmt.Errorf("%w: blocksize %d for nbytes %d", ErrCorrupt, h.BlockSize, h.NBytes)
	}
	if h.Flags&FlagMemcpyed != 0 {
		if h.CBytes != h.NBytes+HeaderSize {
			return h, fmt.Errorf("%w: memcpyed frame of %d bytes holds cbytes %d, want nbytes %d + %d", ErrCorrupt, len(src), h.CBytes, h.NBytes, HeaderSize)
		}
		return h, nil
	}
	if h.Codec() >= len(codecNames) {
		return h, fmt.Errorf("%w: compressor code %d", ErrUnsupported, h.Codec())
	}
	if h.VersionLZ != codecVersion {
		return h, fmt.Errorf("%w: %s stream format version %d (c-blosc 1.x reads %d)", ErrUnsupported, h.CodecName(), h.VersionLZ, codecVersion)
	}
	if nb := h.nblocks(); nb > (h.CBytes-HeaderSize)/4 {
		return h, fmt.Errorf("%w: %d blocks, cbytes %d cannot hold their offsets", ErrCorrupt, nb, h.CBytes)
	}
	return h, nil
}

// nblocks is the number of blocks of a checked header with NBytes > 0.
func (h Header) nblocks() int { return (h.NBytes-1)/h.BlockSize + 1 }

// u32 reads a size field; values past every limit clamp to MaxInt32 (also
// past them) so that they stay positive where int has 32 bits.
func u32(b []byte) int { return int(min(binary.LittleEndian.Uint32(b), math.MaxInt32)) }

// DecodedSize returns the decoded size of the frame in src after checking
// its header (see ParseHeader).
func DecodedSize(src []byte) (int, error) {
	h, err := ParseHeader(src)
	if err != nil {
		return 0, err
	}
	return h.NBytes, nil
}

// Decode decodes the Blosc frame in src into dst's storage (reallocated
// when cap(dst) is too small) and returns it with its decoded length. A
// frame of more than limit decoded bytes is refused with ErrTooLarge. dst
// must not overlap src. On error, the contents of dst's storage are
// unspecified. Decode is safe for concurrent use.
func Decode(dst, src []byte, limit int) ([]byte, error) {
	h, err := ParseHeader(src)
	if err != nil {
		return nil, err
	}
	if h.NBytes > limit {
		return nil, fmt.Errorf("%w: frame decodes to %d bytes, limit %d", ErrTooLarge, h.NBytes, limit)
	}
	if cap(dst) < h.NBytes {
		dst = make([]byte, h.NBytes)
	}
	dst = dst[:h.NBytes]
	if h.NBytes == 0 {
		return dst, nil
	}
	src = src[:h.CBytes]
	if h.Flags&FlagMemcpyed != 0 {
		copy(dst, src[HeaderSize:])
		return dst, nil
	}
	d := decoder{h: h, src: src, room: h.CBytes - HeaderSize - 4*h.nblocks()}
	if d.unshuffles() {
		buf := scratch.Get().(*[]byte)
		defer scratch.Put(buf)
		if cap(*buf) < h.BlockSize {
			*buf = make([]byte, h.BlockSize)
		}
		d.tmp = (*buf)[:h.BlockSize]
	}
	for j, nb := 0, h.nblocks(); j < nb; j++ {
		start := int(int32(binary.LittleEndian.Uint32(src[HeaderSize+4*j:])))
		lo := j * h.BlockSize
		hi := min(lo+h.BlockSize, h.NBytes)
		if err := d.block(dst[lo:hi], start, hi-lo < h.BlockSize); err != nil {
			return nil, fmt.Errorf("block %d of %d (%s): %w", j, nb, h.CodecName(), err)
		}
	}
	return dst, nil
}

// scratch holds the buffers blocks are decompressed into before they are
// unshuffled into place.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

type decoder struct {
	h   Header
	src []byte // the frame, cut at cbytes
	tmp []byte // BlockSize bytes, when blocks need unshuffling
	// room is what is left of the frame after the header, the offsets and
	// the streams decoded so far. c-blosc writes streams one after the
	// other; charging each against room refuses frames whose blocks share
	// streams, which would make the work grow with the square of the
	// frame's size (zlib and zstd streams can be long and decode to little).
	room int
}

// unshuffles says whether any block can need a shuffle undone.
func (d *decoder) unshuffles() bool {
	return d.h.Flags&FlagShuffle != 0 && d.h.TypeSize > 1 || d.h.Flags&FlagBitShuffle != 0
}

// block decodes one block whose streams start at offset off of the frame
// into out, which has the block's decoded size.
func (d *decoder) block(out []byte, off int, leftover bool) error {
	ts := d.h.TypeSize
	n := len(out)
	byteShuffled := d.h.Flags&FlagShuffle != 0 && ts > 1
	bitShuffled := !byteShuffled && d.h.Flags&FlagBitShuffle != 0 && n >= ts
	into := out
	if byteShuffled || bitShuffled {
		into = d.tmp[:n]
	}
	// c-blosc's rule, which also covers frames written before the
	// don't-split flag existed: those split whenever the rule allows.
	nsplits := 1
	if d.h.Flags&FlagDontSplit == 0 && ts <= maxSplits && n/ts >= minSplitElems && !leftover {
		nsplits = ts
		if n%ts != 0 {
			// c-blosc never writes this, and would leave the tail unwritten.
			return fmt.Errorf("%w: split block of %d bytes is not a multiple of typesize %d", ErrCorrupt, n, ts)
		}
	}
	size := n / nsplits
	for s := range nsplits {
		if off < 0 || off > len(d.src)-4 {
			return fmt.Errorf("%w: stream %d starts at %d, outside the %d-byte frame", ErrCorrupt, s, off, len(d.src))
		}
		cs := int(int32(binary.LittleEndian.Uint32(d.src[off:])))
		off += 4
		if cs < 0 || cs > len(d.src)-off {
			return fmt.Errorf("%w: stream %d of %d bytes at %d overruns the %d-byte frame", ErrCorrupt, s, cs, off, len(d.src))
		}
		if d.room -= 4 + cs; d.room < 0 {
			return fmt.Errorf("%w: stream %d at %d: the streams add up to more than the frame holds (blocks share streams)", ErrCorrupt, s, off)
		}
		part := into[s*size : (s+1)*size]
		if err := d.stream(part, d.src[off:off+cs]); err != nil {
			return fmt.Errorf("stream %d: %w", s, err)
		}
		off += cs
	}
	switch {
	case byteShuffled:
		unshuffle(out, into, ts)
	case bitShuffled:
		bitUnshuffle(out, into, ts)
	}
	return nil
}

// stream decodes one compressed stream, which must fill out exactly. A
// stream as long as its output is stored uncompressed.
func (d *decoder) stream(out, in []byte) error {
	if len(in) == len(out) {
		copy(out, in)
		return nil
	}
	var err error
	switch d.h.Codec() {
	case CodecBloscLZ:
		err = blosclz(out, in)
	case CodecLZ4:
		err = lz4Block(out, in)
	case CodecSnappy:
		err = snappyBlock(out, in)
	case CodecZlib:
		err = zlibBlock(out, in)
	case CodecZstd:
		err = zstdBlock(out, in)
	default: // ParseHeader refused it
		err = fmt.Errorf("%w: compressor code %d", ErrUnsupported, d.h.Codec())
	}
	return err
}
