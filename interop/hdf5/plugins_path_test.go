package hdf5

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// TestPluginPathAndBrokenPlugin: a process with HDF5_PLUGIN_PATH set finds
// the plugins there, and a library there that cannot be loaded (sorted
// before the good one, where libhdf5's own search would stop) hides no
// other plugin: it is named instead. The plugin path is read once a
// process, so the check runs in a child test process.
func TestPluginPathAndBrokenPlugin(t *testing.T) {
	if os.Getenv("SCC_TEST_PLUGIN_CHILD") != "" {
		pluginChild(t)
		return
	}
	needReaders(t)
	bz2 := filepath.Join(h5.DebianPluginDir(), "libh5bz2.so")
	if _, err := os.Stat(bz2); err != nil {
		t.Fatalf("the BZip2 plugin is missing (%v); run `make interop-hdf5-deps`", err)
	}
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	require.NoError(t, os.Mkdir(plugins, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(plugins, "a_broken.so"), []byte("not a shared library"), 0o644))
	require.NoError(t, os.Symlink(bz2, filepath.Join(plugins, "libh5bz2.so")))
	h5path := filepath.Join(dir, "bz2.h5")
	runPython(t, `
import sys, h5py, numpy as np, hdf5plugin
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("b", data=np.arange(1000, dtype="<i8"), chunks=(100,), **hdf5plugin.BZip2())
    f.create_dataset("l", data=np.arange(1000, dtype="<i8"), chunks=(100,), **hdf5plugin.LZ4(nbytes=64))
`, h5path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPluginPathAndBrokenPlugin$", "-test.v")
	cmd.Env = append(os.Environ(), "SCC_TEST_PLUGIN_CHILD="+h5path, "HDF5_PLUGIN_PATH="+plugins)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestPluginPathAndBrokenPlugin")
}

func pluginChild(t *testing.T) {
	h5path := os.Getenv("SCC_TEST_PLUGIN_CHILD")
	broken := h5.BrokenPlugins()
	require.Len(t, broken, 1)
	assert.True(t, strings.Contains(broken[0], "a_broken.so"), broken[0])
	assert.Equal(t, []string{os.Getenv("HDF5_PLUGIN_PATH")}, h5.PluginPath())
	f := testfile.Create(t, filepath.Join(t.TempDir(), "o.scc"), &engine.Options{NoSync: true})
	defer f.Close(context.Background())
	rep, err := Import(context.Background(), h5path, f, nil)
	require.NoError(t, err)
	// BZip2 decodes through the path's plugin; LZ4 in several blocks
	// would need the LZ4 plugin, which is not on this path.
	require.Len(t, rep.Datasets, 1)
	assert.Equal(t, "b", rep.Datasets[0].Name)
	require.Len(t, rep.Skipped, 1)
	assert.Contains(t, rep.Skipped[0].Reason, "lz4 (id 32004)")
	ds, err := f.OpenDataset(context.Background(), "b", nil)
	require.NoError(t, err)
	defer ds.Close(context.Background())
	got := make([]int64, 1000)
	require.NoError(t, engine.ReadSlice(context.Background(), ds, engine.All(ds.Shape()), got))
	for i, v := range got {
		if v != int64(i) {
			t.Fatalf("element %d = %d", i, v)
		}
	}
}
