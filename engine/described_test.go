package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

var (
	tColor   = Enum(Int16, EnumMember{"RED", 0}, EnumMember{"GREEN", 1}, EnumMember{"BLUE", -7})
	tUColor  = Enum(Uint64, EnumMember{"big", -1}, EnumMember{"zero", 0})
	tBlob    = Opaque(5, "blob")
	tBits    = Bitfield(4)
	tMat     = ArrayOf(Float32, 2, 3)
	tComplex = PackedCompound(Field{Name: "r", Type: Float64}, Field{Name: "i", Type: Float64})
	// tRecord is laid out as HDF5 and numpy align it: padding after
	// name and after flag.
	tRecord = Compound(56,
		Field{"name", 0, FixedString(6, NullPad, ASCII)},
		Field{"z", 8, tComplex},
		Field{"m", 24, tMat},
		Field{"flag", 48, Bool},
		Field{"color", 50, tColor},
		Field{"h", 52, Float16},
		Field{"b", 54, BFloat16})
	tArrRec = ArrayOf(tComplex, 3)
)

// describedTypes are one type of every class, nested ones included.
func describedTypes() []Type {
	return []Type{Float16, BFloat16, tColor, tUColor, tBlob, tBits, tMat, tComplex, tRecord, tArrRec}
}

// TestDescribedTypes: the constructors give valid types whose accessors
// return what was described; equal descriptions give equal Types (also
// built concurrently), different ones different Types.
func TestDescribedTypes(t *testing.T) {
	assert.Equal(t, ClassEnum, tColor.Class())
	assert.Equal(t, Int16, tColor.Base())
	assert.Equal(t, 2, tColor.Size())
	assert.Equal(t, []EnumMember{{"RED", 0}, {"GREEN", 1}, {"BLUE", -7}}, tColor.Members())
	assert.Equal(t, []EnumMember{{"big", -1}, {"zero", 0}}, tUColor.Members())
	assert.Equal(t, ClassOpaque, tBlob.Class())
	assert.Equal(t, "blob", tBlob.Tag())
	assert.Equal(t, 5, tBlob.Size())
	assert.Equal(t, ClassBitfield, tBits.Class())
	assert.Equal(t, 4, tBits.Size())
	assert.Equal(t, ClassArray, tMat.Class())
	assert.Equal(t, []int{2, 3}, tMat.Dims())
	assert.Equal(t, Float32, tMat.Base())
	assert.Equal(t, 24, tMat.Size())
	assert.Equal(t, []Field{{"r", 0, Float64}, {"i", 8, Float64}}, tComplex.Fields())
	assert.Equal(t, 16, tComplex.Size())
	assert.Equal(t, 56, tRecord.Size())
	assert.Equal(t, 48, tArrRec.Size())
	assert.Equal(t, ClassFloat, Float16.Class())
	assert.Equal(t, ClassString, FixedString(3, NullPad, ASCII).Class())
	assert.Equal(t, ClassInteger, Uint8.Class())
	for _, ty := range describedTypes() {
		assert.True(t, ty.Valid(), "%v", ty)
		assert.NotEmpty(t, ty.String())
	}
	ft, off, err := tRecord.FieldOf("z.i")
	require.NoError(t, err)
	assert.Equal(t, Float64, ft)
	assert.Equal(t, 16, off)
	_, _, err = tRecord.FieldOf("z.q")
	assert.ErrorIs(t, err, ErrNotFound)
	_, _, err = tColor.FieldOf("x")
	assert.ErrorIs(t, err, ErrInvalid)

	// Interning: the same description from many goroutines is one Type.
	var wg sync.WaitGroup
	got := make([]Type, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = Compound(25, Field{"k", 0, Int64}, Field{"v", 8, ArrayOf(Uint32, 4)}, Field{fmt.Sprint("g", i%2), 24, Int8})
		}()
	}
	wg.Wait()
	for i := range got {
		assert.Equal(t, got[i%2], got[i])
	}
	assert.NotEqual(t, got[0], got[1])
	assert.Equal(t, tComplex, Compound(16, Field{"r", 0, Float64}, Field{"i", 8, Float64}))
	assert.NotEqual(t, tComplex, Compound(16, Field{"i", 8, Float64}, Field{"r", 0, Float64}))
	assert.NotEqual(t, Opaque(5, "blob"), Opaque(5, "other"))
}

// TestDescribedTypesInvalid: descriptions that break a rule give a type
// that is not Valid, and CreateDataset refuses it with ErrInvalid.
func TestDescribedTypesInvalid(t *testing.T) {
	for name, ty := range map[string]Type{
		"enum of float":        Enum(Float32, EnumMember{"a", 1}),
		"enum value too big":   Enum(Uint8, EnumMember{"a", 256}),
		"enum negative uint":   Enum(Uint16, EnumMember{"a", -1}),
		"enum names repeat":    Enum(Int8, EnumMember{"a", 1}, EnumMember{"a", 2}),
		"enum values repeat":   Enum(Int8, EnumMember{"a", 1}, EnumMember{"b", 1}),
		"opaque 0":             Opaque(0, ""),
		"opaque too big":       Opaque(MaxTypeSize+1, ""),
		"opaque tag NUL":       Opaque(1, "a\x00"),
		"bitfield 3":           Bitfield(3),
		"array no dims":        ArrayOf(Int8),
		"array dim 0":          ArrayOf(Int8, 3, 0),
		"array of invalid":     ArrayOf(Bitfield(5), 2),
		"array too big":        ArrayOf(Float64, 1<<17+1),
		"compound empty":       Compound(8),
		"compound overlap":     Compound(8, Field{"a", 0, Int32}, Field{"b", 2, Int32}),
		"compound beyond size": Compound(4, Field{"a", 2, Int32}),
		"compound same names":  Compound(8, Field{"a", 0, Int32}, Field{"a", 4, Int32}),
		"compound no name":     PackedCompound(Field{Type: Int8}),
		"compound of invalid":  PackedCompound(Field{Name: "a", Type: Type(99)}),
		"compound negative":    Compound(8, Field{"a", -1, Int8}),
	} {
		assert.False(t, ty.Valid(), name)
		assert.Equal(t, ClassInvalid, ty.Class(), name)
		f := tCreate(t, vfd.NewMem(), nil)
		_, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: ty, Shape: []uint64{4}, Chunk: []uint64{2}})
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
	deep := Int8
	for range MaxTypeDepth - 1 {
		deep = ArrayOf(deep, 1)
	}
	assert.True(t, deep.Valid())
	assert.False(t, ArrayOf(deep, 1).Valid())
}

// randomElems returns n elements of t: random bytes, with each Bool byte
// (at the top or in a compound) 0 or 1, so that the typed API's rule
// holds.
func randomElems(rng *rand.Rand, t Type, n int) []byte {
	b := make([]byte, n*t.Size())
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if t == Bool {
		for i := range b {
			b[i] &= 1
		}
	}
	return b
}

// TestDescribedDatasets: a dataset of every new type, in every layout
// that stores fixed-size elements (chunked with and without filters,
// contiguous, sparse), with a fill value, writes, reads back, reopens,
// reads the same and checks; unwritten elements read as the fill value.
func TestDescribedDatasets(t *testing.T) {
	ctx := t.Context()
	layouts := map[string]DatasetSpec{
		"chunked":    {Shape: []uint64{9, 7}, Chunk: []uint64{4, 3}},
		"zstd":       {Shape: []uint64{9, 7}, Chunk: []uint64{4, 3}, Filters: []Filter{Shuffle(), Zstd(1), CRC32C()}},
		"contiguous": {Shape: []uint64{9, 7}, Layout: Contiguous},
		"sparse":     {Shape: []uint64{9, 7}, Chunk: []uint64{4, 3}, Layout: Sparse},
		"extensible": {Shape: []uint64{9, 7}, MaxShape: []uint64{Unlimited, 7}, Chunk: []uint64{4, 3}},
	}
	for _, ty := range describedTypes() {
		for lname, spec := range layouts {
			t.Run(fmt.Sprintf("%v/%s", ty.Class(), lname), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ty.Size()), uint64(len(lname))))
				mem := vfd.NewMem()
				f := tCreate(t, mem, nil)
				spec.Type = ty
				spec.Fill = randomElems(rng, ty, 1)
				d, err := f.CreateDataset(ctx, "d", spec)
				require.NoError(t, err)
				assert.Equal(t, ty, d.Type())
				sel := Box([]uint64{1, 2}, []uint64{5, 4})
				data := randomElems(rng, ty, 20)
				require.NoError(t, d.Write(ctx, sel, data))
				want := bytes.Repeat(spec.Fill, 63)
				for i := range 5 {
					copy(want[((1+i)*7+2)*ty.Size():], data[i*4*ty.Size():(i+1)*4*ty.Size()])
				}
				read := func(d *Dataset) {
					t.Helper()
					got := make([]byte, len(want))
					require.NoError(t, d.Read(ctx, All([]uint64{9, 7}), got))
					assert.Equal(t, want, got)
				}
				read(d)
				require.NoError(t, d.SetAttr(ctx, "same", RawAttr(AttrArray, ty, data[:2*ty.Size()])))
				require.NoError(t, f.Close(ctx))
				_, err = Check(ctx, "", &Options{Driver: mem})
				require.NoError(t, err)
				f = tOpen(t, mem, nil)
				d, err = f.OpenDataset(ctx, "d", nil)
				require.NoError(t, err)
				assert.Equal(t, ty, d.Type())
				assert.Equal(t, spec.Fill, d.Fill())
				read(d)
				a, err := d.Attr("same")
				require.NoError(t, err)
				assert.Equal(t, ty, a.Type())
				assert.Equal(t, data[:2*ty.Size()], a.Bytes())
			})
		}
	}
}

// TestDescribedAttrs: attributes of every new type, on a file and on a
// dataset, keep their type and bytes through a commit and a reopen; the
// set's accounted size is its encoding's.
func TestDescribedAttrs(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	d, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	want := map[string]AttrValue{}
	for i, ty := range describedTypes() {
		want[fmt.Sprint("s", i)] = RawAttr(AttrScalar, ty, randomElems(rng, ty, 1))
		want[fmt.Sprint("a", i)] = RawAttr(AttrArray, ty, randomElems(rng, ty, 3))
	}
	for name, v := range want {
		require.NoError(t, f.SetAttr(ctx, name, v))
		require.NoError(t, d.SetAttr(ctx, name, v))
	}
	for _, s := range []*attrSet{f.attrs.load(), d.s.attrs.load()} {
		assert.Equal(t, len(encodeAttrs(s.list())), s.size)
	}
	h, err := Scalar[float32](RawAttr(AttrScalar, Float16, []byte{0, 0x3c}))
	assert.ErrorIs(t, err, ErrAttrType) // typed getters take the exact type
	assert.Zero(t, h)
	fs, err := RawAttr(AttrArray, Float16, []byte{0, 0x3c, 0, 0xc0}).Float64s()
	require.NoError(t, err)
	assert.Equal(t, []float64{1, -2}, fs)
	fs, err = RawAttr(AttrScalar, tColor, []byte{0xf9, 0xff}).Float64s()
	require.NoError(t, err)
	assert.Equal(t, []float64{-7}, fs)
	_, err = RawAttr(AttrScalar, tBlob, []byte("12345")).Float64s()
	assert.ErrorIs(t, err, ErrAttrType)
	assert.ErrorIs(t, f.SetAttr(ctx, "bad", RawAttr(AttrScalar, tBlob, []byte("1234"))), ErrInvalid)
	assert.ErrorIs(t, f.SetAttr(ctx, "bad", RawAttr(AttrScalar, Bitfield(3), []byte("123"))), ErrInvalid)
	require.NoError(t, f.Close(ctx))

	f = tOpen(t, mem, nil)
	d, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	for name, v := range want {
		for _, get := range []func(string) (AttrValue, error){f.Attr, d.Attr} {
			got, err := get(name)
			require.NoError(t, err)
			assert.True(t, got.Equal(v), "%s: %v", name, got.Type())
		}
	}
}

// TestDescribedAttrsDecodeErrors: an attribute encoding of an older
// version naming a new type, or holding a description that does not
// decode, is ErrCorrupt.
func TestDescribedAttrsDecodeErrors(t *testing.T) {
	for i, v := range []AttrValue{RawAttr(AttrScalar, Float16, []byte{1, 2}), RawAttr(AttrScalar, tColor, []byte{1, 0})} {
		b := encodeAttrs([]Attr{{"a", v}})
		_, err := decodeAttrs(b)
		require.NoError(t, err)
		for ver := byte(1); ver < attrVersionV4; ver++ {
			old := bytes.Clone(b)
			old[0] = ver
			_, err := decodeAttrs(old)
			assert.ErrorIs(t, err, ErrCorrupt, "value %d as version %d", i, ver)
		}
	}
	b := encodeAttrs([]Attr{{"a", RawAttr(AttrScalar, tColor, []byte{1, 0})}})
	// The description follows name length, name, kind, type: u32 length
	// at byte 10, the description at 14 (its class byte at 15).
	for name, edit := range map[string]func([]byte){
		"class":      func(b []byte) { b[15] = 9 },
		"length":     func(b []byte) { b[10] = 0xff },
		"short":      func(b []byte) { b[10] = 2 },
		"not typed":  func(b []byte) { b[14] = 3 },
		"base float": func(b []byte) { b[16] = 9 },
	} {
		bad := bytes.Clone(b)
		edit(bad)
		_, err := decodeAttrs(bad)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// TestReadAsHalfAndEnum: a float16 or bfloat16 dataset reads into every Go
// number type with conversion; an enum dataset reads and writes as its
// base type and converts from it.
func TestReadAsHalfAndEnum(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	vals := []float64{0.5, -1.25, 300, 65504}
	for _, ty := range []Type{Float16, BFloat16} {
		d, err := f.CreateDataset(ctx, ty.String(), DatasetSpec{Type: ty, Shape: []uint64{4}, Chunk: []uint64{2}})
		require.NoError(t, err)
		raw := make([]byte, 8)
		require.NoError(t, ConvertElems(raw, ty, toBytes(vals), Float64, ConvertOptions{}))
		require.NoError(t, d.Write(ctx, All(d.Shape()), raw))
		f32 := make([]float32, 4)
		require.NoError(t, ReadSlice(ctx, d, All(d.Shape()), f32))
		want := []float32{0.5, -1.25, 300, 65504}
		if ty == BFloat16 {
			want[3] = 65536 // bfloat16 keeps 8 bits
		}
		assert.Equal(t, want, f32, "%v", ty)
		i8 := make([]int8, 4)
		require.NoError(t, ReadSlice(ctx, d, All(d.Shape()), i8))
		assert.Equal(t, []int8{0, -1, 127, 127}, i8)
		assert.ErrorIs(t, ReadAs(ctx, d, All(d.Shape()), i8, ConvertOptions{Strict: true}), ErrOutOfRange)
		assert.ErrorIs(t, WriteSlice(ctx, d, All(d.Shape()), []uint16{1, 2, 3, 4}), ErrInvalid)
	}
	e, err := f.CreateDataset(ctx, "e", DatasetSpec{Type: tColor, Shape: []uint64{3}, Chunk: []uint64{3}})
	require.NoError(t, err)
	require.NoError(t, WriteSlice(ctx, e, All(e.Shape()), []int16{1, -7, 0}))
	got := make([]int16, 3)
	require.NoError(t, ReadSlice(ctx, e, All(e.Shape()), got))
	assert.Equal(t, []int16{1, -7, 0}, got)
	u8 := make([]uint8, 3)
	require.NoError(t, ReadSlice(ctx, e, All(e.Shape()), u8))
	assert.Equal(t, []uint8{1, 0, 0}, u8)
	f64 := make([]float64, 3)
	require.NoError(t, ReadSlice(ctx, e, All(e.Shape()), f64))
	assert.Equal(t, []float64{1, -7, 0}, f64)
	assert.ErrorIs(t, WriteSlice(ctx, e, All(e.Shape()), []int32{1, 2, 3}), ErrInvalid)

	for _, ty := range []Type{tBlob, tBits, tMat, tComplex} {
		d, err := f.CreateDataset(ctx, fmt.Sprint("x", ty.Class()), DatasetSpec{Type: ty, Shape: []uint64{2}, Chunk: []uint64{2}})
		require.NoError(t, err)
		assert.ErrorIs(t, ReadSlice(ctx, d, All(d.Shape()), make([]uint8, 2*ty.Size())), ErrInvalid, "%v", ty)
	}
}

// TestReadField: one field of a compound dataset, nested and array
// fields included, reads into its own buffer, as bytes or converted, for
// boxes, strided selections and reads larger than one piece.
func TestReadField(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(5, 6))
	f := tCreate(t, vfd.NewMem(), nil)
	rows := 3*fieldMaxRead/tRecord.Size()/8 + 5
	d, err := f.CreateDataset(ctx, "rec", DatasetSpec{Type: tRecord, Shape: []uint64{uint64(rows), 8}, Chunk: []uint64{64, 8},
		Fill: randomElems(rng, tRecord, 1)})
	require.NoError(t, err)
	all := randomElems(rng, tRecord, rows*8)
	require.NoError(t, d.Write(ctx, All(d.Shape()), all))
	field := func(elems []byte, off, size int) []byte {
		var out []byte
		for i := 0; i < len(elems); i += tRecord.Size() {
			out = append(out, elems[i+off:i+off+size]...)
		}
		return out
	}
	sels := map[string]Selection{
		"all":     All(d.Shape()),
		"box":     Box([]uint64{3, 1}, []uint64{10, 5}),
		"strided": Hyperslab([]uint64{1, 0}, []uint64{3, 4}, []uint64{5, 2}, []uint64{2, 3}),
	}
	for sname, sel := range sels {
		elems := make([]byte, sel.NumElements()*uint64(tRecord.Size()))
		require.NoError(t, d.Read(ctx, sel, elems))
		for path, size := range map[string]int{"name": 6, "z": 16, "z.i": 8, "m": 24, "color": 2, "h": 2, "flag": 1} {
			_, off, err := tRecord.FieldOf(path)
			require.NoError(t, err)
			got := make([]byte, int(sel.NumElements())*size)
			require.NoError(t, ReadFieldBytes(ctx, d, sel, path, got), "%s %s", sname, path)
			assert.Equal(t, field(elems, off, size), got, "%s %s", sname, path)
		}
		n := int(sel.NumElements())
		zi := make([]float64, n)
		require.NoError(t, ReadField(ctx, d, sel, "z.i", zi, ConvertOptions{}))
		assert.Equal(t, field(elems, 16, 8), toBytes(zi))
		m := make([]float64, 6*n)
		require.NoError(t, ReadField(ctx, d, sel, "m", m, ConvertOptions{}))
		m32 := make([]float32, 6*n)
		fromBytes(field(elems, 24, 24), m32)
		for i := range m {
			if m[i] != float64(m32[i]) && m[i] == m[i] {
				t.Fatalf("%s: m[%d] = %v, want %v", sname, i, m[i], m32[i])
			}
		}
		h := make([]float32, n)
		require.NoError(t, ReadField(ctx, d, sel, "h", h, ConvertOptions{}))
		hb := field(elems, 52, 2)
		for i := range h {
			want := float32(Float16FromBits(le.Uint16(hb[2*i:])))
			if h[i] != want && want == want {
				t.Fatalf("%s: h[%d] = %v, want %v", sname, i, h[i], want)
			}
		}
		c := make([]int64, n)
		require.NoError(t, ReadField(ctx, d, sel, "color", c, ConvertOptions{}))
		c16 := make([]int16, n)
		fromBytes(field(elems, 50, 2), c16)
		for i := range c {
			assert.EqualValues(t, c16[i], c[i])
		}
	}
	one := Box([]uint64{0, 0}, []uint64{1, 1})
	assert.ErrorIs(t, ReadFieldBytes(ctx, d, one, "nope", make([]byte, 1)), ErrNotFound)
	assert.ErrorIs(t, ReadFieldBytes(ctx, d, one, "h", make([]byte, 3)), ErrInvalid)
	assert.ErrorIs(t, ReadField(ctx, d, one, "name", make([]byte, 6), ConvertOptions{}), ErrInvalid)
	assert.ErrorIs(t, ReadField(ctx, d, one, "z", make([]float64, 2), ConvertOptions{}), ErrInvalid)
	plain, err := f.CreateDataset(ctx, "plain", DatasetSpec{Type: Int8, Shape: []uint64{2}, Chunk: []uint64{2}})
	require.NoError(t, err)
	assert.ErrorIs(t, ReadFieldBytes(ctx, plain, All(plain.Shape()), "a", make([]byte, 2)), ErrInvalid)
}

// TestDescribedVlenAndVirtual: a variable-length dataset holds sequences
// of a compound type, and a virtual dataset maps a compound source of the
// same type (the Type, interned, compares equal); both read back after a
// reopen, and a source of another type is refused.
func TestDescribedVlenAndVirtual(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 8))
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	vl, err := f.CreateDataset(ctx, "vl", DatasetSpec{Type: tComplex, Shape: []uint64{3}, Chunk: []uint64{2}, Layout: Vlen})
	require.NoError(t, err)
	vals := [][]byte{randomElems(rng, tComplex, 2), nil, randomElems(rng, tComplex, 5)}
	require.NoError(t, vl.WriteVlen(ctx, All([]uint64{3}), vals))
	src, err := f.CreateDataset(ctx, "src", DatasetSpec{Type: tRecord, Shape: []uint64{6}, Chunk: []uint64{3}})
	require.NoError(t, err)
	data := randomElems(rng, tRecord, 6)
	require.NoError(t, src.Write(ctx, All([]uint64{6}), data))
	fill := randomElems(rng, tRecord, 1)
	_, err = f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: tRecord, Shape: []uint64{8}, Fill: fill,
		Mappings: []VirtualMapping{{Virtual: Box([]uint64{2}, []uint64{6}), Dataset: "src", Source: All([]uint64{6})}}})
	require.NoError(t, err)
	_, err = f.CreateVirtualDataset(ctx, "bad", VirtualSpec{Type: tComplex, Shape: []uint64{6},
		Mappings: []VirtualMapping{{Virtual: All([]uint64{6}), Dataset: "src", Source: All([]uint64{6})}}})
	assert.ErrorIs(t, err, ErrInvalid)
	require.NoError(t, f.Close(ctx))

	f = tOpen(t, mem, nil)
	vl, err = f.OpenDataset(ctx, "vl", nil)
	require.NoError(t, err)
	got, err := vl.ReadVlen(ctx, All([]uint64{3}))
	require.NoError(t, err)
	assert.Equal(t, vals[0], got[0])
	assert.Empty(t, got[1])
	assert.Equal(t, vals[2], got[2])
	v, err := f.OpenDataset(ctx, "v", nil)
	require.NoError(t, err)
	assert.Equal(t, tRecord, v.Type())
	buf := make([]byte, 8*tRecord.Size())
	require.NoError(t, v.Read(ctx, All([]uint64{8}), buf))
	assert.Equal(t, append(bytes.Repeat(fill, 2), data...), buf)
	zi := make([]float64, 8)
	require.NoError(t, ReadField(ctx, v, All([]uint64{8}), "z.i", zi, ConvertOptions{}))
}
