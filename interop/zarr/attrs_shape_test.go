package zarr

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

func shapedAttr(t *testing.T, v engine.AttrValue, dims ...uint64) engine.AttrValue {
	t.Helper()
	w, err := v.WithShape(dims...)
	require.NoError(t, err)
	return w
}

// TestShapedAndNullAttrsRoundTrip: an N-D attribute exports as nested JSON
// lists and a null one as JSON null, in v2 and v3; zarr-python reads the
// v2 attributes as those lists and None; importing the export gives the
// same attributes back (shape, type and nulls kept).
func TestShapedAndNullAttrsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), nil)
	ds, err := f.CreateDataset(bg, "d", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	strs, err := engine.FixedStringsAttr(engine.FixedString(2, engine.NullPad, engine.UTF8), "a", "bc", "é", "")
	require.NoError(t, err)
	attrs := []engine.Attr{
		{Name: "b", Value: shapedAttr(t, engine.ArrayAttr([]bool{true, false}), 1, 2)},
		{Name: "e", Value: shapedAttr(t, engine.ArrayAttr([]int16{}), 3, 0)},
		{Name: "m", Value: shapedAttr(t, engine.ArrayAttr([]int32{1, 2, 3, 4, 5, 6}), 2, 3)},
		{Name: "n_f", Value: engine.NullAttr(engine.Float64)},
		{Name: "n_s", Value: engine.NullAttr(engine.FixedString(3, engine.NullTerm, engine.ASCII))},
		{Name: "n_t", Value: engine.NullAttr(0)},
		{Name: "s", Value: shapedAttr(t, strs, 2, 1, 2)},
	}
	for _, a := range attrs {
		require.NoError(t, ds.SetAttr(bg, a.Name, a.Value))
	}
	require.NoError(t, f.Close(context.Background()))
	for _, v := range []int{2, 3} {
		src, err := engine.Open(bg, filepath.Join(dir, "src.scc"), &engine.Options{ReadOnly: true})
		require.NoError(t, err)
		store := filepath.Join(dir, "store"+string(rune('0'+v)))
		_, err = Export(bg, src, store, Options{Version: v})
		require.NoError(t, err)
		require.NoError(t, src.Close(bg))

		meta := filepath.Join(store, "d", ".zattrs")
		if v == 3 {
			meta = filepath.Join(store, "d", "zarr.json")
		}
		raw, err := os.ReadFile(meta)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(raw, &doc))
		if v == 3 {
			doc, _ = doc["attributes"].(map[string]any)
		}
		assert.Equal(t, []any{[]any{1.0, 2.0, 3.0}, []any{4.0, 5.0, 6.0}}, doc["m"], "v%d", v)
		assert.Equal(t, []any{[]any{}, []any{}, []any{}}, doc["e"], "v%d", v)
		assert.Contains(t, doc, "n_f")
		assert.Nil(t, doc["n_f"], "v%d", v)

		g := testfile.Create(t, filepath.Join(dir, "back"+string(rune('0'+v))+".scc"), nil)
		rep, err := Import(bg, store, g, Options{})
		require.NoError(t, err)
		for _, d := range rep.Datasets {
			assert.Empty(t, d.Notes, "v%d", v)
		}
		back, err := g.OpenDataset(bg, "d", nil)
		require.NoError(t, err)
		sameAttrs(t, "back", attrs, testfile.Attrs(t, back))
		require.NoError(t, back.Close(bg))
	}

	zarrPython(t)
	out, err := exec.Command(python, "-c", `
import sys, json, zarr
a = zarr.open(sys.argv[1], mode="r")["d"]
print(json.dumps({k: a.attrs[k] for k in ("m", "n_f", "s")}))
`, filepath.Join(dir, "store2")).Output()
	require.NoError(t, err, "%s", stderr(err))
	var py map[string]any
	require.NoError(t, json.Unmarshal(out, &py))
	assert.Equal(t, map[string]any{
		"m":   []any{[]any{1.0, 2.0, 3.0}, []any{4.0, 5.0, 6.0}},
		"n_f": nil,
		"s":   []any{[]any{[]any{"a", "bc"}}, []any{[]any{"é", ""}}},
	}, py)
}
