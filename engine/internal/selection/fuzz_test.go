package selection

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// byteReader hands out fuzz bytes, zeros once they run out.
type byteReader struct{ b []byte }

func (r *byteReader) next() uint64 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return uint64(v)
}

// FuzzHyperslab decodes bytes into a small hyperslab, extent and chunk shape
// (values may be zero, overlapping or out of range on purpose), and checks
// that Validate and Split never panic, that they agree, and that for a valid
// selection the pieces cover exactly NumElements elements at the reference
// positions and the kernels round-trip.
func FuzzHyperslab(f *testing.F) {
	f.Add([]byte{1, 10, 3, 0, 1, 10, 1})
	f.Add([]byte{2, 7, 9, 4, 4, 1, 2, 2, 1, 3, 3, 2, 2, 3})
	f.Add([]byte{3, 5, 5, 5, 2, 3, 5, 0, 1, 1, 1, 4, 2, 2, 2, 1, 2, 1, 1, 0})
	f.Add([]byte{4, 3, 3, 3, 3, 4, 4, 4, 4, 0, 0, 0, 0, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 3})
	f.Add([]byte{1, 10, 3, 0, 0, 10, 1})                            // zero stride
	f.Add([]byte{1, 10, 3, 0, 2, 3, 5})                             // block > stride
	f.Add([]byte{1, 0, 3, 0, 1, 1, 1})                              // zero extent
	f.Add([]byte{2, 12, 12, 0, 5, 1, 1, 1, 1, 3, 4, 3, 4, 2, 2, 7}) // zero chunk dim
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{data}
		rank := int(r.next()%4) + 1
		dims := make([]uint64, rank)
		chunk := make([]uint64, rank)
		h := Hyperslab{make([]uint64, rank), make([]uint64, rank), make([]uint64, rank), make([]uint64, rank)}
		for d := range rank {
			dims[d] = r.next() % 16
		}
		for d := range rank {
			chunk[d] = r.next() % 9
		}
		for d := range rank {
			h.Start[d] = r.next() % 16
			h.Stride[d] = r.next() % 8
			h.Count[d] = r.next() % 8
			h.Block[d] = r.next() % 6
		}
		es := elemSizes[r.next()%4]
		verr := h.Validate(dims)
		var pieces []Piece
		serr := Split(h, chunk, func(p *Piece) error {
			pieces = append(pieces, p.Clone())
			return nil
		})
		if verr != nil {
			if !errors.Is(verr, ErrInvalid) && !errors.Is(verr, ErrOutOfRange) {
				t.Fatalf("Validate error %v wraps no sentinel", verr)
			}
			return
		}
		chunkOK := true
		for _, c := range chunk {
			chunkOK = chunkOK && c > 0
		}
		if !chunkOK {
			if !errors.Is(serr, ErrInvalid) {
				t.Fatalf("Split with chunk %v: %v", chunk, serr)
			}
			return
		}
		if serr != nil {
			t.Fatalf("Split rejected a valid selection %v: %v", h, serr)
		}
		if err := checkCover(h, chunk, pieces); err != nil {
			t.Fatalf("%v dims %v chunk %v: %v", h, dims, chunk, err)
		}
		rng := rand.New(rand.NewPCG(uint64(len(data)), 1))
		if err := roundTrip(rng, dims, chunk, h, es); err != nil {
			t.Fatalf("%v dims %v chunk %v es %d: %v", h, dims, chunk, es, err)
		}
	})
}
