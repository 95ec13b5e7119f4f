package h5

import (
	"fmt"
	"testing"
)

// fuzzType decodes a type tree from b (bounded: depth, members, sizes),
// any bytes giving some tree; ok false when b runs out.
func fuzzType(b *[]byte, depth int) (Type, bool) {
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
		return Type{}, false
	}
	sizes := []int{1, 2, 4, 8}
	arg, _ := next()
	switch c % 11 {
	case 0:
		return Type{Class: Int, Size: sizes[arg%4]}, true
	case 1:
		return Type{Class: Uint, Size: sizes[arg%4]}, true
	case 2:
		return Type{Class: Float, Size: []int{2, 4, 8, 2}[arg%4], BFloat: arg%4 == 3}, true
	case 3:
		return Type{Class: Bool, Size: 1}, true
	case 4:
		return Type{Class: Complex, Size: []int{8, 16}[arg%2]}, true
	case 5:
		return Type{Class: String, Size: int(arg%9) + 1, Pad: int(arg % 3)}, true
	case 6:
		return Type{Class: Opaque, Size: int(arg%17) + 1, Tag: fmt.Sprint(arg % 3)[:arg%2]}, true
	case 7:
		return Type{Class: Bitfield, Size: sizes[arg%4]}, true
	}
	if depth >= 20 {
		return Type{Class: Uint, Size: 1}, true
	}
	switch c % 11 {
	case 8:
		base := Type{Class: Int, Size: sizes[arg%4]}
		if arg&0x80 != 0 {
			base.Class = Uint
		}
		t := Type{Class: Enum, Size: base.Size, Base: &base}
		for i := 0; i < int(arg%5); i++ {
			v, _ := next()
			t.Names = append(t.Names, fmt.Sprintf("m%d", v%8))
			t.Values = append(t.Values, int64(v%8)-2)
		}
		return t, true
	case 9:
		base, ok := fuzzType(b, depth+1)
		if !ok {
			return Type{}, false
		}
		dims := []int{int(arg%3) + 1}
		if arg&0x40 != 0 {
			dims = append(dims, int(arg>>3%3)+1)
		}
		n := base.Size
		for _, d := range dims {
			n *= d
		}
		return Type{Class: Array, Size: n, Base: &base, Dims: dims}, true
	}
	t := Type{Class: Compound}
	off := 0
	for i := 0; i < int(arg%4)+1; i++ {
		m, ok := fuzzType(b, depth+1)
		if !ok {
			return Type{}, false
		}
		g, _ := next()
		off += int(g % 3) // gaps, and with g%7 == 6 an overlap
		if g%7 == 6 && off > 0 {
			off--
		}
		t.Members = append(t.Members, Member{Name: fmt.Sprintf("f%d", g%5), Offset: off, Type: m})
		off += m.Size
	}
	t.Size = off
	return t, true
}

// FuzzTypeRoundTrip: any type the binding can build (makeType refuses
// the others with an error: overlapping or repeated members, bad
// enums...) is classified back by typeOf — the walk every file's type
// description goes through — as a type of the same class and size,
// never a panic; nesting beyond the bound comes back as a named Other.
func FuzzTypeRoundTrip(f *testing.F) {
	for _, s := range [][]byte{
		{0, 1}, {2, 0}, {2, 3}, {6, 5}, {7, 2}, {8, 3, 1, 2, 3},
		{9, 0x41, 0, 1}, {10, 1, 0, 0, 2, 3, 4, 5, 1},
		{10, 0, 10, 0, 10, 0, 10, 0, 10, 0, 10, 0, 10, 0, 10, 0, 10, 0, 10, 0, 0, 0},
		[]byte("A0A0J"), // an enum without members in a compound: refused before libhdf5 sees it
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, ok := fuzzType(&b, 0)
		if !ok {
			return
		}
		lock()
		defer unlock()
		tid, err := makeType(in, false)
		if err != nil {
			return
		}
		defer closeType(tid)
		got := typeOf(tid)
		if got.Class == Other {
			if got.Name == "" {
				t.Fatalf("%v: unnamed Other", in)
			}
			return
		}
		if got.Class != in.Class || got.Size != in.Size {
			t.Fatalf("built %v, classified %v", in, got)
		}
	})
}
