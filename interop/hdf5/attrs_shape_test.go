package hdf5

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

func shaped(t *testing.T, v engine.AttrValue, dims ...uint64) engine.AttrValue {
	t.Helper()
	w, err := v.WithShape(dims...)
	require.NoError(t, err)
	return w
}

// TestAttrsShapedAndNullImportFromH5py: attributes of 2 or more dimensions
// (numbers in either byte order, strings, compounds, a zero dimension) and
// over a null dataspace (h5py's Empty of numbers, fixed and variable-length
// strings and compounds) import with their shape, type and values.
func TestAttrsShapedAndNullImportFromH5py(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "s.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["grid"] = np.arange(6, dtype="<i2").reshape(2, 3)
    f.attrs["none"] = h5py.Empty("f4")
    d = f.create_dataset("d", data=np.arange(4, dtype="u1"))
    a = d.attrs
    a["cube"] = np.arange(8, dtype=">f8").reshape(2, 2, 2) / 4
    a["strs"] = np.array([[b"ab", b"c"], [b"d", b"efg"]])
    a["vstrs"] = np.array([["x", "yz"], ["", "w"]], dtype=h5py.string_dtype())
    a["cmpd"] = np.array([[(1, 2.0)], [(3, 4.0)]], dtype=[("a", "<i4"), ("b", "<f8")])
    a["flat0"] = np.zeros((0, 3), dtype="<u4")
    a["e_i8"] = h5py.Empty("<i8")
    a["e_be"] = h5py.Empty(">u2")
    a["e_s"] = h5py.Empty("S5")
    a["e_str"] = h5py.Empty(h5py.string_dtype())
    a["e_cmpd"] = h5py.Empty(np.dtype([("a", "<i4"), ("b", "<f8")]))
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "s.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	require.NoError(t, err)
	assert.Zero(t, rep.RootAttrsNotImported, "%v", rep.RootAttrNotes)
	require.Len(t, rep.Datasets, 1)
	assert.Zero(t, rep.Datasets[0].AttrsNotImported, "%v", rep.Datasets[0].AttrNotes)

	sameAttrs(t, "root", []engine.Attr{
		{Name: "grid", Value: shaped(t, engine.ArrayAttr([]int16{0, 1, 2, 3, 4, 5}), 2, 3)},
		{Name: "none", Value: engine.NullAttr(engine.Float32)},
	}, testfile.Attrs(t, f))

	ds, err := f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	defer ds.Close(ctx)
	strs, err := engine.FixedStringsAttr(engine.FixedString(3, engine.NullPad, engine.ASCII), "ab", "c", "d", "efg")
	require.NoError(t, err)
	vstrs, err := engine.FixedStringsAttr(engine.FixedString(2, engine.NullPad, engine.UTF8), "x", "yz", "", "w")
	require.NoError(t, err)
	rec := engine.PackedCompound(engine.Field{Name: "a", Type: engine.Int32}, engine.Field{Name: "b", Type: engine.Float64})
	var recs []byte
	for _, r := range [][2]float64{{1, 2}, {3, 4}} {
		recs = append(recs, byte(r[0]), 0, 0, 0)
		recs = append(recs, f64bytes(r[1])...)
	}
	sameAttrs(t, "d", []engine.Attr{
		{Name: "cmpd", Value: shaped(t, engine.RawAttr(engine.AttrArray, rec, recs), 2, 1)},
		{Name: "cube", Value: shaped(t, engine.ArrayAttr([]float64{0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75}), 2, 2, 2)},
		{Name: "e_be", Value: engine.NullAttr(engine.Uint16)},
		{Name: "e_cmpd", Value: engine.NullAttr(rec)},
		{Name: "e_i8", Value: engine.NullAttr(engine.Int64)},
		{Name: "e_s", Value: engine.NullAttr(engine.FixedString(5, engine.NullPad, engine.ASCII))},
		{Name: "e_str", Value: engine.NullAttr(0)},
		{Name: "flat0", Value: shaped(t, engine.ArrayAttr([]uint32{}), 0, 3)},
		{Name: "strs", Value: shaped(t, strs, 2, 2)},
		{Name: "vstrs", Value: shaped(t, vstrs, 2, 2)},
	}, testfile.Attrs(t, ds))
}

// readShapedAttrsPy prints every attribute of "/" and "d" as h5py gives
// it: an Empty's dtype, or the array's dtype, shape and values.
const readShapedAttrsPy = `
import sys, json, h5py, numpy as np
def conv(x):
    if isinstance(x, bytes):
        return x.decode("utf-8")
    return x
with h5py.File(sys.argv[1], "r") as f:
    out = {}
    for obj in (f, f["d"]):
        for k, v in obj.attrs.items():
            if isinstance(v, h5py.Empty):
                out[obj.name + ":" + k] = {"empty": str(v.dtype)}
                continue
            a = np.asarray(v)
            out[obj.name + ":" + k] = {"dtype": a.dtype.str, "shape": list(a.shape), "values": [conv(x) for x in a.ravel().tolist()]}
print(json.dumps(out))
`

// TestAttrsShapedAndNullExportReadByH5py: N-D and null attributes export
// as simple dataspaces of their shape and null dataspaces of their type,
// which h5py reads with equal shape and values (an Empty of the dtype),
// and importing the export gives the same attributes back.
func TestAttrsShapedAndNullExportReadByH5py(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := testfile.Create(t, filepath.Join(dir, "a.scc"), &engine.Options{NoSync: true})
	defer src.Close(ctx)
	ds, err := src.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	defer ds.Close(ctx)
	strs, err := engine.FixedStringsAttr(engine.FixedString(2, engine.NullPad, engine.ASCII), "a", "bc", "d", "")
	require.NoError(t, err)
	dsAttrs := []engine.Attr{
		{Name: "b3", Value: shaped(t, engine.ArrayAttr([]bool{true, false, true, true, false, false}), 1, 2, 3)},
		{Name: "e_f64", Value: engine.NullAttr(engine.Float64)},
		{Name: "e_s", Value: engine.NullAttr(engine.FixedString(4, engine.NullPad, engine.ASCII))},
		{Name: "e_text", Value: engine.NullAttr(0)},
		{Name: "m", Value: shaped(t, engine.ArrayAttr([]int32{1, 2, 3, 4, 5, 6}), 3, 2)},
		{Name: "s", Value: shaped(t, strs, 2, 2)},
		{Name: "z", Value: shaped(t, engine.ArrayAttr([]float32{}), 2, 0)},
	}
	for _, a := range dsAttrs {
		require.NoError(t, ds.SetAttr(ctx, a.Name, a.Value))
	}
	rootAttrs := []engine.Attr{{Name: "e", Value: engine.NullAttr(engine.Uint8)}, {Name: "g", Value: shaped(t, engine.ArrayAttr([]uint16{9, 8}), 2, 1)}}
	for _, a := range rootAttrs {
		require.NoError(t, src.SetAttr(ctx, a.Name, a.Value))
	}
	h5path := filepath.Join(dir, "a.h5")
	_, err = Export(ctx, src, h5path, nil)
	require.NoError(t, err)

	var got map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(runPython(t, readShapedAttrsPy, h5path)), &got))
	want := map[string]map[string]any{
		"/:e":       {"empty": "uint8"},
		"/:g":       {"dtype": "<u2", "shape": []any{2.0, 1.0}, "values": []any{9.0, 8.0}},
		"/d:b3":     {"dtype": "|b1", "shape": []any{1.0, 2.0, 3.0}, "values": []any{true, false, true, true, false, false}},
		"/d:e_f64":  {"empty": "float64"},
		"/d:e_s":    {"empty": "|S4"},
		"/d:e_text": {"empty": "object"},
		"/d:m":      {"dtype": "<i4", "shape": []any{3.0, 2.0}, "values": []any{1.0, 2.0, 3.0, 4.0, 5.0, 6.0}},
		"/d:s":      {"dtype": "|S2", "shape": []any{2.0, 2.0}, "values": []any{"a", "bc", "d", ""}},
		"/d:z":      {"dtype": "<f4", "shape": []any{2.0, 0.0}, "values": []any{}},
	}
	for k, w := range want {
		g := got[k]
		if w["empty"] == "|S4" && g != nil {
			// numpy names a bytes dtype S4 in str(), |S4 in .str.
			g = map[string]any{"empty": "|" + strings.TrimPrefix(g["empty"].(string), "|")}
		}
		assert.Equal(t, w, g, k)
	}
	assert.Len(t, got, len(want))

	back := testfile.Create(t, filepath.Join(dir, "b.scc"), &engine.Options{NoSync: true})
	defer back.Close(ctx)
	rep, err := Import(ctx, h5path, back, nil)
	require.NoError(t, err)
	require.Len(t, rep.Datasets, 1)
	assert.Zero(t, rep.Datasets[0].AttrsNotImported, "%v", rep.Datasets[0].AttrNotes)
	sameAttrs(t, "root", rootAttrs, testfile.Attrs(t, back))
	ds2, err := back.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	defer ds2.Close(ctx)
	sameAttrs(t, "d", dsAttrs, testfile.Attrs(t, ds2))
}
