package selection

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFillOutside: for random boxes (overlapping or not, covering the
// chunk or not) in chunks of rank 1 to 3, FillOutside sets exactly the
// elements outside every box to the fill value and leaves the others.
func TestFillOutside(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 2000; i++ {
		r := 1 + rng.IntN(3)
		es := []int{1, 2, 4}[rng.IntN(3)]
		dims := make([]uint64, r)
		n := 1
		for d := range dims {
			dims[d] = 1 + uint64(rng.IntN(6))
			n *= int(dims[d])
		}
		var boxes []uint64
		in := make([]bool, n)
		for b := rng.IntN(5); b > 0; b-- {
			p := Piece{Runs: make([][]Run, r)}
			for d := range dims {
				lo := uint64(rng.IntN(int(dims[d])))
				p.Runs[d] = []Run{{Chunk: lo, Len: 1 + uint64(rng.IntN(int(dims[d]-lo)))}}
			}
			var ok bool
			boxes, ok = AppendBox(boxes, &p, r)
			require.True(t, ok)
			markBox(in, dims, p.Runs)
		}
		fill := []byte{0xf1, 0xf2, 0xf3, 0xf4}[:es]
		chunk := make([]byte, n*es)
		for j := range chunk {
			chunk[j] = 0xaa
		}
		filled := FillOutside(chunk, dims, boxes, es, fill)
		outside := 0
		for _, x := range in {
			if !x {
				outside += es
			}
		}
		assert.Equal(t, outside, filled)
		for e := 0; e < n; e++ {
			want := fill
			if in[e] {
				want = []byte{0xaa, 0xaa, 0xaa, 0xaa}[:es]
			}
			if !assert.Equal(t, want, chunk[e*es:(e+1)*es], "dims %v boxes %v element %d", dims, boxes, e) {
				return
			}
		}
	}
}

// markBox sets in[e] for every element e of the box runs selects.
func markBox(in []bool, dims []uint64, runs [][]Run) {
	r := len(dims)
	idx := make([]uint64, r)
	for e := range in {
		rem := uint64(e)
		for d := r - 1; d >= 0; d-- {
			idx[d] = rem % dims[d]
			rem /= dims[d]
		}
		inside := true
		for d := range dims {
			run := runs[d][0]
			inside = inside && idx[d] >= run.Chunk && idx[d] < run.Chunk+run.Len
		}
		if inside {
			in[e] = true
		}
	}
}

// TestFillOutsideCovered: disjoint boxes that cover the chunk (a chunk
// written in quarters) leave it untouched without a pass over it, and a
// piece of several runs is not a box.
func TestFillOutsideCovered(t *testing.T) {
	dims := []uint64{4, 4}
	var boxes []uint64
	for _, q := range [][2]uint64{{0, 0}, {0, 2}, {2, 0}, {2, 2}} {
		p := Piece{Runs: [][]Run{{{Chunk: q[0], Len: 2}}, {{Chunk: q[1], Len: 2}}}}
		var ok bool
		boxes, ok = AppendBox(boxes, &p, 2)
		require.True(t, ok)
	}
	assert.True(t, coveredByDisjoint(dims, boxes, 4))
	chunk := make([]byte, 16)
	for i := range chunk {
		chunk[i] = byte(i + 1)
	}
	assert.Zero(t, FillOutside(chunk, dims, boxes, 1, nil))
	for i := range chunk {
		assert.Equal(t, byte(i+1), chunk[i])
	}
	assert.False(t, coveredByDisjoint(dims, append(boxes[:len(boxes):len(boxes)], 0, 1, 0, 1), 5), "overlap")
	strided := Piece{Runs: [][]Run{{{Chunk: 0, Len: 1}, {Chunk: 2, Len: 1}}, {{Chunk: 0, Len: 4}}}}
	got, ok := AppendBox(boxes, &strided, 2)
	assert.False(t, ok)
	assert.Len(t, got, len(boxes))
}
