package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/scc-dev/scc/engine/selection"
)

// TestOneChunkMatchesSplit: for random selections, oneChunk accepts
// exactly the selections Split cuts into one piece with one run per
// dimension, and produces that same piece.
func TestOneChunkMatchesSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for i := 0; i < 5000; i++ {
		r := 1 + rng.IntN(3)
		chunk := make([]uint64, r)
		start, stride, count, block := make([]uint64, r), make([]uint64, r), make([]uint64, r), make([]uint64, r)
		for d := 0; d < r; d++ {
			chunk[d] = 1 + rng.Uint64N(8)
			start[d] = rng.Uint64N(20)
			count[d] = 1 + rng.Uint64N(3)
			block[d] = 1 + rng.Uint64N(4)
			stride[d] = block[d] + rng.Uint64N(2)
		}
		h := selection.Hyperslab{Start: start, Stride: stride, Count: count, Block: block}
		if i%2 == 0 {
			h = selection.Box(start, block)
		}
		s := &dsState{id: 1, chunk: chunk}
		sc := new(ioScratch)
		reg := s.regionInto(Selection{h}, sc)
		got := sc.oneChunk(h, chunk, reg)
		ps, err := selection.Pieces(h, chunk)
		if err != nil {
			t.Fatal(err)
		}
		want := len(ps) == 1
		if want {
			for _, rs := range ps[0].Runs {
				want = want && len(rs) == 1
			}
		}
		if got != want {
			t.Fatalf("%v chunk %v: oneChunk %v, Split gives %d pieces %+v", h, chunk, got, len(ps), ps)
		}
		if got {
			accepted++
			if !reflect.DeepEqual(sc.oneSel.Coord, ps[0].Coord) || !reflect.DeepEqual(sc.oneSel.Runs, ps[0].Runs) || sc.oneSel.N != ps[0].N {
				t.Fatalf("%v chunk %v: oneChunk %+v, Split %+v", h, chunk, sc.oneSel, ps[0])
			}
		}
	}
	if accepted < 100 {
		t.Fatalf("only %d single-chunk selections drawn", accepted)
	}
}
