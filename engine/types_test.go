package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// typeModel writes random boxes of T through the typed API into one
// dataset of each layout, mirrors them in a flat reference, reads boxes
// back as it goes, then reopens the file and compares every element (the
// unwritten ones are the fill value). tCreate/tOpen check the file at
// cleanup.
func typeModel[T Element](t *testing.T, gen func(*rand.Rand) T, fill T) {
	t.Helper()
	ctx := t.Context()
	typ := TypeOf[T]()
	dims := []uint64{13, 7}
	n := int(dims[0] * dims[1])
	fillBytes := append([]byte(nil), toBytes([]T{fill})...)
	specs := map[string]DatasetSpec{
		"chunked":    {Type: typ, Shape: dims, Chunk: []uint64{4, 3}, Fill: fillBytes, Filters: []Filter{Shuffle(), Zstd(1)}},
		"contiguous": {Type: typ, Shape: dims, Layout: Contiguous, Fill: fillBytes},
		"sparse":     {Type: typ, Shape: dims, Chunk: []uint64{5, 5}, Layout: Sparse, Fill: fillBytes},
	}
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	rng := rand.New(rand.NewPCG(uint64(typ), 9))
	refs := map[string][]T{}
	for name, spec := range specs {
		ds, err := f.CreateDataset(ctx, name, spec)
		if err != nil {
			t.Fatalf("%v %s: %v", typ, name, err)
		}
		if !slices.Equal(ds.Fill(), fillBytes) {
			t.Fatalf("%v %s: fill %x, want %x", typ, name, ds.Fill(), fillBytes)
		}
		ref := make([]T, n)
		for i := range ref {
			ref[i] = fill
		}
		for range 40 {
			start, count := randBox(rng, dims)
			sel := Box(start, count)
			if rng.IntN(3) > 0 {
				vals := make([]T, count[0]*count[1])
				for i := range vals {
					vals[i] = gen(rng)
				}
				if err := WriteSlice(ctx, ds, sel, vals); err != nil {
					t.Fatalf("%v %s: write: %v", typ, name, err)
				}
				forBox(start, count, dims, func(k, flat int) { ref[flat] = vals[k] })
				continue
			}
			got := make([]T, count[0]*count[1])
			if err := ReadSlice(ctx, ds, sel, got); err != nil {
				t.Fatalf("%v %s: read: %v", typ, name, err)
			}
			forBox(start, count, dims, func(k, flat int) {
				if !sameElem(got[k], ref[flat]) {
					t.Fatalf("%v %s: element %d = %v, want %v", typ, name, flat, got[k], ref[flat])
				}
			})
		}
		refs[name] = ref
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, mem, &Options{ReadOnly: true})
	for name, ref := range refs {
		ds, err := f.OpenDataset(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ds.Type() != typ || !slices.Equal(ds.Fill(), fillBytes) {
			t.Fatalf("%s reopened: type %v fill %x", name, ds.Type(), ds.Fill())
		}
		got := make([]T, n)
		if err := ReadSlice(ctx, ds, All(dims), got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !sameElem(got[i], ref[i]) {
				t.Fatalf("%v %s reopened: element %d = %v, want %v", typ, name, i, got[i], ref[i])
			}
		}
	}
}

func randBox(rng *rand.Rand, dims []uint64) (start, count []uint64) {
	start, count = make([]uint64, len(dims)), make([]uint64, len(dims))
	for d, n := range dims {
		start[d] = rng.Uint64N(n)
		count[d] = 1 + rng.Uint64N(n-start[d])
	}
	return start, count
}

// forBox calls fn with each element of a 2-D box: its index in the box and
// in the C-order array of dims.
func forBox(start, count, dims []uint64, fn func(k, flat int)) {
	k := 0
	for i := start[0]; i < start[0]+count[0]; i++ {
		for j := start[1]; j < start[1]+count[1]; j++ {
			fn(k, int(i*dims[1]+j))
			k++
		}
	}
}

// sameElem compares by bytes, so NaN parts compare equal to themselves.
func sameElem[T Element](a, b T) bool {
	return slices.Equal(toBytes([]T{a}), toBytes([]T{b}))
}

func TestTypesModel(t *testing.T) {
	t.Run("bool", func(t *testing.T) {
		typeModel(t, func(r *rand.Rand) bool { return r.IntN(2) == 1 }, true)
	})
	t.Run("complex64", func(t *testing.T) {
		typeModel(t, func(r *rand.Rand) complex64 {
			return complex(float32(r.NormFloat64()), float32(r.NormFloat64()))
		}, complex(float32(math.Inf(1)), -1.5))
	})
	t.Run("complex128", func(t *testing.T) {
		typeModel(t, func(r *rand.Rand) complex128 {
			if r.IntN(8) == 0 {
				return complex(math.NaN(), math.Copysign(0, -1))
			}
			return complex(r.NormFloat64(), r.ExpFloat64())
		}, complex(0.25, -math.MaxFloat64))
	})
}

// TestBoolBytes: a Bool is 0 or 1 through the typed API; a fill value or
// an attribute of another byte is refused; raw Write stores bytes as
// given, Read returns them, and ReadSlice[bool] reads them as true.
func TestBoolBytes(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	if _, err := f.CreateDataset(ctx, "bad", DatasetSpec{Type: Bool, Shape: []uint64{4}, Fill: []byte{2}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bool fill 2: %v, want ErrInvalid", err)
	}
	if err := f.SetAttr(ctx, "a", RawAttr(AttrArray, Bool, []byte{0, 1, 7})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bool attribute byte 7: %v, want ErrInvalid", err)
	}
	ds, err := f.CreateDataset(ctx, "b", DatasetSpec{Type: Bool, Shape: []uint64{4}, Chunk: []uint64{2}})
	must(t, err)
	must(t, ds.Write(ctx, All([]uint64{4}), []byte{0, 1, 2, 0xff}))
	raw := make([]byte, 4)
	must(t, ds.Read(ctx, All([]uint64{4}), raw))
	if !slices.Equal(raw, []byte{0, 1, 2, 0xff}) {
		t.Fatalf("raw read %v", raw)
	}
	got := make([]bool, 4)
	must(t, ReadSlice(ctx, ds, All([]uint64{4}), got))
	if !slices.Equal(got, []bool{false, true, true, true}) {
		t.Fatalf("typed read %v", got)
	}
	// A Go bool read back must behave as one: == true, and its byte 1.
	if got[2] != true || asBytes(got)[2] != 1 {
		t.Fatalf("typed read left byte %d", asBytes(got)[2])
	}
	if err := ReadSlice(ctx, ds, All([]uint64{4}), make([]uint8, 4)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bool read as uint8: %v, want ErrInvalid", err)
	}
	if err := WriteSlice(ctx, ds, All([]uint64{4}), []uint8{1, 1, 1, 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("uint8 written to bool: %v, want ErrInvalid", err)
	}
}

// TestReadSliceConverts: ReadSlice into another numeric type converts
// (saturating); ReadAs with Strict fails with ErrOutOfRange; complex
// datasets read into the other complex type and nothing else.
func TestReadSliceConverts(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset(ctx, "f", DatasetSpec{Type: Float64, Shape: []uint64{5}, Chunk: []uint64{2}})
	must(t, err)
	must(t, WriteSlice(ctx, ds, All([]uint64{5}), []float64{-1.9, 2.5, 300, math.NaN(), math.Inf(-1)}))
	got := make([]int8, 5)
	must(t, ReadSlice(ctx, ds, All([]uint64{5}), got))
	if !slices.Equal(got, []int8{-1, 2, 127, 0, -128}) {
		t.Fatalf("float64 as int8: %v", got)
	}
	if err := ReadAs(ctx, ds, All([]uint64{5}), got, ConvertOptions{Strict: true}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("strict: %v, want ErrOutOfRange", err)
	}
	must(t, ReadAs(ctx, ds, Box([]uint64{0}, []uint64{2}), got[:2], ConvertOptions{Strict: true}))
	c, err := f.CreateDataset(ctx, "c", DatasetSpec{Type: Complex128, Shape: []uint64{2}})
	must(t, err)
	must(t, WriteSlice(ctx, c, All([]uint64{2}), []complex128{1 + 2i, -3i}))
	c64 := make([]complex64, 2)
	must(t, ReadSlice(ctx, c, All([]uint64{2}), c64))
	if !slices.Equal(c64, []complex64{1 + 2i, -3i}) {
		t.Fatalf("complex128 as complex64: %v", c64)
	}
	if err := ReadSlice(ctx, c, All([]uint64{2}), make([]float64, 2)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("complex read as float64: %v, want ErrInvalid", err)
	}
}

// TestAttrNewTypes: Bool and complex attributes round-trip through a
// reopen, as scalars and arrays, on the file and on a dataset.
func TestAttrNewTypes(t *testing.T) {
	ctx := t.Context()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Bool, Shape: []uint64{3}})
	must(t, err)
	vals := map[string]AttrValue{
		"b": ScalarAttr(true), "bs": ArrayAttr([]bool{true, false, true}),
		"c64": ScalarAttr(complex64(1 - 2i)), "c128s": ArrayAttr([]complex128{complex(math.Inf(1), 0), 3i}),
	}
	for n, v := range vals {
		must(t, f.SetAttr(ctx, n, v))
		must(t, ds.SetAttr(ctx, n, v))
	}
	must(t, f.Close(ctx))
	f = tOpen(t, mem, &Options{ReadOnly: true})
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	for n, v := range vals {
		for _, get := range []func(string) (AttrValue, error){f.Attr, ds.Attr} {
			got, err := get(n)
			must(t, err)
			if !got.Equal(v) {
				t.Fatalf("attr %s: %v, want %v", n, got, v)
			}
		}
	}
	if b, err := Scalar[bool](mustAttr(t, f, "b")); err != nil || !b {
		t.Fatalf("Scalar[bool]: %v %v", b, err)
	}
	if c, err := Array[complex128](mustAttr(t, f, "c128s")); err != nil || c[1] != 3i {
		t.Fatalf("Array[complex128]: %v %v", c, err)
	}
	if _, err := mustAttr(t, f, "c64").Float64s(); !errors.Is(err, ErrAttrType) {
		t.Fatalf("complex Float64s: %v, want ErrAttrType", err)
	}
}

// TestAttrEncodingV1: an attribute part in the encoding before Bool and
// complex (version 1) still decodes and re-encodes in the current
// version; a version-1 part naming one of the newer types is damage.
func TestAttrEncodingV1(t *testing.T) {
	old := encodeAttrs([]Attr{{"a", ScalarAttr(int16(-2))}, {"s", StringAttr("x")}})
	old[0] = attrVersionV1
	set, err := decodeAttrs(old)
	must(t, err)
	if again := set.encoding(); again[0] != attrVersionV4 || !slices.Equal(again[1:], old[1:]) {
		t.Fatalf("v1 re-encodes as %x", again)
	}
	for _, v := range []AttrValue{ScalarAttr(true), ScalarAttr(complex64(1)), ArrayAttr([]complex128{2})} {
		b := encodeAttrs([]Attr{{"a", v}})
		if _, err := decodeAttrs(b); err != nil {
			t.Fatalf("%v: %v", v.Type(), err)
		}
		b[0] = attrVersionV1
		if _, err := decodeAttrs(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v in a v1 encoding: %v, want ErrCorrupt", v.Type(), err)
		}
	}
}
