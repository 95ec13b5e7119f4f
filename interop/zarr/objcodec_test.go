package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// objectPy writes object arrays with numcodecs' object codecs other than
// vlen-utf8: json2 (2-D, None elements, edge chunks), msgpack2 (fill value
// 0 in an edge chunk), vlen-array of big-endian int16 and of float64 (an
// empty sequence, an unwritten chunk), and pickle.
const objectPy = `
import sys, zarr, numcodecs, numpy as np
g = zarr.open_group(sys.argv[1], mode="w")
a = g.create("json", shape=(3, 4), chunks=(2, 3), dtype=object, object_codec=numcodecs.JSON(), fill_value=None)
a[...] = np.array([["a", "bé", "", None], ["x", "y\u6e29", "z", "w"], ["1", "2", "3", "4"]], dtype=object)
b = g.create("msgpack", shape=(5,), chunks=(3,), dtype=object, object_codec=numcodecs.MsgPack(), compressor=numcodecs.Zstd(1))
b[:4] = np.array(["a", "b\u00e9", "", None], dtype=object)
c = g.create("seq_i2", shape=(7,), chunks=(3,), dtype=object, object_codec=numcodecs.VLenArray(">i2"))
c[:5] = np.array([np.arange(3), np.array([], "i2"), np.array([-5]), np.arange(100), np.array([7, 8])], dtype=object)
d = g.create("seq_f8", shape=(2, 2), chunks=(1, 2), dtype=object, object_codec=numcodecs.VLenArray("<f8"), fill_value=None)
d[0] = np.array([np.array([0.5, -1e300]), np.array([np.inf])], dtype=object)
e = g.create("pickled", shape=(2,), chunks=(2,), dtype=object, object_codec=numcodecs.Pickle())
e[...] = np.array(["a", "b"], dtype=object)
`

// dumpRef is corpus.py's reference reading of array directories.
func dumpRef(t *testing.T, dirs ...string) []struct{ Form, Dump, Error string } {
	out := t.TempDir()
	b, err := exec.Command(python, append([]string{filepath.Join(testdata(t), "corpus.py"), "dump", out}, dirs...)...).Output()
	require.NoError(t, err, stderr(err))
	var recs []struct{ Form, Dump, Error string }
	require.NoError(t, json.Unmarshal(b, &recs))
	return recs
}

// TestZarrObjectCodecs: object arrays of json2 and msgpack2 strings
// import as variable-length strings and vlen-array ones as
// variable-length sequences of their dtype, every element as zarr-python
// reads it (None and the fill value 0 being the empty sequence); the
// sequences export back to vlen-array arrays zarr-python reads the same;
// pickle is refused by name.
func TestZarrObjectCodecs(t *testing.T) {
	zarrPython(t)
	ctx := context.Background()
	dir := t.TempDir()
	store := filepath.Join(dir, "o.zarr")
	if b, err := exec.Command(python, "-c", objectPy, store).CombinedOutput(); err != nil {
		t.Fatalf("zarr-python: %v: %s", err, b)
	}
	f := testfile.Create(t, filepath.Join(dir, "o.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, store, f, Options{})
	require.NoError(t, err)
	require.Len(t, rep.Skipped, 1)
	assert.Equal(t, "pickled", rep.Skipped[0].Name)
	assert.Contains(t, rep.Skipped[0].Reason, `"pickle": unpickling runs`)
	names := []string{"json", "msgpack", "seq_i2", "seq_f8"}
	types := map[string]engine.Type{"json": engine.Uint8, "msgpack": engine.Uint8, "seq_i2": engine.Int16, "seq_f8": engine.Float64}
	var dirs []string
	for _, n := range names {
		dirs = append(dirs, filepath.Join(store, n))
	}
	ref := dumpRef(t, dirs...)
	for i, n := range names {
		require.Empty(t, ref[i].Error, n)
		ds, err := f.OpenDataset(ctx, n, nil)
		require.NoError(t, err, n)
		assert.Equal(t, engine.Vlen, ds.Layout(), n)
		assert.Equal(t, types[n], ds.Type(), n)
		_, err = ds.Attr("scc:vlen-string")
		assert.Equal(t, types[n] == engine.Uint8, err == nil, "%s: marked as text", n)
		assert.Empty(t, compareNormal(ctx, ds, ref[i].Form, ref[i].Dump), n)
		ds.Close(ctx)
	}

	// Back out as v2: the sequences as vlen-array of their dtype.
	back := filepath.Join(dir, "back.zarr")
	_, err = Export(ctx, f, back, Options{Version: 2, Strict: true})
	require.NoError(t, err)
	got := dumpRef(t, filepath.Join(back, "seq_i2"), filepath.Join(back, "seq_f8"))
	for i, n := range []string{"seq_i2", "seq_f8"} {
		require.Empty(t, got[i].Error, n)
		w, err := os.ReadFile(ref[2+i].Dump)
		require.NoError(t, err)
		g, err := os.ReadFile(got[i].Dump)
		require.NoError(t, err)
		assert.Equal(t, string(w), string(g), n)
	}
	meta, err := os.ReadFile(filepath.Join(back, "seq_i2", ".zarray"))
	require.NoError(t, err)
	var zarray struct{ Filters []map[string]any }
	require.NoError(t, json.Unmarshal(meta, &zarray))
	assert.Equal(t, []map[string]any{{"id": "vlen-array", "dtype": "<i2"}}, zarray.Filters)
	_, err = Export(ctx, f, filepath.Join(dir, "v3.zarr"), Options{Version: 3, Strict: true})
	require.ErrorIs(t, err, ErrUnsupported)
}

// FuzzObjectChunk: any json2 or msgpack2 chunk decodes to the chunk's
// elements or fails with ErrCorrupt or ErrUnsupported, never a panic.
func FuzzObjectChunk(f *testing.F) {
	f.Add(true, []byte(`[["a","b\u00e9",""],["x","y","z"],"|O",[2,3]]`), uint8(2), uint8(3))
	f.Add(true, []byte(`[["4",null,null],[null,0,null],"|O",[2,3]]`), uint8(2), uint8(3))
	f.Add(false, []byte("\x95\xa1a\xa3b\xc3\xa9\xa0\xa2|O\x91\x03"), uint8(3), uint8(0))
	f.Add(false, []byte("\x95\xc0\x00\x00\xa2|O\x91\x03"), uint8(3), uint8(0))
	f.Add(false, []byte("\xdd\xff\xff\xff\xff"), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, isJSON bool, raw []byte, c0, c1 uint8) {
		chunk := []uint64{uint64(c0)}
		if c1 > 0 {
			chunk = append(chunk, uint64(c1))
		}
		id := "msgpack2"
		if isJSON {
			id = "json2"
		}
		vals, err := objectChunk(id, raw, chunk)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrUnsupported", err)
			}
			return
		}
		n := uint64(1)
		for _, c := range chunk {
			n *= c
		}
		if uint64(len(vals)) != n {
			t.Fatalf("%d elements for chunk %v", len(vals), chunk)
		}
	})
}
