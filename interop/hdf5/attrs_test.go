package hdf5

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// sccTestAttrs is one attribute of every kind and edge the mapping has.
func sccTestAttrs() []engine.Attr {
	return []engine.Attr{
		{Name: "title", Value: engine.StringAttr("détecteur \"A\" ✓")},
		{Name: "empty", Value: engine.StringAttr("")},
		{Name: "nul", Value: engine.StringAttr("a\x00b")},
		{Name: "version", Value: engine.ScalarAttr(uint16(3))},
		{Name: "offset", Value: engine.ScalarAttr(int64(math.MinInt64))},
		{Name: "gain", Value: engine.ScalarAttr(float64(-0.125))},
		{Name: "weights", Value: engine.ArrayAttr([]float32{0.5, float32(math.Inf(1)), -2})},
		{Name: "ids", Value: engine.ArrayAttr([]uint64{0, math.MaxUint64})},
		{Name: "none", Value: engine.ArrayAttr([]int8{})},
		{Name: "blob", Value: engine.BytesAttr([]byte{0, 1, 2, 255})},
		{Name: "noblob", Value: engine.BytesAttr(nil)},
	}
}

// readAttrsPy prints every attribute of the root group and of dataset "d"
// as h5py and numpy see them: kind, dtype, shape and the value.
const readAttrsPy = `
import sys, json, base64, h5py, numpy as np
def desc(v):
    if isinstance(v, h5py.Empty):
        return {"kind": "empty", "dtype": v.dtype.str}
    if isinstance(v, str):
        return {"kind": "str", "value": v}
    if isinstance(v, bytes):
        return {"kind": "bytes", "value": base64.b64encode(v).decode()}
    a = np.asarray(v)
    if a.dtype.kind == "V":
        return {"kind": "void", "value": base64.b64encode(a.tobytes()).decode()}
    if a.dtype.kind == "f":
        vals = [repr(float(x)) for x in a.ravel()]
    else:
        vals = [str(int(x)) for x in a.ravel()]
    return {"kind": "num", "dtype": a.dtype.str, "shape": list(a.shape), "value": vals}
with h5py.File(sys.argv[1], "r") as f:
    out = {"root": {k: desc(f.attrs[k]) for k in f.attrs}, "d": {k: desc(f["d"].attrs[k]) for k in f["d"].attrs}}
print(json.dumps(out))
`

type pyAttr struct {
	Kind  string          `json:"kind"`
	Dtype string          `json:"dtype"`
	Shape []int           `json:"shape"`
	Value json.RawMessage `json:"value"`
}

// TestAttrsExportReadByH5py: h5py reads every scc attribute kind with the
// documented HDF5 form and value, on the root group and on a dataset; and
// importing the exported file gives the same scc attributes back.
func TestAttrsExportReadByH5py(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := testfile.Create(t, filepath.Join(dir, "a.scc"), &engine.Options{NoSync: true})
	defer src.Close(ctx)
	ds, err := src.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{10}, Chunk: []uint64{4}, Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(ctx)
	for _, a := range sccTestAttrs() {
		if err := src.SetAttr(ctx, a.Name, a.Value); err != nil {
			t.Fatal(err)
		}
		if err := ds.SetAttr(ctx, a.Name, a.Value); err != nil {
			t.Fatal(err)
		}
	}
	h5path := filepath.Join(dir, "a.h5")
	if _, err := Export(ctx, src, h5path, nil); err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]pyAttr
	if err := json.Unmarshal([]byte(runPython(t, readAttrsPy, h5path)), &got); err != nil {
		t.Fatal(err)
	}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	b64 := func(b []byte) json.RawMessage { return str(base64.StdEncoding.EncodeToString(b)) }
	want := map[string]pyAttr{
		"title":   {Kind: "str", Value: str("détecteur \"A\" ✓")},
		"empty":   {Kind: "str", Value: str("")},
		"nul":     {Kind: "bytes", Value: b64([]byte("a\x00b"))}, // fixed-length: numpy bytes
		"version": {Kind: "num", Dtype: "<u2", Shape: []int{}, Value: json.RawMessage(`["3"]`)},
		"offset":  {Kind: "num", Dtype: "<i8", Shape: []int{}, Value: json.RawMessage(`["-9223372036854775808"]`)},
		"gain":    {Kind: "num", Dtype: "<f8", Shape: []int{}, Value: json.RawMessage(`["-0.125"]`)},
		"weights": {Kind: "num", Dtype: "<f4", Shape: []int{3}, Value: json.RawMessage(`["0.5","inf","-2.0"]`)},
		"ids":     {Kind: "num", Dtype: "<u8", Shape: []int{2}, Value: json.RawMessage(`["0","18446744073709551615"]`)},
		"none":    {Kind: "num", Dtype: "|i1", Shape: []int{0}, Value: json.RawMessage(`[]`)},
		"blob":    {Kind: "void", Value: b64([]byte{0, 1, 2, 255})},
		"noblob":  {Kind: "empty", Dtype: "|V1"},
	}
	for _, where := range []string{"root", "d"} {
		if len(got[where]) != len(want) {
			t.Errorf("%s: h5py sees %d attributes, want %d: %v", where, len(got[where]), len(want), got[where])
		}
		for name, w := range want {
			g, ok := got[where][name]
			if !ok {
				t.Errorf("%s: attribute %q missing", where, name)
				continue
			}
			if g.Kind != w.Kind || g.Dtype != w.Dtype || !slices.Equal(g.Shape, w.Shape) || compactJSON(g.Value) != compactJSON(w.Value) {
				t.Errorf("%s %s: h5py sees %+v (value %s), want %+v (value %s)", where, name, g, g.Value, w, w.Value)
			}
		}
	}

	// And back: the same scc attributes (name order, as scc lists them).
	dst := testfile.Create(t, filepath.Join(dir, "b.scc"), &engine.Options{NoSync: true})
	defer dst.Close(ctx)
	rep, err := Import(ctx, h5path, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RootAttrsNotImported != 0 || rep.Datasets[0].AttrsNotImported != 0 {
		t.Fatalf("left behind: %v %v", rep.RootAttrNotes, rep.Datasets[0].AttrNotes)
	}
	back, err := dst.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close(ctx)
	sameAttrs(t, "root", testfile.Attrs(t, src), testfile.Attrs(t, dst))
	sameAttrs(t, "d", testfile.Attrs(t, ds), testfile.Attrs(t, back))
}

func compactJSON(b json.RawMessage) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func sameAttrs(t *testing.T, what string, a, b []engine.Attr) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d attributes, want %d", what, len(b), len(a))
	}
	for i := range a {
		if a[i].Name != b[i].Name || !a[i].Value.Equal(b[i].Value) {
			t.Errorf("%s: attribute %q = %v, want %q = %v", what, b[i].Name, b[i].Value, a[i].Name, a[i].Value)
		}
	}
}

// TestAttrsImportFromH5py: attributes h5py writes in the forms people use
// are imported with their values; the kinds scc cannot hold are left
// behind and named in the report with the reason.
func TestAttrsImportFromH5py(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "p.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["origin"] = "h5py"
    f.attrs["n"] = np.int32(-5)
    d = f.create_dataset("d", data=np.arange(8, dtype="<u2"), chunks=(4,), compression="gzip", shuffle=True)
    a = d.attrs
    a["vlen"] = "température"
    a["fixed"] = np.bytes_(b"abc")
    a.create("padded", np.bytes_(b"xy"), dtype="S5")
    a["i16"] = np.int16(-300)
    a["be"] = np.array([1, 2, 258], dtype=">i4")
    a["f64s"] = np.array([0.5, -1e300])
    a["u8s"] = np.array([], dtype="u1")
    a["void"] = np.void(b"\x00\xffz")
    a["matrix"] = np.zeros((2, 2))
    a["cmpd"] = np.array((1, 2.0), dtype=[("a", "<i4"), ("b", "<f8")])
    a["ref"] = f.ref
    a["strs"] = np.array([b"a", b"b"])
    a["flag"] = True
    a["zbe"] = np.array([1+2j, complex(0, -0.5)], dtype=">c16")
    a["f16"] = np.float16(1.5)
    a.create("latin1", np.bytes_(b"caf\xe9"), dtype="S4")
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "p.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", rep)
	if rep.RootAttrsNotImported != 0 {
		t.Errorf("root left behind: %v", rep.RootAttrNotes)
	}
	if v, err := f.Attr("origin"); err != nil {
		t.Error(err)
	} else if s, _ := v.Str(); s != "h5py" {
		t.Errorf("origin = %q", s)
	}
	if v, err := f.Attr("n"); err != nil || v.Kind() != engine.AttrScalar || v.Type() != engine.Int32 {
		t.Errorf("n = %v %v", v, err)
	} else if n, _ := engine.Scalar[int32](v); n != -5 {
		t.Errorf("n = %d", n)
	}
	ds, err := f.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(ctx)
	strs, err := engine.FixedStringsAttr(engine.FixedString(1, engine.NullPad, engine.ASCII), "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	matrix, err := engine.ArrayAttr(make([]float64, 4)).WithShape(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Attr{
		{Name: "be", Value: engine.ArrayAttr([]int32{1, 2, 258})},
		{Name: "cmpd", Value: engine.RawAttr(engine.AttrScalar,
			engine.PackedCompound(engine.Field{Name: "a", Type: engine.Int32}, engine.Field{Name: "b", Type: engine.Float64}),
			append(binary.LittleEndian.AppendUint32(nil, 1), f64bytes(2)...))},
		{Name: "f16", Value: engine.RawAttr(engine.AttrScalar, engine.Float16, binary.LittleEndian.AppendUint16(nil, engine.Float16Bits(1.5)))},
		{Name: "f64s", Value: engine.ArrayAttr([]float64{0.5, -1e300})},
		{Name: "fixed", Value: engine.StringAttr("abc")},
		{Name: "flag", Value: engine.ScalarAttr(true)},
		{Name: "i16", Value: engine.ScalarAttr(int16(-300))},
		{Name: "matrix", Value: matrix},
		{Name: "padded", Value: engine.StringAttr("xy")},
		{Name: "ref", Value: engine.StringAttr("/")},
		{Name: ReferenceAttr + ":ref", Value: engine.StringAttr("object")},
		{Name: "strs", Value: strs},
		{Name: "u8s", Value: engine.ArrayAttr([]uint8{})},
		{Name: "vlen", Value: engine.StringAttr("température")},
		{Name: "void", Value: engine.BytesAttr([]byte{0, 0xff, 'z'})},
		{Name: "zbe", Value: engine.ArrayAttr([]complex128{1 + 2i, -0.5i})},
	}
	sameAttrs(t, "d", want, testfile.Attrs(t, ds))
	notes := strings.Join(rep.Datasets[0].AttrNotes, "\n")
	for _, w := range []string{"latin1: string is not valid UTF-8"} {
		if !strings.Contains(notes, w) {
			t.Errorf("report does not say %q:\n%s", w, notes)
		}
	}
	if n := rep.Datasets[0].AttrsNotImported; n != 1 {
		t.Errorf("%d attributes left behind, want 1:\n%s", n, notes)
	}
	if !strings.Contains(rep.String(), "attribute not imported: latin1: string is not valid UTF-8") {
		t.Errorf("report text:\n%s", rep)
	}
}

// TestAttrsIntegerRange: integer attributes keep their exact values at the
// edges of their types, in either byte order and with a precision below
// their size (HDF5 allows a 12-bit integer in 2 bytes): the import reads
// each into the scc type of its own class and size, so no value is out of
// the target's range and none is truncated.
func TestAttrsIntegerRange(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "r.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("d", data=np.arange(4, dtype="<u1"))
    a = d.attrs
    a["i8"] = np.array([-128, 127], dtype="i1")
    a["u8"] = np.array([0, 255], dtype="u1")
    a["i16be"] = np.array([-32768, 32767], dtype=">i2")
    a["u32be"] = np.array([4294967295], dtype=">u4")
    a["i64"] = np.array([-2**63, 2**63 - 1], dtype="<i8")
    a["u64be"] = np.array([2**64 - 1, 2**63], dtype=">u8")
    for name, base, vals in ((b"p12", h5py.h5t.STD_I16LE, [-2048, 2047]), (b"up12", h5py.h5t.STD_U16BE, [4095, 1])):
        t = base.copy()
        t.set_precision(12)
        at = h5py.h5a.create(d.id, name, t, h5py.h5s.create_simple((2,)))
        at.write(np.array(vals, dtype=base.dtype))
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "r.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Datasets[0].AttrsNotImported; n != 0 {
		t.Fatalf("left behind: %v", rep.Datasets[0].AttrNotes)
	}
	ds, err := f.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(ctx)
	sameAttrs(t, "d", []engine.Attr{
		{Name: "i16be", Value: engine.ArrayAttr([]int16{math.MinInt16, math.MaxInt16})},
		{Name: "i64", Value: engine.ArrayAttr([]int64{math.MinInt64, math.MaxInt64})},
		{Name: "i8", Value: engine.ArrayAttr([]int8{math.MinInt8, math.MaxInt8})},
		{Name: "p12", Value: engine.ArrayAttr([]int16{-2048, 2047})},
		{Name: "u32be", Value: engine.ArrayAttr([]uint32{math.MaxUint32})},
		{Name: "u64be", Value: engine.ArrayAttr([]uint64{math.MaxUint64, 1 << 63})},
		{Name: "u8", Value: engine.ArrayAttr([]uint8{0, math.MaxUint8})},
		{Name: "up12", Value: engine.ArrayAttr([]uint16{4095, 1})},
	}, testfile.Attrs(t, ds))
}

// TestAttrsReadBounded: the attributes of one object are read up to a
// total, not all into memory; past it they are left behind and named.
func TestAttrsReadBounded(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "big.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    d = f.create_dataset("d", data=np.arange(4, dtype="<u1"))
    d.attrs["a1"] = np.zeros(9 << 20, dtype="u1")
    d.attrs["a2"] = np.zeros(9 << 20, dtype="u1")
    d.attrs["a3"] = np.int32(7)
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "big.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(rep.Datasets[0].AttrNotes, "\n")
	if !strings.Contains(notes, "a2: not read: the object's attributes exceed") || rep.Datasets[0].AttrsNotImported != 2 {
		t.Fatalf("notes:\n%s", notes)
	}
	ds, err := f.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(ctx)
	sameAttrs(t, "d", []engine.Attr{{Name: "a3", Value: engine.ScalarAttr(int32(7))}}, testfile.Attrs(t, ds))
}
