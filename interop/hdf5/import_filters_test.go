package hdf5

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// writeUndecodable writes datasets whose filters fail or are missing only
// for some chunks: "bad" (bzip2, whose plugin is installed) has one chunk
// the plugin rejects; "skipped" names a filter no plugin decodes
// (fpzip, optional) but every chunk skipped it, so libhdf5 reads them
// all; "never" has the same filter and no chunk stored, "needs" a chunk
// stored through it, "vlen" variable-length sequences whose chunks all
// skipped it; "good" is gzip.
const writeUndecodable = `
import sys, h5py, numpy as np, hdf5plugin
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("good", data=np.arange(100, dtype="<i4"), chunks=(10,), compression="gzip")
    d = f.create_dataset("bad", data=np.arange(40, dtype="<i4"), chunks=(10,), **hdf5plugin.BZip2())
    d.id.write_direct_chunk((10,), b"this is no bzip2 stream")
    f.create_dataset("skipped", data=np.arange(30, dtype="<i2"), chunks=(8,), compression=32014, allow_unknown_filter=True)
    f.create_dataset("never", shape=(30,), dtype="<i2", chunks=(8,), fillvalue=-4, compression=32014, allow_unknown_filter=True)
    d = f.create_dataset("needs", shape=(4,), dtype="<f8", chunks=(4,), compression=32014, allow_unknown_filter=True)
    d.id.write_direct_chunk((0,), b"\x00" * 9)
    f.create_dataset("vlen", data=[np.arange(n, dtype="<i4") for n in range(5)], dtype=h5py.vlen_dtype("<i4"), chunks=(5,), compression=32014, allow_unknown_filter=True)
`

// TestImportChunkFilterFails: a chunk the filter pipeline cannot decode
// (a plugin that rejects it, a filter without a plugin that the chunk
// needs) skips that dataset, named with the filter and the library's
// error, not the whole file; a filter without a plugin that no stored
// chunk needs does not keep a dataset out.
func TestImportChunkFilterFails(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "in.h5")
	runPython(t, writeUndecodable, src)
	out := filepath.Join(dir, "out.scc")
	rep, err := ImportFile(ctx, src, out, nil)
	require.NoError(t, err)
	t.Logf("report:\n%s", rep)
	require.Len(t, rep.Skipped, 2)
	assert.Equal(t, "/needs", rep.Skipped[0].Path)
	assert.Contains(t, rep.Skipped[0].Reason, "filter fpzip (id 32014) is not available in this libhdf5")
	assert.Equal(t, "/bad", rep.Skipped[1].Path)
	assert.Contains(t, rep.Skipped[1].Reason, "the chunk at [10] cannot be decoded by its filters bzip2")

	// Strict: the chunk that needs a filter without a plugin is found
	// before anything is created.
	g := testfile.Create(t, filepath.Join(dir, "strict.scc"), &engine.Options{NoSync: true})
	defer g.Close(ctx)
	_, err = Import(ctx, src, g, &Options{Strict: true})
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), `"needs"`)
	assert.Empty(t, testfile.DatasetNames(t, g))

	f, err := engine.Open(ctx, out, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	testfile.CheckAtCleanup(t, out)
	defer f.Close(ctx)
	_, err = f.OpenDataset(ctx, "bad", nil)
	assert.ErrorIs(t, err, engine.ErrNotFound, "the skipped dataset is removed")
	read := func(name string, n int) []byte {
		ds, err := f.OpenDataset(ctx, name, nil)
		require.NoError(t, err, name)
		defer ds.Close(ctx)
		b := make([]byte, n*ds.Type().Size())
		require.NoError(t, ds.Read(ctx, engine.All(ds.Shape()), b), name)
		return b
	}
	b := read("skipped", 30)
	for i := 0; i < 30; i++ {
		assert.Equal(t, int16(i), int16(binary.LittleEndian.Uint16(b[2*i:])), "skipped[%d]", i)
	}
	b = read("never", 30)
	for i := 0; i < 30; i++ {
		assert.Equal(t, int16(-4), int16(binary.LittleEndian.Uint16(b[2*i:])), "never[%d]", i)
	}
	ds, err := f.OpenDataset(ctx, "vlen", nil)
	require.NoError(t, err)
	defer ds.Close(ctx)
	vals, err := ds.ReadVlen(ctx, engine.All(ds.Shape()))
	require.NoError(t, err)
	require.Len(t, vals, 5)
	for n, v := range vals {
		assert.Len(t, v, 4*n)
	}
	read("good", 100)
}
