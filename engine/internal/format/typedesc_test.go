package format

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func plain(code uint8) *TypeNode { return &TypeNode{Code: code} }

// sampleTypes are valid descriptions of every class, nested.
func sampleTypes() []*TypeNode {
	enum := &TypeNode{Code: TypeDescribed, Class: ClassEnum, Base: plain(TypeInt16),
		Names: []string{"RED", "GREEN", "minus"}, Values: []uint64{0, 1, ^uint64(0)}}
	uenum := &TypeNode{Code: TypeDescribed, Class: ClassEnum, Base: plain(TypeUint8), Names: []string{"a"}, Values: []uint64{255}}
	opaque := &TypeNode{Code: TypeDescribed, Class: ClassOpaque, Size: 7, Tag: "blob"}
	bits := &TypeNode{Code: TypeDescribed, Class: ClassBitfield, Size: 4}
	arr := &TypeNode{Code: TypeDescribed, Class: ClassArray, Dims: []uint32{2, 3}, Base: plain(TypeFloat16)}
	str := &TypeNode{Code: TypeString, StrLen: 5, StrPad: PadNullPad}
	inner := &TypeNode{Code: TypeDescribed, Class: ClassCompound, Size: 16, Fields: []FieldNode{
		{"re", 0, plain(TypeFloat64)}, {"im", 8, plain(TypeFloat64)}}}
	outer := &TypeNode{Code: TypeDescribed, Class: ClassCompound, Size: 64, Fields: []FieldNode{
		{"name", 0, str}, {"z", 8, inner}, {"m", 24, arr}, {"e", 36, enum}, {"o", 38, opaque},
		{"b", 48, bits}, {"x.y", 52, plain(TypeBFloat16)}}}
	arrOfCompound := &TypeNode{Code: TypeDescribed, Class: ClassArray, Dims: []uint32{4}, Base: inner}
	return []*TypeNode{enum, uenum, opaque, bits, arr, inner, outer, arrOfCompound,
		{Code: TypeDescribed, Class: ClassOpaque, Size: MaxTypeSize}}
}

// TestTypeDescriptionRoundTrip: every class, nested, encodes canonically
// and decodes to the same tree, with the element size its layout says.
func TestTypeDescriptionRoundTrip(t *testing.T) {
	sizes := []int{2, 1, 7, 4, 12, 16, 64, 64, MaxTypeSize}
	for i, n := range sampleTypes() {
		require.NoError(t, ValidateType(n), "sample %d", i)
		b := EncodeType(n)
		got, err := DecodeType(b)
		require.NoError(t, err, "sample %d", i)
		assert.True(t, reflect.DeepEqual(n, got), "sample %d: %+v", i, got)
		assert.Equal(t, b, EncodeType(got))
		assert.Equal(t, sizes[i], got.ElemSize(), "sample %d", i)
	}
}

// TestTypeDescriptionMalformed: descriptions out of the rules are refused
// by ValidateType (ErrInvalid) and, encoded anyway, by DecodeType
// (ErrCorrupt).
func TestTypeDescriptionMalformed(t *testing.T) {
	deep := plain(TypeInt8)
	for range MaxTypeDepth {
		deep = &TypeNode{Code: TypeDescribed, Class: ClassArray, Dims: []uint32{1}, Base: deep}
	}
	f := func(name string, off uint32, ty *TypeNode) FieldNode { return FieldNode{name, off, ty} }
	comp := func(size uint32, fs ...FieldNode) *TypeNode {
		return &TypeNode{Code: TypeDescribed, Class: ClassCompound, Size: size, Fields: fs}
	}
	enum := func(base uint8, names []string, values ...uint64) *TypeNode {
		return &TypeNode{Code: TypeDescribed, Class: ClassEnum, Base: plain(base), Names: names, Values: values}
	}
	for name, n := range map[string]*TypeNode{
		"unknown class":        {Code: TypeDescribed, Class: 9},
		"class 0":              {Code: TypeDescribed},
		"too deep":             deep,
		"enum float base":      enum(TypeFloat32, []string{"a"}, 0),
		"enum value too big":   enum(TypeUint8, []string{"a"}, 256),
		"enum value too low":   enum(TypeInt8, []string{"a"}, uint64(0xffffffffffffff7f)),
		"enum name repeated":   enum(TypeInt8, []string{"a", "a"}, 0, 1),
		"enum value repeated":  enum(TypeInt8, []string{"a", "b"}, 1, 1),
		"enum empty name":      enum(TypeInt8, []string{""}, 1),
		"enum NUL name":        enum(TypeInt8, []string{"a\x00"}, 1),
		"opaque size 0":        {Code: TypeDescribed, Class: ClassOpaque},
		"opaque too big":       {Code: TypeDescribed, Class: ClassOpaque, Size: MaxTypeSize + 1},
		"opaque tag not ascii": {Code: TypeDescribed, Class: ClassOpaque, Size: 1, Tag: "é"},
		"bitfield 3":           {Code: TypeDescribed, Class: ClassBitfield, Size: 3},
		"array rank 0":         {Code: TypeDescribed, Class: ClassArray, Base: plain(TypeInt8)},
		"array dim 0":          {Code: TypeDescribed, Class: ClassArray, Dims: []uint32{2, 0}, Base: plain(TypeInt8)},
		"array too big":        {Code: TypeDescribed, Class: ClassArray, Dims: []uint32{1 << 19, 3}, Base: plain(TypeInt8)},
		"array bad element":    {Code: TypeDescribed, Class: ClassArray, Dims: []uint32{2}, Base: plain(99)},
		"compound no fields":   comp(4),
		"compound size 0":      comp(0, f("a", 0, plain(TypeInt8))),
		"field beyond size":    comp(4, f("a", 1, plain(TypeInt32))),
		"fields overlap":       comp(8, f("a", 0, plain(TypeInt32)), f("b", 3, plain(TypeInt8))),
		"field repeated":       comp(8, f("a", 0, plain(TypeInt32)), f("a", 4, plain(TypeInt8))),
		"field unnamed":        comp(8, f("", 0, plain(TypeInt32))),
		"field bad type":       comp(8, f("a", 0, &TypeNode{Code: TypeString})),
		"params on int":        {Code: TypeInt8, Size: 3},
	} {
		err := ValidateType(n)
		assert.ErrorIs(t, err, ErrInvalid, name)
		switch name {
		case "enum value too big", "enum value too low", "params on int":
			continue // the encoding has no room for what is wrong
		}
		_, err = DecodeType(EncodeType(n))
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
	// Encodings no writer makes.
	good := EncodeType(sampleTypes()[6])
	for name, b := range map[string][]byte{
		"empty":            nil,
		"truncated":        good[:len(good)-1],
		"trailing":         append(bytes.Clone(good), 0),
		"huge enum count":  {TypeDescribed, ClassEnum, TypeInt8, 0xff, 0xff, 0xff, 0x7f},
		"huge field count": {TypeDescribed, ClassCompound, 8, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f},
		"deep":             bytes.Repeat([]byte{TypeDescribed, ClassArray, 1, 1, 0, 0, 0}, MaxTypeDepth+1),
		"long":             make([]byte, MaxTypeDescBytes+1),
	} {
		_, err := DecodeType(b)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

func describedHeader(d *TypeNode) DatasetHeader {
	return DatasetHeader{Name: "c", ID: 4, Type: TypeDescribed, Desc: d, Shape: []uint64{6}, MaxShape: []uint64{Unlimited},
		Chunk: []uint64{4}, Layout: LayoutDense, Fill: bytes.Repeat([]byte{3}, d.ElemSize())}
}

// TestHeaderDescribedType: a header of a described type carries its
// description (part 6) and its element size; the float16 codes need none.
// Sealed as v5 or older, the same blocks are damage, not a newer file.
func TestHeaderDescribedType(t *testing.T) {
	var hs []DatasetHeader
	for _, n := range sampleTypes()[:8] {
		hs = append(hs, describedHeader(n))
	}
	for _, code := range []uint8{TypeFloat16, TypeBFloat16} {
		hs = append(hs, DatasetHeader{Name: "h", ID: 5, Type: code, Shape: []uint64{6}, MaxShape: []uint64{6},
			Chunk: []uint64{3}, Layout: LayoutContiguous, Fill: []byte{0, 0x3c}})
	}
	for i, h := range hs {
		require.NoError(t, h.Validate(), "header %d", i)
		b := EncodeDatasetHeader(h)
		got, err := DecodeDatasetHeader(b)
		require.NoError(t, err, "header %d", i)
		assert.True(t, reflect.DeepEqual(h, got), "header %d", i)
		assert.Equal(t, uint64(4*got.ElemSize()), got.ChunkBytes()/uint64(h.Chunk[0])*4)
		for v := uint8(MinVersion); v < 6; v++ {
			_, err := DecodeDatasetHeader(resealAs(b, v))
			assert.True(t, errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion), "header %d as v%d: %v", i, v, err)
		}
	}
	// A described code without a description, a description on another
	// code, a description of another code.
	noDesc := describedHeader(sampleTypes()[0])
	noDesc.Desc = nil
	onInt := DatasetHeader{Name: "i", ID: 1, Type: TypeInt8, Desc: sampleTypes()[0], Shape: []uint64{2}, MaxShape: []uint64{2},
		Chunk: []uint64{2}, Layout: LayoutDense}
	ofString := describedHeader(sampleTypes()[0])
	ofString.Desc = &TypeNode{Code: TypeString, StrLen: 2}
	ofString.Fill = nil
	for name, h := range map[string]DatasetHeader{"no description": noDesc, "on int8": onInt, "of a string": ofString} {
		assert.ErrorIs(t, h.Validate(), ErrInvalid, name)
		_, err := DecodeDatasetHeader(EncodeDatasetHeader(h))
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// typeSeeds seed FuzzTypeDescription: every sample and some damage.
func typeSeeds() [][]byte {
	var s [][]byte
	for _, n := range sampleTypes()[:8] {
		s = append(s, EncodeType(n))
	}
	b := EncodeType(sampleTypes()[6])
	s = append(s, b[:len(b)/2], []byte{TypeDescribed, ClassEnum, TypeInt8, 1, 0, 0, 0, 1, 0, 'a', 5},
		[]byte(strings.Repeat("\x11\x04\x01\x02\x00\x00\x00", 3)+"\x01"))
	return s
}

// FuzzTypeDescription: whatever decodes validates, re-encodes to the same
// bytes and decodes again to the same tree; nothing panics.
func FuzzTypeDescription(f *testing.F) {
	for _, s := range typeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeType(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := ValidateType(n); err != nil {
			t.Fatalf("decoded type fails ValidateType: %v", err)
		}
		again := EncodeType(n)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
		n2, err := DecodeType(again)
		if err != nil || !reflect.DeepEqual(n, n2) {
			t.Fatalf("re-decode: %+v %v", n2, err)
		}
		if n.ElemSize() <= 0 || n.ElemSize() > MaxTypeSize {
			t.Fatalf("element size %d", n.ElemSize())
		}
	})
}

// TestHeaderDataspace: scalar and null dataspaces (part 7) round-trip with
// their stored shapes; other shapes, unknown codes, virtual layouts and a
// v5 seal are refused.
func TestHeaderDataspace(t *testing.T) {
	base := func(space uint8, n uint64) DatasetHeader {
		return DatasetHeader{Name: "s", ID: 2, Type: TypeInt32, Space: space, Shape: []uint64{n}, MaxShape: []uint64{n},
			Chunk: []uint64{1}, Layout: LayoutContiguous}
	}
	for _, h := range []DatasetHeader{base(SpaceScalar, 1), base(SpaceNull, 0)} {
		require.NoError(t, h.Validate())
		b := EncodeDatasetHeader(h)
		got, err := DecodeDatasetHeader(b)
		require.NoError(t, err)
		assert.True(t, reflect.DeepEqual(h, got))
		_, err = DecodeDatasetHeader(resealAs(b, 5))
		assert.True(t, errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion), "%v", err)
	}
	scalar2 := base(SpaceScalar, 2)
	nullMax := base(SpaceNull, 0)
	nullMax.MaxShape = []uint64{Unlimited}
	rank2 := base(SpaceScalar, 1)
	rank2.Shape, rank2.MaxShape, rank2.Chunk = []uint64{1, 1}, []uint64{1, 1}, []uint64{1, 1}
	virt := base(SpaceScalar, 1)
	virt.Layout = LayoutVirtual
	for name, h := range map[string]DatasetHeader{"scalar of 2": scalar2, "growable null": nullMax, "rank 2": rank2,
		"code 3": base(3, 1), "virtual": virt} {
		assert.ErrorIs(t, h.Validate(), ErrInvalid, name)
		_, err := DecodeDatasetHeader(EncodeDatasetHeader(h))
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}
