package zarr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestImportFillValuesAsZarrPython: fill values of the forms zarr-python
// reads but does not write (a bare 0 for a "|S1" array, as its own older
// fixtures hold, a number or text for longer "|S" arrays, a number for a
// bool) import as the value zarr-python reads for an unwritten chunk.
func TestImportFillValuesAsZarrPython(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "s.zarr")
	// Each array has its first chunk written and its second not, so the
	// reading shows the fill value; the fill is then patched in by hand.
	fills := map[string]struct{ dtype, fill string }{
		"s1zero":  {"|S1", "0"},
		"s4num":   {"|S4", "12.5"},
		"s8big":   {"|S8", "1e20"},
		"s3text":  {"|S3", `"abcdef"`},
		"s2int":   {"|S2", "123"},
		"s5true":  {"|S5", "true"},
		"b1two":   {"|b1", "2"},
		"s4b64":   {"|S4", `"YWI="`},
		"f8nan":   {"<f8", `"NaN"`},
		"f4text":  {"<f4", `"2.5"`},
		"c8pair":  {"<c8", `[1.5, "-2"]`},
		"i2float": {"<i2", "7.0"},
	}
	var names []string
	var py strings.Builder
	fmt.Fprintf(&py, "import json, zarr, numpy as np\ng = zarr.open_group(%q, mode='w')\n", store)
	for name, c := range fills {
		names = append(names, name)
		fmt.Fprintf(&py, "a = g.create(%q, shape=(4,), chunks=(2,), dtype=%q, compressor=None)\n", name, c.dtype)
		fmt.Fprintf(&py, "a[:2] = np.ones(2, dtype=%q)\n", c.dtype)
		// The fill value as the JSON text says, patched in after.
		fmt.Fprintf(&py, "p = %q\nm = json.load(open(p))\nm['fill_value'] = json.loads(%q)\njson.dump(m, open(p, 'w'))\n",
			filepath.Join(store, name, ".zarray"), c.fill)
	}
	if out, err := exec.Command(python, "-c", py.String()).CombinedOutput(); err != nil {
		t.Fatalf("zarr-python: %v: %s", err, out)
	}
	out := filepath.Join(dir, "out")
	must(t, os.Mkdir(out, 0o755))
	cmd := exec.Command(python, append([]string{filepath.Join(testdata(t), "zarr2.py"), "read", store, out}, names...)...)
	if b, err := cmd.Output(); err != nil {
		t.Fatalf("zarr-python read: %v: %s %s", err, b, stderr(err))
	}
	f := testfile.Create(t, filepath.Join(dir, "in.scc"), nil)
	defer f.Close(context.Background())
	rep, err := Import(bg, store, f, Options{})
	if err != nil || len(rep.Skipped) != 0 {
		t.Fatalf("import: %v (report %+v)", err, rep)
	}
	for i, name := range names {
		want, err := os.ReadFile(filepath.Join(out, fmt.Sprint(i)+".bin"))
		must(t, err)
		ds, err := f.OpenDataset(context.Background(), name, nil)
		must(t, err)
		if got := readAll(t, ds); !bytes.Equal(got, want) {
			t.Errorf("%s (fill %s): scc reads % x, zarr-python % x", name, fills[name].fill, got, want)
		}
	}
}

// TestImportSkipsCorruptArrays: an array whose metadata breaks the
// specification (a fill value out of its type's range, JSON that does not
// parse, a v3 document with no node type) is skipped and named with what
// is wrong, like an array scc cannot hold; the other arrays import. When
// every array is skipped the import fails with an error matching each
// one's (ErrCorrupt here).
func TestImportSkipsCorruptArrays(t *testing.T) {
	root := t.TempDir()
	v2 := filepath.Join(root, "v2")
	writeFile(t, filepath.Join(v2, ".zgroup"), `{"zarr_format":2}`)
	writeFile(t, filepath.Join(v2, "good", ".zarray"), strings.Replace(v2i4, "%s", "", 1))
	writeFile(t, filepath.Join(v2, "good", "0"), chunk8)
	writeFile(t, filepath.Join(v2, "fill", ".zarray"), strings.Replace(strings.Replace(v2i4, "%s", "", 1), `"fill_value":0`, `"fill_value":4294967296`, 1))
	writeFile(t, filepath.Join(v2, "fill", "0"), chunk8)
	writeFile(t, filepath.Join(v2, "json", ".zarray"), `{"zarr_format":2,`)
	writeFile(t, filepath.Join(v2, "g", "zarr.json"), `{"zarr_format":3,"node_type":"group"}`)
	writeFile(t, filepath.Join(v2, "g", "nt", "zarr.json"), strings.Replace(strings.Replace(v3i4, "%s", "", 1), `"node_type":"array",`, "", 1))
	writeFile(t, filepath.Join(v2, "g", "v3fill", "zarr.json"), strings.Replace(strings.Replace(v3i4, "%s", "", 1), `"fill_value":0`, `"fill_value":"x"`, 1))
	f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
	defer f.Close(context.Background())
	rep, err := Import(bg, v2, f, Options{})
	must(t, err)
	if len(rep.Datasets) != 1 || rep.Datasets[0].Name != "good" {
		t.Fatalf("imported %+v", rep.Datasets)
	}
	want := map[string]string{
		"fill": "4294967296 is out of range for int32", "json": ".zarray", "g/nt": `"node_type"`, "g/v3fill": "fill_value",
	}
	if len(rep.Skipped) != len(want) {
		t.Fatalf("skipped %+v", rep.Skipped)
	}
	for _, sk := range rep.Skipped {
		if w, ok := want[sk.Name]; !ok || !strings.Contains(sk.Reason, w) || !strings.Contains(sk.Reason, "corrupt") {
			t.Errorf("skipped %s: %q, want it to say %q", sk.Name, sk.Reason, want[sk.Name])
		}
	}
	if s := rep.Summary(); !strings.Contains(s, "SKIPPED fill: ") || !strings.Contains(s, "1 imported, 4 skipped") {
		t.Fatalf("summary:\n%s", s)
	}
	if got := testfile.DatasetNames(t, f); len(got) != 1 || got[0] != "good" {
		t.Fatalf("datasets %v", got)
	}
	// Nothing importable: the error is the skipped arrays'.
	only := filepath.Join(root, "only")
	v2Array(t, only, strings.Replace(strings.Replace(v2i4, "%s", "", 1), `"fill_value":0`, `"fill_value":[1]`, 1))
	g := testfile.Create(t, filepath.Join(root, "only.scc"), nil)
	defer g.Close(context.Background())
	if _, err := Import(bg, only, g, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "a: ") {
		t.Fatalf("import of a store of one corrupt array: %v", err)
	}
	if len(testfile.DatasetNames(t, g)) != 0 {
		t.Fatalf("datasets %v", testfile.DatasetNames(t, g))
	}
}

// TestExportSkipsUnmappedDatasets: a dataset Zarr cannot hold (UTF-8
// strings, a name Zarr reserves) is left out and named with why; the
// others export and zarr-python reads them. Strict refuses the export
// naming it and leaves no store.
func TestExportSkipsUnmappedDatasets(t *testing.T) {
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), nil)
	defer f.Close(context.Background())
	ok, err := f.CreateDataset(context.Background(), "ok", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{6}, Chunk: []uint64{4}})
	must(t, err)
	must(t, ok.Write(bg, engine.All([]uint64{6}), []byte{1, 2, 3, 4, 5, 6}))
	_, err = f.CreateDataset(context.Background(), "u8", engine.DatasetSpec{Type: engine.FixedString(8, engine.NullPad, engine.UTF8), Shape: []uint64{4}, Chunk: []uint64{2}})
	must(t, err)
	_, err = f.CreateDataset(context.Background(), ".zfoo", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{2}})
	must(t, err)
	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, fmt.Sprintf("v%d.zarr", v))
		if _, err := Export(bg, f, store, Options{Version: v, Strict: true}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "UTF-32") && !strings.Contains(err.Error(), "reserved") {
			t.Fatalf("v%d strict: %v", v, err)
		}
		if _, err := os.Stat(store); !os.IsNotExist(err) {
			t.Fatalf("v%d: a strict export that failed left a store (%v)", v, err)
		}
		rep, err := Export(bg, f, store, Options{Version: v})
		must(t, err)
		why := map[string]string{}
		for _, sk := range rep.Skipped {
			why[sk.Name] = sk.Reason
		}
		if len(rep.Datasets) != 1 || rep.Datasets[0].Name != "ok" || len(why) != 2 ||
			!strings.Contains(why["u8"], "UTF-32") || !strings.Contains(why[".zfoo"], "reserved") {
			t.Fatalf("v%d: report %+v", v, rep)
		}
		if s := rep.Summary(); !strings.Contains(s, "SKIPPED u8: ") || !strings.Contains(s, "1 exported, 2 skipped") {
			t.Fatalf("v%d summary:\n%s", v, s)
		}
		if _, err := os.Stat(filepath.Join(store, "u8")); !os.IsNotExist(err) {
			t.Fatalf("v%d: the skipped dataset left %v", v, err)
		}
		g := testfile.Create(t, filepath.Join(dir, fmt.Sprintf("back%d.scc", v)), nil)
		_, err = Import(bg, store, g, Options{})
		must(t, err)
		back, err := g.OpenDataset(context.Background(), "ok", nil)
		must(t, err)
		if got := readAll(t, back); !bytes.Equal(got, []byte{1, 2, 3, 4, 5, 6}) {
			t.Fatalf("v%d: read back % x", v, got)
		}
		must(t, g.Close(context.Background()))
	}
	zarrPython(t)
	out := t.TempDir()
	if b, err := exec.Command(python, filepath.Join(testdata(t), "zarr2.py"), "read", filepath.Join(dir, "v2.zarr"), out, "ok").Output(); err != nil {
		t.Fatalf("zarr-python read: %v: %s %s", err, b, stderr(err))
	}
	if got, err := os.ReadFile(filepath.Join(out, "0.bin")); err != nil || !bytes.Equal(got, []byte{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("zarr-python reads % x (%v)", got, err)
	}
}

// TestImportStrict: with Strict, an array that would be skipped fails the
// import naming it, before anything is written.
func TestImportStrict(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
	writeFile(t, filepath.Join(store, "good", ".zarray"), strings.Replace(v2i4, "%s", "", 1))
	writeFile(t, filepath.Join(store, "good", "0"), chunk8)
	writeFile(t, filepath.Join(store, "half", ".zarray"), `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<f16","fill_value":0,"order":"C","filters":null,"compressor":null}`)
	f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
	defer f.Close(context.Background())
	if _, err := Import(bg, store, f, Options{Strict: true}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"half"`) {
		t.Fatalf("strict import: %v", err)
	}
	if len(testfile.DatasetNames(t, f)) != 0 {
		t.Fatalf("a refused strict import wrote %v", testfile.DatasetNames(t, f))
	}
}
