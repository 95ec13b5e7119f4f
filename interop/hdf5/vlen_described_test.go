package hdf5

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// writeVlenDescribed writes variable-length sequences of h5py's
// described types: an enum, a compound with a big-endian member and an
// array member, an opaque type. None is empty: h5py 3.7 cannot read an
// empty sequence of a compound or opaque type ("Cannot create
// cython.array from NULL pointer").
const writeVlenDescribed = `
import sys, h5py, numpy as np
e = h5py.enum_dtype({"lo": 0, "mid": 1, "hi": 5}, basetype="i1")
c = np.dtype([("x", "<i4"), ("y", ">f8"), ("z", "<u2", (2,))])
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("enum", shape=(4,), dtype=h5py.vlen_dtype(e), chunks=(2,))
    for i in range(4):
        d[i] = np.array([0, 1, 5, 1][:i + 1], dtype="i1")
    d = f.create_dataset("cmpd", shape=(2, 3), dtype=h5py.vlen_dtype(c))
    for i in range(2):
        for j in range(3):
            n = i + j + 1
            v = np.zeros(n, dtype=c)
            v["x"] = np.arange(n) - 2
            v["y"] = np.arange(n) / 4
            v["z"] = np.arange(2 * n).reshape(n, 2)
            d[i, j] = v
    d = f.create_dataset("opaque", shape=(3,), dtype=h5py.vlen_dtype(np.dtype("V3")))
    for i in range(3):
        d[i] = np.frombuffer(bytes(range(3 * i + 3)), dtype="V3")
`

// describeVlen prints, for each dataset of a file, every element's
// sequence as h5py reads it, little-endian with zeroed gaps, in hex.
const describeVlen = `
import sys, json, h5py, numpy as np
out = {}
with h5py.File(sys.argv[1], "r") as f:
    for n in f:
        d = f[n]
        base = h5py.check_vlen_dtype(d.dtype)
        le = base.newbyteorder("<")
        vals = []
        for v in d[...].ravel():
            v = np.asarray(v)
            if v.dtype != base and v.dtype.itemsize == base.itemsize:
                v = np.frombuffer(v.tobytes(), dtype=base)
            z = np.zeros(v.shape, dtype=le)
            z[...] = v
            vals.append(z.tobytes().hex())
        out[n] = vals
print(json.dumps(out))
`

// TestImportVlenDescribed: variable-length sequences of enums, compounds
// (a big-endian member among them) and opaque types import onto scc's
// variable-length layout of the same described type, each sequence equal
// to h5py's reading, and export back to sequences h5py reads equal.
func TestImportVlenDescribed(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "in.h5")
	runPython(t, writeVlenDescribed, src)
	var want map[string][]string
	require.NoError(t, json.Unmarshal([]byte(runPython(t, describeVlen, src)), &want))

	out := filepath.Join(dir, "out.scc")
	rep, err := ImportFile(ctx, src, out, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Skipped)
	f, err := engine.Open(ctx, out, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	testfile.CheckAtCleanup(t, out)
	defer f.Close(ctx)
	classes := map[string]engine.Class{"enum": engine.ClassEnum, "cmpd": engine.ClassCompound, "opaque": engine.ClassOpaque}
	for name, w := range want {
		ds, err := f.OpenDataset(ctx, name, nil)
		require.NoError(t, err, name)
		assert.Equal(t, engine.Vlen, ds.Layout(), name)
		assert.Equal(t, classes[name], ds.Type().Class(), "%s: %v", name, ds.Type())
		vals, err := ds.ReadVlen(ctx, engine.All(ds.Shape()))
		require.NoError(t, err, name)
		require.Len(t, vals, len(w), name)
		gaps := gapMask(ds.Type())
		for i, v := range vals {
			if gaps != nil {
				v = append([]byte(nil), v...)
				for j := range v {
					if gaps[j%len(gaps)] {
						v[j] = 0
					}
				}
			}
			assert.Equal(t, w[i], hex.EncodeToString(v), "%s[%d]", name, i)
		}
		require.NoError(t, ds.Close(ctx))
	}
	back := filepath.Join(dir, "back.h5")
	_, err = Export(ctx, f, back, nil)
	require.NoError(t, err)
	var got map[string][]string
	require.NoError(t, json.Unmarshal([]byte(runPython(t, describeVlen, back)), &got))
	assert.Equal(t, want, got)
}
