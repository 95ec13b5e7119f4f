package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestExportImportDescribedZarr: compound (with a gap and an array
// field), enum, float16, opaque and scalar datasets go out with `scctl
// export --format zarr2` and come back with `scctl import` dumping as the
// originals do (types, values, fill values and attributes); zarr3 leaves
// the compound and opaque datasets out, naming them.
func TestExportImportDescribedZarr(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d.scc")
	f := testfile.Create(t, path, nil)
	rec := engine.Compound(16, engine.Field{Name: "id", Offset: 0, Type: engine.Int16},
		engine.Field{Name: "v", Offset: 4, Type: engine.ArrayOf(engine.Float16, 2)},
		engine.Field{Name: "w", Offset: 8, Type: engine.Float64})
	color := engine.Enum(engine.Uint8, engine.EnumMember{Name: "RED", Value: 0}, engine.EnumMember{Name: "GREEN", Value: 1})
	specs := map[string]engine.DatasetSpec{
		"rec":    {Type: rec, Shape: []uint64{3}, Chunk: []uint64{2}},
		"color":  {Type: color, Shape: []uint64{3}, Chunk: []uint64{2}, Fill: []byte{1}},
		"half":   {Type: engine.Float16, Shape: []uint64{3}, Chunk: []uint64{2}},
		"blob":   {Type: engine.Opaque(3, ""), Shape: []uint64{2}, Chunk: []uint64{2}},
		"scalar": {Type: engine.Int32, Fill: []byte{7, 0, 0, 0}},
	}
	for name, spec := range specs {
		ds, err := f.CreateDataset(ctx, name, spec)
		require.NoError(t, err, name)
		n := uint64(1)
		for _, s := range spec.Shape {
			n *= s
		}
		b := make([]byte, n*uint64(spec.Type.Size()))
		for i := range b {
			b[i] = byte(i % 2) // enum values 0/1, small numbers elsewhere
		}
		if name == "rec" {
			for e := 0; e < 3; e++ {
				clear(b[e*16+2 : e*16+4]) // the gap
			}
		}
		require.NoError(t, ds.Write(ctx, engine.All(spec.Shape), b), name)
		require.NoError(t, ds.SetAttr(ctx, "units", engine.StringAttr("m")))
		ds.Close(ctx)
	}
	require.NoError(t, f.Close(ctx))

	store := filepath.Join(t.TempDir(), "store")
	code, out, stderr := runCmd(t, "export", "--format", "zarr2", path, store)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	back := filepath.Join(t.TempDir(), "back.scc")
	code, out, stderr = runCmd(t, "import", store, back)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	for name := range specs {
		_, a, _ := runCmd(t, "dump", "--dataset", name, path)
		_, b, _ := runCmd(t, "dump", "--dataset", name, back)
		assert.Equal(t, a, b, name)
	}
	_, ls, _ := runCmd(t, "ls", back)
	assert.Contains(t, ls, `enum(uint8, "RED"=0, "GREEN"=1)`)

	store3 := filepath.Join(t.TempDir(), "store3")
	code, out, stderr = runCmd(t, "export", "--format", "zarr3", path, store3)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	for _, name := range []string{"rec", "blob"} {
		assert.True(t, strings.Contains(out+stderr, name) && strings.Contains(out+stderr, "Zarr v3"), "%s:\n%s%s", name, out, stderr)
	}
}
