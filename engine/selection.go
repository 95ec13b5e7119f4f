package engine

import (
	"github.com/scc-dev/scc/engine/internal/selection"
)

// Selection picks elements of a dataset: a hyperslab, as in HDF5. The
// caller's buffer holds the selected elements packed in C order of the
// selection's shape (Count[d]×Block[d] along dimension d), little-endian.
type Selection struct {
	// slab is the general form; read it through hyper or in, never
	// directly: an inline box leaves it nil. A pointer, not the four
	// slice headers, because a Selection is passed and returned by value
	// on every Read and Write: the value is what the call copies.
	slab *selection.Hyperslab
	// A box of rank at most maxInlineRank keeps its start and count here
	// instead of in slab (box is set), so that building one in the call
	// (ds.Read(ctx, Box(start, count), buf)) allocates nothing: Read and
	// Write expand it into their request scratch (in), other calls into
	// fresh slices (hyper).
	box          bool
	rank         uint8
	start, count [maxInlineRank]uint64
}

// maxInlineRank bounds the rank of a Box kept inline in its Selection.
const maxInlineRank = 8

// Box selects the dense block of count[d] elements starting at start[d].
// It copies start and count.
func Box(start, count []uint64) (s Selection) {
	if len(start) != len(count) || len(count) > maxInlineRank {
		return boxSlab(start, count)
	}
	// Into the named result, element by element: a local returned, and
	// copy's memmove calls, were most of Box's cost for the few words a
	// box has.
	s.box, s.rank = true, uint8(len(count))
	start = start[:len(count)]
	for d := range count {
		s.start[d&(maxInlineRank-1)] = start[d]
		s.count[d&(maxInlineRank-1)] = count[d]
	}
	return s
}

// boxSlab is Box's general form, kept out of Box: inlined, it doubled
// Box's frame and the zeroing of it.
//
//go:noinline
func boxSlab(start, count []uint64) Selection {
	return general(selection.Box(start, count)) // Validate reports a rank mismatch
}

// general returns the selection of hyperslab h.
func general(h selection.Hyperslab) Selection { return Selection{slab: &h} }

// slabOf is the general form's hyperslab (the empty one for a zero
// Selection).
func (s *Selection) slabOf() selection.Hyperslab {
	if s.slab == nil {
		return selection.Hyperslab{}
	}
	return *s.slab
}

// selArrays is the storage an inline box expands into: start, stride,
// count and block.
type selArrays [4][maxInlineRank]uint64

// in returns the selection's hyperslab, expanding an inline box into a.
func (s *Selection) in(a *selArrays) selection.Hyperslab {
	if !s.box {
		return s.slabOf()
	}
	r := int(s.rank)
	return s.expand(a[0][:r], a[1][:r], a[2][:r], a[3][:r])
}

// hyper returns the selection's hyperslab, expanding an inline box into
// fresh slices.
func (s Selection) hyper() selection.Hyperslab {
	if !s.box {
		return s.slabOf()
	}
	r := int(s.rank)
	a := make([]uint64, 4*r)
	return s.expand(a[:r:r], a[r:2*r:2*r], a[2*r:3*r:3*r], a[3*r:])
}

// expand writes the inline box as a hyperslab, as selection.Box does.
func (s *Selection) expand(start, stride, count, block []uint64) selection.Hyperslab {
	for d := range start {
		n := s.count[d]
		start[d] = s.start[d]
		if n == 0 {
			stride[d], count[d], block[d] = 1, 0, 1
			continue
		}
		stride[d], count[d], block[d] = n, 1, n
	}
	return selection.Hyperslab{Start: start, Stride: stride, Count: count, Block: block}
}

// normal returns the selection with its hyperslab in slab (hyper).
func (s Selection) normal() Selection {
	if !s.box {
		return s
	}
	return general(s.hyper())
}

// Hyperslab selects, along each dimension d, count[d] blocks of block[d]
// elements, the i-th starting at start[d]+i×stride[d]. A nil stride or
// block means all ones, so Hyperslab(start, nil, count, nil) selects the
// same elements as Box(start, count).
func Hyperslab(start, stride, count, block []uint64) Selection {
	r := len(start)
	if stride == nil {
		stride = ones(r)
	}
	if block == nil {
		block = ones(r)
	}
	return general(selection.Hyperslab{Start: start, Stride: stride, Count: count, Block: block})
}

// All selects every element of a dataset whose extent is dims.
func All(dims []uint64) Selection {
	if len(dims) <= maxInlineRank {
		s := Selection{box: true, rank: uint8(len(dims))}
		copy(s.count[:], dims)
		return s
	}
	return general(selection.Box(make([]uint64, len(dims)), dims))
}

// Shape is the shape of the selection's packed buffer.
func (s Selection) Shape() []uint64 {
	if s.box {
		return append([]uint64(nil), s.count[:s.rank]...)
	}
	return s.slabOf().Shape()
}

// NumElements is the number of selected elements.
func (s Selection) NumElements() uint64 { return s.hyper().NumElements() }

func ones(r int) []uint64 {
	o := make([]uint64, r)
	for i := range o {
		o[i] = 1
	}
	return o
}

// Coord returns the dataset coordinates of the element at position pos of
// the selection's packed buffer (C order of Shape()); positions are what
// DefinedElements and ReadDefined return. It returns nil for a position
// outside the selection.
func (s Selection) Coord(pos uint64) []uint64 {
	h := s.hyper()
	r := len(h.Start)
	if pos >= h.NumElements() {
		return nil
	}
	out := make([]uint64, r)
	for d := r - 1; d >= 0; d-- {
		n := h.Count[d] * h.Block[d]
		i := pos % n
		pos /= n
		out[d] = h.Start[d] + (i/h.Block[d])*h.Stride[d] + i%h.Block[d]
	}
	return out
}

// Parts returns the selection as a hyperslab: start, stride, count and
// block along each dimension (copies).
func (s Selection) Parts() (start, stride, count, block []uint64) {
	h := s.hyper()
	return clone(h.Start), clone(h.Stride), clone(h.Count), clone(h.Block)
}
