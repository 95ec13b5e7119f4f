package cache

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

// TestRowsScatterMatchesIter checks the tight-loop scatter against the
// row-by-row walk it replaced, over random row sets of every rank up to
// ten (past the odometer's fixed array).
func TestRowsScatterMatchesIter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 2000; trial++ {
		rank := rng.IntN(11)
		if trial < 50 {
			rank = trial % 3
		}
		r := layout.Rows{Len: uint64(1 + rng.IntN(8)), First: uint64(rng.IntN(5)),
			Count: make([]uint64, rank), Step: make([]uint64, rank)}
		span := r.Len + uint64(rng.IntN(3)) // bytes one step of the next dimension covers
		for d := rank - 1; d >= 0; d-- {
			r.Count[d] = uint64(1 + rng.IntN(3))
			r.Step[d] = span
			span = r.Count[d]*span + uint64(rng.IntN(3))
		}
		r.Buf = make([]byte, r.First+span+uint64(rng.IntN(4)))
		rows := 1
		for _, c := range r.Count {
			rows *= int(c)
		}
		if _, ok := rowCount(&r, int64(rows)*int64(r.Len)); !ok {
			t.Fatalf("trial %d: generated rows %+v are not well formed", trial, r)
		}
		src := make([]byte, rows*int(r.Len))
		for i := range src {
			src[i] = byte(1 + rng.IntN(255))
		}
		want := make([]byte, len(r.Buf))
		var it rowIter
		ri := r
		ri.Buf = want
		it.init(&ri)
		for s := src; len(s) > 0; s = s[r.Len:] {
			copy(it.next(), s)
		}
		scatterRows(&r, src)
		if !bytes.Equal(r.Buf, want) {
			t.Fatalf("trial %d: rows %+v: scatter wrote %v, the walk %v", trial, r, r.Buf, want)
		}
	}
}

// scatter's odometer lives on the stack up to rank 9: a many-chunk read
// scatters every chunk through it, and an allocation each would show.
func TestRowsScatterAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what escapes")
	}
	for _, rank := range []int{2, 9} {
		r := layout.Rows{Len: 4, Count: make([]uint64, rank), Step: make([]uint64, rank)}
		span := r.Len
		for d := rank - 1; d >= 0; d-- {
			r.Count[d], r.Step[d] = 2, span
			span *= 2
		}
		r.Buf = make([]byte, span)
		src := make([]byte, span)
		if n := testing.AllocsPerRun(20, func() { scatterRows(&r, src) }); n != 0 {
			t.Fatalf("rank %d: %.1f allocations per scatter, want 0", rank, n)
		}
	}
}
