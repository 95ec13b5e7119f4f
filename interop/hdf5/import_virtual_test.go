package hdf5

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
)

// writeVDSH5py writes two source files and a file holding a virtual
// dataset over them and over a dataset of its own (strided), and saves
// h5py's reading of the virtual dataset.
const writeVDSH5py = `
import sys, h5py, numpy as np
d = sys.argv[1]
for i in range(2):
    with h5py.File("%s/src%d.h5" % (d, i), "w") as f:
        f.create_dataset("data", data=np.arange(10, dtype="<i4") + 100 * i)
with h5py.File(d + "/main.h5", "w") as f:
    f.create_dataset("local", data=np.arange(20, dtype="<i4") * -1)
    lay = h5py.VirtualLayout(shape=(3, 10), dtype="<i4")
    for i in range(2):
        lay[i] = h5py.VirtualSource("src%d.h5" % i, "data", shape=(10,))
    lay[2, ::2] = h5py.VirtualSource(".", "/local", shape=(20,))[0:10:2]
    v = f.create_virtual_dataset("vds", lay, fillvalue=-7)
    v.attrs["kind"] = "stack"
    f["vds"][...].astype("<i4").tofile(d + "/vds.bin")
    pts = h5py.VirtualLayout(shape=(4,), dtype="<i4")
    src = h5py.VirtualSource(".", "/local", shape=(20,))
    pts[[0, 1, 3]] = src[0:3]
    f.create_virtual_dataset("pts", pts)
`

// TestImportVirtual: an HDF5 virtual dataset imports as an scc virtual
// dataset of the same mappings, its sources in other files named as
// those files import (".h5" becomes ".scc"), its sources in the same
// file as the imported datasets; once the sources are imported too, it
// reads every element as h5py does (the fill value where nothing maps).
func TestImportVirtual(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	runPython(t, writeVDSH5py, dir)
	for i := 0; i < 2; i++ {
		_, err := ImportFile(ctx, filepath.Join(dir, "src"+string(rune('0'+i))+".h5"), filepath.Join(dir, "src"+string(rune('0'+i))+".scc"), nil)
		require.NoError(t, err)
	}
	rep, err := ImportFile(ctx, filepath.Join(dir, "main.h5"), filepath.Join(dir, "main.scc"), nil)
	require.NoError(t, err)
	t.Logf("import report:\n%s", rep)
	var vr DatasetReport
	for _, d := range rep.Datasets {
		if d.Name == "vds" {
			vr = d
		}
	}
	assert.Equal(t, Virtual, vr.Mode)
	assert.Contains(t, vr.Reason, "src0.scc")

	f, err := engine.Open(ctx, filepath.Join(dir, "main.scc"), &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "vds", nil)
	require.NoError(t, err)
	defer ds.Close(ctx)
	assert.Equal(t, engine.Virtual, ds.Layout())
	want, err := os.ReadFile(filepath.Join(dir, "vds.bin"))
	require.NoError(t, err)
	got := make([]byte, len(want))
	require.NoError(t, ds.Read(ctx, engine.All(ds.Shape()), got))
	assert.Equal(t, want, got)
	assert.Equal(t, binary.LittleEndian.AppendUint32(nil, uint32(0xffffffff-6)), ds.Fill())
	v, err := ds.Attr("kind")
	require.NoError(t, err)
	s, _ := v.Str()
	assert.Equal(t, "stack", s)

	// A union of slabs is no scc selection: left out and named.
	var skipped []string
	for _, sk := range rep.Skipped {
		skipped = append(skipped, sk.Path+": "+sk.Reason)
	}
	require.Len(t, skipped, 1)
	assert.True(t, strings.HasPrefix(skipped[0], "/pts: virtual dataset"), skipped[0])
}

// TestImportVirtualUnlimited: an unlimited HDF5 mapping stays unlimited,
// so the imported virtual dataset's extent follows its source as HDF5's
// does: it grows when the imported source grows.
func TestImportVirtualUnlimited(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	runPython(t, `
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/src.h5", "w") as f:
    ds = f.create_dataset("data", shape=(3, 4), maxshape=(None, 4), dtype="<i4", chunks=(1, 4))
    ds[...] = np.arange(12).reshape(3, 4)
UNL = h5py.h5s.UNLIMITED
with h5py.File(d + "/main.h5", "w", libver="latest") as f:
    lay = h5py.VirtualLayout(shape=(3, 4), maxshape=(None, 4), dtype="<i4")
    src = h5py.VirtualSource("src.h5", "data", shape=(3, 4), maxshape=(None, 4))
    lay[0:UNL, :] = src[0:UNL, :]
    f.create_virtual_dataset("v", lay, fillvalue=-1)
`, dir)
	_, err := ImportFile(ctx, filepath.Join(dir, "src.h5"), filepath.Join(dir, "src.scc"), nil)
	require.NoError(t, err)
	_, err = ImportFile(ctx, filepath.Join(dir, "main.h5"), filepath.Join(dir, "main.scc"), nil)
	require.NoError(t, err)

	read := func() ([]uint64, []int32) {
		f, err := engine.Open(ctx, filepath.Join(dir, "main.scc"), &engine.Options{ReadOnly: true})
		require.NoError(t, err)
		defer f.Close(ctx)
		ds, err := f.OpenDataset(ctx, "v", nil)
		require.NoError(t, err)
		defer ds.Close(ctx)
		assert.Equal(t, engine.Unlimited, ds.MaxShape()[0])
		got := make([]int32, ds.Shape()[0]*ds.Shape()[1])
		require.NoError(t, engine.ReadSlice(ctx, ds, engine.All(ds.Shape()), got))
		return ds.Shape(), got
	}
	shape, got := read()
	assert.Equal(t, []uint64{3, 4}, shape)
	for i, v := range got {
		assert.Equal(t, int32(i), v)
	}
	src, err := engine.Open(ctx, filepath.Join(dir, "src.scc"), nil)
	require.NoError(t, err)
	sd, err := src.OpenDataset(ctx, "data", nil)
	require.NoError(t, err)
	require.NoError(t, sd.SetExtent(ctx, []uint64{5, 4}))
	require.NoError(t, engine.WriteSlice(ctx, sd, engine.Box([]uint64{3, 0}, []uint64{2, 4}), []int32{12, 13, 14, 15, 16, 17, 18, 19}))
	sd.Close(ctx)
	require.NoError(t, src.Close(ctx))
	shape, got = read()
	assert.Equal(t, []uint64{5, 4}, shape)
	for i, v := range got {
		assert.Equal(t, int32(i), v)
	}
}
