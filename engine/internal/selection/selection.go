// Package selection describes which elements of an n-dimensional array a
// read or write touches, cuts that description into per-chunk pieces, and
// copies elements between a dense chunk buffer and the caller's packed
// buffer. It is the hot path of every Dataset.Read and Dataset.Write.
//
// A selection is an HDF5-style regular hyperslab (Hyperslab): per dimension
// Start, Stride, Count and Block. Split turns it into one Piece per chunk it
// intersects: per dimension, the contiguous runs of selected indices inside
// that chunk and where they sit in the packed buffer. The kernels (Scatter,
// Gather, FillBuf, Trim, FillChunk) are the dense-layout bodies of the seed
// 002 "Layout Callbacks" H5SC_chunk_scatter_mem_t, H5SC_chunk_gather_mem_t and
// H5SC_chunk_fill_t.
//
// Element bytes are copied verbatim (no type conversion): the caller's buffer
// and the chunk buffers hold the same little-endian element encoding.
//
// Concurrency: everything here is a pure function of its arguments, so it is
// safe for concurrent use, provided goroutines do not write the same bytes
// of a destination buffer at once. The *Piece that Split hands to its
// callback is reused for the next chunk; keep it with Piece.Clone.
package selection

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// MaxRank is the largest rank a selection may have (HDF5's H5S_MAX_RANK).
// Bounding it lets the kernels keep their per-dimension state in fixed-size
// arrays on the stack.
const MaxRank = 32

var (
	// ErrOutOfRange: a selected index lies outside the dataset's extent.
	ErrOutOfRange = errors.New("selection: out of range")
	// ErrInvalid: the selection (or chunk shape, or piece) is malformed:
	// rank mismatch, zero stride or block, overlapping blocks, or sizes that
	// overflow 64 bits.
	ErrInvalid = errors.New("selection: invalid")
)

// Hyperslab is a regular hyperslab selection. Along dimension d it selects
//
//	{Start[d] + i*Stride[d] + j : 0 <= i < Count[d], 0 <= j < Block[d]}
//
// and the whole selection is the Cartesian product over dimensions. The
// caller's buffer holds the selected elements packed in C (row-major) order
// of Shape(), where Shape()[d] = Count[d]*Block[d].
//
// Rules (checked by Validate): all four slices have the same length, 1 to
// MaxRank; Stride >= 1 and Block >= 1; Stride >= Block whenever Count > 1
// (blocks must not overlap; a single block overlaps nothing and its stride
// is never used, so Count <= 1 skips that check). Count == 0 along any
// dimension selects nothing.
type Hyperslab struct {
	Start, Stride, Count, Block []uint64
}

// Box selects the rectangle of count[d] indices from start[d] along every
// dimension. It is stored as one block per dimension (Count 1, Block
// count[d]) so that Split produces exactly one run per dimension per chunk;
// a zero count becomes Count 0 (an empty selection). Mismatched lengths are
// reported by Validate.
func Box(start, count []uint64) Hyperslab {
	h := Hyperslab{
		Start:  append([]uint64(nil), start...),
		Stride: make([]uint64, len(count)),
		Count:  make([]uint64, len(count)),
		Block:  make([]uint64, len(count)),
	}
	for d, n := range count {
		if n == 0 {
			h.Stride[d], h.Count[d], h.Block[d] = 1, 0, 1
			continue
		}
		h.Stride[d], h.Count[d], h.Block[d] = n, 1, n
	}
	return h
}

// Clone returns a deep copy.
func (h Hyperslab) Clone() Hyperslab {
	return Hyperslab{
		Start:  append([]uint64(nil), h.Start...),
		Stride: append([]uint64(nil), h.Stride...),
		Count:  append([]uint64(nil), h.Count...),
		Block:  append([]uint64(nil), h.Block...),
	}
}

// Rank is the number of dimensions (len(Start)).
func (h Hyperslab) Rank() int { return len(h.Start) }

// String formats the hyperslab for error messages.
func (h Hyperslab) String() string {
	return fmt.Sprintf("hyperslab{start=%v stride=%v count=%v block=%v}", h.Start, h.Stride, h.Count, h.Block)
}

// check validates everything that does not depend on the dataset extent:
// ranks, stride/block rules, that the last selected index along each
// dimension and the element count fit in 64 bits. Split relies on it; once
// it passes, no index arithmetic in this package can overflow.
func (h Hyperslab) check() error {
	r := len(h.Start)
	if len(h.Stride) != r || len(h.Count) != r || len(h.Block) != r {
		return fmt.Errorf("%w: start, stride, count and block lengths differ (%d, %d, %d, %d)",
			ErrInvalid, len(h.Start), len(h.Stride), len(h.Count), len(h.Block))
	}
	if r == 0 || r > MaxRank {
		return fmt.Errorf("%w: rank %d not in 1..%d", ErrInvalid, r, MaxRank)
	}
	for d := range r {
		if h.Stride[d] == 0 {
			return fmt.Errorf("%w: stride 0 in dimension %d", ErrInvalid, d)
		}
		if h.Block[d] == 0 {
			return fmt.Errorf("%w: block 0 in dimension %d", ErrInvalid, d)
		}
		if h.Count[d] > 1 && h.Stride[d] < h.Block[d] {
			return fmt.Errorf("%w: block %d larger than stride %d in dimension %d (blocks overlap)",
				ErrInvalid, h.Block[d], h.Stride[d], d)
		}
		if h.Count[d] == 0 {
			continue
		}
		if _, ok := lastIndex(h.Start[d], h.Stride[d], h.Count[d], h.Block[d]); !ok {
			return fmt.Errorf("%w: dimension %d: start %d + (count %d - 1) * stride %d + block %d overflows",
				ErrOutOfRange, d, h.Start[d], h.Count[d], h.Stride[d], h.Block[d])
		}
	}
	if _, ok := h.numElements(); !ok {
		return fmt.Errorf("%w: %v selects more than 2^64-1 elements", ErrInvalid, h)
	}
	return nil
}

// lastIndex returns start + (count-1)*stride + block - 1 for count >= 1, and
// whether it fits with room for one more (so that last+1, the exclusive end,
// is representable too).
func lastIndex(start, stride, count, block uint64) (uint64, bool) {
	hi, off := bits.Mul64(count-1, stride)
	if hi != 0 {
		return 0, false
	}
	end, c1 := bits.Add64(start, off, 0)
	end, c2 := bits.Add64(end, block, 0) // exclusive end
	if c1 != 0 || c2 != 0 {
		return 0, false
	}
	return end - 1, true
}

// Validate checks the hyperslab against a dataset of extent dims: rank match,
// the stride/block rules of Hyperslab, no 64-bit overflow, and every selected
// index < dims[d]. Errors wrap ErrInvalid or ErrOutOfRange.
func (h Hyperslab) Validate(dims []uint64) error {
	if err := h.check(); err != nil {
		return err
	}
	if len(dims) != len(h.Start) {
		return fmt.Errorf("%w: selection rank %d, dataset rank %d", ErrInvalid, len(h.Start), len(dims))
	}
	for d := range dims {
		if h.Count[d] == 0 {
			continue
		}
		last, _ := lastIndex(h.Start[d], h.Stride[d], h.Count[d], h.Block[d])
		if last >= dims[d] {
			return fmt.Errorf("%w: dimension %d: selection reaches index %d, extent is %d",
				ErrOutOfRange, d, last, dims[d])
		}
	}
	return nil
}

// Shape is the shape of the packed buffer: Count[d]*Block[d] per dimension.
// It returns nil for a hyperslab whose slices have different lengths; on one
// that passed Validate no entry overflows.
func (h Hyperslab) Shape() []uint64 {
	if len(h.Count) != len(h.Block) {
		return nil
	}
	s := make([]uint64, len(h.Count))
	for d := range s {
		s[d] = h.Count[d] * h.Block[d]
	}
	return s
}

// NumElements is the number of selected elements. On a hyperslab that passed
// Validate it is exact; otherwise an overflowing product saturates to
// math.MaxUint64 and malformed slices give 0. CountElements reports overflow
// as an error instead.
func (h Hyperslab) NumElements() uint64 {
	if len(h.Count) != len(h.Block) {
		return 0
	}
	n, ok := h.numElements()
	if !ok {
		return math.MaxUint64
	}
	return n
}

// CountElements is NumElements with overflow and malformed slices reported
// as errors wrapping ErrInvalid.
func (h Hyperslab) CountElements() (uint64, error) {
	if len(h.Count) != len(h.Block) {
		return 0, fmt.Errorf("%w: count and block lengths differ", ErrInvalid)
	}
	n, ok := h.numElements()
	if !ok {
		return 0, fmt.Errorf("%w: %v selects more than 2^64-1 elements", ErrInvalid, h)
	}
	return n, nil
}

func (h Hyperslab) numElements() (uint64, bool) {
	if h.anyEmpty() {
		return 0, true
	}
	n := uint64(1)
	for d := range h.Count {
		hi, s := bits.Mul64(h.Count[d], h.Block[d])
		if hi != 0 {
			return 0, false
		}
		if hi, n = bits.Mul64(n, s); hi != 0 {
			return 0, false
		}
	}
	return n, true
}

// anyEmpty reports whether some dimension selects nothing (Count 0), which
// makes the whole selection empty.
func (h Hyperslab) anyEmpty() bool {
	for _, c := range h.Count {
		if c == 0 {
			return true
		}
	}
	return false
}

// BufferLen is the byte length the caller's packed buffer must have for
// elements of elemSize bytes; errors wrap ErrInvalid when the hyperslab is
// malformed or the length does not fit in an int.
func (h Hyperslab) BufferLen(elemSize int) (int, error) {
	if err := h.check(); err != nil {
		return 0, err
	}
	if elemSize <= 0 {
		return 0, fmt.Errorf("%w: element size %d", ErrInvalid, elemSize)
	}
	n, _ := h.numElements()
	return mulInt(n, uint64(elemSize))
}

// ChunkLen is the byte length of a dense chunk of chunkDims elements of
// elemSize bytes; errors wrap ErrInvalid when a dimension is zero, the rank
// is not 1..MaxRank, or the length does not fit in an int. Layouts use it to
// check a decoded chunk before handing it to the kernels.
func ChunkLen(chunkDims []uint64, elemSize int) (int, error) {
	if len(chunkDims) == 0 || len(chunkDims) > MaxRank {
		return 0, fmt.Errorf("%w: chunk rank %d not in 1..%d", ErrInvalid, len(chunkDims), MaxRank)
	}
	if elemSize <= 0 {
		return 0, fmt.Errorf("%w: element size %d", ErrInvalid, elemSize)
	}
	n := uint64(elemSize)
	for d, c := range chunkDims {
		if c == 0 {
			return 0, fmt.Errorf("%w: chunk dimension %d is 0", ErrInvalid, d)
		}
		hi, lo := bits.Mul64(n, c)
		if hi != 0 {
			return 0, fmt.Errorf("%w: chunk %v of %d-byte elements overflows", ErrInvalid, chunkDims, elemSize)
		}
		n = lo
	}
	return mulInt(n, 1)
}

func mulInt(a, b uint64) (int, error) {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 || lo > math.MaxInt {
		return 0, fmt.Errorf("%w: %d*%d bytes does not fit in an int", ErrInvalid, a, b)
	}
	return int(lo), nil
}
