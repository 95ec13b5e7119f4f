package zarr

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExportSharded: a dataset with sharded chunks exports (v2 and v3) as
// unsharded Zarr chunks of its values, which import back equal; its
// stored bytes, inner chunks and an index, are never copied as one codec
// chain's output.
func TestExportSharded(t *testing.T) {
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), nil)
	dims := []uint64{40, 24}
	ds, err := f.CreateDataset(context.Background(), "s", engine.DatasetSpec{Type: engine.Uint16, Shape: dims, Chunk: []uint64{16, 24}, InnerChunk: []uint64{4, 8}, Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	data := make([]byte, 40*24*2)
	for i := range data {
		data[i] = byte(i / 3)
	}
	require.NoError(t, ds.Write(bg, engine.Box([]uint64{0, 0}, []uint64{30, 24}), data[:30*24*2]))
	require.NoError(t, f.Flush(bg))
	clear(data[30*24*2:])
	for _, v := range []int{2, 3} {
		out := filepath.Join(dir, "out", string(rune('0'+v)))
		rep, err := Export(bg, f, out, Options{Version: v})
		require.NoError(t, err)
		require.Len(t, rep.Datasets, 1)
		assert.Contains(t, rep.Datasets[0].Why, "sharded")
		g := testfile.Create(t, filepath.Join(dir, "back"+string(rune('0'+v))+".scc"), nil)
		_, err = Import(bg, out, g, Options{})
		require.NoError(t, err)
		back, err := g.OpenDataset(context.Background(), "s", nil)
		require.NoError(t, err)
		got := make([]byte, len(data))
		require.NoError(t, back.Read(bg, engine.All(dims), got))
		assert.Equal(t, data, got, "v%d", v)
		require.NoError(t, g.Close(context.Background()))
	}
	require.NoError(t, f.Close(context.Background()))
}
