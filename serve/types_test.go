package serve

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestViewDescribedTypes: the view maps a compound onto numpy's
// structured dtype and an enum onto its base integer with its names in
// zarrmap.EnumAttr in Zarr v2; in Zarr v3, which has no structured type,
// the compound is left out of the view (logged with the reason) and the
// rest is served.
func TestViewDescribedTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.scc")
	f := testfile.Create(t, path, nil)
	comp := engine.PackedCompound(engine.Field{Name: "a", Type: engine.Int32}, engine.Field{Name: "b", Type: engine.Float16})
	en := engine.Enum(engine.Uint8, engine.EnumMember{Name: "x", Value: 1})
	for name, ty := range map[string]engine.Type{"comp": comp, "enum": en, "plain": engine.Int16} {
		_, err := f.CreateDataset(context.Background(), name, engine.DatasetSpec{Type: ty, Shape: []uint64{4}, Chunk: []uint64{2}})
		require.NoError(t, err)
	}
	require.NoError(t, f.Close(context.Background()))

	_, s2, _ := open(t, path, Options{Format: 2})
	w := get(s2, "GET", "/comp/.zarray")
	require.Equal(t, 200, w.Code, w.Body.String())
	var m map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
	assert.Equal(t, []any{[]any{"a", "<i4"}, []any{"b", "<f2"}}, m["dtype"])
	w = get(s2, "GET", "/enum/.zattrs")
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "scc:enum")

	_, s3, lb := open(t, path, Options{Format: 3})
	assert.Equal(t, 404, get(s3, "GET", "/comp/zarr.json").Code)
	assert.Equal(t, 200, get(s3, "GET", "/plain/zarr.json").Code)
	assert.Equal(t, 200, get(s3, "GET", "/enum/zarr.json").Code)
	assert.Contains(t, lb.String(), "structured")
}

// TestViewScalar: a scalar dataset is served as a zero-dimensional array,
// its one chunk at key "0" (v2) and "c" (v3) holding its element; a null
// dataset is left out.
func TestViewScalar(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.scc")
	f := testfile.Create(t, path, nil)
	ds, err := f.CreateDataset(context.Background(), "s", engine.DatasetSpec{Type: engine.Int32, Fill: []byte{9, 0, 0, 0}})
	require.NoError(t, err)
	require.NoError(t, ds.Write(context.Background(), engine.All(nil), []byte{5, 0, 0, 0}))
	_, err = f.CreateDataset(context.Background(), "n", engine.DatasetSpec{Type: engine.Int32, Space: engine.SpaceNull})
	require.NoError(t, err)
	require.NoError(t, f.Close(context.Background()))
	for _, c := range []struct {
		format     int
		meta, key  string
		wrong      []string
		nullMetaAt string
	}{
		{2, "/s/.zarray", "/s/0", []string{"/s/1", "/s/0.0", "/s/c"}, "/n/.zarray"},
		{3, "/s/zarr.json", "/s/c", []string{"/s/c/0", "/s/0"}, "/n/zarr.json"},
	} {
		_, s, _ := open(t, path, Options{Format: c.format})
		w := get(s, "GET", c.meta)
		require.Equal(t, 200, w.Code, w.Body.String())
		var m map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
		assert.Equal(t, []any{}, m["shape"], c.format)
		w = get(s, "GET", c.key)
		require.Equal(t, 200, w.Code, "v%d %s", c.format, c.key)
		assert.Equal(t, []byte{5, 0, 0, 0}, w.Body.Bytes(), c.format)
		for _, k := range c.wrong {
			assert.Equal(t, 404, get(s, "GET", k).Code, k)
		}
		assert.Equal(t, 404, get(s, "GET", c.nullMetaAt).Code)
		// The web page's slice of a dataset without dimensions is a
		// bad request, not a crash.
		assert.Equal(t, 422, get(s, "GET", "/__scc/slice.png?ds=s").Code)
		assert.Equal(t, 200, get(s, "GET", "/").Code)
	}
}
