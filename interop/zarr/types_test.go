package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// typeDefs are datasets of the non-numeric fixed-size types, each with a
// fill value that is not zero and a first chunk left unwritten (so it
// reads as the fill value through Zarr too).
func typeDefs() []dsDef {
	c64 := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))
	c64 = binary.LittleEndian.AppendUint32(c64, math.Float32bits(-2))
	c128 := binary.LittleEndian.AppendUint64(nil, 0x7ff8000000000000) // NaN
	c128 = binary.LittleEndian.AppendUint64(c128, math.Float64bits(math.Inf(-1)))
	return []dsDef{
		{"b", engine.DatasetSpec{Type: engine.Bool, Shape: []uint64{50, 7}, Chunk: []uint64{20, 4}, Filters: []engine.Filter{engine.Zstd(1)}, Fill: []byte{1}}, false, true},
		{"c64", engine.DatasetSpec{Type: engine.Complex64, Shape: []uint64{300}, Chunk: []uint64{64}, Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(3)}, Fill: c64}, false, true},
		{"c128", engine.DatasetSpec{Type: engine.Complex128, Shape: []uint64{9, 11}, Chunk: []uint64{4, 4}, Fill: c128}, false, true},
	}
}

// makeTypedFile writes typeDefs with valid elements (bools 0 or 1, finite
// complex parts) and attributes of the same types.
func makeTypedFile(t *testing.T, path string) {
	t.Helper()
	f := testfile.Create(t, path, nil)
	must(t, f.SetAttr(bg, "flag", engine.ScalarAttr(true)))
	must(t, f.SetAttr(bg, "z", engine.ArrayAttr([]complex128{1 + 2i, complex(math.Inf(1), -0.5)})))
	for _, d := range typeDefs() {
		ds, err := f.CreateDataset(context.Background(), d.name, d.spec)
		must(t, err)
		must(t, ds.SetAttr(bg, "mask", engine.ArrayAttr([]bool{true, false, true})))
		must(t, ds.SetAttr(bg, "z0", engine.ScalarAttr(complex64(3-1i))))
		start := make([]uint64, len(d.spec.Shape))
		count := append([]uint64{}, d.spec.Shape...)
		start[0] = d.spec.Chunk[0]
		count[0] -= d.spec.Chunk[0]
		n := 1
		for _, c := range count {
			n *= int(c)
		}
		switch d.spec.Type {
		case engine.Bool:
			v := make([]bool, n)
			for i := range v {
				v[i] = i%3 == 0
			}
			must(t, engine.WriteSlice(bg, ds, engine.Box(start, count), v))
		case engine.Complex64:
			v := make([]complex64, n)
			for i := range v {
				v[i] = complex(float32(i)/4, -float32(i%7))
			}
			must(t, engine.WriteSlice(bg, ds, engine.Box(start, count), v))
		case engine.Complex128:
			v := make([]complex128, n)
			for i := range v {
				v[i] = complex(float64(i)*1e-3, float64(i%5)*1e200)
			}
			must(t, engine.WriteSlice(bg, ds, engine.Box(start, count), v))
		}
	}
	must(t, f.Close(context.Background()))
}

// TestRoundTripBoolComplex: bool and complex datasets (their elements,
// fill values and attributes of those types) cross to Zarr v2 and v3 and
// back unchanged, with the dtypes and fill forms the Zarr specifications
// name.
func TestRoundTripBoolComplex(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	makeTypedFile(t, src)
	f, err := engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
	must(t, err)
	defer f.Close(context.Background())
	wantMeta := map[int]map[string]string{
		2: {"b": `"|b1" true`, "c64": `"<c8" ["1.5","-2"]`, "c128": `"<c16" ["NaN","-Infinity"]`},
		3: {"b": `"bool" true`, "c64": `"complex64" ["1.5","-2"]`, "c128": `"complex128" ["NaN","-Infinity"]`},
	}
	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, "store"+string(rune('0'+v)))
		_, err := Export(bg, f, store, Options{Version: v})
		must(t, err)
		for name, want := range wantMeta[v] {
			doc, key := ".zarray", "dtype"
			if v == 3 {
				doc, key = "zarr.json", "data_type"
			}
			b, err := os.ReadFile(filepath.Join(store, name, doc))
			must(t, err)
			var m map[string]any
			must(t, json.Unmarshal(b, &m))
			fill, _ := json.Marshal(m["fill_value"])
			if got := fmt.Sprintf("%q %s", m[key], jsonFloatsAsStrings(fill)); got != want {
				t.Errorf("v%d %s: dtype and fill %s, want %s", v, name, got, want)
			}
		}
		g := testfile.Create(t, filepath.Join(dir, "back"+string(rune('0'+v))+".scc"), nil)
		_, err = Import(bg, store, g, Options{})
		must(t, err)
		sameAttrs(t, "file", testfile.Attrs(t, f), testfile.Attrs(t, g))
		for _, d := range typeDefs() {
			a, err := f.OpenDataset(context.Background(), d.name, nil)
			must(t, err)
			b, err := g.OpenDataset(context.Background(), d.name, nil)
			must(t, err)
			if a.Type() != b.Type() || !bytes.Equal(a.Fill(), b.Fill()) {
				t.Errorf("v%d %s: type %v fill %x after the round trip, want %v %x", v, d.name, b.Type(), b.Fill(), a.Type(), a.Fill())
			}
			if !bytes.Equal(readAll(t, a), readAll(t, b)) {
				t.Errorf("v%d %s: elements differ after the round trip", v, d.name)
			}
			sameAttrs(t, d.name, testfile.Attrs(t, a), testfile.Attrs(t, b))
		}
		must(t, g.Close(context.Background()))
	}
}

// jsonFloatsAsStrings renders a fill value with its numbers quoted, so a
// pair compares the same whether its parts were numbers or the special
// float strings.
func jsonFloatsAsStrings(b []byte) string {
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&x)
	if l, ok := x.([]any); ok {
		for i, e := range l {
			if n, ok := e.(json.Number); ok {
				f, _ := n.Float64()
				l[i] = strconv.FormatFloat(f, 'g', -1, 64)
			}
		}
	}
	out, _ := json.Marshal(x)
	return string(out)
}

// sameElems compares element bytes, a NaN float part equal to any other
// NaN: zarr-python 2 builds a complex fill value as re + 1j*im, which
// gives the NaN real part another sign bit.
func sameElems(a, b []byte, t engine.Type) bool {
	if t != engine.Complex128 || len(a) != len(b) {
		return bytes.Equal(a, b)
	}
	for i := 0; i < len(a); i += 8 {
		x := math.Float64frombits(binary.LittleEndian.Uint64(a[i:]))
		y := math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
		if !(math.IsNaN(x) && math.IsNaN(y)) && math.Float64bits(x) != math.Float64bits(y) {
			return false
		}
	}
	return true
}

// TestZarrPythonReadsBoolComplex: zarr-python reads the v2 export of bool
// and complex datasets as numpy bool and complex arrays with scc's
// elements and fill values.
func TestZarrPythonReadsBoolComplex(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	makeTypedFile(t, src)
	f, err := engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
	must(t, err)
	defer f.Close(context.Background())
	store := filepath.Join(dir, "store")
	_, err = Export(bg, f, store, Options{Version: 2})
	must(t, err)
	out := filepath.Join(dir, "out")
	must(t, os.Mkdir(out, 0o755))
	var names []string
	for _, d := range typeDefs() {
		names = append(names, d.name)
	}
	raw, err := exec.Command(python, append([]string{filepath.Join(testdata(t), "zarr2.py"), "read", store, out}, names...)...).Output()
	if err != nil {
		t.Fatalf("zarr-python read: %v: %s", err, stderr(err))
	}
	var res struct {
		Arrays []struct {
			Dtype string          `json:"dtype"`
			Fill  json.RawMessage `json:"fill_value"`
		} `json:"arrays"`
	}
	must(t, json.Unmarshal(raw, &res))
	wantDtype := []string{"|b1", "<c8", "<c16"}
	wantFill := []string{`true`, `["1.5","-2"]`, `["nan","-inf"]`}
	for i, name := range names {
		ds, err := f.OpenDataset(context.Background(), name, nil)
		must(t, err)
		got, err := os.ReadFile(filepath.Join(out, string(rune('0'+i))+".bin"))
		must(t, err)
		if w := readAll(t, ds); !sameElems(got, w, ds.Type()) {
			t.Errorf("%s: zarr-python's elements differ from scc's (%d vs %d bytes)", name, len(got), len(w))
		}
		if res.Arrays[i].Dtype != wantDtype[i] {
			t.Errorf("%s: zarr-python's dtype %s, want %s", name, res.Arrays[i].Dtype, wantDtype[i])
		}
		if g := jsonFloatsAsStrings(res.Arrays[i].Fill); g != wantFill[i] {
			t.Errorf("%s: zarr-python's fill value %s, want %s", name, g, wantFill[i])
		}
	}
}

// TestImportBigEndianComplex: a ">c8" array's elements swap each float
// part on its own (not the 8-byte element as one number), and ">b1" is
// the same as "|b1".
func TestImportBigEndianComplex(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.zarr")
	must(t, os.MkdirAll(filepath.Join(store, "c"), 0o755))
	must(t, os.MkdirAll(filepath.Join(store, "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(store, ".zgroup"), []byte(`{"zarr_format":2}`), 0o644))
	must(t, os.WriteFile(filepath.Join(store, "c", ".zarray"), []byte(`{"zarr_format":2,"shape":[2],"chunks":[2],"dtype":">c8",
		"fill_value":[0.5,"-Infinity"],"order":"C","filters":null,"compressor":null}`), 0o644))
	must(t, os.WriteFile(filepath.Join(store, "b", ".zarray"), []byte(`{"zarr_format":2,"shape":[3],"chunks":[3],"dtype":">b1",
		"fill_value":false,"order":"C","filters":null,"compressor":null}`), 0o644))
	var be []byte
	for _, x := range []float32{1, -2, 3.5, 4} {
		be = binary.BigEndian.AppendUint32(be, math.Float32bits(x))
	}
	must(t, os.WriteFile(filepath.Join(store, "c", "0"), be, 0o644))
	must(t, os.WriteFile(filepath.Join(store, "b", "0"), []byte{1, 0, 1}, 0o644))
	g := testfile.Create(t, filepath.Join(t.TempDir(), "g.scc"), nil)
	defer g.Close(context.Background())
	_, err := Import(bg, store, g, Options{})
	must(t, err)
	ds, err := g.OpenDataset(context.Background(), "c", nil)
	must(t, err)
	got := make([]complex64, 2)
	must(t, engine.ReadSlice(bg, ds, engine.All(ds.Shape()), got))
	if got[0] != complex(1, -2) || got[1] != complex(3.5, 4) {
		t.Errorf(">c8 elements %v, want [(1-2i) (3.5+4i)]", got)
	}
	if want := append(binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5)), 0, 0, 0x80, 0xff); !bytes.Equal(ds.Fill(), want) {
		t.Errorf(">c8 fill %x, want %x", ds.Fill(), want)
	}
	bs, err := g.OpenDataset(context.Background(), "b", nil)
	must(t, err)
	bv := make([]bool, 3)
	must(t, engine.ReadSlice(bg, bs, engine.All(bs.Shape()), bv))
	if bs.Type() != engine.Bool || !bv[0] || bv[1] || !bv[2] {
		t.Errorf(">b1: %v %v", bs.Type(), bv)
	}
}

// TestStringsRoundTrip: a NUL-padded fixed-length string dataset crosses
// as "|S<n>" (v2) and null_terminated_bytes (v3) with its fill value (the
// base64 of its bytes) and back to the same type, elements and fill; and
// zarr-python reads the v2 export as numpy bytes with scc's elements and
// fill value.
func TestStringsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	typ := engine.FixedString(5, engine.NullPad, engine.ASCII)
	f := testfile.Create(t, src, nil)
	fill, err := engine.EncodeString(typ, "ab")
	must(t, err)
	ds, err := f.CreateDataset(context.Background(), "s", engine.DatasetSpec{Type: typ, Shape: []uint64{7, 3}, Chunk: []uint64{3, 2}, Fill: fill, Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}})
	must(t, err)
	must(t, ds.WriteStrings(bg, engine.Box([]uint64{3, 0}, []uint64{4, 3}), []string{"", "x", "hello", "a\x00b", "12345", "z", "", "q", "w", "e", "r", "t"}))
	names, err := engine.FixedStringsAttr(engine.FixedString(6, engine.SpacePad, engine.UTF8), "αβ", "x")
	must(t, err)
	must(t, ds.SetAttr(bg, "names", names))
	must(t, ds.SetAttr(bg, "unit", engine.RawAttr(engine.AttrScalar, engine.FixedString(4, engine.NullTerm, engine.ASCII), []byte("ab\x00\x00"))))
	must(t, f.Close(context.Background()))
	f, err = engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
	must(t, err)
	defer f.Close(context.Background())
	a, err := f.OpenDataset(context.Background(), "s", nil)
	must(t, err)
	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, "store"+string(rune('0'+v)))
		_, err := Export(bg, f, store, Options{Version: v})
		must(t, err)
		doc, key, want := ".zarray", "dtype", `"|S5"`
		if v == 3 {
			doc, key, want = "zarr.json", "data_type", `{"configuration":{"length_bytes":5},"name":"null_terminated_bytes"}`
		}
		b, err := os.ReadFile(filepath.Join(store, "s", doc))
		must(t, err)
		var m map[string]any
		must(t, json.Unmarshal(b, &m))
		var dt bytes.Buffer
		enc := json.NewEncoder(&dt)
		enc.SetEscapeHTML(false)
		must(t, enc.Encode(m[key]))
		if got := strings.TrimSpace(dt.String()); got != want || m["fill_value"] != "YWIAAAA=" {
			t.Errorf("v%d: data type %s fill %v, want %s and base64 of \"ab\\0\\0\\0\"", v, got, m["fill_value"], want)
		}
		g := testfile.Create(t, filepath.Join(dir, "back"+string(rune('0'+v))+".scc"), nil)
		_, err = Import(bg, store, g, Options{})
		must(t, err)
		b2, err := g.OpenDataset(context.Background(), "s", nil)
		must(t, err)
		if b2.Type() != typ || !bytes.Equal(b2.Fill(), fill) || !bytes.Equal(readAll(t, a), readAll(t, b2)) {
			t.Errorf("v%d: type %v fill %q after the round trip, or elements differ", v, b2.Type(), b2.Fill())
		}
		sameAttrs(t, "s", testfile.Attrs(t, a), testfile.Attrs(t, b2))
		must(t, g.Close(context.Background()))
	}
	zarrPython(t)
	out := filepath.Join(dir, "out")
	must(t, os.Mkdir(out, 0o755))
	raw, err := exec.Command(python, filepath.Join(testdata(t), "zarr2.py"), "read", filepath.Join(dir, "store2"), out, "s").Output()
	if err != nil {
		t.Fatalf("zarr-python read: %v: %s", err, stderr(err))
	}
	var res struct {
		Arrays []struct {
			Dtype string         `json:"dtype"`
			FillV []int          `json:"fill_value"`
			Attrs map[string]any `json:"attributes"`
		} `json:"arrays"`
	}
	must(t, json.Unmarshal(raw, &res))
	got, err := os.ReadFile(filepath.Join(out, "0.bin"))
	must(t, err)
	if !bytes.Equal(got, readAll(t, a)) {
		t.Errorf("zarr-python's elements differ from scc's")
	}
	if r := res.Arrays[0]; r.Dtype != "|S5" || fmt.Sprint(r.FillV) != "[97 98]" || fmt.Sprint(r.Attrs["names"]) != "[αβ x]" || r.Attrs["unit"] != "ab" {
		t.Errorf("zarr-python: dtype %s fill %v attributes %v, want |S5, b'ab', names [αβ x] and unit ab", r.Dtype, r.FillV, r.Attrs)
	}
}

// TestExportRefusesInexactStringAttr: a string attribute whose bytes its
// text would not give back (bytes after the NUL of a NUL-terminated
// string, as a raw write may leave) is refused, not exported changed.
func TestExportRefusesInexactStringAttr(t *testing.T) {
	f := testfile.Create(t, filepath.Join(t.TempDir(), "src.scc"), nil)
	defer f.Close(context.Background())
	must(t, f.SetAttr(bg, "u", engine.RawAttr(engine.AttrScalar, engine.FixedString(4, engine.NullTerm, engine.ASCII), []byte("a\x00zz"))))
	if _, err := Export(bg, f, filepath.Join(t.TempDir(), "s.zarr"), Options{Version: 2}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "does not give back") {
		t.Fatalf("export: %v, want ErrUnsupported", err)
	}
}
