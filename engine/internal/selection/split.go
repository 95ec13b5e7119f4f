package selection

import (
	"fmt"
	"math/bits"
)

// Run is a contiguous interval along one dimension: Len indices starting at
// Chunk (the offset inside the chunk) that sit at Buf (the offset along the
// same dimension of the packed selection buffer).
type Run struct {
	Chunk, Buf, Len uint64
}

// Piece is the part of a selection inside one chunk. Along dimension d the
// selected indices are the union of Runs[d] (ascending, disjoint, never
// adjacent when produced by Split); the piece is their Cartesian product.
type Piece struct {
	// Coord is the chunk's scaled coordinates (element index / chunk dim).
	Coord []uint64
	// Runs holds, per dimension, the selected runs inside the chunk.
	Runs [][]Run
	// N is the number of selected elements in the piece.
	N uint64
}

// Clone returns a deep copy that stays valid after Split moves on.
func (p *Piece) Clone() Piece {
	total := 0
	for _, rs := range p.Runs {
		total += len(rs)
	}
	backing := make([]Run, total)
	q := Piece{
		Coord: append([]uint64(nil), p.Coord...),
		Runs:  make([][]Run, len(p.Runs)),
		N:     p.N,
	}
	for d, rs := range p.Runs {
		n := copy(backing, rs)
		q.Runs[d] = backing[:n:n]
		backing = backing[n:]
	}
	return q
}

// Full reports whether the piece selects every element of a chunk of
// chunkDims. A write whose piece is full overwrites the chunk entirely and
// never needs to load it; a piece that is not full is "partial" in the sense
// of SCC design section 4.2 footnote 7.
func (p *Piece) Full(chunkDims []uint64) bool {
	if len(p.Runs) != len(chunkDims) {
		return false
	}
	for d, rs := range p.Runs {
		if len(rs) != 1 || rs[0].Chunk != 0 || rs[0].Len != chunkDims[d] {
			return false
		}
	}
	return true
}

// FullWithin reports whether the piece selects every element of its chunk
// that lies inside a dataset of extent dims. For an edge chunk that sticks
// out of the extent this is the condition under which a write can create the
// chunk without loading it (the elements outside the extent then hold the
// fill value; see Trim). For interior chunks it equals Full.
func (p *Piece) FullWithin(chunkDims, dims []uint64) bool {
	if len(p.Runs) != len(chunkDims) || len(dims) != len(chunkDims) || len(p.Coord) != len(chunkDims) {
		return false
	}
	for d, rs := range p.Runs {
		in := inExtent(p.Coord[d], chunkDims[d], dims[d])
		if in == 0 || len(rs) != 1 || rs[0].Chunk != 0 || rs[0].Len != in {
			return false
		}
	}
	return true
}

// inExtent is how many of the chunk's indices along one dimension lie below
// the extent dim: clamp(dim - coord*cd, 0, cd).
func inExtent(coord, cd, dim uint64) uint64 {
	hi, origin := bits.Mul64(coord, cd)
	if hi != 0 || origin >= dim {
		return 0
	}
	return min(dim-origin, cd)
}

// Check verifies that the piece fits a chunk of chunkDims and a packed buffer
// of bufShape: same rank, every run inside both. The kernels assume this
// (pieces from Split over a validated selection always fit); a layout that
// receives pieces from elsewhere calls Check first. Errors wrap ErrInvalid.
func (p *Piece) Check(chunkDims, bufShape []uint64) error {
	r := len(p.Runs)
	if r == 0 || r > MaxRank || len(chunkDims) != r || len(bufShape) != r {
		return fmt.Errorf("%w: piece rank %d, chunk rank %d, buffer rank %d", ErrInvalid, r, len(chunkDims), len(bufShape))
	}
	for d, rs := range p.Runs {
		for _, run := range rs {
			ce, c1 := bits.Add64(run.Chunk, run.Len, 0)
			be, c2 := bits.Add64(run.Buf, run.Len, 0)
			if c1 != 0 || c2 != 0 || ce > chunkDims[d] || be > bufShape[d] {
				return fmt.Errorf("%w: dimension %d: run %+v outside chunk %d / buffer %d",
					ErrInvalid, d, run, chunkDims[d], bufShape[d])
			}
		}
	}
	return nil
}

// dimIter walks, along one dimension, the chunks a selection touches and the
// runs inside each. It is normalized so that a dimension whose blocks touch
// (Stride == Block) or that has one block is a single block: that keeps Box
// selections and stride-1 selections at one run per chunk.
type dimIter struct {
	start, stride, count, block uint64
	cd                          uint64 // chunk dimension
	last                        uint64 // last selected index
}

// newDimIter requires count >= 1 and a hyperslab that passed check.
func newDimIter(start, stride, count, block, cd uint64) dimIter {
	if count == 1 || stride == block {
		block *= count // fits: check bounded the product of all shapes
		count, stride = 1, block
	}
	last, _ := lastIndex(start, stride, count, block)
	return dimIter{start: start, stride: stride, count: count, block: block, cd: cd, last: last}
}

// first is the index of the first chunk the selection touches.
func (it *dimIter) first() uint64 { return it.start / it.cd }

// next returns the first chunk after c that the selection touches. Chunks
// that fall wholly in a gap between blocks are skipped in O(1).
func (it *dimIter) next(c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(c+1, it.cd) // exclusive end of chunk c
	if hi != 0 || lo > it.last {
		return 0, false
	}
	// First block that ends after lo; it exists because lo <= last.
	var i uint64
	if lo >= it.start+it.block {
		i = (lo-it.start-it.block)/it.stride + 1
	}
	s := max(it.start+i*it.stride, lo)
	return s / it.cd, true
}

// runs appends the runs inside chunk c to out.
func (it *dimIter) runs(c uint64, out []Run) ([]Run, uint64) {
	lo := c * it.cd // <= a selected index, so no overflow
	hi, c1 := bits.Add64(lo, it.cd, 0)
	if c1 != 0 {
		hi = ^uint64(0)
	}
	var i uint64
	if lo >= it.start+it.block {
		i = (lo-it.start-it.block)/it.stride + 1
	}
	var n uint64
	for ; i < it.count; i++ {
		bs := it.start + i*it.stride
		if bs >= hi {
			break
		}
		a, e := max(bs, lo), min(bs+it.block, hi)
		out = append(out, Run{Chunk: a - lo, Buf: i*it.block + (a - bs), Len: e - a})
		n += e - a
	}
	return out, n
}

// Split calls fn for every chunk the selection touches, in C order of chunk
// coordinates, with the part of the selection inside it. chunkDims is the
// chunk shape; chunks may stick out of the dataset extent (edge chunks).
//
// The Piece is reused: it and its slices are valid only during the call and
// must not be modified; Clone it to keep it. Split iterates lazily: its
// memory is O(rank + runs in one chunk), however many chunks the selection
// spans, and a chunk lying wholly in a gap of a strided selection costs
// nothing. It returns the first error fn returns, or an error wrapping
// ErrInvalid for a malformed selection or chunk shape. Split does not check
// the selection against the dataset extent; call Validate for that.
func Split(h Hyperslab, chunkDims []uint64, fn func(p *Piece) error) error {
	if err := h.check(); err != nil {
		return err
	}
	r := len(h.Start)
	if len(chunkDims) != r {
		return fmt.Errorf("%w: selection rank %d, chunk rank %d", ErrInvalid, r, len(chunkDims))
	}
	for d, c := range chunkDims {
		if c == 0 {
			return fmt.Errorf("%w: chunk dimension %d is 0", ErrInvalid, d)
		}
	}
	if h.anyEmpty() {
		return nil
	}
	// INVARIANT: between calls to fn, p.Runs[d] holds the runs of chunk
	// p.Coord[d] along d and sums[d] their total length, for every d.
	its := make([]dimIter, r)
	sums := make([]uint64, r)
	p := &Piece{Coord: make([]uint64, r), Runs: make([][]Run, r)}
	for d := range r {
		its[d] = newDimIter(h.Start[d], h.Stride[d], h.Count[d], h.Block[d], chunkDims[d])
		p.Coord[d] = its[d].first()
		p.Runs[d], sums[d] = its[d].runs(p.Coord[d], p.Runs[d][:0])
	}
	for {
		p.N = 1
		for _, s := range sums {
			p.N *= s
		}
		if err := fn(p); err != nil {
			return err
		}
		// Odometer: advance the innermost dimension that has another chunk,
		// restart every dimension inside it.
		d := r - 1
		for ; d >= 0; d-- {
			if c, ok := its[d].next(p.Coord[d]); ok {
				p.Coord[d] = c
				p.Runs[d], sums[d] = its[d].runs(c, p.Runs[d][:0])
				break
			}
		}
		if d < 0 {
			return nil
		}
		for d++; d < r; d++ {
			p.Coord[d] = its[d].first()
			p.Runs[d], sums[d] = its[d].runs(p.Coord[d], p.Runs[d][:0])
		}
	}
}

// Pieces collects the pieces Split produces (each cloned). It builds one
// Piece per chunk touched; for selections over very many chunks prefer Split.
func Pieces(h Hyperslab, chunkDims []uint64) ([]Piece, error) {
	var out []Piece
	err := Split(h, chunkDims, func(p *Piece) error {
		out = append(out, p.Clone())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
