package engine

import (
	"fmt"
	"math/bits"

	"github.com/scc-dev/scc/engine/filter"
)

// Unlimited marks a dimension of DatasetSpec.MaxShape that may grow without
// bound.
const Unlimited = ^uint64(0)

// MaxRank is the largest number of dimensions a dataset may have.
const MaxRank = 32

// Filter is one stage of a dataset's filter pipeline. Filters run in the
// order given on write and in reverse on read.
type Filter struct{ spec filter.Spec }

// Shuffle reorders the bytes of each element so that compressors see long
// runs (HDF5's shuffle).
func Shuffle() Filter { return Filter{filter.Spec{ID: filter.Shuffle}} }

// Deflate compresses with DEFLATE at level 1..9.
func Deflate(level int) Filter { return Filter{filter.Spec{ID: filter.Deflate, Level: int32(level)}} }

// Zlib compresses with DEFLATE at level 1..9 in the zlib framing (RFC 1950:
// header, stream, Adler-32), the form HDF5's deflate filter and numcodecs'
// Zlib codec store: interop/zarr and interop/hdf5 copy such chunks both ways
// without inflating them, where Deflate's raw stream needs one inflate per
// chunk to compute the foreign wrapper's checksum.
func Zlib(level int) Filter { return Filter{filter.Spec{ID: filter.Zlib, Level: int32(level)}} }

// Zstd compresses with Zstandard at one of zstd's levels: 1..22, the
// negative fast levels down to -131072, and 0 for the default (3), as the
// zstd command line, numcodecs and HDF5's zstd plugin count them. A cgo
// build encodes with libzstd at exactly that level; a CGO_ENABLED=0 build
// with klauspost/compress/zstd, which has four speeds, each level mapping
// onto one of them by the library's documented correspondence (FORMAT.md
// §13).
func Zstd(level int) Filter { return Filter{filter.Spec{ID: filter.Zstd, Level: int32(level)}} }

// LZ4 compresses with LZ4 (block format).
func LZ4() Filter { return Filter{filter.Spec{ID: filter.LZ4}} }

// CRC32C appends a Castagnoli checksum at its place in the pipeline. (Every
// stored chunk carries a checksum of its stored bytes anyway; this filter
// additionally checks the data at its stage of the pipeline.)
func CRC32C() Filter { return Filter{filter.Spec{ID: filter.CRC32C}} }

func (f Filter) String() string { return f.spec.String() }

// DatasetSpec describes a dataset to create.
type DatasetSpec struct {
	Type Type
	// Shape is the current extent; empty (with MaxShape and Chunk) for a
	// scalar dataset, or for a null one with Space SpaceNull.
	Shape    []uint64
	MaxShape []uint64 // nil means Shape; Unlimited along growable dimensions
	Chunk    []uint64 // chunk shape, every dimension >= 1
	// Space is the dataspace (dataspace.go): SpaceSimple (the zero value;
	// a spec without dimensions is then scalar), SpaceScalar or SpaceNull.
	Space   Space
	Filters []Filter
	Fill    []byte // fill value: nil (zero) or exactly Type.Size() bytes
	// CacheMinBytes is the dataset's minimum reservation in the shared
	// cache (SCC design min_dset_size): 0 takes the cache's default, -1 none.
	CacheMinBytes int64
	// Layout is the storage layout: Chunked (the zero value, dense),
	// Sparse (engine/sparse.go) or Contiguous (engine/contig.go). A spec
	// with no Chunk shape, a fixed shape (MaxShape nil or equal to Shape),
	// no filters and at most 1 MiB of data is Contiguous by default;
	// Contiguous takes no Chunk (the layout picks its pieces).
	Layout LayoutKind
	// SelectionFilters is a Sparse dataset's pipeline for the section
	// that records which elements are defined (Filters applies to the
	// values); nil means none. Only for Sparse.
	SelectionFilters []Filter
	// HeapDefragPercent is a Vlen dataset's threshold: a chunk's heap is
	// defragmented when more than this share of it is unused. 0 means
	// 25; only for Vlen.
	HeapDefragPercent int
	// InnerChunk, when set, stores every chunk sharded: as inner chunks of
	// this shape (which divides Chunk along every dimension), each
	// filtered and checksummed alone, with an index of their places
	// (engine/shard.go). A read of part of a chunk then reads and decodes
	// only the inner chunks it touches, and a whole chunk's inner chunks
	// decode and encode on every worker. Only for Chunked.
	InnerChunk []uint64
}

// validate checks the spec and returns it with MaxShape filled in.
func (s DatasetSpec) validate() (DatasetSpec, error) {
	if !s.Type.Valid() {
		return s, fmt.Errorf("%w: element type %v", ErrInvalid, s.Type)
	}
	var err error
	if s, err = s.withSpace(); err != nil {
		return s, err
	}
	r := len(s.Shape)
	if r == 0 || r > MaxRank {
		return s, fmt.Errorf("%w: rank %d (1..%d)", ErrInvalid, r, MaxRank)
	}
	if s.MaxShape == nil {
		s.MaxShape = append([]uint64(nil), s.Shape...)
	}
	if s, err = s.withContiguous(); err != nil {
		return s, err
	}
	if len(s.MaxShape) != r || len(s.Chunk) != r {
		return s, fmt.Errorf("%w: shape, max shape and chunk must have the same rank", ErrInvalid)
	}
	elems := uint64(1)
	for d := 0; d < r; d++ {
		if s.Chunk[d] == 0 {
			return s, fmt.Errorf("%w: chunk dimension %d is zero", ErrInvalid, d)
		}
		if s.Shape[d] > s.MaxShape[d] {
			return s, fmt.Errorf("%w: shape %v exceeds max shape %v", ErrInvalid, s.Shape, s.MaxShape)
		}
		hi, lo := bits.Mul64(elems, s.Chunk[d])
		if hi != 0 {
			return s, fmt.Errorf("%w: chunk %v too large", ErrInvalid, s.Chunk)
		}
		elems = lo
	}
	if elems*uint64(s.Type.Size()) > maxChunkBytes || elems > maxChunkBytes {
		return s, fmt.Errorf("%w: chunk of %d elements exceeds %d bytes", ErrInvalid, elems, maxChunkBytes)
	}
	if len(s.Fill) != 0 && len(s.Fill) != s.Type.Size() {
		return s, fmt.Errorf("%w: fill value has %d bytes, element has %d", ErrInvalid, len(s.Fill), s.Type.Size())
	}
	if err := s.Type.checkElems(s.Fill); err != nil {
		return s, fmt.Errorf("fill value: %w", err)
	}
	if len(s.Filters) > 32 {
		return s, fmt.Errorf("%w: %d filters (at most 32)", ErrInvalid, len(s.Filters))
	}
	for _, f := range s.Filters {
		if err := f.spec.Validate(); err != nil {
			return s, classify(err)
		}
	}
	if err := s.validateLayout(); err != nil {
		return s, err
	}
	if s.Type.IsString() && s.Layout == Vlen {
		// A vlen element is a sequence of Type values; a sequence of
		// fixed-length strings is not a string.
		return s, fmt.Errorf("%w: a variable-length dataset of %v", ErrInvalid, s.Type)
	}
	if s.CacheMinBytes < -1 {
		return s, fmt.Errorf("%w: CacheMinBytes %d", ErrInvalid, s.CacheMinBytes)
	}
	return s, nil
}

// maxChunkBytes bounds one chunk's decoded size (1 GiB): a chunk is the
// cache's indivisible unit and must fit in memory many times over.
const maxChunkBytes = 1 << 30
