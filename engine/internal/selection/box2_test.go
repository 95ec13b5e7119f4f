package selection

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestBox2MatchesWalk: for random rank-1 and rank-2 single-run pieces
// (including whole rows, which box2 merges into one copy) box2 takes the
// piece and moves the same bytes as walk, both ways.
func TestBox2MatchesWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		r := 1 + rng.IntN(2)
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
			if !box2(op, b1, bs, c1, cd, runs, es) {
				t.Fatalf("box2 refused rank %d runs %v", r, runs)
			}
			walk(op, b2, bs, c2, cd, runs, es, fillValue{})
			if !bytes.Equal(c1, c2) || !bytes.Equal(b1, b2) {
				t.Fatalf("op %d rank %d chunk %v buf %v runs %v es %d: box2 and walk differ", op, r, cd, bs, runs, es)
			}
		}
	}
	if box2(opScatter, nil, []uint64{1, 1, 1}, nil, []uint64{1, 1, 1}, [][]Run{{{Len: 1}}, {{Len: 1}}, {{Len: 1}}}, 1) {
		t.Fatal("box2 took a rank-3 piece")
	}
	if box2(opScatter, nil, []uint64{4}, nil, []uint64{4}, [][]Run{{{Len: 1}, {Chunk: 2, Buf: 1, Len: 1}}}, 1) {
		t.Fatal("box2 took a two-run piece")
	}
}
