package hdf5

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// writeVlenH5py writes what h5py makes of Python str and of ragged
// arrays: variable-length strings (UTF-8, ASCII; chunked, contiguous,
// 2-D, with empty ones and chunks never written), variable-length
// sequences of integers and floats (big-endian among them), and
// attributes of strings. It prints the elements as h5py reads them back
// (strings as text, sequences as lists; the big-endian ones as written).
const writeVlenH5py = `
import sys, json, h5py, numpy as np
path = sys.argv[1]
u = h5py.string_dtype("utf-8")
a = h5py.string_dtype("ascii")
with h5py.File(path, "w") as f:
    f.create_dataset("utf8", data=np.array(["", "α", "hello", "x" * 300, "日本語", ""] * 5, dtype=object), dtype=u, chunks=(7,), maxshape=(None,))
    f.create_dataset("ascii", data=np.array([b"a", b"", b"bc"] * 4, dtype=object).reshape(3, 4), dtype=a)
    d = f.create_dataset("sparse", shape=(100,), dtype=u, chunks=(10,), compression="gzip")
    d[42] = "only"
    d.attrs["names"] = ["first", "", "third one"]
    d.attrs["title"] = "a str"
    ints = f.create_dataset("ints", shape=(3, 4), dtype=h5py.vlen_dtype(np.dtype("<i4")), chunks=(2, 2))
    for i in range(3):
        for j in range(4):
            ints[i, j] = np.arange(i * j, dtype="<i4") - 5
    be = f.create_dataset("be", shape=(5,), dtype=h5py.vlen_dtype(np.dtype(">f8")))
    for i in range(5):
        be[i] = np.linspace(0, 1, i, dtype=">f8")
    f.attrs["tags"] = np.array(["x", "yy", "ünï"], dtype=u)
out = {}
with h5py.File(path, "r") as f:
    for n in ("utf8", "ascii", "sparse"):
        out[n] = [s.decode() for s in f[n][...].ravel()]
    out["ints"] = [[float(x) for x in s] for s in f["ints"][...].ravel()]
# h5py 3.7 reads sequences of big-endian floats without swapping them: the
# values written are the reference.
out["be"] = [[float(x) for x in np.linspace(0, 1, i)] for i in range(5)]
print(json.dumps(out))
`

// vlenValues reads every element of an scc variable-length dataset:
// strings as text, numbers as float64.
func vlenValues(t *testing.T, f *engine.File, name string) []any {
	ctx := context.Background()
	ds, err := f.OpenDataset(ctx, name, nil)
	require.NoError(t, err, name)
	defer ds.Close(ctx)
	require.Equal(t, engine.Vlen, ds.Layout(), name)
	vals, err := ds.ReadVlen(ctx, engine.All(ds.Shape()))
	require.NoError(t, err, name)
	var out []any
	for _, v := range vals {
		switch ds.Type() {
		case engine.Uint8:
			out = append(out, string(v))
		case engine.Int32:
			s := []any{}
			for i := 0; i < len(v); i += 4 {
				s = append(s, float64(int32(binary.LittleEndian.Uint32(v[i:]))))
			}
			out = append(out, s)
		case engine.Float64:
			s := []any{}
			for i := 0; i < len(v); i += 8 {
				s = append(s, math.Float64frombits(binary.LittleEndian.Uint64(v[i:])))
			}
			out = append(out, s)
		default:
			t.Fatalf("%s: type %v", name, ds.Type())
		}
	}
	return out
}

// TestImportVlenFromH5py: h5py's variable-length strings and sequences
// import onto scc's variable-length layout with every element equal to
// h5py's reading, string attributes as text and arrays of strings; and
// they export back to variable-length HDF5 data h5py reads equal, strings
// as strings.
func TestImportVlenFromH5py(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "in.h5")
	var want map[string][]any
	require.NoError(t, json.Unmarshal([]byte(runPython(t, writeVlenH5py, h5path)), &want))

	sccPath := filepath.Join(dir, "out.scc")
	f := testfile.Create(t, sccPath, &engine.Options{NoSync: true})
	rep, err := Import(ctx, h5path, f, &Options{Workers: 2})
	require.NoError(t, err)
	t.Logf("import report:\n%s", rep)
	assert.Empty(t, rep.Skipped)
	assert.Empty(t, rep.RootAttrNotes)
	for name, w := range want {
		assert.Equal(t, w, vlenValues(t, f, name), name)
	}
	ds, err := f.OpenDataset(ctx, "sparse", nil)
	require.NoError(t, err)
	v, err := ds.Attr("names")
	require.NoError(t, err)
	names, err := v.Strings()
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "", "third one"}, names)
	v, err = ds.Attr("title")
	require.NoError(t, err)
	title, err := v.Str()
	require.NoError(t, err)
	assert.Equal(t, "a str", title)
	v, err = ds.Attr(VlenStringAttr)
	require.NoError(t, err)
	cs, _ := v.Str()
	assert.Equal(t, "utf-8", cs)
	ds.Close(ctx)
	v, err = f.Attr("tags")
	require.NoError(t, err)
	tags, err := v.Strings()
	require.NoError(t, err)
	assert.Equal(t, []string{"x", "yy", "ünï"}, tags)
	for _, d := range rep.Datasets {
		if d.Name == "sparse" {
			assert.Equal(t, 1, d.Chunks, "only the chunk holding a string is written")
		}
	}

	// Back out: h5py reads the same elements, strings as str.
	back := filepath.Join(dir, "back.h5")
	_, err = Export(ctx, f, back, nil)
	require.NoError(t, err)
	require.NoError(t, f.Close(ctx))
	got := runPython(t, `
import sys, json, h5py
out = {}
with h5py.File(sys.argv[1], "r") as f:
    for n in ("utf8", "ascii", "sparse"):
        assert h5py.check_string_dtype(f[n].dtype) is not None, n
        assert "scc:vlen-string" not in f[n].attrs, n
        out[n] = [s.decode() for s in f[n][...].ravel()]
    assert h5py.check_string_dtype(f["ascii"].dtype).encoding == "ascii"
    for n in ("ints", "be"):
        out[n] = [[float(x) for x in s] for s in f[n][...].ravel()]
print(json.dumps(out))
`, back)
	var again map[string][]any
	require.NoError(t, json.Unmarshal([]byte(got), &again))
	assert.Equal(t, want, again)
}

// TestVlenRoundTrip: scc's variable-length datasets (sequences of every
// numeric type scc exports so, bytes, and strings marked as such) export to
// HDF5 and import back equal.
func TestVlenRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := testfile.Create(t, filepath.Join(dir, "src.scc"), &engine.Options{NoSync: true})
	want := map[string][][]byte{}
	for _, typ := range []engine.Type{engine.Int8, engine.Uint16, engine.Int64, engine.Float32, engine.Float64, engine.Uint8} {
		name := "v_" + typ.String()
		ds, err := src.CreateDataset(ctx, name, engine.DatasetSpec{Type: typ, Shape: []uint64{4, 5}, MaxShape: []uint64{engine.Unlimited, 5}, Chunk: []uint64{3, 2}, Layout: engine.Vlen})
		require.NoError(t, err)
		vals := make([][]byte, 20)
		for i := range vals {
			if i%3 != 1 && i > 0 {
				vals[i] = pattern(typ, i, i)
			}
		}
		require.NoError(t, ds.WriteVlen(ctx, engine.All(ds.Shape()), vals))
		want[name] = vals
		ds.Close(ctx)
	}
	ds, err := src.CreateDataset(ctx, "text", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{6}, Chunk: []uint64{4}, Layout: engine.Vlen})
	require.NoError(t, err)
	require.NoError(t, ds.SetAttr(ctx, VlenStringAttr, engine.StringAttr("utf-8")))
	require.NoError(t, ds.WriteStrings(ctx, engine.All(ds.Shape()), []string{"a", "", "ζ", "long ", "", "z"}))
	ds.Close(ctx)
	require.NoError(t, src.Flush(ctx))

	h5path := filepath.Join(dir, "out.h5")
	_, err = Export(ctx, src, h5path, nil)
	require.NoError(t, err)
	require.NoError(t, src.Close(ctx))
	back := filepath.Join(dir, "back.scc")
	rep, err := ImportFile(ctx, h5path, back, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Skipped)
	f, err := engine.Open(ctx, back, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	for name, w := range want {
		ds, err := f.OpenDataset(ctx, name, nil)
		require.NoError(t, err, name)
		assert.Equal(t, engine.Vlen, ds.Layout(), name)
		got, err := ds.ReadVlen(ctx, engine.All(ds.Shape()))
		require.NoError(t, err, name)
		assert.Equal(t, w, got, name)
		ds.Close(ctx)
	}
	ds, err = f.OpenDataset(ctx, "text", nil)
	require.NoError(t, err)
	defer ds.Close(ctx)
	s, err := ds.ReadStrings(ctx, engine.All(ds.Shape()))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "", "ζ", "long ", "", "z"}, s)
	v, err := ds.Attr(VlenStringAttr)
	require.NoError(t, err)
	cs, _ := v.Str()
	assert.Equal(t, "utf-8", cs)
}
