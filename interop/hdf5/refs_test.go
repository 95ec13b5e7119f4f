package hdf5

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

const writeRefsH5py = `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    g = f.create_group("grp/sub")
    d = f.create_dataset("data", data=np.arange(10, dtype="<i4"))
    r = f.create_dataset("refs", shape=(2, 2), dtype=h5py.ref_dtype, chunks=(1, 2))
    r[0, 0] = d.ref
    r[0, 1] = g.ref
    r[1, 1] = f.ref
    d.attrs["parent"] = g.ref
    d.attrs["many"] = np.array([d.ref, g.ref], dtype=h5py.ref_dtype)
    d.attrs["region"] = d.regionref[2:5]
    f.create_dataset("regions", data=[d.regionref[1:3]], dtype=h5py.regionref_dtype)
`

// TestImportObjectReferences: HDF5 object references import as the paths
// of the objects they point to (the null reference as ""), datasets and
// attributes, each marked as references; region references are left out
// and named.
func TestImportObjectReferences(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "in.h5")
	runPython(t, writeRefsH5py, h5path)
	f := testfile.Create(t, filepath.Join(dir, "out.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	require.NoError(t, err)
	t.Logf("import report:\n%s", rep)

	require.Len(t, rep.Skipped, 1)
	assert.Equal(t, "/regions", rep.Skipped[0].Path)
	assert.Contains(t, rep.Skipped[0].Reason, "region reference")

	ds, err := f.OpenDataset(ctx, "refs", nil)
	require.NoError(t, err)
	defer ds.Close(ctx)
	paths, err := ds.ReadStrings(ctx, engine.All(ds.Shape()))
	require.NoError(t, err)
	assert.Equal(t, []string{"/data", "/grp/sub", "", "/"}, paths)
	v, err := ds.Attr(ReferenceAttr)
	require.NoError(t, err)
	s, _ := v.Str()
	assert.Equal(t, "object", s)

	d, err := f.OpenDataset(ctx, "data", nil)
	require.NoError(t, err)
	defer d.Close(ctx)
	v, err = d.Attr("parent")
	require.NoError(t, err)
	s, _ = v.Str()
	assert.Equal(t, "/grp/sub", s)
	v, err = d.Attr("many")
	require.NoError(t, err)
	many, err := v.Strings()
	require.NoError(t, err)
	assert.Equal(t, []string{"/data", "/grp/sub"}, many)
	for _, n := range []string{"parent", "many"} {
		v, err = d.Attr(ReferenceAttr + ":" + n)
		require.NoError(t, err, n)
		s, _ = v.Str()
		assert.Equal(t, "object", s, n)
	}
	var dr DatasetReport
	for _, x := range rep.Datasets {
		if x.Name == "data" {
			dr = x
		}
	}
	require.Len(t, dr.AttrNotes, 1)
	assert.True(t, strings.HasPrefix(dr.AttrNotes[0], "region: region reference"), dr.AttrNotes[0])
}

// TestImportDimensionLists: HDF5 dimension scales (h5py's dims, netCDF-4's
// dimensions) keep their association: the DIMENSION_LIST attribute,
// variable-length sequences of one object reference each, imports as the
// paths of each dimension's scale, marked "object-sequence"; one whose
// sequences hold another number of references is left out and named.
func TestImportDimensionLists(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "in.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = np.arange(4.0)
    f["y"] = np.arange(3.0)
    f["y2"] = np.arange(3.0) * 2
    f["x"].make_scale("x")
    f["y"].make_scale("y")
    f["y2"].make_scale("y2")
    d = f.create_dataset("data", data=np.zeros((3, 4), dtype="<f4"))
    d.dims[0].attach_scale(f["y"])
    d.dims[1].attach_scale(f["x"])
    e = f.create_dataset("two", data=np.zeros((3,), dtype="<f4"))
    e.dims[0].attach_scale(f["y"])
    e.dims[0].attach_scale(f["y2"])
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "out.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	require.NoError(t, err)
	t.Logf("import report:\n%s", rep)
	ds, err := f.OpenDataset(ctx, "data", nil)
	require.NoError(t, err)
	defer ds.Close(ctx)
	v, err := ds.Attr("DIMENSION_LIST")
	require.NoError(t, err)
	dims, err := v.Strings()
	require.NoError(t, err)
	assert.Equal(t, []string{"/y", "/x"}, dims)
	v, err = ds.Attr(ReferenceAttr + ":DIMENSION_LIST")
	require.NoError(t, err)
	s, _ := v.Str()
	assert.Equal(t, "object-sequence", s)

	var notes []string
	for _, d := range rep.Datasets {
		if d.Name == "two" {
			notes = d.AttrNotes
		}
	}
	assert.Contains(t, notes, "DIMENSION_LIST: variable-length sequences of object references, not each of one")
}
