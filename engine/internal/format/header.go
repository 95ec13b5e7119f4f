package format

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// DatasetHeader is everything the container keeps about one dataset.
type DatasetHeader struct {
	Name string
	ID   uint64 // non-zero; equals the catalog entry's ID
	// Type is the element type code (TypeInt8..TypeString).
	Type uint8
	// StrLen, StrPad and StrCharset are a TypeString's parameters (version
	// 4): its length in bytes (1..MaxStringLen), padding (PadNullTerm..
	// PadSpacePad) and character set (CharsetASCII, CharsetUTF8). All zero
	// for every other type.
	StrLen             uint32
	StrPad, StrCharset uint8
	// Desc is a TypeDescribed's description (version 6), whose Code is
	// TypeDescribed; nil for every other type.
	Desc *TypeNode
	// Shape, MaxShape and Chunk have the same rank, 1..MaxRank.
	// Shape[d] <= MaxShape[d]; MaxShape[d] == Unlimited for a dimension
	// without bound; Chunk[d] >= 1.
	Shape, MaxShape, Chunk []uint64
	// Layout is the layout code; v1 knows LayoutDense only.
	Layout uint8
	// Filters is engine/filter's encoding of the filter pipeline; opaque
	// here, at most MaxFilterBytes.
	Filters []byte
	// Fill is the fill value: empty (zero) or exactly one element.
	Fill []byte
	// MinCacheBytes is the dataset's reservation in the shared cache
	// (SCC design §2.3 min_dset_size); see engine.DatasetSpec.CacheMinBytes
	// for the meaning of 0 and -1. Values below -1 are invalid.
	MinCacheBytes int64
	// IndexKind and IndexRoot are engine/internal/index's; opaque here. IndexRoot is
	// at most MaxIndexRoot bytes.
	IndexKind uint8
	IndexRoot []byte

	// v2 parts (FORMAT.md §6 "v2 parts"): optional, opaque here, each at
	// most MaxPartBytes; nil/empty means the part is absent. A v1 header
	// has none.

	// Attrs is the engine's encoding of the dataset's attributes.
	Attrs []byte
	// LayoutParams is the layout's own parameters (for layouts other than
	// dense chunked: engine's layout encodings).
	LayoutParams []byte
	// Space (version 6) is the dataspace when it is not simple:
	// SpaceScalar (one element, no dimensions; stored as Shape, MaxShape
	// and Chunk [1]) or SpaceNull (no element; stored as Shape and
	// MaxShape [0], Chunk [1]). SpaceSimple (0), and no part, otherwise.
	Space uint8
	// ChunkKey (version 5) keys the dataset's chunk checksums
	// (KeyedChunkSum); 0, and no part, for the unkeyed rule of datasets
	// written before.
	ChunkKey uint64
}

// LayoutSparse is the layout code of sparse datasets (structured chunks
// of a selection and a values section; FORMAT.md §8, §16). Version 2
// headers only.
const LayoutSparse uint8 = 2

// LayoutContiguous is the layout code of contiguous datasets (one extent,
// no chunk index; FORMAT.md §8, §17). Version 2 headers only.
const LayoutContiguous uint8 = 3

// LayoutVlen is the layout code of variable-length datasets (structured
// chunks of a fixed and a heap section; FORMAT.md §8, §18). Version 2
// headers only.
const LayoutVlen uint8 = 4

// Part tags of a dataset header, in the order they are written.
const (
	partAttrs        = 1
	partLayoutParams = 2
	headerPartsV2    = 2 // the number of part tags a v2 or v3 header defines
	partStringType   = 3 // v4: a TypeString's parameters
	partWideFill     = 4 // v4: a fill value longer than the fill length byte holds
	headerPartsV4    = 4 // the number of part tags a v4 header defines
	partChunkKey     = 5 // v5: the chunk checksum key, u64, non-zero
	headerPartsV5    = 5 // the number of part tags a v5 header defines
	partTypeDesc     = 6 // v6: a TypeDescribed's description (EncodeType)
	partSpace        = 7 // v6: the dataspace when not simple, u8
	headerParts      = 7 // the number of part tags a v6 header defines
)

// Dataspaces (DatasetHeader.Space), after HDF5's H5S_SIMPLE, H5S_SCALAR
// and H5S_NULL.
const (
	SpaceSimple uint8 = 0
	SpaceScalar uint8 = 1
	SpaceNull   uint8 = 2
)

// chunkKeyBytes is the size of the chunk key part.
const chunkKeyBytes = 8

// stringTypeBytes is the size of the string type part: u32 length, u8
// padding, u8 character set.
const stringTypeBytes = 6

// maxInlineFill is the longest fill value the fixed part's one-byte fill
// length holds; a longer one is the wide fill part.
const maxInlineFill = 255

// parts returns h's present parts in tag order.
func (h DatasetHeader) parts() []part {
	var ps []part
	if len(h.Attrs) > 0 {
		ps = append(ps, part{partAttrs, h.Attrs})
	}
	if len(h.LayoutParams) > 0 {
		ps = append(ps, part{partLayoutParams, h.LayoutParams})
	}
	// Written also for stray parameters on another type, so that such an
	// invalid header encodes to a block the decoder rejects.
	if h.Type == TypeString || h.StrLen != 0 || h.StrPad != 0 || h.StrCharset != 0 {
		b := le.AppendUint32(nil, h.StrLen)
		ps = append(ps, part{partStringType, append(b, h.StrPad, h.StrCharset)})
	}
	if len(h.Fill) > maxInlineFill {
		ps = append(ps, part{partWideFill, h.Fill})
	}
	if h.ChunkKey != 0 {
		ps = append(ps, part{partChunkKey, le.AppendUint64(nil, h.ChunkKey)})
	}
	if h.Type == TypeDescribed || h.Desc != nil {
		ps = append(ps, part{partTypeDesc, EncodeType(h.Desc)})
	}
	if h.Space != SpaceSimple {
		ps = append(ps, part{partSpace, []byte{h.Space}})
	}
	return ps
}

// inlineFill is the fill value the fixed part carries.
func (h DatasetHeader) inlineFill() []byte {
	if len(h.Fill) > maxInlineFill {
		return nil
	}
	return h.Fill
}

// ElemSize is the size in bytes of one element: the type code's, or a
// string's length.
func (h DatasetHeader) ElemSize() int {
	switch h.Type {
	case TypeString:
		return int(h.StrLen)
	case TypeDescribed:
		return h.Desc.ElemSize()
	}
	return ElemSize(h.Type)
}

// Dataset header layout (FORMAT.md "Dataset header"): a fixed part of
// headerFixed bytes, then name, Shape, MaxShape, Chunk, Fill, Filters,
// IndexRoot, checksum.
const (
	headerFixed = 36
	headerMin   = headerFixed + 1 + 3*8 + crcSize // one-byte name, rank 1
)

// ChunkBytes is the decoded size of one chunk in bytes. It is only meaningful
// for a header that passed Validate or came from DecodeDatasetHeader
// (which bound it by MaxChunkBytes).
func (h DatasetHeader) ChunkBytes() uint64 {
	n := uint64(h.ElemSize())
	for _, c := range h.Chunk {
		n *= c
	}
	return n
}

func (h DatasetHeader) validate() error {
	if err := checkName(h.Name); err != nil {
		return err
	}
	if h.ID == 0 {
		return fmt.Errorf("dataset ID 0 is reserved")
	}
	if h.Type == TypeString {
		switch {
		case h.StrLen == 0 || h.StrLen > MaxStringLen:
			return fmt.Errorf("string length %d (want 1..%d)", h.StrLen, MaxStringLen)
		case h.StrPad > PadSpacePad:
			return fmt.Errorf("string padding code %d (want 0..%d)", h.StrPad, PadSpacePad)
		case h.StrCharset > CharsetUTF8:
			return fmt.Errorf("string character set code %d (want 0..%d)", h.StrCharset, CharsetUTF8)
		}
	} else if h.StrLen != 0 || h.StrPad != 0 || h.StrCharset != 0 {
		return fmt.Errorf("string parameters on element type code %d", h.Type)
	}
	if (h.Type == TypeDescribed) != (h.Desc != nil) {
		return fmt.Errorf("element type code %d with a type description %v", h.Type, h.Desc != nil)
	}
	if h.Desc != nil {
		if h.Desc.Code != TypeDescribed {
			return fmt.Errorf("type description of code %d", h.Desc.Code)
		}
		if err := ValidateType(h.Desc); err != nil {
			return err
		}
	}
	esize := h.ElemSize()
	if esize == 0 {
		return fmt.Errorf("element type code %d (want 1..%d)", h.Type, TypeDescribed)
	}
	if h.Layout < LayoutDense || h.Layout > LayoutVirtual {
		return fmt.Errorf("layout code %d (v2 knows %d..%d)", h.Layout, LayoutDense, LayoutVirtual)
	}
	r := len(h.Shape)
	if r == 0 || r > MaxRank {
		return fmt.Errorf("rank %d (want 1..%d)", r, MaxRank)
	}
	if len(h.MaxShape) != r || len(h.Chunk) != r {
		return fmt.Errorf("ranks differ: shape %d, max shape %d, chunk %d", r, len(h.MaxShape), len(h.Chunk))
	}
	chunkBytes := uint64(esize)
	elems := uint64(1)
	for d := 0; d < r; d++ {
		if h.Shape[d] == Unlimited {
			return fmt.Errorf("shape[%d] is the Unlimited marker", d)
		}
		if h.Shape[d] > h.MaxShape[d] {
			return fmt.Errorf("shape[%d]=%d exceeds max shape %d", d, h.Shape[d], h.MaxShape[d])
		}
		if h.Chunk[d] == 0 {
			return fmt.Errorf("chunk[%d] is zero", d)
		}
		hi, lo := bits.Mul64(chunkBytes, h.Chunk[d])
		if hi != 0 || lo > MaxChunkBytes {
			return fmt.Errorf("chunk %v of %d-byte elements exceeds %d bytes", h.Chunk, esize, MaxChunkBytes)
		}
		chunkBytes = lo
		// The element count of the current extent must fit an int64 so
		// that the engine's size arithmetic cannot overflow.
		hi, elems = bits.Mul64(elems, h.Shape[d])
		if hi != 0 || elems > math.MaxInt64 {
			return fmt.Errorf("shape %v has more than 2^63-1 elements", h.Shape)
		}
	}
	switch h.Space {
	case SpaceSimple:
	case SpaceScalar, SpaceNull:
		n := uint64(1)
		if h.Space == SpaceNull {
			n = 0
		}
		if r != 1 || h.Shape[0] != n || h.MaxShape[0] != n || h.Chunk[0] != 1 {
			return fmt.Errorf("dataspace %d stored as shape %v, max shape %v, chunk %v (want [%d], [%d], [1])", h.Space, h.Shape, h.MaxShape, h.Chunk, n, n)
		}
		if h.Layout == LayoutVirtual {
			return fmt.Errorf("dataspace %d of a virtual dataset", h.Space)
		}
	default:
		return fmt.Errorf("dataspace code %d (want %d..%d)", h.Space, SpaceSimple, SpaceNull)
	}
	if len(h.Fill) != 0 && len(h.Fill) != esize {
		return fmt.Errorf("fill value of %d bytes for %d-byte elements", len(h.Fill), esize)
	}
	if len(h.Filters) > MaxFilterBytes {
		return fmt.Errorf("filter encoding of %d bytes (at most %d)", len(h.Filters), MaxFilterBytes)
	}
	if len(h.IndexRoot) > MaxIndexRoot {
		return fmt.Errorf("index root of %d bytes (at most %d)", len(h.IndexRoot), MaxIndexRoot)
	}
	if h.MinCacheBytes < -1 {
		return fmt.Errorf("MinCacheBytes %d (want >= -1)", h.MinCacheBytes)
	}
	for _, p := range h.parts() {
		if len(p.data) > MaxPartBytes {
			return fmt.Errorf("part %d of %d bytes (at most %d)", p.tag, len(p.data), MaxPartBytes)
		}
	}
	return nil
}

// Validate reports whether h may be encoded; the error wraps ErrInvalid.
func (h DatasetHeader) Validate() error {
	if err := h.validate(); err != nil {
		return fmt.Errorf("%w: dataset header: %w", ErrInvalid, err)
	}
	return nil
}

// EncodeDatasetHeader returns the header block for h. Encode only headers
// that pass Validate: an invalid one encodes to a block that
// DecodeDatasetHeader rejects.
func EncodeDatasetHeader(h DatasetHeader) []byte {
	r := len(h.Shape)
	fill := h.inlineFill()
	n := headerFixed + len(h.Name) + 8*(r+len(h.MaxShape)+len(h.Chunk)) + len(fill) + len(h.Filters) + len(h.IndexRoot) + crcSize
	b := make([]byte, 0, n)
	b = append(b, magicHeader[:]...)
	b = append(b, Version, h.Type, h.Layout, uint8(r))
	b = le.AppendUint64(b, h.ID)
	b = le.AppendUint64(b, uint64(h.MinCacheBytes))
	b = append(b, h.IndexKind, uint8(len(fill)))
	b = le.AppendUint16(b, uint16(len(h.Name)))
	b = le.AppendUint32(b, uint32(len(h.Filters)))
	b = le.AppendUint32(b, uint32(len(h.IndexRoot)))
	b = append(b, h.Name...)
	for _, dims := range [][]uint64{h.Shape, h.MaxShape, h.Chunk} {
		for _, v := range dims {
			b = le.AppendUint64(b, v)
		}
	}
	b = append(b, fill...)
	b = append(b, h.Filters...)
	b = append(b, h.IndexRoot...)
	b = appendParts(b, h.parts())
	return sealFrame(b)
}

// DecodeDatasetHeader decodes a header block. The returned slices do not
// alias b.
func DecodeDatasetHeader(b []byte) (DatasetHeader, error) {
	if len(b) > MaxHeaderBytes {
		return DatasetHeader{}, corrupt("dataset header", "%d bytes exceeds %d", len(b), MaxHeaderBytes)
	}
	p, version, err := openFrame("dataset header", b, magicHeader, headerMin)
	if err != nil {
		return DatasetHeader{}, err
	}
	r := reader{b: p}
	var h DatasetHeader
	h.Type = r.u8()
	h.Layout = r.u8()
	rank := int(r.u8())
	h.ID = r.u64()
	h.MinCacheBytes = int64(r.u64())
	h.IndexKind = r.u8()
	fillLen := int(r.u8())
	nameLen := int(r.u16())
	filtersLen := int(r.u32())
	rootLen := int(r.u32())
	if r.err != nil {
		return DatasetHeader{}, corrupt("dataset header", "fixed part: %v", r.err)
	}
	// Check the lengths against the limits before slicing anything, and
	// their sum against the bytes that are actually there.
	switch {
	case rank == 0 || rank > MaxRank:
		return DatasetHeader{}, corrupt("dataset header", "rank %d (want 1..%d)", rank, MaxRank)
	case nameLen > MaxNameBytes:
		return DatasetHeader{}, corrupt("dataset header", "name of %d bytes", nameLen)
	case filtersLen > MaxFilterBytes:
		return DatasetHeader{}, corrupt("dataset header", "filter encoding of %d bytes", filtersLen)
	case rootLen > MaxIndexRoot:
		return DatasetHeader{}, corrupt("dataset header", "index root of %d bytes", rootLen)
	}
	want := nameLen + 3*8*rank + fillLen + filtersLen + rootLen
	if want > len(r.b) || version == 1 && want != len(r.b) {
		return DatasetHeader{}, corrupt("dataset header", "fields need %d bytes, block holds %d", want, len(r.b))
	}
	h.Name = string(r.take(nameLen))
	dims := make([]uint64, 3*rank)
	for i := range dims {
		dims[i] = r.u64()
	}
	h.Shape, h.MaxShape, h.Chunk = dims[:rank:rank], dims[rank:2*rank:2*rank], dims[2*rank:]
	h.Fill = cloneOrNil(r.take(fillLen))
	h.Filters = cloneOrNil(r.take(filtersLen))
	h.IndexRoot = cloneOrNil(r.take(rootLen))
	if r.err != nil {
		return DatasetHeader{}, corrupt("dataset header", "%v", r.err)
	}
	if version == 1 && h.Layout != LayoutDense {
		// Layouts other than dense chunked came with version 2
		// (FORMAT.md §8): a v1 block naming one is damaged.
		return DatasetHeader{}, corrupt("dataset header", "v1 header with layout code %d", h.Layout)
	}
	if v := TypeVersion(h.Type); v > version {
		// Type codes are part of what a version calls valid (FORMAT.md
		// §15): an older block naming a newer code is damaged.
		return DatasetHeader{}, corrupt("dataset header", "v%d header with element type code %d (from v%d)", version, h.Type, v)
	}
	maxTag := uint16(headerParts)
	switch {
	case version < 4:
		maxTag = headerPartsV2
	case version < 5:
		maxTag = headerPartsV4
	case version < 6:
		maxTag = headerPartsV5
	}
	ps, err := readParts(r.b, maxTag)
	if err != nil {
		return DatasetHeader{}, corrupt("dataset header", "%v", err)
	}
	sawString := false
	for _, p := range ps {
		switch p.tag {
		case partAttrs:
			h.Attrs = p.data
		case partLayoutParams:
			h.LayoutParams = p.data
		case partStringType:
			if len(p.data) != stringTypeBytes {
				return DatasetHeader{}, corrupt("dataset header", "string type part of %d bytes (want %d)", len(p.data), stringTypeBytes)
			}
			sawString = true
			h.StrLen, h.StrPad, h.StrCharset = le.Uint32(p.data), p.data[4], p.data[5]
		case partWideFill:
			// Canonical: a fill the fixed part could hold is never wide.
			if len(p.data) <= maxInlineFill || fillLen != 0 {
				return DatasetHeader{}, corrupt("dataset header", "wide fill part of %d bytes beside an inline fill of %d", len(p.data), fillLen)
			}
			h.Fill = p.data
		case partChunkKey:
			// Canonical: the unkeyed rule is the absent part, never a
			// zero key.
			if len(p.data) != chunkKeyBytes || le.Uint64(p.data) == 0 {
				return DatasetHeader{}, corrupt("dataset header", "chunk key part of %d bytes (want %d, non-zero)", len(p.data), chunkKeyBytes)
			}
			h.ChunkKey = le.Uint64(p.data)
		case partSpace:
			// Canonical: a simple dataspace is the absent part.
			if len(p.data) != 1 || p.data[0] == SpaceSimple {
				return DatasetHeader{}, corrupt("dataset header", "dataspace part of %d bytes (want 1, not simple)", len(p.data))
			}
			h.Space = p.data[0]
		case partTypeDesc:
			d, err := DecodeType(p.data)
			if err != nil {
				return DatasetHeader{}, corrupt("dataset header", "%v", err)
			}
			h.Desc = d
		}
	}
	if version < 6 && h.Layout == LayoutDense && len(h.LayoutParams) > 0 {
		// Dense layout parameters (sharded chunks) came with version 6.
		return DatasetHeader{}, corrupt("dataset header", "v%d dense header with layout parameters", version)
	}
	if version < 8 && h.Layout == LayoutDense && len(h.LayoutParams) > 0 && h.LayoutParams[0] >= 2 {
		// Sharded chunks whose index entries carry their frames'
		// checksums (dense layout parameters version 2) came with
		// version 8.
		return DatasetHeader{}, corrupt("dataset header", "v%d dense header with layout parameters version %d", version, h.LayoutParams[0])
	}
	if sawString != (h.Type == TypeString) {
		return DatasetHeader{}, corrupt("dataset header", "element type code %d with string type part %v", h.Type, sawString)
	}
	if err := h.validate(); err != nil {
		return DatasetHeader{}, corrupt("dataset header", "%v", err)
	}
	return h, nil
}

// cloneOrNil copies p; empty becomes nil so that decoded headers compare
// equal regardless of how the encoder's caller spelled "empty".
func cloneOrNil(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return slices.Clone(p)
}
