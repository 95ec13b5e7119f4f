package hdf5

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// writePlugins writes one dataset per filter that libhdf5 decodes only
// through a plugin (hdf5plugin's filter objects name them for h5py), a
// zstd dataset whose chunks the test made (Debian has no zstd plugin:
// h5py stores them with write_direct_chunk), and one with a filter no
// plugin decodes. Each dataset's elements as h5py reads them back are
// saved beside the file; for zstd, what was written.
const writePlugins = `
import sys, json, h5py, numpy as np, hdf5plugin
path, outdir = sys.argv[1], sys.argv[2]
exp = {}
a = (np.arange(70*50, dtype="<i4").reshape(70, 50) // 3).astype("<i4")
f32 = (np.arange(70*50, dtype="<f4").reshape(70, 50) / 8).astype("<f4")
with h5py.File(path, "w") as f:
    for name, data, kw in [
        ("bitshuffle", a, hdf5plugin.Bitshuffle()),
        ("blosc", a, hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.SHUFFLE)),
        ("blosc_zstd", a, hdf5plugin.Blosc(cname="zstd")),
        ("bzip2", a, hdf5plugin.BZip2()),
        ("lz4", a, hdf5plugin.LZ4()),
        ("lz4_shuffle", a, dict(shuffle=True, **hdf5plugin.LZ4())),
        ("lz4_blocks", a, hdf5plugin.LZ4(nbytes=1000)),
        ("zfp", f32, hdf5plugin.Zfp(reversible=True)),
        ("lzf", a, dict(compression="lzf", shuffle=True)),
    ]:
        f.create_dataset(name, data=data, chunks=(16, 20), **kw)
    for name, shuffle in [("zstd", False), ("zstd_shuffle", True), ("zstd_noise", True), ("zstd_stream", False)]:
        d = f.create_dataset(name, shape=(10, 12), dtype="<i4", chunks=(4, 12), shuffle=shuffle,
                             compression=32015, compression_opts=(5,), allow_unknown_filter=True)
        for k in range(3):
            d.id.write_direct_chunk((4*k, 0), open("%s/%s_%d.bin" % (outdir, name, k), "rb").read())
    d = f.create_dataset("sz", shape=(8,), dtype="<f4", chunks=(8,), compression=32017, allow_unknown_filter=True)
    d.id.write_direct_chunk((0,), b"not an sz stream")
with h5py.File(path, "r") as f:
    for name in f:
        if name.startswith("zstd") or name == "sz":
            continue
        p = "%s/%s.exp" % (outdir, name)
        f[name][...].tofile(p)
        exp[name] = p
json.dump(exp, open(outdir + "/exp.json", "w"))
`

// zstdChunks writes the chunk images of a (10, 12) int32 dataset in (4,
// 12) chunks as the zstd plugin stores them (one frame with its content
// size, after HDF5's shuffle when shuffled; larger than the chunk when
// the data is noise) or, stream, as a streaming encoder writes them (no
// content size), and returns the elements.
func zstdChunks(t *testing.T, dir, name string, shuffled, noisy, stream bool) []byte {
	// ZSTD_compress, which the plugin calls, records the content size.
	enc, err := zstd.NewWriter(nil, zstd.WithSingleSegment(true))
	require.NoError(t, err)
	defer enc.Close()
	data := make([]byte, 10*12*4)
	for i := 0; i < 10*12; i++ {
		binary.LittleEndian.PutUint32(data[4*i:], uint32(i/5))
	}
	if noisy {
		data = noise(len(data))
	}
	for k := 0; k < 3; k++ {
		chunk := make([]byte, 4*12*4) // the edge chunk's padding is the fill value, 0
		copy(chunk, data[k*4*12*4:min(len(data), (k+1)*4*12*4)])
		if shuffled {
			s := make([]byte, len(chunk))
			n := len(chunk) / 4
			for i := 0; i < n; i++ {
				for b := 0; b < 4; b++ {
					s[b*n+i] = chunk[4*i+b]
				}
			}
			chunk = s
		}
		img := enc.EncodeAll(chunk, nil)
		if stream {
			var b bytes.Buffer
			w, err := zstd.NewWriter(&b)
			require.NoError(t, err)
			_, err = w.Write(chunk)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			img = b.Bytes()
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s_%d.bin", name, k)), img, 0o644))
	}
	return data
}

// TestImportPluginFilters: chunks compressed by filters libhdf5 decodes
// only through a plugin import with every element equal to h5py's reading
// of them; HDF5's zstd and one-block LZ4 chunks are copied without being
// decoded here (zstd even where no plugin decodes it: Debian has none),
// LZ4 in smaller blocks through the plugin; a filter that no plugin
// decodes is named in the skipped dataset's reason. zstd chunks that are
// not in scc's form (grown by noise, or without their content size)
// import all the same, decoded by scc's zstd library.
func TestImportPluginFilters(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	want := map[string][]byte{
		"zstd":         zstdChunks(t, dir, "zstd", false, false, false),
		"zstd_shuffle": zstdChunks(t, dir, "zstd_shuffle", true, false, false),
		"zstd_noise":   zstdChunks(t, dir, "zstd_noise", true, true, false),
		"zstd_stream":  zstdChunks(t, dir, "zstd_stream", false, false, true),
	}
	h5path := filepath.Join(dir, "in.h5")
	runPython(t, writePlugins, h5path, dir)
	var exp map[string]string
	b, err := os.ReadFile(filepath.Join(dir, "exp.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &exp))
	for name, p := range exp {
		want[name], err = os.ReadFile(p)
		require.NoError(t, err)
	}

	sccPath := filepath.Join(dir, "out.scc")
	f := testfile.Create(t, sccPath, &engine.Options{NoSync: true})
	rep, err := Import(ctx, h5path, f, &Options{Workers: 3})
	require.NoError(t, err)
	t.Logf("import report:\n%s", rep)
	require.NoError(t, f.Close(ctx))

	modes := map[string]Mode{
		"zstd": Raw, "zstd_shuffle": Raw, "zstd_noise": Raw, "zstd_stream": Raw, "lz4": Rewrapped, "lz4_shuffle": Rewrapped, "lz4_blocks": Rewrapped,
		"bitshuffle": Reencoded, "blosc": Reencoded, "blosc_zstd": Reencoded, "bzip2": Reencoded, "zfp": Reencoded, "lzf": Reencoded,
	}
	byName := map[string]DatasetReport{}
	for _, d := range rep.Datasets {
		byName[d.Name] = d
	}
	assert.Len(t, rep.Datasets, len(modes))
	for name, m := range modes {
		d := byName[name]
		assert.Equal(t, m, d.Mode, name)
		switch name {
		case "zstd_noise":
			// Frames larger than the chunk are not scc's form, and no
			// plugin decodes them: decoded here (godecode.go).
			assert.Less(t, d.CopiedChunks, d.Chunks, name)
			assert.Equal(t, 3, d.Chunks, name)
		case "zstd_stream":
			assert.Zero(t, d.CopiedChunks, name)
		case "lz4_blocks":
			// Several LZ4 blocks a chunk are not scc's form: the plugin
			// decodes them.
			assert.Zero(t, d.CopiedChunks, name)
		case "zstd", "zstd_shuffle", "lz4", "lz4_shuffle":
			assert.Equal(t, d.Chunks, d.CopiedChunks, name)
			assert.NotZero(t, d.Chunks, name)
		}
	}
	require.Len(t, rep.Skipped, 1)
	assert.Equal(t, "/sz", rep.Skipped[0].Path)
	assert.Contains(t, rep.Skipped[0].Reason, "sz (id 32017) is not available")
	assert.Contains(t, rep.Skipped[0].Reason, h5.DebianPluginDir())

	f, err = engine.Open(ctx, sccPath, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	for name, w := range want {
		ds, err := f.OpenDataset(ctx, name, nil)
		require.NoError(t, err, name)
		got := make([]byte, len(w))
		require.NoError(t, ds.Read(ctx, engine.Box(make([]uint64, 2), ds.Shape()), got), name)
		assert.Equal(t, w, got, "%s: elements differ from h5py's", name)
		ds.Close(ctx)
	}
}
