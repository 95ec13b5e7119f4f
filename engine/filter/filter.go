// Package filter is the chunk filter pipeline: it turns the cache-format bytes
// of a chunk into the image stored on disk (Encode) and back (Decode).
//
// A pipeline is an ordered list of filters, as in HDF5 (SCC requirements §"Structured
// Chunk" item 4 runs a pipeline per section; SCC internal API Q&A on
// H5SC_chunk_encode_t computes the filter mask during encoding): byte shuffle,
// deflate (raw or zlib-framed), zstd, LZ4 and a CRC32C checksum. Compressors are optional filters
// in HDF5's sense: when one does not make its input smaller it is skipped and
// its bit is set in the filter mask that the caller stores beside the image,
// so incompressible chunks are stored raw instead of growing.
//
// Decoding treats the image and the mask as hostile on-disk bytes. Every step
// is bounded by sizes that follow from the decoded chunk size the caller
// knows from the dataset's geometry, so a decompression bomb, a lying length
// prefix or a flipped bit returns an error wrapping ErrCorrupt; it never
// panics and never allocates much more than the decoded size.
//
// A Pipeline is immutable and safe for concurrent use by any number of
// goroutines; the zstd encoders and decoder it uses are shared process-wide
// (their EncodeAll/DecodeAll are concurrency-safe), and the deflate and LZ4
// state it needs per call comes from sync.Pools.
package filter

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var (
	// ErrCorrupt reports on-disk bytes (an image, a mask, an encoded filter
	// list) that are not something this package could have written.
	ErrCorrupt = errors.New("filter: corrupt data")
	// ErrUnknown reports an on-disk filter list naming a filter this
	// version does not know: the list is intact (its block's checksum
	// held), so a newer scc wrote it. It does not wrap ErrCorrupt: the
	// engine reports it as a newer format version, not damage.
	ErrUnknown = errors.New("filter: unknown filter (written by a newer version)")
	// ErrInvalid reports a bad argument from the caller: an unknown filter,
	// a level out of range, a bad element size.
	ErrInvalid = errors.New("filter: invalid argument")
)

// ID identifies a filter. The numbers are stored on disk (EncodeSpecs) and
// must never be renumbered or reused.
type ID uint16

const (
	Shuffle ID = 1 // byte shuffle by element size (HDF5's H5Z_FILTER_SHUFFLE)
	Deflate ID = 2 // raw DEFLATE (RFC 1951), Level 1..9
	// zstdPreset is the first zstd filter, whose levels 1..4 named the
	// encoder's four speeds rather than zstd's levels. Files written with
	// it keep reading: DecodeSpecs turns it into Zstd with the zstd level
	// that selects the same speed, so nothing in memory carries it.
	zstdPreset ID = 3
	LZ4        ID = 4 // uint32 little-endian decoded length, then one LZ4 block
	CRC32C     ID = 5 // appends the 4-byte little-endian CRC-32C (Castagnoli)
	// Zlib is DEFLATE in the zlib framing (RFC 1950: header, stream,
	// Adler-32), Level 1..9: byte-identical to HDF5's deflate filter and
	// numcodecs' Zlib, so those chunks move between formats uninflated.
	Zlib ID = 6
	// Zstd is one Zstandard frame with its content size and no frame
	// checksum, at a Level on zstd's own scale (see ZstdMinLevel). A new ID
	// rather than a new meaning for 3: a reader that predates it refuses
	// the dataset as written by a newer version instead of misreading the
	// level.
	Zstd ID = 7

	maxID = Zstd
)

// MaxFilters bounds a pipeline: the filter mask is a uint32 with one bit per
// filter, and DecodeSpecs must not let on-disk bytes ask for more.
const MaxFilters = 32

// Zstd levels are zstd's: negative fast levels down to zstd's minimum,
// 1..22, and 0 for the default, 3 (Spec.normalize stores it as 3). The
// encoder has four speeds, chosen from the level by the library's documented
// correspondence (zstd.EncoderLevelFromZstd): below 3 SpeedFastest, 3..5
// SpeedDefault, 6..9 SpeedBetterCompression, 10 and up
// SpeedBestCompression. The level only affects encoding; every level
// decodes with the same decoder.
const (
	ZstdMinLevel     = -(1 << 17) // zstd's ZSTD_minCLevel()
	ZstdMaxLevel     = 22
	ZstdDefaultLevel = 3
)

// zstdPresetLevels maps a zstdPreset level (1..4) onto the zstd level that
// selects the same encoder speed, so a level stored by the first zstd
// filter keeps meaning what it meant when it was written.
var zstdPresetLevels = [...]int32{1: 1, 2: 3, 3: 7, 4: 11}

// Deflate and Zlib levels are zlib's 1 (fastest) to 9 (best), which
// klauspost/compress/flate takes on the same scale. zlib's 0 (store) and -1
// (default) are refused: a stored stream is never smaller than its input,
// and a default would hide the level in the file.
const (
	DeflateMinLevel = 1
	DeflateMaxLevel = 9
)

// Spec names one filter of a pipeline. Level is used by Deflate and Zlib
// (1..9) and Zstd (zstd's levels, see ZstdMinLevel); other filters ignore it
// and NewPipeline and EncodeSpecs normalise it to 0 (and a Zstd level of 0
// to ZstdDefaultLevel).
type Spec struct {
	ID    ID
	Level int32
}

// String returns the filter's name: "shuffle", "deflate(1)", "zlib(1)", "zstd(1)",
// "lz4", "crc32c"; an unknown ID prints as "filter#N".
func (s Spec) String() string {
	switch s.ID {
	case Shuffle:
		return "shuffle"
	case Deflate:
		return fmt.Sprintf("deflate(%d)", s.Level)
	case Zlib:
		return fmt.Sprintf("zlib(%d)", s.Level)
	case Zstd:
		return fmt.Sprintf("zstd(%d)", s.Level)
	case LZ4:
		return "lz4"
	case CRC32C:
		return "crc32c"
	default:
		return fmt.Sprintf("filter#%d", uint16(s.ID))
	}
}

// Validate reports whether s names a known filter with a usable level. The
// error wraps ErrInvalid.
func (s Spec) Validate() error {
	switch s.ID {
	case Shuffle, LZ4, CRC32C:
		return nil
	case Deflate, Zlib:
		if s.Level < DeflateMinLevel || s.Level > DeflateMaxLevel {
			return fmt.Errorf("%w: %s level %d not in [%d, %d]", ErrInvalid, s.ID.name(), s.Level, DeflateMinLevel, DeflateMaxLevel)
		}
		return nil
	case Zstd:
		if s.Level < ZstdMinLevel || s.Level > ZstdMaxLevel {
			return fmt.Errorf("%w: zstd level %d not in [%d, %d]", ErrInvalid, s.Level, ZstdMinLevel, ZstdMaxLevel)
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown filter id %d", ErrInvalid, uint16(s.ID))
	}
}

// hasLevel reports whether the filter uses Spec.Level.
func (id ID) hasLevel() bool { return id == Deflate || id == Zlib || id == Zstd }

// name is the level-less name used in messages.
func (id ID) name() string {
	if id == Zlib {
		return "zlib"
	}
	return "deflate"
}

// optional reports whether the filter is a compressor that Encode may skip
// (HDF5's H5Z_FLAG_OPTIONAL). Shuffle and CRC32C are never skipped, so a mask
// bit on them is corrupt.
func (id ID) optional() bool { return id == Deflate || id == Zlib || id == Zstd || id == LZ4 }

// normalize returns s with Level zeroed for filters that ignore it, so equal
// pipelines have equal specs and equal on-disk bytes.
func (s Spec) normalize() Spec {
	if !s.ID.hasLevel() {
		s.Level = 0
	}
	if s.ID == Zstd && s.Level == 0 {
		s.Level = ZstdDefaultLevel
	}
	return s
}

// On-disk form of a pipeline (stored in the dataset header):
//
//	offset  size  field
//	0       1     version, 1
//	1       1     n, the number of filters, 0..32
//	2       6*n   n records, in pipeline order:
//	                uint16 LE  filter ID
//	                int32  LE  level (0 for filters without a level)
//
// The encoding is canonical for what EncodeSpecs writes: DecodeSpecs
// rejects trailing bytes, unknown IDs, levels out of range, non-zero levels
// on filters without one and a Zstd level of 0, so DecodeSpecs(b)
// succeeding implies EncodeSpecs(result) == b, with one exception: a
// zstdPreset record (ID 3, level 1..4), which only earlier versions wrote,
// decodes to Zstd at the matching zstd level and re-encodes as such. The
// engine keeps a header's stored filter bytes as they are, so an old file
// is not rewritten by that. Integrity of the bytes is the header's
// checksum's job, not this encoding's.
const (
	specsVersion   = 1
	specsHeaderLen = 2
	specRecordLen  = 6
)

// EncodeSpecs returns the on-disk form of a pipeline (see the layout above).
// Levels of filters without one are written as 0. EncodeSpecs does not
// validate: pass specs that NewPipeline accepted, otherwise DecodeSpecs will
// reject the bytes.
func EncodeSpecs(specs []Spec) []byte {
	n := len(specs)
	if n > 255 {
		// Not representable; write a count DecodeSpecs rejects rather than
		// a silently truncated list.
		n = 255
	}
	b := make([]byte, specsHeaderLen, specsHeaderLen+specRecordLen*n)
	b[0] = specsVersion
	b[1] = byte(n)
	for _, s := range specs[:n] {
		s = s.normalize()
		b = binary.LittleEndian.AppendUint16(b, uint16(s.ID))
		b = binary.LittleEndian.AppendUint32(b, uint32(s.Level))
	}
	return b
}

// DecodeSpecs parses the output of EncodeSpecs. Bad bytes return an error
// wrapping ErrCorrupt; at most MaxFilters filters are accepted, so the
// allocation is bounded whatever the input.
func DecodeSpecs(b []byte) ([]Spec, error) {
	if len(b) < specsHeaderLen {
		return nil, fmt.Errorf("%w: filter list of %d bytes is shorter than its header", ErrCorrupt, len(b))
	}
	if b[0] != specsVersion {
		return nil, fmt.Errorf("%w: filter list version %d, want %d", ErrCorrupt, b[0], specsVersion)
	}
	n := int(b[1])
	if n > MaxFilters {
		return nil, fmt.Errorf("%w: %d filters, at most %d allowed", ErrCorrupt, n, MaxFilters)
	}
	if want := specsHeaderLen + specRecordLen*n; len(b) != want {
		return nil, fmt.Errorf("%w: filter list of %d filters is %d bytes, want %d", ErrCorrupt, n, len(b), want)
	}
	specs := make([]Spec, n)
	for i := range specs {
		r := b[specsHeaderLen+specRecordLen*i:]
		s := Spec{ID: ID(binary.LittleEndian.Uint16(r)), Level: int32(binary.LittleEndian.Uint32(r[2:]))}
		if s.ID > maxID { // (0 is never a filter: damage, caught below)
			return nil, fmt.Errorf("%w: filter %d has id %d", ErrUnknown, i, uint16(s.ID))
		}
		if s.ID == zstdPreset {
			if s.Level < 1 || int(s.Level) >= len(zstdPresetLevels) {
				return nil, fmt.Errorf("%w: filter %d: zstd preset level %d not in [1, %d]", ErrCorrupt, i, s.Level, len(zstdPresetLevels)-1)
			}
			specs[i] = Spec{ID: Zstd, Level: zstdPresetLevels[s.Level]}
			continue
		}
		if s.ID == Zstd && s.Level == 0 {
			return nil, fmt.Errorf("%w: filter %d (zstd) stores level 0, want the level it stands for", ErrCorrupt, i)
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%w: filter %d: %v", ErrCorrupt, i, err)
		}
		if !s.ID.hasLevel() && s.Level != 0 {
			return nil, fmt.Errorf("%w: filter %d (%s) has level %d, want 0", ErrCorrupt, i, s, s.Level)
		}
		specs[i] = s
	}
	return specs, nil
}
