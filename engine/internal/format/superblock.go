package format

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Superblock is the root of a committed state. Two slots hold the two most
// recent generations; open takes the valid slot with the higher generation
// (FORMAT.md "Commit protocol").
type Superblock struct {
	Generation  uint64 // increments on every commit; selects the slot (SlotFor)
	CatalogAddr uint64 // catalog block; both 0 when the file has no catalog yet
	CatalogSize uint64
	// CatalogSum is the catalog block's CRC32C trailer. A reader checks it
	// against the block it reads, so a block at a reused address (a reader
	// that fell behind a writer) is never taken for the catalog.
	CatalogSum    uint32
	EOF           uint64 // end of the space the committed state may reference
	NextDatasetID uint64 // next ID to give a dataset; IDs start at 1
	FileID        [16]byte
	// Image records the cache image block written with this generation
	// (FORMAT.md §4 "image record", §16), the zero value when there is
	// none. A v2-only field: it lives in bytes a v1 superblock keeps zero.
	Image ImageRecord
}

// ImageRecord locates a cache image block (Cache image RFC §4.1, the "metadata
// cache image message"): its address, its length and its CRC32C trailer,
// which the reader checks against the block it reads (a parent verifies
// its child, FORMAT.md §5). All zero means no image.
type ImageRecord struct {
	Addr uint64
	Size uint64
	Sum  uint32
}

// Exists reports whether the record names an image.
func (r ImageRecord) Exists() bool { return r.Size != 0 }

// Superblock field offsets inside a slot (FORMAT.md "Superblock").
const (
	sbGeneration = 8
	sbCatalog    = 16
	sbCatSize    = 24
	sbEOF        = 32
	sbNextID     = 40
	sbFileID     = 48
	sbCatSum     = 64
	sbUsedV1     = 68 // v1: bytes 68..507 are reserved (zero)
	sbImageAddr  = 68 // v2: the image record (ImageRecord)
	sbImageSize  = 76
	sbImageSum   = 84
	sbUsed       = 88 // v2: bytes 88..507 are reserved (zero)
)

// ImageVersion is the first block format version that knows cache images:
// a superblock with an image record is always written as this version or
// later, so a reader that knows only older versions refuses the file with
// ErrVersion (Cache image RFC §2: "versions of the library that do not understand
// this message must refuse to open files in which it appears").
const ImageVersion = 2

// SlotFor returns the offset of the slot generation gen is written to: SlotA
// for even generations, SlotB for odd ones, so consecutive commits alternate
// and a torn superblock write never damages the last committed one.
func SlotFor(gen uint64) int64 {
	if gen%2 == 0 {
		return SlotA
	}
	return SlotB
}

// validate checks the superblock's fields against each other.
func (sb Superblock) validate() error {
	if sb.EOF < DataStart || sb.EOF > math.MaxInt64 {
		return fmt.Errorf("EOF %d outside [%d, 2^63)", sb.EOF, DataStart)
	}
	if err := sb.Image.validate(sb.EOF); err != nil {
		return err
	}
	if sb.CatalogSize == 0 {
		if sb.CatalogAddr != 0 || sb.CatalogSum != 0 {
			return fmt.Errorf("catalog address %d or checksum %#x with zero size", sb.CatalogAddr, sb.CatalogSum)
		}
		return nil
	}
	if sb.CatalogSize < catalogMin || sb.CatalogSize > MaxCatalogBytes {
		return fmt.Errorf("catalog size %d outside [%d, %d]", sb.CatalogSize, catalogMin, MaxCatalogBytes)
	}
	if sb.CatalogAddr < DataStart || sb.CatalogAddr > sb.EOF || sb.CatalogSize > sb.EOF-sb.CatalogAddr {
		return fmt.Errorf("catalog [%d,+%d) outside [%d, EOF %d)", sb.CatalogAddr, sb.CatalogSize, DataStart, sb.EOF)
	}
	return nil
}

// validate checks an image record against the superblock's EOF.
func (r ImageRecord) validate(eof uint64) error {
	if r.Size == 0 {
		if r.Addr != 0 || r.Sum != 0 {
			return fmt.Errorf("image address %d or checksum %#x with zero size", r.Addr, r.Sum)
		}
		return nil
	}
	if r.Size < imageMin || r.Size > MaxImageBytes {
		return fmt.Errorf("image size %d outside [%d, %d]", r.Size, imageMin, MaxImageBytes)
	}
	if r.Addr < DataStart || r.Addr > eof || r.Size > eof-r.Addr {
		return fmt.Errorf("image [%d,+%d) outside [%d, EOF %d)", r.Addr, r.Size, DataStart, eof)
	}
	return nil
}

// Validate reports whether sb may be encoded; the error wraps ErrInvalid.
func (sb Superblock) Validate() error {
	if err := sb.validate(); err != nil {
		return fmt.Errorf("%w: superblock: %w", ErrInvalid, err)
	}
	return nil
}

// EncodeSuperblock returns sb as one slot image of exactly SlotSize bytes.
// Encode only values that pass Validate: an invalid one encodes to a slot
// that DecodeSuperblock rejects.
func EncodeSuperblock(sb Superblock) []byte {
	b := make([]byte, SlotSize-crcSize, SlotSize)
	copy(b, magicSuperblock[:])
	b[4] = Version
	le.PutUint64(b[sbGeneration:], sb.Generation)
	le.PutUint64(b[sbCatalog:], sb.CatalogAddr)
	le.PutUint64(b[sbCatSize:], sb.CatalogSize)
	le.PutUint64(b[sbEOF:], sb.EOF)
	le.PutUint64(b[sbNextID:], sb.NextDatasetID)
	copy(b[sbFileID:], sb.FileID[:])
	le.PutUint32(b[sbCatSum:], sb.CatalogSum)
	le.PutUint64(b[sbImageAddr:], sb.Image.Addr)
	le.PutUint64(b[sbImageSize:], sb.Image.Size)
	le.PutUint32(b[sbImageSum:], sb.Image.Sum)
	return sealFrame(b)
}

// DecodeSuperblock decodes one slot image (exactly SlotSize bytes).
func DecodeSuperblock(b []byte) (Superblock, error) {
	if len(b) != SlotSize {
		return Superblock{}, corrupt("superblock", "slot of %d bytes, want %d", len(b), SlotSize)
	}
	_, version, err := openFrame("superblock", b, magicSuperblock, SlotSize)
	if err != nil {
		return Superblock{}, err
	}
	// A v1 superblock has no image record: its bytes are reserved there.
	used := sbUsed
	if version < ImageVersion {
		used = sbUsedV1
	}
	// INVARIANT: v1 reserved bytes are zero; a writer that needs them
	// defines a new version, so non-zero means damage (that the checksum
	// missed) or a confused writer.
	for i := 5; i < sbGeneration; i++ {
		if b[i] != 0 {
			return Superblock{}, corrupt("superblock", "reserved byte %d is %#x", i, b[i])
		}
	}
	for i := used; i < SlotSize-crcSize; i++ {
		if b[i] != 0 {
			return Superblock{}, corrupt("superblock", "reserved byte %d is %#x", i, b[i])
		}
	}
	sb := Superblock{
		Generation:    le.Uint64(b[sbGeneration:]),
		CatalogAddr:   le.Uint64(b[sbCatalog:]),
		CatalogSize:   le.Uint64(b[sbCatSize:]),
		EOF:           le.Uint64(b[sbEOF:]),
		NextDatasetID: le.Uint64(b[sbNextID:]),
		CatalogSum:    le.Uint32(b[sbCatSum:]),
	}
	if version >= ImageVersion {
		sb.Image = ImageRecord{Addr: le.Uint64(b[sbImageAddr:]), Size: le.Uint64(b[sbImageSize:]), Sum: le.Uint32(b[sbImageSum:])}
	}
	copy(sb.FileID[:], b[sbFileID:])
	if err := sb.validate(); err != nil {
		return Superblock{}, corrupt("superblock", "%v", err)
	}
	return sb, nil
}

// PickSuperblock chooses the committed state from the two slot images read
// at SlotA (a) and SlotB (b): the valid one with the higher generation.
//
// A slot is valid when it decodes and its generation belongs in that slot
// (SlotFor); a misplaced generation means a misdirected write and is
// treated as damage. If either slot is an intact block of an unknown version
// the result is ErrVersion, even when the other slot is valid: a newer
// writer may have committed there, and falling back to the older slot would
// silently roll the file back. Two valid slots with different FileIDs do not
// belong to one file and give ErrCorrupt.
func PickSuperblock(a, b []byte) (Superblock, error) {
	sa, errA := decodeSlot(a, SlotA)
	sb, errB := decodeSlot(b, SlotB)
	switch {
	case errors.Is(errA, ErrVersion):
		return Superblock{}, errA
	case errors.Is(errB, ErrVersion):
		return Superblock{}, errB
	case errA != nil && errB != nil:
		return Superblock{}, fmt.Errorf("no valid superblock: slot A: %w; slot B: %w", errA, errB)
	case errA != nil:
		return sb, nil
	case errB != nil:
		return sa, nil
	}
	if sa.FileID != sb.FileID {
		return Superblock{}, corrupt("superblock", "slots carry different file IDs %x and %x", sa.FileID, sb.FileID)
	}
	if sa.Generation > sb.Generation {
		return sa, nil
	}
	return sb, nil
}

func decodeSlot(p []byte, slot int64) (Superblock, error) {
	s, err := DecodeSuperblock(p)
	if err != nil {
		return Superblock{}, err
	}
	if SlotFor(s.Generation) != slot {
		return Superblock{}, corrupt("superblock", "generation %d found in slot at %d", s.Generation, slot)
	}
	return s, nil
}

// SlotState is what a consistency checker can tell of one slot image
// without trusting it: whether it was never written (all zero), and, for
// a slot that does not decode, the generation its damaged bytes still
// name when its magic is intact (the generation field is not covered by
// anything but the checksum that failed, so it is a hint).
type SlotState struct {
	Blank      bool
	Valid      bool
	Gen        uint64 // the decoded generation, or the hint
	EOF        uint64 // the decoded end of file, or the hint
	GenLegible bool   // Gen is the decoded generation or a hint read under an intact magic
	Err        error  // why the slot does not decode
}

// InspectSlot describes the slot image b read at slot.
func InspectSlot(b []byte, slot int64) SlotState {
	s, err := decodeSlot(b, slot)
	if err == nil {
		return SlotState{Valid: true, Gen: s.Generation, EOF: s.EOF, GenLegible: true}
	}
	st := SlotState{Err: err, Blank: len(b) == SlotSize && !slices.ContainsFunc(b, func(c byte) bool { return c != 0 })}
	if len(b) == SlotSize && [4]byte(b[:4]) == magicSuperblock {
		st.Gen, st.EOF, st.GenLegible = le.Uint64(b[sbGeneration:]), le.Uint64(b[sbEOF:]), true
	}
	return st
}
