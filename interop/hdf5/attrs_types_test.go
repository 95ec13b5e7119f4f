package hdf5

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// readTypedAttrsPy prints dataset "d"'s attributes as h5py and numpy see
// them: dtype, shape and values as text.
const readTypedAttrsPy = `
import sys, json, h5py, numpy as np
def text(x):
    if isinstance(x, bytes):
        return x.decode("utf-8")
    if isinstance(x, (complex, np.complexfloating)):
        return repr(complex(x))
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    return repr(x)
with h5py.File(sys.argv[1], "r") as f:
    out = {}
    for k in f["d"].attrs:
        a = np.asarray(f["d"].attrs[k])
        out[k] = {"dtype": a.dtype.str, "shape": list(a.shape), "values": [text(x) for x in a.ravel().tolist()]}
print(json.dumps(out))
`

// TestAttrsBoolComplexStringsRoundTrip: bool, complex and fixed-length
// string array attributes export with h5py's encodings (an int8 enum, a
// compound {r, i}, fixed-length strings), h5py reads their values, and
// importing the file gives the same attributes back.
func TestAttrsBoolComplexStringsRoundTrip(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := testfile.Create(t, filepath.Join(dir, "a.scc"), &engine.Options{NoSync: true})
	defer src.Close(ctx)
	ds, err := src.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(ctx)
	names, err := engine.FixedStringsAttr(engine.FixedString(4, engine.NullPad, engine.ASCII), "ab", "cdef", "")
	if err != nil {
		t.Fatal(err)
	}
	utf, err := engine.FixedStringsAttr(engine.FixedString(6, engine.NullTerm, engine.UTF8), "é", "x")
	if err != nil {
		t.Fatal(err)
	}
	spaced, err := engine.FixedStringsAttr(engine.FixedString(3, engine.SpacePad, engine.ASCII), "a", "bcd")
	if err != nil {
		t.Fatal(err)
	}
	attrs := []engine.Attr{
		{Name: "valid", Value: engine.ScalarAttr(true)},
		{Name: "mask", Value: engine.ArrayAttr([]bool{true, false, true})},
		{Name: "z64", Value: engine.ScalarAttr(complex64(1.5 - 2i))},
		{Name: "z128", Value: engine.ArrayAttr([]complex128{0, -0.25 + 1e300i})},
		{Name: "names", Value: names},
		{Name: "utf", Value: utf},
		{Name: "spaced", Value: spaced},
	}
	for _, a := range attrs {
		if err := ds.SetAttr(ctx, a.Name, a.Value); err != nil {
			t.Fatal(err)
		}
		if err := src.SetAttr(ctx, a.Name, a.Value); err != nil {
			t.Fatal(err)
		}
	}
	h5path := filepath.Join(dir, "a.h5")
	if _, err := Export(ctx, src, h5path, nil); err != nil {
		t.Fatal(err)
	}
	type pyAttr struct {
		Dtype  string   `json:"dtype"`
		Shape  []int    `json:"shape"`
		Values []string `json:"values"`
	}
	var got map[string]pyAttr
	if err := json.Unmarshal([]byte(runPython(t, readTypedAttrsPy, h5path)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]pyAttr{
		"valid":  {"|b1", []int{}, []string{"True"}},
		"mask":   {"|b1", []int{3}, []string{"True", "False", "True"}},
		"z64":    {"<c8", []int{}, []string{"(1.5-2j)"}},
		"z128":   {"<c16", []int{2}, []string{"0j", "(-0.25+1e+300j)"}},
		"names":  {"|S4", []int{3}, []string{"ab", "cdef", ""}},
		"utf":    {"|S6", []int{2}, []string{"é", "x"}},
		"spaced": {"|S3", []int{2}, []string{"a", "bcd"}}, // h5py strips the padding
	}
	for name, w := range want {
		g, ok := got[name]
		b, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if !ok || string(b) != string(wb) {
			t.Errorf("%s: h5py reads %s, want %s", name, b, wb)
		}
	}
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
