package selection

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
)

// This file holds the naive reference the tests compare against: it lists
// selected indices one by one and computes every position with plain
// multiplication, sharing no code with the package.

// refIndices lists, per dimension, the selected indices in ascending order;
// the position of an index in its list is its offset in the packed buffer.
func refIndices(h Hyperslab) [][]uint64 {
	out := make([][]uint64, len(h.Start))
	for d := range h.Start {
		for i := uint64(0); i < h.Count[d]; i++ {
			for j := uint64(0); j < h.Block[d]; j++ {
				out[d] = append(out[d], h.Start[d]+i*h.Stride[d]+j)
			}
		}
	}
	return out
}

// refEach calls fn for every selected element in packed-buffer order with
// its global index and its position in the packed buffer.
func refEach(h Hyperslab, fn func(g []uint64, pos uint64)) {
	sel := refIndices(h)
	r := len(sel)
	for _, s := range sel {
		if len(s) == 0 {
			return
		}
	}
	idx := make([]int, r)
	g := make([]uint64, r)
	pos := uint64(0)
	for {
		for d := range r {
			g[d] = sel[d][idx[d]]
		}
		fn(g, pos)
		pos++
		d := r - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < len(sel[d]) {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

func prod(v []uint64) uint64 {
	n := uint64(1)
	for _, x := range v {
		n *= x
	}
	return n
}

// linear is the C-order element offset of idx in an array of shape dims.
func linear(idx, dims []uint64) uint64 {
	var off uint64
	for d := range dims {
		off = off*dims[d] + idx[d]
	}
	return off
}

func coordKey(c []uint64) string { return fmt.Sprint(c) }

// gridDims is the number of chunks along each dimension for extent dims.
func gridDims(dims, chunkDims []uint64) []uint64 {
	g := make([]uint64, len(dims))
	for d := range dims {
		g[d] = (dims[d] + chunkDims[d] - 1) / chunkDims[d]
	}
	return g
}

// eachCoord calls fn for every index tuple below shape, in C order.
func eachCoord(shape []uint64, fn func(c []uint64)) {
	for _, s := range shape {
		if s == 0 {
			return
		}
	}
	c := make([]uint64, len(shape))
	for {
		fn(c)
		d := len(shape) - 1
		for ; d >= 0; d-- {
			c[d]++
			if c[d] < shape[d] {
				break
			}
			c[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// randCase draws a dataset extent, a chunk shape (often not dividing the
// extent, sometimes larger than it) and a hyperslab valid for the extent.
func randCase(rng *rand.Rand) (dims, chunkDims []uint64, h Hyperslab) {
	r := 1 + rng.IntN(4)
	maxDim := [...]int{0, 300, 40, 14, 8}[r]
	dims = make([]uint64, r)
	chunkDims = make([]uint64, r)
	for d := range r {
		dims[d] = uint64(1 + rng.IntN(maxDim))
		chunkDims[d] = uint64(1 + rng.IntN(int(dims[d])+2))
	}
	if rng.IntN(5) == 0 {
		start := make([]uint64, r)
		count := make([]uint64, r)
		for d := range r {
			start[d] = rng.Uint64N(dims[d])
			count[d] = 1 + rng.Uint64N(dims[d]-start[d])
		}
		return dims, chunkDims, Box(start, count)
	}
	h = Hyperslab{make([]uint64, r), make([]uint64, r), make([]uint64, r), make([]uint64, r)}
	for d := range r {
		start := rng.Uint64N(dims[d])
		block := 1 + rng.Uint64N(min(dims[d]-start, 5))
		stride := block + rng.Uint64N(4)
		if rng.IntN(4) == 0 {
			stride = block
		}
		maxCount := (dims[d]-start-block)/stride + 1
		count := 1 + rng.Uint64N(maxCount)
		if count == 1 && rng.IntN(2) == 0 {
			stride = 1 + rng.Uint64N(block) // single block: stride unused, may be < block
		}
		h.Start[d], h.Stride[d], h.Count[d], h.Block[d] = start, stride, count, block
	}
	if rng.IntN(30) == 0 {
		h.Count[rng.IntN(r)] = 0
	}
	return dims, chunkDims, h
}

// checkCover verifies that the pieces cover the selection exactly: every
// element of every piece is a selected element sitting at its reference
// buffer position, no position is covered twice, and all are covered. It
// also checks the run invariants and N.
func checkCover(h Hyperslab, chunkDims []uint64, pieces []Piece) error {
	sel := refIndices(h)
	shape := h.Shape()
	total := h.NumElements()
	seen := make([]bool, total)
	var prev []uint64
	var sum uint64
	for pi := range pieces {
		p := &pieces[pi]
		if prev != nil && slices.Compare(prev, p.Coord) >= 0 {
			return fmt.Errorf("pieces not in C order: %v then %v", prev, p.Coord)
		}
		prev = p.Coord
		if err := p.Check(chunkDims, shape); err != nil {
			return fmt.Errorf("piece %v: %v", p.Coord, err)
		}
		n := uint64(1)
		for d, rs := range p.Runs {
			var s uint64
			for i, run := range rs {
				if run.Len == 0 {
					return fmt.Errorf("piece %v: empty run", p.Coord)
				}
				if i > 0 && rs[i-1].Chunk+rs[i-1].Len >= run.Chunk {
					return fmt.Errorf("piece %v dim %d: runs not ascending/disjoint/non-adjacent: %v", p.Coord, d, rs)
				}
				s += run.Len
			}
			n *= s
		}
		if n != p.N || n == 0 {
			return fmt.Errorf("piece %v: N=%d, runs hold %d", p.Coord, p.N, n)
		}
		sum += n
		// Enumerate the piece's elements through its runs.
		r := len(p.Runs)
		g := make([]uint64, r)
		bp := make([]uint64, r)
		var rec func(d int) error
		rec = func(d int) error {
			if d == r {
				pos := linear(bp, shape)
				if seen[pos] {
					return fmt.Errorf("buffer position %d covered twice", pos)
				}
				seen[pos] = true
				return nil
			}
			for _, run := range p.Runs[d] {
				for j := uint64(0); j < run.Len; j++ {
					g[d] = p.Coord[d]*chunkDims[d] + run.Chunk + j
					bp[d] = run.Buf + j
					if sel[d][bp[d]] != g[d] {
						return fmt.Errorf("piece %v dim %d: buffer offset %d holds index %d, reference %d",
							p.Coord, d, bp[d], g[d], sel[d][bp[d]])
					}
					if err := rec(d + 1); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := rec(0); err != nil {
			return err
		}
	}
	if sum != total {
		return fmt.Errorf("pieces hold %d elements, selection %d", sum, total)
	}
	for pos, ok := range seen {
		if !ok {
			return fmt.Errorf("buffer position %d not covered", pos)
		}
	}
	return nil
}

// roundTrip gathers src into freshly randomised chunks through Split and
// Gather, checks the chunks against the reference, then scatters them back
// through Split and Scatter and checks that src is reproduced.
func roundTrip(rng *rand.Rand, dims, chunkDims []uint64, h Hyperslab, es int) error {
	shape := h.Shape()
	n := h.NumElements()
	src := make([]byte, int(n)*es)
	fillRand(rng, src)
	clen := int(prod(chunkDims)) * es
	// Every chunk of the grid, with random prior contents.
	chunks := map[string][]byte{}
	want := map[string][]byte{}
	eachCoord(gridDims(dims, chunkDims), func(c []uint64) {
		b := make([]byte, clen)
		fillRand(rng, b)
		chunks[coordKey(c)] = b
		want[coordKey(c)] = bytes.Clone(b)
	})
	// Read direction first: scatter the original chunks, compare with the
	// reference read.
	dst := bytes.Repeat([]byte{0xEE}, len(src))
	err := Split(h, chunkDims, func(p *Piece) error {
		Scatter(dst, shape, chunks[coordKey(p.Coord)], chunkDims, p, es)
		return nil
	})
	if err != nil {
		return err
	}
	cc := make([]uint64, len(dims))
	co := make([]uint64, len(dims))
	var mismatch error
	refEach(h, func(g []uint64, pos uint64) {
		for d := range g {
			cc[d], co[d] = g[d]/chunkDims[d], g[d]%chunkDims[d]
		}
		off := int(linear(co, chunkDims)) * es
		if mismatch == nil && !bytes.Equal(dst[int(pos)*es:int(pos+1)*es], want[coordKey(cc)][off:off+es]) {
			mismatch = fmt.Errorf("read: element %v (pos %d) differs", g, pos)
		}
		// Expected chunk contents after the write below.
		copy(want[coordKey(cc)][off:off+es], src[int(pos)*es:])
	})
	if mismatch != nil {
		return mismatch
	}
	err = Split(h, chunkDims, func(p *Piece) error {
		Gather(chunks[coordKey(p.Coord)], chunkDims, src, shape, p, es)
		return nil
	})
	if err != nil {
		return err
	}
	for k, b := range chunks {
		if !bytes.Equal(b, want[k]) {
			return fmt.Errorf("write: chunk %s differs from reference", k)
		}
	}
	back := bytes.Repeat([]byte{0x5A}, len(src))
	err = Split(h, chunkDims, func(p *Piece) error {
		Scatter(back, shape, chunks[coordKey(p.Coord)], chunkDims, p, es)
		return nil
	})
	if err != nil {
		return err
	}
	if !bytes.Equal(back, src) {
		return fmt.Errorf("scatter after gather does not reproduce the buffer")
	}
	return nil
}

func fillRand(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}
