package hdf5

import (
	"fmt"
	"testing"

	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// fuzzType decodes a type tree from b (bounded: depth, members, sizes),
// any bytes giving some tree; ok false when b runs out.
func fuzzH5Type(b *[]byte, depth int) (h5.Type, bool) {
	next := func() (byte, bool) {
		if len(*b) == 0 {
			return 0, false
		}
		c := (*b)[0]
		*b = (*b)[1:]
		return c, true
	}
	c, ok := next()
	if !ok {
		return h5.Type{}, false
	}
	sizes := []int{1, 2, 4, 8}
	arg, _ := next()
	switch c % 11 {
	case 0:
		return h5.Type{Class: h5.Int, Size: sizes[arg%4]}, true
	case 1:
		return h5.Type{Class: h5.Uint, Size: sizes[arg%4]}, true
	case 2:
		return h5.Type{Class: h5.Float, Size: []int{2, 4, 8, 2}[arg%4], BFloat: arg%4 == 3}, true
	case 3:
		return h5.Type{Class: h5.Bool, Size: 1}, true
	case 4:
		return h5.Type{Class: h5.Complex, Size: []int{8, 16}[arg%2]}, true
	case 5:
		return h5.Type{Class: h5.String, Size: int(arg%9) + 1, Pad: int(arg % 3)}, true
	case 6:
		return h5.Type{Class: h5.Opaque, Size: int(arg%17) + 1, Tag: fmt.Sprint(arg % 3)[:arg%2]}, true
	case 7:
		return h5.Type{Class: h5.Bitfield, Size: sizes[arg%4]}, true
	}
	if depth >= 20 {
		return h5.Type{Class: h5.Uint, Size: 1}, true
	}
	switch c % 11 {
	case 8:
		base := h5.Type{Class: h5.Int, Size: sizes[arg%4]}
		if arg&0x80 != 0 {
			base.Class = h5.Uint
		}
		t := h5.Type{Class: h5.Enum, Size: base.Size, Base: &base}
		for i := 0; i < int(arg%5); i++ {
			v, _ := next()
			t.Names = append(t.Names, fmt.Sprintf("m%d", v%8))
			t.Values = append(t.Values, int64(v%8)-2)
		}
		return t, true
	case 9:
		base, ok := fuzzH5Type(b, depth+1)
		if !ok {
			return h5.Type{}, false
		}
		dims := []int{int(arg%3) + 1}
		if arg&0x40 != 0 {
			dims = append(dims, int(arg>>3%3)+1)
		}
		n := base.Size
		for _, d := range dims {
			n *= d
		}
		return h5.Type{Class: h5.Array, Size: n, Base: &base, Dims: dims}, true
	}
	t := h5.Type{Class: h5.Compound}
	off := 0
	for i := 0; i < int(arg%4)+1; i++ {
		m, ok := fuzzH5Type(b, depth+1)
		if !ok {
			return h5.Type{}, false
		}
		g, _ := next()
		off += int(g % 3) // gaps, and with g%7 == 6 an overlap
		if g%7 == 6 && off > 0 {
			off--
		}
		t.Members = append(t.Members, h5.Member{Name: fmt.Sprintf("f%d", g%5), Offset: off, Type: m})
		off += m.Size
	}
	t.Size = off
	return t, true
}

// FuzzSccType: the mapping of a classified HDF5 type onto scc's (the
// description a file gives, member offsets, names and enum tables
// included) never panics; what it maps is a valid scc type of the same
// size, which maps back onto the same HDF5 description.
func FuzzSccType(f *testing.F) {
	for _, s := range [][]byte{
		{0, 1}, {2, 0}, {2, 3}, {6, 5}, {7, 2}, {8, 3, 1, 2, 3}, {8, 2, 1, 1},
		{9, 0x41, 0, 1}, {10, 1, 0, 0, 2, 3, 4, 5, 1}, {10, 1, 0, 0, 6, 3, 4, 5, 6},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, ok := fuzzH5Type(&b, 0)
		if !ok {
			return
		}
		st, ok := sccType(in)
		if !ok {
			return
		}
		if !st.Valid() || st.Size() != in.Size {
			t.Fatalf("%v mapped onto %v", in, st)
		}
		back, ok := sccType(h5Type(st))
		if !ok || back != st {
			t.Fatalf("%v: %v maps back onto %v", in, st, back)
		}
	})
}
