package selection

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scc-dev/scc/internal/memcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBoxFastMatchesWalk: for random single-run pieces of rank 1 to 3
// (including whole rows and whole planes, which boxFast merges into one
// copy) boxFast takes the piece and moves the same bytes as walk, both
// ways.
func TestBoxFastMatchesWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		r := 1 + rng.IntN(3)
		es := 1 << rng.IntN(4)
		cd, bs := make([]uint64, r), make([]uint64, r)
		runs := make([][]Run, r)
		for d := 0; d < r; d++ {
			cd[d] = 1 + rng.Uint64N(9)
			n := 1 + rng.Uint64N(cd[d])
			if rng.IntN(3) == 0 {
				n = cd[d] // whole rows
			}
			c := rng.Uint64N(cd[d] - n + 1)
			bs[d] = n + rng.Uint64N(3)
			if rng.IntN(3) == 0 {
				bs[d] = n
			}
			b := rng.Uint64N(bs[d] - n + 1)
			runs[d] = []Run{{Chunk: c, Buf: b, Len: n}}
		}
		chunk := make([]byte, int(prod(cd))*es)
		buf := make([]byte, int(prod(bs))*es)
		for _, op := range []kernelOp{opScatter, opGather} {
			fillRand(rng, chunk)
			fillRand(rng, buf)
			c1, b1 := bytes.Clone(chunk), bytes.Clone(buf)
			c2, b2 := bytes.Clone(chunk), bytes.Clone(buf)
			if !boxFast(op, b1, bs, c1, cd, runs, es) {
				t.Fatalf("boxFast refused rank %d runs %v", r, runs)
			}
			walk(op, b2, bs, c2, cd, runs, es, fillValue{})
			if !bytes.Equal(c1, c2) || !bytes.Equal(b1, b2) {
				t.Fatalf("op %d rank %d chunk %v buf %v runs %v es %d: boxFast and walk differ", op, r, cd, bs, runs, es)
			}
		}
	}
	if boxFast(opScatter, nil, []uint64{1, 1, 1, 1}, nil, []uint64{1, 1, 1, 1}, [][]Run{{{Len: 1}}, {{Len: 1}}, {{Len: 1}}, {{Len: 1}}}, 1) {
		t.Fatal("boxFast took a rank-4 piece")
	}
	if boxFast(opScatter, nil, []uint64{4}, nil, []uint64{4}, [][]Run{{{Len: 1}, {Chunk: 2, Buf: 1, Len: 1}}}, 1) {
		t.Fatal("boxFast took a two-run piece")
	}
}

// TestScatterRangeMatchesScatter: scattering a chunk in parts cut at random
// places (in random order) moves the same bytes as Scatter of the whole
// chunk, for the pieces boxFast takes, and ScatterRange refuses the others.
func TestScatterRangeMatchesScatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 3000; i++ {
		r := 1 + rng.IntN(3)
		es := 1 << rng.IntN(4)
		cd, bs := make([]uint64, r), make([]uint64, r)
		runs := make([][]Run, r)
		for d := 0; d < r; d++ {
			cd[d] = 1 + rng.Uint64N(9)
			n := 1 + rng.Uint64N(cd[d])
			if rng.IntN(3) == 0 {
				n = cd[d]
			}
			c := rng.Uint64N(cd[d] - n + 1)
			bs[d] = n + rng.Uint64N(3)
			if rng.IntN(3) == 0 {
				bs[d] = n
			}
			b := rng.Uint64N(bs[d] - n + 1)
			runs[d] = []Run{{Chunk: c, Buf: b, Len: n}}
		}
		p := &Piece{Runs: runs}
		require.True(t, CanScatterRange(bs, cd, p, es))
		chunk := make([]byte, int(prod(cd))*es)
		buf := make([]byte, int(prod(bs))*es)
		fillRand(rng, chunk)
		fillRand(rng, buf)
		want, got := bytes.Clone(buf), bytes.Clone(buf)
		Scatter(want, bs, chunk, cd, p, es)
		cuts := []int{0, len(chunk)}
		for range rng.IntN(6) {
			cuts = append(cuts, rng.IntN(len(chunk)+1))
		}
		slices.Sort(cuts)
		order := rng.Perm(len(cuts) - 1)
		for _, k := range order {
			lo, hi := cuts[k], cuts[k+1]
			require.True(t, ScatterRange(got, bs, chunk[lo:hi], uint64(lo), cd, p, es))
		}
		require.Equal(t, want, got, "rank %d chunk %v buf %v runs %v es %d cuts %v", r, cd, bs, runs, es, cuts)
	}
	two := &Piece{Runs: [][]Run{{{Len: 1}, {Chunk: 2, Buf: 1, Len: 1}}}}
	assert.False(t, CanScatterRange([]uint64{4}, []uint64{4}, two, 1))
	assert.False(t, ScatterRange(make([]byte, 4), []uint64{4}, make([]byte, 4), 0, []uint64{4}, two, 1))
}

// TestStreamedScatterMatchesWalk: a scatter into a buffer of at least
// memcopy.StreamFrom bytes, which streams its rows, moves the same bytes
// as walk, whole and in parts, for boxes whose rows start at any
// alignment and run across the streaming thresholds.
func TestStreamedScatterMatchesWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 12; i++ {
		es := 1 << rng.IntN(4)
		cd := []uint64{2 + rng.Uint64N(4), 3 + rng.Uint64N(5), 1 + rng.Uint64N(300)}
		// The buffer's rows are long enough for it to reach StreamFrom.
		row := uint64(memcopy.StreamFrom)/(uint64(es)*8*8) + 1
		bs := []uint64{8, 8, row}
		runs := make([][]Run, 3)
		for d := range 3 {
			n := 1 + rng.Uint64N(cd[d])
			c := rng.Uint64N(cd[d] - n + 1)
			b := rng.Uint64N(bs[d] - n + 1)
			runs[d] = []Run{{Chunk: c, Buf: b, Len: n}}
		}
		chunk := make([]byte, int(prod(cd))*es)
		buf := make([]byte, int(prod(bs))*es)
		require.GreaterOrEqual(t, len(buf), memcopy.StreamFrom)
		fillRand(rng, chunk)
		fillRand(rng, buf[:4096])
		want, got, parts := bytes.Clone(buf), bytes.Clone(buf), bytes.Clone(buf)
		walk(opScatter, want, bs, chunk, cd, runs, es, fillValue{})
		require.True(t, boxFast(opScatter, got, bs, chunk, cd, runs, es))
		p := &Piece{Runs: runs}
		for lo := 0; lo < len(chunk); lo += 97 {
			hi := min(lo+97, len(chunk))
			require.True(t, ScatterRange(parts, bs, chunk[lo:hi], uint64(lo), cd, p, es))
		}
		if !bytes.Equal(want, got) || !bytes.Equal(want, parts) {
			t.Fatalf("chunk %v buf %v runs %v es %d: streamed scatter differs from walk", cd, bs, runs, es)
		}
	}
}
