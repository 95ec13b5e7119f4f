package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/scc-dev/scc/engine/internal/selection"
)

// TestPieceArena: pieces cloned from the arena equal their sources, stay
// valid while later pieces are cloned (blocks and slabs never move),
// survive a change to the source (Split reuses it), and reset drops the
// caller's buffer; ranks above arenaRank and pieces with many runs work.
func TestPieceArena(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	var a pieceArena
	buf, shape := make([]byte, 8), []uint64{8}
	for round := 0; round < 3; round++ {
		var srcs []selection.Piece
		var got []*piece
		for i := 0; i < 300; i++ {
			r := 1 + rng.IntN(10) // up to 10: some above arenaRank
			p := selection.Piece{Coord: make([]uint64, r), Runs: make([][]selection.Run, r), N: rng.Uint64()}
			for d := range r {
				p.Coord[d] = rng.Uint64()
				for range 1 + rng.IntN(1500)/100*(rng.IntN(2)) {
					p.Runs[d] = append(p.Runs[d], selection.Run{Chunk: rng.Uint64(), Buf: rng.Uint64(), Len: rng.Uint64()})
				}
				if len(p.Runs[d]) == 0 {
					p.Runs[d] = []selection.Run{{Len: 1}}
				}
			}
			want := p.Clone()
			pc := a.clone(&p, buf, shape)
			// Split reuses its piece: scribble over the source.
			p.Coord[0]++
			p.Runs[0][0].Len++
			srcs = append(srcs, want)
			got = append(got, pc)
		}
		for i, pc := range got {
			if !reflect.DeepEqual(*pc.p, srcs[i]) || &pc.buf[0] != &buf[0] {
				t.Fatalf("round %d piece %d: %+v, want %+v", round, i, *pc.p, srcs[i])
			}
		}
		a.reset()
		for i, pc := range got {
			if len(srcs[i].Coord) <= arenaRank && pc.buf != nil {
				t.Fatalf("round %d piece %d keeps the caller's buffer after reset", round, i)
			}
		}
	}
}
