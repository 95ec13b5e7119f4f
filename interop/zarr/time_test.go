package zarr

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// TestTimeDtypesRoundTrip: numpy datetime64 and timedelta64 arrays
// zarr-python writes import as Int64 with their numpy type in an
// attribute (NaT and its fill value as the smallest int64), and export
// back, v2 and v3, with the same dtype and values: zarr-python reads the
// v2 store equal, and the v3 store imports back equal.
func TestTimeDtypesRoundTrip(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "s.zarr")
	py := `
import sys, json, zarr, numpy as np
store = sys.argv[1]
g = zarr.open_group(store, mode="w")
a = np.array(["2024-01-01T00:00:00.000000001", "NaT", "1969-12-31T23:59:59", "2262-04-11"], dtype="datetime64[ns]")
z = g.create("when", shape=(6,), chunks=(4,), dtype="<M8[ns]", fill_value=np.datetime64("NaT"))
z[:4] = a
d = g.create("took", shape=(3,), chunks=(2,), dtype=">m8[10s]", fill_value=np.timedelta64(7, "10s"))
d[:] = np.array([1, -2, 3], dtype=">m8[10s]")
out = {}
for n in ("when", "took"):
    r = zarr.open_array(store + "/" + n, mode="r")
    out[n] = {"dtype": str(r.dtype.newbyteorder("<")), "values": [int(x) for x in r[...].astype(r.dtype.newbyteorder("<")).view("<i8")]}
print(json.dumps(out))
`
	b, err := exec.Command(python, "-c", py, store).Output()
	require.NoError(t, err, stderr(err))
	var want map[string]struct {
		Dtype  string  `json:"dtype"`
		Values []int64 `json:"values"`
	}
	require.NoError(t, json.Unmarshal(b, &want))

	f := testfile.Create(t, filepath.Join(dir, "in.scc"), nil)
	rep, err := Import(bg, store, f, Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Skipped)
	marks := map[string]string{"when": "datetime64[ns]", "took": "timedelta64[10s]"}
	check := func(f *engine.File, what string) {
		for name, w := range want {
			ds, err := f.OpenDataset(context.Background(), name, nil)
			require.NoError(t, err, what)
			assert.Equal(t, engine.Int64, ds.Type(), what)
			v, err := ds.Attr(zarrmap.DtypeAttr)
			require.NoError(t, err, what)
			s, _ := v.Str()
			assert.Equal(t, marks[name], s, what)
			got := make([]int64, ds.Shape()[0])
			require.NoError(t, engine.ReadSlice(bg, ds, engine.All(ds.Shape()), got), what)
			assert.Equal(t, w.Values, got, "%s: %s", what, name)
			ds.Close(context.Background())
		}
	}
	check(f, "import")
	ds, err := f.OpenDataset(context.Background(), "when", nil)
	require.NoError(t, err)
	assert.Equal(t, binary.LittleEndian.AppendUint64(nil, 1<<63), ds.Fill(), "NaT fill")
	ds.Close(context.Background())

	v2 := filepath.Join(dir, "v2.zarr")
	_, err = Export(bg, f, v2, Options{Version: 2})
	require.NoError(t, err)
	v3 := filepath.Join(dir, "v3.zarr")
	_, err = Export(bg, f, v3, Options{Version: 3})
	require.NoError(t, err)
	require.NoError(t, f.Close(context.Background()))
	b, err = exec.Command(python, "-c", `
import sys, json, zarr
out = {}
for n in ("when", "took"):
    r = zarr.open_array(sys.argv[1] + "/" + n, mode="r")
    assert "scc:numpy-dtype" not in r.attrs, n
    out[n] = {"dtype": str(r.dtype), "values": [int(x) for x in r[...].view("<i8")]}
print(json.dumps(out))
`, v2).Output()
	require.NoError(t, err, stderr(err))
	var back map[string]struct {
		Dtype  string  `json:"dtype"`
		Values []int64 `json:"values"`
	}
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, want, back)

	g := testfile.Create(t, filepath.Join(dir, "v3.scc"), nil)
	defer g.Close(context.Background())
	_, err = Import(bg, v3, g, Options{})
	require.NoError(t, err)
	check(g, "v3 round trip")
}
