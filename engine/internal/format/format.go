// Package format encodes and decodes scc's on-disk container format (v6; older files read unchanged): the
// two superblock slots, the dataset catalog, dataset headers and the frame
// around every stored chunk. FORMAT.md at the repository root is the
// byte-by-byte specification; this package is its reference implementation.
//
// The package does no I/O. Every block has the same frame: a 4-byte magic
// naming the block kind, a version byte, the payload, and a trailing CRC32C
// (Castagnoli) over every byte before it. SCC requirements §3.4 asks for checksums on
// metadata whose corruption could drive buffer overruns; here every block and
// every chunk carries one (DESIGN.md "No data loss").
//
// Decoders take bytes that may be arbitrary (a corrupt or hostile file): they
// never panic, never allocate more than the block's length implies, and
// return errors wrapping ErrCorrupt, or ErrVersion for an intact block of a
// version this package does not know.
//
// All functions are pure and safe for concurrent use.
package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"unicode/utf8"
)

var (
	// ErrCorrupt wraps every decoding failure: bad magic, checksum mismatch,
	// truncation, out-of-range or inconsistent fields.
	ErrCorrupt = errors.New("format: corrupt block")
	// ErrVersion is returned for a block whose checksum is intact but whose
	// version byte is not one this package reads (a file written by a newer
	// scc). It does not wrap ErrCorrupt: the file is not damaged.
	ErrVersion = errors.New("format: unsupported version")
	// ErrInvalid is returned by the Validate functions for values that must
	// not be encoded (the engine checks user input with them).
	ErrInvalid = errors.New("format: invalid value")
)

// Fixed file layout (FORMAT.md "File layout").
const (
	// SlotSize is the size of one superblock slot. A slot is written with a
	// single write, which sectors of 512 bytes make atomic on most devices;
	// the checksum catches the rest (torn writes).
	SlotSize = 512
	// SlotA and SlotB are the offsets of the two superblock slots.
	SlotA = 0
	SlotB = 4096
	// DataStart is the first allocatable byte.
	DataStart = 8192
)

// Version is the block format version this package writes; it reads every
// version from MinVersion to Version. Version 2 is a superset of version 1:
// each block kind's v2 additions are optional parts that a v1 block lacks
// (FORMAT.md §15 "Version history"), so a v1 file opens unchanged and a v2
// file is refused by a v1 reader with ErrVersion, never misread. Version 3
// adds element type codes (TypeBool..TypeComplex128) that only a v3 header
// may name, so a v2 reader refuses a file that might hold them at open.
// Version 4 adds the fixed-length string type (TypeString) with its
// parameters and a wide fill value as dataset header parts. Version 5 adds
// the chunk key part, which keys a dataset's chunk checksums (ChunkSum):
// a v4 reader could not verify such chunks, so it refuses the file.
// Version 6 adds float16 and bfloat16 (TypeFloat16, TypeBFloat16),
// described types (TypeDescribed: enum, opaque, bitfield, array,
// compound) with their description as a header part, scalar and null
// dataspaces, and sharded chunks: a dense dataset whose LayoutParams name
// an inner chunk shape stores each chunk as inner chunks and an index
// (FORMAT.md "Sharded chunk"), which a v5 reader would take for one
// frame. Version 7 adds attributes of 2 or more dimensions and null
// attributes to the attribute encoding (its own version 5, engine/attr.go),
// which a v6 reader would report as damage. Version 8 adds sharded chunks
// whose index entries carry their inner frames' checksums (dense
// LayoutParams version 2), which a v7 reader would take for a damaged
// index.
const (
	Version    = 8
	MinVersion = 1
)

// Block magics. Each is four ASCII bytes.
var (
	magicSuperblock = [4]byte{'S', 'C', 'C', 'F'}
	magicCatalog    = [4]byte{'S', 'C', 'C', 'C'}
	magicHeader     = [4]byte{'S', 'C', 'C', 'D'}
)

// Limits enforced by the decoders (and Validate). They bound every allocation
// an on-disk length can cause.
const (
	MaxRank        = 32
	MaxNameBytes   = 1024
	MaxFilterBytes = 32 << 10 // filter pipeline encoding (engine/filter; at most 32 filters)
	MaxIndexRoot   = 1 << 20  // index root record (engine/internal/index)
	MaxPartBytes   = 1 << 20  // one v2 part of a block (§3 "v2 parts")
	// MaxChunkBytes bounds one chunk's decoded size (product of Chunk times
	// the element size); it matches the engine's own limit.
	MaxChunkBytes = 1 << 30
	// MaxHeaderBytes is the largest dataset header block any valid header
	// encodes to: the longest inline fill (a string's, up to 255 bytes),
	// the two v2 parts, v4's string type and wide fill parts, v5's chunk
	// key, and v6's type description and dataspace. (A header holds a string type or a
	// type description, never both, so this overstates by a few bytes.)
	MaxHeaderBytes = headerFixed + MaxNameBytes + 3*8*MaxRank + maxInlineFill + MaxFilterBytes + MaxIndexRoot +
		headerPartsV2*(partHeader+MaxPartBytes) + partHeader + stringTypeBytes + partHeader + MaxStringLen +
		partHeader + chunkKeyBytes + partHeader + MaxTypeDescBytes + partHeader + 1 + crcSize
	// MaxCatalogBytes bounds the catalog block (about a million datasets
	// with short names).
	MaxCatalogBytes = 1 << 30
	// ChunkFrameOverhead is what a chunk frame's trailer adds to an image.
	ChunkFrameOverhead = crcSize
)

// Unlimited in DatasetHeader.MaxShape marks a dimension without bound.
const Unlimited = ^uint64(0)

// Element type codes (FORMAT.md "Element type codes"). They never change.
const (
	TypeInt8    uint8 = 1
	TypeInt16   uint8 = 2
	TypeInt32   uint8 = 3
	TypeInt64   uint8 = 4
	TypeUint8   uint8 = 5
	TypeUint16  uint8 = 6
	TypeUint32  uint8 = 7
	TypeUint64  uint8 = 8
	TypeFloat32 uint8 = 9
	TypeFloat64 uint8 = 10
	// Version 3 on (TypeVersion).
	TypeBool       uint8 = 11
	TypeComplex64  uint8 = 12
	TypeComplex128 uint8 = 13
	// TypeString is a fixed-length string; its length, padding and
	// character set are header fields (DatasetHeader.StrLen...). Version 4
	// on.
	TypeString uint8 = 14
	// TypeFloat16 and TypeBFloat16 are IEEE 754 binary16 and bfloat16
	// (the top half of a float32). Version 6 on.
	TypeFloat16  uint8 = 15
	TypeBFloat16 uint8 = 16
	// TypeDescribed is a type its description spells out (TypeNode): an
	// enum, opaque type, bitfield, array or compound; its size is the
	// description's. Version 6 on.
	TypeDescribed uint8 = 17
)

// String padding codes (HDF5's H5T_STR_NULLTERM, H5T_STR_NULLPAD,
// H5T_STR_SPACEPAD) and character sets (H5T_CSET_ASCII, H5T_CSET_UTF8).
const (
	PadNullTerm  uint8 = 0
	PadNullPad   uint8 = 1
	PadSpacePad  uint8 = 2
	CharsetASCII uint8 = 0
	CharsetUTF8  uint8 = 1
)

// MaxStringLen bounds a fixed-length string's byte length: its fill value
// must fit one header part.
const MaxStringLen = MaxPartBytes

// TypeVersion is the first block version that may name type code t (0 for
// an unknown code): a block of an older version naming it is damaged, since
// no writer of that version could have written it.
func TypeVersion(t uint8) uint8 {
	switch {
	case t >= TypeInt8 && t <= TypeFloat64:
		return 1
	case t >= TypeBool && t <= TypeComplex128:
		return 3
	case t == TypeString:
		return 4
	case t >= TypeFloat16 && t <= TypeDescribed:
		return 6
	}
	return 0
}

// Layout codes. Only dense chunked exists in v1; the others are reserved.
const LayoutDense uint8 = 1

// ElemSize reports the size in bytes of an element of type code t, or 0 for
// an unknown code and for TypeString and TypeDescribed, whose size is
// their parameters' (DatasetHeader.ElemSize, TypeNode.ElemSize).
func ElemSize(t uint8) int {
	switch t {
	case TypeInt8, TypeUint8, TypeBool:
		return 1
	case TypeInt16, TypeUint16, TypeFloat16, TypeBFloat16:
		return 2
	case TypeInt32, TypeUint32, TypeFloat32:
		return 4
	case TypeInt64, TypeUint64, TypeFloat64, TypeComplex64:
		return 8
	case TypeComplex128:
		return 16
	}
	return 0
}

const crcSize = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C every block and chunk frame uses.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Trailer returns a block's CRC32C trailer (its last four bytes), the value
// a parent records to recognise its child; 0 for a block too short to have
// one.
func Trailer(b []byte) uint32 {
	if len(b) < crcSize {
		return 0
	}
	return le.Uint32(b[len(b)-crcSize:])
}

var le = binary.LittleEndian

// corrupt builds an error wrapping ErrCorrupt.
func corrupt(block, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, block, fmt.Sprintf(format, args...))
}

// openFrame checks a block's frame: length, magic, checksum, then version,
// in that order, so that a damaged version byte reads as corruption and only
// an intact block of another version reads as ErrVersion. It returns the
// bytes between the version byte and the checksum, and the block's version
// (MinVersion..Version) for the decoder to choose the parts it expects.
func openFrame(block string, b []byte, magic [4]byte, minLen int) ([]byte, uint8, error) {
	if len(b) < minLen {
		return nil, 0, corrupt(block, "%d bytes, need at least %d", len(b), minLen)
	}
	if [4]byte(b[:4]) != magic {
		return nil, 0, corrupt(block, "bad magic %q", b[:4])
	}
	n := len(b) - crcSize
	if want, got := le.Uint32(b[n:]), Checksum(b[:n]); want != got {
		return nil, 0, corrupt(block, "checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if v := b[4]; v < MinVersion || v > Version {
		return nil, 0, fmt.Errorf("%w: %s version %d (this reader knows %d to %d)", ErrVersion, block, v, MinVersion, Version)
	}
	return b[5:n], b[4], nil
}

// A part is one optional piece of a v2 block (FORMAT.md §3 "v2 parts"):
// u16 tag, u32 length, the bytes. A block's parts follow its v1 payload in
// strictly increasing tag order, each tag at most once, so the encoding
// stays canonical; the meaning of a tag belongs to the block kind.
type part struct {
	tag  uint16
	data []byte
}

// partHeader is the size of a part's tag and length.
const partHeader = 6

// appendParts appends ps (in increasing tag order, none empty) to b.
func appendParts(b []byte, ps []part) []byte {
	for _, p := range ps {
		b = le.AppendUint16(b, p.tag)
		b = le.AppendUint32(b, uint32(len(p.data)))
		b = append(b, p.data...)
	}
	return b
}

// readParts decodes the parts that fill b exactly. Tags must increase, lie
// in 1..maxTag and carry 1..MaxPartBytes bytes; anything else (including a
// tag this version does not define) is an error, since a block of a known
// version holds only the parts that version defines. The returned data
// does not alias b.
func readParts(b []byte, maxTag uint16) ([]part, error) {
	var ps []part
	last := uint16(0)
	for len(b) > 0 {
		if len(b) < partHeader {
			return nil, fmt.Errorf("%d bytes left, a part needs %d", len(b), partHeader)
		}
		tag, n := le.Uint16(b), le.Uint32(b[2:])
		b = b[partHeader:]
		switch {
		case tag == 0 || tag > maxTag:
			return nil, fmt.Errorf("part tag %d (want 1..%d)", tag, maxTag)
		case tag <= last:
			return nil, fmt.Errorf("part tag %d after %d", tag, last)
		case n == 0 || n > MaxPartBytes || uint64(n) > uint64(len(b)):
			return nil, fmt.Errorf("part %d of %d bytes, %d left (at most %d)", tag, n, len(b), MaxPartBytes)
		}
		ps = append(ps, part{tag, slices.Clone(b[:n])})
		b = b[n:]
		last = tag
	}
	return ps, nil
}

// sealFrame appends the checksum of b to b.
func sealFrame(b []byte) []byte {
	return le.AppendUint32(b, Checksum(b))
}

// reader consumes a payload; the first short read sets err and every later
// read returns zero, so decoders check err once per section.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("need %d bytes, %d left", n, len(r.b))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if p := r.take(2); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return le.Uint64(p)
	}
	return 0
}

// checkName enforces the dataset name rule: 1..MaxNameBytes bytes of valid
// UTF-8.
func checkName(name string) error {
	if len(name) == 0 {
		return errors.New("empty name")
	}
	if len(name) > MaxNameBytes {
		return fmt.Errorf("name of %d bytes (at most %d)", len(name), MaxNameBytes)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("name %q is not valid UTF-8", name)
	}
	return nil
}

// ValidName reports whether name may name a dataset (1..1024 bytes of valid
// UTF-8). The error wraps ErrInvalid.
func ValidName(name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
