package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// refArray is the reference model every engine test checks against: a dense
// in-memory array of one dataset, in C order, with the dataset's fill value.
type refArray struct {
	dims     []uint64
	elemSize int
	fill     []byte
	data     []byte
	// vlen, for a variable-length dataset (vlen_test.go), holds every
	// element's sequence instead of data.
	vlen [][]byte
}

func newRef(dims []uint64, elemSize int, fill []byte) *refArray {
	r := &refArray{dims: clone(dims), elemSize: elemSize, fill: fill}
	r.data = make([]byte, prod(dims)*uint64(elemSize))
	r.fillRange(r.data)
	return r
}

func (r *refArray) fillRange(b []byte) {
	if len(r.fill) == 0 {
		clear(b)
		return
	}
	for i := 0; i+r.elemSize <= len(b); i += r.elemSize {
		copy(b[i:], r.fill)
	}
}

func (r *refArray) clone() *refArray {
	return &refArray{dims: clone(r.dims), elemSize: r.elemSize, fill: r.fill, data: clone(r.data), vlen: clone(r.vlen)}
}

// points calls fn for every selected element: its linear index in the array
// and its position in the packed selection buffer, in C order.
func points(sel Selection, fn func(coord []uint64, bufPos uint64)) {
	h := sel.hyper()
	rank := len(h.Start)
	shape := h.Shape()
	idx := make([]uint64, rank)
	coord := make([]uint64, rank)
	n := prod(shape)
	for pos := uint64(0); pos < n; pos++ {
		rem := pos
		for d := rank - 1; d >= 0; d-- {
			idx[d] = rem % shape[d]
			rem /= shape[d]
		}
		for d := 0; d < rank; d++ {
			blk, off := idx[d]/h.Block[d], idx[d]%h.Block[d]
			coord[d] = h.Start[d] + blk*h.Stride[d] + off
		}
		fn(coord, pos)
	}
}

func (r *refArray) linear(coord []uint64) uint64 {
	var l uint64
	for d := range coord {
		l = l*r.dims[d] + coord[d]
	}
	return l
}

func (r *refArray) write(sel Selection, buf []byte) {
	es := uint64(r.elemSize)
	points(sel, func(c []uint64, pos uint64) {
		copy(r.data[r.linear(c)*es:][:es], buf[pos*es:])
	})
}

func (r *refArray) read(sel Selection) []byte {
	es := uint64(r.elemSize)
	out := make([]byte, sel.NumElements()*es)
	points(sel, func(c []uint64, pos uint64) {
		copy(out[pos*es:][:es], r.data[r.linear(c)*es:])
	})
	return out
}

// resize models SetExtent: elements outside the new extent are lost and read
// as the fill value if the extent grows again.
func (r *refArray) resize(dims []uint64) {
	n := newRef(dims, r.elemSize, r.fill)
	es := uint64(r.elemSize)
	common := make([]uint64, len(dims))
	for d := range dims {
		common[d] = min(dims[d], r.dims[d])
	}
	if prod(common) > 0 {
		points(All(common), func(c []uint64, _ uint64) {
			copy(n.data[n.linear(c)*es:][:es], r.data[r.linear(c)*es:])
		})
	}
	*r = *n
}

// verify reads the whole dataset and compares it with the model.
func (r *refArray) verify(t testing.TB, ds *Dataset) {
	t.Helper()
	if r.vlen != nil {
		r.verifyVlen(t, ds)
		return
	}
	require.Equal(t, r.dims, ds.Shape(), "%s: shape (want the model's)", ds.Path())
	if prod(r.dims) == 0 {
		return
	}
	buf := make([]byte, len(r.data))
	require.NoError(t, ds.Read(context.Background(), All(r.dims), buf), "%s: read all", ds.Path())
	if !bytes.Equal(buf, r.data) {
		// The first element that differs: a diff of the whole array
		// would bury it.
		es := r.elemSize
		for i := 0; i < len(buf); i += es {
			require.Equal(t, r.data[i:i+es], buf[i:i+es], "%s: element %d (want the model's)", ds.Path(), i/es)
		}
	}
}

func prod(s []uint64) uint64 {
	p := uint64(1)
	for _, x := range s {
		p *= x
	}
	return p
}

// randomSelection picks a random hyperslab inside dims (non-empty dims).
func randomSelection(rng *rand.Rand, dims []uint64) Selection {
	r := len(dims)
	start, stride, count, block := make([]uint64, r), make([]uint64, r), make([]uint64, r), make([]uint64, r)
	strided := rng.IntN(3) == 0
	for d := 0; d < r; d++ {
		start[d] = rng.Uint64N(dims[d])
		room := dims[d] - start[d]
		if !strided {
			stride[d], block[d] = 1, 1
			count[d] = 1 + rng.Uint64N(room)
			continue
		}
		block[d] = 1 + rng.Uint64N(min(room, 3))
		stride[d] = block[d] + rng.Uint64N(3)
		// the last block must fit: start + (count-1)*stride + block <= dims
		count[d] = 1 + (room-block[d])/stride[d]
		count[d] = 1 + rng.Uint64N(count[d])
	}
	return Hyperslab(start, stride, count, block)
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// compressibleBytes mimics detector data: a smooth signal plus noise.
func compressibleBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	base := rng.IntN(200)
	for i := range b {
		if i%2 == 0 {
			b[i] = byte(base + (i/64)%16 + rng.IntN(3))
		}
	}
	return b
}

// must is require.NoError, for the many calls whose success is a
// precondition of the test.
func must(t testing.TB, err error) {
	t.Helper()
	require.NoError(t, err)
}

func name(i int) string { return fmt.Sprintf("ds%02d", i) }

// verifyNoLeaks fails the test if goroutines outlive it. ants (under the
// cache's worker pool) starts a default pool with two housekeeping
// goroutines when the package initializes; they are not ours to stop.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	goleak.VerifyNone(t,
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"))
}
