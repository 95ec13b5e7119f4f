package hdf5

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// layoutsFile builds an scc file with one dataset of every layout Export
// writes through values, and one of every non-numeric element type.
func layoutsFile(t *testing.T, path string) *engine.File {
	t.Helper()
	ctx := context.Background()
	f := testfile.Create(t, path, &engine.Options{NoSync: true})
	mk := func(name string, spec engine.DatasetSpec) *engine.Dataset {
		ds, err := f.CreateDataset(ctx, name, spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return ds
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Contiguous: 70 rows of 3 int32, a fill value, the middle written.
	c := mk("contig", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{70, 3}, Layout: engine.Contiguous, Fill: []byte{7, 0, 0, 0}})
	must(c.Write(ctx, engine.Box([]uint64{10, 0}, []uint64{40, 3}), pattern(engine.Int32, 120, 3)))
	// Variable-length bytes, one chunk never written, empty elements.
	v := mk("grp/vlen", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{9, 4}, MaxShape: []uint64{engine.Unlimited, 4}, Chunk: []uint64{4, 2}, Layout: engine.Vlen})
	vals := make([][]byte, 6*4)
	for i := range vals {
		for k := 0; k < i%5; k++ {
			vals[i] = append(vals[i], byte(i*7+k))
		}
	}
	must(v.WriteVlen(ctx, engine.Box([]uint64{0, 0}, []uint64{6, 4}), vals))
	// Variable-length sequences of float32.
	vf := mk("vlenf", engine.DatasetSpec{Type: engine.Float32, Shape: []uint64{5}, Chunk: []uint64{2}, Layout: engine.Vlen})
	must(vf.WriteVlen(ctx, engine.Box([]uint64{0}, []uint64{3}), [][]byte{f32bytes(1.5), nil, append(f32bytes(-2), f32bytes(3.25)...)}))
	// Sparse float64: a few defined elements, one of them the fill value,
	// one chunk defined then erased.
	s := mk("sparse", engine.DatasetSpec{Type: engine.Float64, Shape: []uint64{20, 30}, Chunk: []uint64{8, 8}, Layout: engine.Sparse, Fill: f64bytes(-1), Filters: []engine.Filter{engine.Zlib(3)}})
	must(s.Write(ctx, engine.Box([]uint64{1, 2}, []uint64{2, 3}), pattern(engine.Float64, 6, 1)))
	must(s.Write(ctx, engine.Box([]uint64{19, 29}, []uint64{1, 1}), f64bytes(-1)))
	must(s.Write(ctx, engine.Box([]uint64{10, 10}, []uint64{1, 1}), f64bytes(42)))
	must(s.Write(ctx, engine.Box([]uint64{17, 9}, []uint64{1, 1}), f64bytes(5)))
	must(s.Erase(ctx, engine.Box([]uint64{17, 9}, []uint64{1, 1})))
	// Element types, chunked (raw chunk copies) and contiguous.
	b := mk("bool", engine.DatasetSpec{Type: engine.Bool, Shape: []uint64{11}, Chunk: []uint64{4}, Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(1)}, Fill: []byte{1}})
	must(b.Write(ctx, engine.Box([]uint64{0}, []uint64{6}), []byte{0, 1, 1, 0, 0, 1}))
	c64 := mk("c64", engine.DatasetSpec{Type: engine.Complex64, Shape: []uint64{5, 3}, Chunk: []uint64{2, 2}, Filters: []engine.Filter{engine.Shuffle()}})
	var cb []byte
	for i := 0; i < 15; i++ {
		cb = append(cb, f32bytes(float32(i)+0.5)...)
		cb = append(cb, f32bytes(-float32(i))...)
	}
	must(c64.Write(ctx, engine.Box([]uint64{0, 0}, []uint64{5, 3}), cb))
	c128 := mk("c128", engine.DatasetSpec{Type: engine.Complex128, Shape: []uint64{4}, Layout: engine.Contiguous})
	var cb2 []byte
	for i := 0; i < 4; i++ {
		cb2 = append(cb2, f64bytes(float64(i)*1.25)...)
		cb2 = append(cb2, f64bytes(float64(-i)-0.5)...)
	}
	must(c128.Write(ctx, engine.Box([]uint64{0}, []uint64{4}), cb2))
	texts := []string{"a", "", "héllo", "abcdef", "x y"}
	for _, st := range []struct {
		name string
		pad  engine.StrPad
		cs   engine.Charset
	}{{"s/nullterm", engine.NullTerm, engine.UTF8}, {"s/nullpad", engine.NullPad, engine.ASCII}, {"s/spacepad", engine.SpacePad, engine.UTF8}} {
		d := mk(st.name, engine.DatasetSpec{Type: engine.FixedString(7, st.pad, st.cs), Shape: []uint64{5}, Chunk: []uint64{2}, Filters: []engine.Filter{engine.Zlib(2)}})
		tx := texts
		if st.cs == engine.ASCII {
			tx = []string{"a", "", "hello", "abcdef", "x y"}
		}
		must(d.WriteStrings(ctx, engine.Box([]uint64{0}, []uint64{5}), tx))
	}
	// Virtual: two sources side by side, the second shorter than its
	// mapping (the rest reads as the fill value), one strided mapping.
	s1 := mk("vsrc/a", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{6, 4}, Chunk: []uint64{3, 4}})
	must(s1.Write(ctx, engine.Box([]uint64{0, 0}, []uint64{6, 4}), pattern(engine.Int16, 24, 5)))
	s2 := mk("vsrc/b", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{4, 4}, Layout: engine.Contiguous})
	must(s2.Write(ctx, engine.Box([]uint64{0, 0}, []uint64{4, 4}), pattern(engine.Int16, 16, 9)))
	if _, err := f.CreateVirtualDataset(ctx, "virt", engine.VirtualSpec{Type: engine.Int16, Shape: []uint64{6, 10}, Fill: []byte{0xff, 0x7f}, Mappings: []engine.VirtualMapping{
		{Virtual: engine.Box([]uint64{0, 0}, []uint64{6, 4}), Dataset: "vsrc/a", Source: engine.Box([]uint64{0, 0}, []uint64{6, 4})},
		{Virtual: engine.Box([]uint64{0, 4}, []uint64{6, 4}), Dataset: "vsrc/b", Source: engine.Box([]uint64{0, 0}, []uint64{6, 4})},
		{Virtual: engine.Hyperslab([]uint64{0, 8}, []uint64{2, 1}, []uint64{3, 1}, []uint64{1, 1}), Dataset: "vsrc/a", Source: engine.Box([]uint64{1, 1}, []uint64{3, 1})},
	}}); err != nil {
		t.Fatal(err)
	}
	// Committed: File.VirtualSpec reads the stored header.
	must(f.Flush(ctx))
	// Written after the commit, still only in the cache: export sees them
	// as the engine's reads do.
	must(v.WriteVlen(ctx, engine.Box([]uint64{8, 3}, []uint64{1, 1}), [][]byte{[]byte("late")}))
	must(s.Write(ctx, engine.Box([]uint64{18, 0}, []uint64{1, 2}), append(f64bytes(8), f64bytes(9)...)))
	return f
}

// engineValues is the engine's own read of every dataset of f, in the
// form the h5py check compares: numbers as JSON numbers, booleans, complex
// as [re, im], strings as hex of their text, vlen as lists of numbers, and
// for a sparse dataset the defined mask.
func engineValues(t *testing.T, f *engine.File) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for _, name := range testfile.DatasetNames(t, f) {
		ds, err := f.OpenDataset(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		shape := ds.Shape()
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		all := engine.Box(make([]uint64, len(shape)), shape)
		e := map[string]any{"shape": shape, "layout": ds.Layout().String()}
		typ := ds.Type()
		switch {
		case ds.Layout() == engine.Vlen:
			vals, err := ds.ReadVlen(ctx, all)
			if err != nil {
				t.Fatal(err)
			}
			var l []string
			for _, v := range vals {
				l = append(l, hex.EncodeToString(v))
			}
			e["kind"], e["values"], e["dtype"] = "vlen", l, dtypeOf(typ)
		case typ.IsString():
			vals, err := ds.ReadStrings(ctx, all)
			if err != nil {
				t.Fatal(err)
			}
			var l []string
			for _, v := range vals {
				l = append(l, hex.EncodeToString([]byte(v)))
			}
			e["kind"], e["values"] = "string", l
			e["size"], e["pad"], e["utf8"] = typ.StrLen(), int(typ.Pad()), typ.Charset() == engine.UTF8
		default:
			buf := make([]byte, n*uint64(typ.Size()))
			if err := ds.Read(ctx, all, buf); err != nil {
				t.Fatal(err)
			}
			e["kind"], e["dtype"], e["values"] = "raw", map[engine.Type]string{engine.Bool: "bool", engine.Complex64: "<c8", engine.Complex128: "<c16"}[typ], hex.EncodeToString(buf)
			if e["dtype"] == "" {
				e["dtype"] = dtypeOf(typ)
			}
			if ds.Layout() == engine.Sparse {
				pos, err := ds.DefinedElements(ctx, all)
				if err != nil {
					t.Fatal(err)
				}
				e["defined"] = pos
			}
		}
		out[name] = e
		ds.Close(ctx)
	}
	return out
}

const checkLayoutsPy = `
import sys, json, h5py, numpy as np
want = json.load(open(sys.argv[2]))
with h5py.File(sys.argv[1], "r") as f:
    for name, w in want.items():
        d = f[name]
        assert list(d.shape) == w["shape"], (name, d.shape)
        lay = d.id.get_create_plist().get_layout()
        if w["layout"] == "virtual":
            assert lay == h5py.h5d.VIRTUAL, (name, lay)
        elif w["layout"] == "contiguous":
            assert lay == h5py.h5d.CONTIGUOUS, (name, lay)
        else:
            assert lay == h5py.h5d.CHUNKED, (name, lay)
        if w["kind"] == "vlen":
            assert h5py.check_vlen_dtype(d.dtype) == np.dtype(w["dtype"]), (name, d.dtype)
            got = [np.asarray(x, dtype=w["dtype"]).tobytes().hex() for x in d[()].ravel()]
            assert got == w["values"], (name, got, w["values"])
        elif w["kind"] == "string":
            t = d.id.get_type()
            assert d.dtype.kind == "S" and d.dtype.itemsize == w["size"], (name, d.dtype)
            assert t.get_strpad() == w["pad"], (name, t.get_strpad())
            assert t.get_cset() == (h5py.h5t.CSET_UTF8 if w["utf8"] else h5py.h5t.CSET_ASCII), (name, t.get_cset())
            got = [x.rstrip(b"\0" if w["pad"] != 2 else b" ").split(b"\0")[0].hex() for x in d[()].ravel()]
            assert got == w["values"], (name, got, w["values"])
        else:
            assert d.dtype == np.dtype(w["dtype"]), (name, d.dtype, w["dtype"])
            got = np.ascontiguousarray(d[()]).ravel()
            exp = np.frombuffer(bytes.fromhex(w["values"]), dtype=w["dtype"])
            assert got.tobytes() == exp.tobytes(), (name, got, exp)
            if "defined" in w:
                a = d.attrs["scc:defined"]
                a = a.decode() if isinstance(a, bytes) else a
                m = f[a]
                assert m.dtype == np.dtype(bool) and m.shape == d.shape, (name, m.dtype)
                pos = np.flatnonzero(m[()].ravel()).tolist()
                assert pos == w["defined"], (name, pos, w["defined"])
print("ok", len(want))
`

// TestExportLayoutsReadByH5py: contiguous, variable-length and sparse
// datasets, and Bool, complex and fixed-length string elements, export to
// HDF5, and h5py reads every element as the engine reads it (the defined
// set of a sparse dataset included).
func TestExportLayoutsReadByH5py(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	f := layoutsFile(t, filepath.Join(dir, "src.scc"))
	defer f.Close(ctx)
	out := filepath.Join(dir, "out.h5")
	if _, err := Export(ctx, f, out, nil); err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(engineValues(t, f))
	if err != nil {
		t.Fatal(err)
	}
	wp := filepath.Join(dir, "want.json")
	if err := os.WriteFile(wp, want, 0o644); err != nil {
		t.Fatal(err)
	}
	runPython(t, checkLayoutsPy, out, wp)
}

// TestImportBackLayouts: importing the export of TestExportLayoutsReadByH5py
// gives back the element types (Bool, complex, fixed-length strings with
// their padding and charset), every value, and a sparse dataset with the
// same defined set; the defined set's companion is not imported as a
// dataset, and its attribute not as an attribute. Variable-length HDF5
// datasets are not imported (scc's importer leaves them out, saying why).
func TestImportBackLayouts(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	f := layoutsFile(t, filepath.Join(dir, "src.scc"))
	defer f.Close(ctx)
	out := filepath.Join(dir, "out.h5")
	if _, err := Export(ctx, f, out, nil); err != nil {
		t.Fatal(err)
	}
	g := testfile.Create(t, filepath.Join(dir, "back.scc"), &engine.Options{NoSync: true})
	defer g.Close(ctx)
	rep, err := Import(ctx, out, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 0 {
		t.Fatalf("skipped %+v", rep.Skipped)
	}
	want, got := engineValues(t, f), engineValues(t, g)
	for name, w := range want {
		gv, ok := got[name]
		if !ok {
			t.Errorf("%s not imported", name)
			continue
		}
		wm, gm := w.(map[string]any), gv.(map[string]any)
		if wm["layout"] == "contiguous" {
			gm["layout"] = "contiguous" // imported chunked: values compared below
		}
		wj, _ := json.Marshal(wm)
		gj, _ := json.Marshal(gm)
		if string(wj) != string(gj) {
			t.Errorf("%s:\n got %s\nwant %s", name, gj, wj)
		}
		delete(got, name)
	}
	if len(got) != 0 {
		t.Errorf("imported more datasets than exported: %v", got)
	}
	for _, name := range []string{"sparse", "bool", "c64", "c128", "s/nullterm", "s/nullpad", "s/spacepad"} {
		a, _ := f.OpenDataset(ctx, name, nil)
		b, err := g.OpenDataset(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Type() != b.Type() || a.Layout() == engine.Sparse && b.Layout() != engine.Sparse {
			t.Errorf("%s: type %v layout %v, want %v %v", name, b.Type(), b.Layout(), a.Type(), a.Layout())
		}
		if _, err := b.Attr(DefinedAttr); err == nil {
			t.Errorf("%s: the export's %s attribute was imported", name, DefinedAttr)
		}
		a.Close(ctx)
		b.Close(ctx)
	}
}

// TestSparseBookkeepingRefusals: names and attributes export uses to record
// a sparse dataset's defined set are refused in scc files (nothing is
// written), and on import a dataset whose defined set is not a boolean
// dataset of its extent and chunk shape, or lies outside the prefix, is
// left out with the reason rather than imported dense.
func TestSparseBookkeepingRefusals(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	for i, mk := range []func(f *engine.File) error{
		func(f *engine.File) error {
			_, err := f.CreateDataset(ctx, DefinedPrefix+"x", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{2}})
			return err
		},
		func(f *engine.File) error {
			ds, err := f.CreateDataset(ctx, "x", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{2}, Layout: engine.Sparse})
			if err != nil {
				return err
			}
			return ds.SetAttr(ctx, DefinedAttr, engine.StringAttr("mine"))
		},
	} {
		f := testfile.Create(t, filepath.Join(dir, fmt.Sprintf("%d.scc", i)), &engine.Options{NoSync: true})
		if err := mk(f); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, fmt.Sprintf("%d.h5", i))
		if _, err := Export(ctx, f, out, nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("case %d: %v, want ErrUnsupported", i, err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("case %d: refused export left %s", i, out)
		}
		f.Close(ctx)
	}
	h5path := filepath.Join(dir, "bad.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    a = f.create_dataset("shape", data=np.arange(8, dtype="<i4"), chunks=(4,))
    a.attrs["scc:defined"] = ".scc/defined/shape"
    f.create_dataset(".scc/defined/shape", data=np.ones(6, dtype=bool), chunks=(4,))
    b = f.create_dataset("type", data=np.arange(8, dtype="<i4"), chunks=(4,))
    b.attrs["scc:defined"] = ".scc/defined/type"
    f.create_dataset(".scc/defined/type", data=np.ones(8, dtype="u1"), chunks=(4,))
    c = f.create_dataset("outside", data=np.arange(8, dtype="<i4"), chunks=(4,))
    c.attrs["scc:defined"] = "ok"
    f.create_dataset("ok", data=np.ones(8, dtype=bool), chunks=(4,))
`, h5path)
	g := testfile.Create(t, filepath.Join(dir, "g.scc"), &engine.Options{NoSync: true})
	defer g.Close(ctx)
	rep, err := Import(ctx, h5path, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, s := range rep.Skipped {
		reasons[s.Path] = s.Reason
	}
	for path, want := range map[string]string{"/shape": "not a boolean dataset of the same extent", "/type": "not a boolean dataset", "/outside": "outside " + DefinedPrefix} {
		if !strings.Contains(reasons[path], want) {
			t.Errorf("%s: skip reason %q, want one naming %q", path, reasons[path], want)
		}
	}
	if n := testfile.DatasetNames(t, g); len(n) != 1 || n[0] != "ok" {
		t.Errorf("imported %v, want only ok", n)
	}
}
