package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestPrepareOneMatchesGeneral: the fused single-chunk prepare
// (ioScratch.prepareOne) accepts only what the general path (Validate,
// NumElements, the buffer check, oneChunk) accepts, and builds the same
// request: coordinates, runs, element count, Full and buffer shape. Random
// hyperslabs, in and out of the extent, across chunk edges, with strides,
// zero counts and wrong buffer sizes.
func TestPrepareOneMatchesGeneral(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	shapes := []struct{ shape, chunk []uint64 }{
		{[]uint64{100}, []uint64{16}},
		{[]uint64{37, 50}, []uint64{8, 10}},
		{[]uint64{9, 7, 12}, []uint64{3, 7, 5}},
	}
	r := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	for i, sh := range shapes {
		ds, err := f.CreateDataset(ctx, string(rune('a'+i)), DatasetSpec{Type: Uint16, Shape: sh.shape, Chunk: sh.chunk})
		if err != nil {
			t.Fatal(err)
		}
		s := ds.s
		if _, err := s.hotDataset(); err != nil { // as io does before prepare
			t.Fatal(err)
		}
		cds := s.hot.Load()
		rank := len(sh.shape)
		for k := 0; k < 20000; k++ {
			start, stride, count, block := make([]uint64, rank), make([]uint64, rank), make([]uint64, rank), make([]uint64, rank)
			for d := 0; d < rank; d++ {
				start[d] = r.Uint64N(sh.shape[d] + 2)
				count[d] = r.Uint64N(3)
				block[d] = 1 + r.Uint64N(sh.chunk[d]+1)
				stride[d] = block[d] + r.Uint64N(2)
				if r.IntN(8) == 0 {
					stride[d] = r.Uint64N(3)
				}
			}
			sel := Hyperslab(start, stride, count, block)
			n := sel.hyper().NumElements()
			size := int(n) * 2
			if r.IntN(10) == 0 {
				size++
			}
			buf := make([]byte, size)

			one := ioPool.Get().(*ioScratch)
			one.regions[0] = s.regionInto(sel, one)
			ok := one.prepareOne(sel.hyper(), s.mu.shape, s.chunk, s.elemSize, buf, cds)

			gen := ioPool.Get().(*ioScratch)
			gen.regions[0] = s.regionInto(sel, gen)
			verr := sel.hyper().Validate(s.mu.shape)
			genOK := verr == nil && n > 0 && uint64(len(buf)) == n*2 && gen.oneChunk(sel.hyper(), s.chunk, gen.regions[0])
			if ok && !genOK {
				t.Fatalf("%v: prepareOne accepted what the general path does not (validate %v, n %d, buf %d)", sel.hyper(), verr, n, len(buf))
			}
			if genOK && !ok {
				t.Fatalf("%v: prepareOne refused a valid single-chunk box", sel.hyper())
			}
			if ok {
				accepted++
				got, want := one.one[0], &gen.oneSel
				if !slices.Equal(got.Coord, want.Coord) || got.Full != want.Full(s.chunk) || one.plan.sel.N != want.N {
					t.Fatalf("%v: request %v full %v n %d, want %v full %v n %d", sel.hyper(), got.Coord, got.Full, one.plan.sel.N, want.Coord, want.Full(s.chunk), want.N)
				}
				for d := range want.Runs {
					if !slices.Equal(one.plan.sel.Runs[d], want.Runs[d]) {
						t.Fatalf("%v: runs %v, want %v", sel.hyper(), one.plan.sel.Runs, want.Runs)
					}
				}
				if !slices.Equal(one.onePiece.bufShape, sel.hyper().Shape()) || got.Dataset != cds {
					t.Fatalf("%v: buffer shape %v", sel.hyper(), one.onePiece.bufShape)
				}
				// And the read through it returns what the general path
				// reads (the chunk is not resident: fill values either way).
				if err := ds.Read(ctx, sel, buf); err != nil {
					t.Fatal(err)
				}
			}
			one.put()
			gen.put()
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d selections took the fused path: the test does not exercise it", accepted)
	}
}
