// Package section encodes and decodes the parts of a structured chunk
// (SCC requirements §2.1): the frame that holds a chunk's sections, each with its
// own stored size, decoded size, filter mask and checksum, and the section
// encodings the layouts use (the run encoding of a sparse chunk's defined
// elements). FORMAT.md §16 specifies the bytes.
//
// Every decoder here treats its input as hostile: lengths and counts are
// checked against the bytes present and the caller's limits before
// anything is allocated, and a damaged input returns an error wrapping
// ErrCorrupt, never a panic.
//
// The package holds no state; everything is safe for concurrent use.
package section

import (
	"encoding/binary"
	"fmt"

	"github.com/scc-dev/scc/engine/internal/format"
)

// ErrCorrupt is format.ErrCorrupt: a damaged frame or section is damage
// like any other block's, and the engine classifies it the same way.
var ErrCorrupt = format.ErrCorrupt

// Version is the frame version this package writes and reads.
const Version = 1

// MaxSections bounds the sections of one frame.
const MaxSections = 8

// entrySize is one section's record in the frame's table.
const entrySize = 16

// HeaderSize is the size of a frame header with n sections: version,
// count, two reserved bytes, the table, the header's checksum.
func HeaderSize(n int) int { return 4 + entrySize*n + 4 }

// Stored is one section as it goes into a frame: its stored (filtered)
// bytes, the size they decode to, and the filter mask of its pipeline.
type Stored struct {
	Data    []byte
	Decoded uint32
	Mask    uint32
}

// Entry is one section's record in a parsed frame header.
type Entry struct {
	Off     int64 // offset of the stored bytes in the frame
	Size    uint32
	Decoded uint32
	Mask    uint32
	Sum     uint32 // the dataset's format.ChunkSum Plain checksum of the stored bytes
}

// Header is a parsed frame header.
type Header struct {
	N   int
	Sec [MaxSections]Entry
	// Sum is the header's own checksum, which covers every section's
	// checksum: the chunk index records it, so that it names the whole
	// frame and any prefix that holds the header and some sections can be
	// verified on its own (a partial read, SCC requirements §2.1 item 6).
	// It is the dataset's format.ChunkSum trailer of the header bytes at
	// the chunk's coordinates, so that under a keyed rule it names which
	// chunk the frame is.
	Sum uint32
	cs  format.ChunkSum
}

// AppendFrame appends the frame of secs, the chunk at coord of a dataset
// whose checksum rule is cs, to dst and returns it with the header's
// checksum. len(secs) must be 1..MaxSections.
func AppendFrame(dst []byte, secs []Stored, cs format.ChunkSum, coord []uint64) ([]byte, uint32) {
	if len(secs) == 0 || len(secs) > MaxSections {
		panic(fmt.Sprintf("section: AppendFrame with %d sections", len(secs)))
	}
	start := len(dst)
	dst = append(dst, Version, uint8(len(secs)), 0, 0)
	for _, s := range secs {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.Data)))
		dst = binary.LittleEndian.AppendUint32(dst, s.Decoded)
		dst = binary.LittleEndian.AppendUint32(dst, s.Mask)
		dst = binary.LittleEndian.AppendUint32(dst, cs.Plain(s.Data))
	}
	sum := cs.Sum(coord, dst[start:])
	dst = binary.LittleEndian.AppendUint32(dst, sum)
	for _, s := range secs {
		dst = append(dst, s.Data...)
	}
	return dst, sum
}

// FrameSize is the size AppendFrame produces for sections of the given
// stored sizes.
func FrameSize(sizes ...int) int {
	n := HeaderSize(len(sizes))
	for _, s := range sizes {
		n += s
	}
	return n
}

// ParseHeader parses and verifies the header at the start of b, a frame
// of frameSize bytes or a prefix of one. It checks the header's checksum,
// that it has exactly want sections, that the sections fill frameSize
// exactly, and that no section declares a decoded size above maxDecoded.
// Sections themselves are checked by Section. cs and coord are the
// dataset's checksum rule and the chunk's coordinates.
func ParseHeader(b []byte, frameSize int64, want int, maxDecoded uint32, cs format.ChunkSum, coord []uint64) (Header, error) {
	h := Header{cs: cs}
	if want < 1 || want > MaxSections {
		return h, fmt.Errorf("%w: structured chunk: %d sections asked for", ErrCorrupt, want)
	}
	hs := HeaderSize(want)
	if len(b) < hs || frameSize < int64(hs) {
		return h, fmt.Errorf("%w: structured chunk: %d bytes (frame %d) cannot hold a %d-byte header", ErrCorrupt, len(b), frameSize, hs)
	}
	if b[0] != Version || int(b[1]) != want || b[2] != 0 || b[3] != 0 {
		return h, fmt.Errorf("%w: structured chunk header: version %d, %d sections, reserved %d %d (want version %d, %d sections)",
			ErrCorrupt, b[0], b[1], b[2], b[3], Version, want)
	}
	h.Sum = binary.LittleEndian.Uint32(b[hs-4:])
	if got := cs.Sum(coord, b[:hs-4]); got != h.Sum {
		return h, fmt.Errorf("%w: structured chunk header: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, h.Sum, got)
	}
	h.N = want
	off := int64(hs)
	for i := 0; i < want; i++ {
		p := b[4+entrySize*i:]
		e := Entry{
			Off:     off,
			Size:    binary.LittleEndian.Uint32(p),
			Decoded: binary.LittleEndian.Uint32(p[4:]),
			Mask:    binary.LittleEndian.Uint32(p[8:]),
			Sum:     binary.LittleEndian.Uint32(p[12:]),
		}
		if e.Decoded > maxDecoded {
			return h, fmt.Errorf("%w: structured chunk: section %d decodes to %d bytes (at most %d)", ErrCorrupt, i, e.Decoded, maxDecoded)
		}
		off += int64(e.Size)
		h.Sec[i] = e
	}
	if off != frameSize {
		return h, fmt.Errorf("%w: structured chunk: sections end at %d, frame has %d bytes", ErrCorrupt, off, frameSize)
	}
	return h, nil
}

// Section returns section i's stored bytes from b (the frame, or a prefix
// of it that reaches past the section), after checking its checksum.
func (h *Header) Section(b []byte, i int) ([]byte, error) {
	if i < 0 || i >= h.N {
		return nil, fmt.Errorf("%w: structured chunk: no section %d", ErrCorrupt, i)
	}
	e := h.Sec[i]
	end := e.Off + int64(e.Size)
	if end > int64(len(b)) {
		return nil, fmt.Errorf("%w: structured chunk: section %d ends at %d, %d bytes present", ErrCorrupt, i, end, len(b))
	}
	s := b[e.Off:end:end]
	if got := h.cs.Plain(s); got != e.Sum {
		return nil, fmt.Errorf("%w: structured chunk: section %d checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, i, e.Sum, got)
	}
	return s, nil
}

// HeaderSum returns the checksum the header at the start of frame records
// for itself (the value a chunk index keeps), or 0 if frame is too short
// for n sections. It verifies nothing.
func HeaderSum(frame []byte, n int) uint32 {
	hs := HeaderSize(n)
	if len(frame) < hs {
		return 0
	}
	return binary.LittleEndian.Uint32(frame[hs-4:])
}
