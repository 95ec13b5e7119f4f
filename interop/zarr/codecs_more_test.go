package zarr

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestImportBZ2AndDelta: arrays zarr-python writes with numcodecs' BZ2
// compressor and Delta filter (integers of several sizes and byte orders,
// floats; differences stored in another type than the elements', astype,
// narrower and wider, signed and unsigned, wrapping) import with every
// element equal to zarr-python's reading.
func TestImportBZ2AndDelta(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "s.zarr")
	out := filepath.Join(dir, "out")
	require.NoError(t, os.Mkdir(out, 0o755))
	py := `
import sys, zarr, numpy as np, numcodecs
store, out = sys.argv[1], sys.argv[2]
g = zarr.open_group(store, mode="w")
arrs = {
    "bz2": (np.arange(5000, dtype="<i4") // 7, dict(compressor=numcodecs.BZ2(level=5))),
    "bz2_f8": (np.linspace(0, 1, 999).reshape(27, 37), dict(compressor=numcodecs.BZ2(), chunks=(10, 10))),
    "delta_i8": ((np.arange(3000, dtype="<i8") ** 2) - 10**6, dict(filters=[numcodecs.Delta(dtype="<i8")], compressor=numcodecs.Zlib(1))),
    "delta_u2_be": (np.arange(1000, dtype=">u2") * 61, dict(filters=[numcodecs.Delta(dtype=">u2")], compressor=None)),
    "delta_i1": (np.arange(-100, 100, dtype="i1"), dict(filters=[numcodecs.Delta(dtype="i1")], compressor=numcodecs.BZ2())),
    "delta_f4": (np.linspace(-3, 3, 777, dtype="<f4"), dict(filters=[numcodecs.Delta(dtype="<f4")], compressor=numcodecs.Zstd())),
    "delta_i8_as_i2": ((np.arange(3000, dtype="<i8") * 30011) % 200003 - 10**5, dict(filters=[numcodecs.Delta(dtype="<i8", astype="<i2")], compressor=numcodecs.Zlib(1))),
    "delta_u1_as_be_i2": (np.arange(1000, dtype="u1") * 7, dict(filters=[numcodecs.Delta(dtype="u1", astype=">i2")], compressor=None)),
    "delta_i4_as_u1": (np.arange(500, dtype="<i4") * 3 - 7, dict(filters=[numcodecs.Delta(dtype="<i4", astype="u1")], compressor=numcodecs.BZ2())),
    "delta_f8_as_f4": (np.linspace(-1e3, 1e3, 999) ** 2, dict(filters=[numcodecs.Delta(dtype="<f8", astype="<f4")], compressor=None)),
    "delta_f4_as_f8": (np.random.RandomState(1).randn(999).astype("<f4") * 1e3, dict(filters=[numcodecs.Delta(dtype="<f4", astype="<f8")], compressor=numcodecs.Zstd())),
}
for i, (name, (a, kw)) in enumerate(sorted(arrs.items())):
    kw.setdefault("chunks", 256)
    z = g.create(name, shape=a.shape, dtype=a.dtype, **kw)
    z[...] = a
    r = zarr.open_array(store + "/" + name, mode="r")[...]
    r.astype(r.dtype.newbyteorder("<")).tofile("%s/%s.bin" % (out, name))
`
	if b, err := exec.Command(python, "-c", py, store, out).CombinedOutput(); err != nil {
		t.Fatalf("zarr-python: %v: %s", err, b)
	}
	f := testfile.Create(t, filepath.Join(dir, "in.scc"), nil)
	defer f.Close(context.Background())
	rep, err := Import(bg, store, f, Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Skipped)
	names := []string{"bz2", "bz2_f8", "delta_i8", "delta_u2_be", "delta_i1", "delta_f4",
		"delta_i8_as_i2", "delta_u1_as_be_i2", "delta_i4_as_u1", "delta_f8_as_f4", "delta_f4_as_f8"}
	assert.Len(t, rep.Datasets, len(names))
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(out, name+".bin"))
		require.NoError(t, err)
		ds, err := f.OpenDataset(context.Background(), name, nil)
		require.NoError(t, err, name)
		got := make([]byte, len(want))
		require.NoError(t, ds.Read(bg, engine.All(ds.Shape()), got), name)
		assert.True(t, bytes.Equal(want, got), "%s: elements differ from zarr-python's", name)
		ds.Close(context.Background())
	}
}

// FuzzBZ2Decode: any input decodes within the bound or fails with
// ErrCorrupt, never a panic, never more than the bound.
func FuzzBZ2Decode(f *testing.F) {
	f.Add([]byte("BZh91AY&SY"), 100)
	// A stream of 10,000 'a's: 45 bytes that would decode to far more
	// than the bound the fuzzer gives.
	f.Add([]byte{0x42, 0x5a, 0x68, 0x39, 0x31, 0x41, 0x59, 0x26, 0x53, 0x59, 0x0e, 0x09, 0xe2, 0xdf, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x20, 0x00, 0x20, 0x00, 0x30, 0xcc, 0x05, 0x29, 0xa6, 0x00, 0x00, 0x00, 0x17, 0x72, 0x45, 0x38, 0x50, 0x90, 0x0e, 0x09, 0xe2, 0xdf}, 10)
	f.Fuzz(func(t *testing.T, src []byte, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		out, err := bz2Decode(src, max)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(out) > max {
			t.Fatalf("%d bytes past the bound %d", len(out), max)
		}
		// What decodes is what Go's reader gives.
		ref := new(bytes.Buffer)
		if _, err := ref.ReadFrom(bzip2.NewReader(bytes.NewReader(src))); err == nil && !bytes.Equal(ref.Bytes(), out) {
			t.Fatal("differs from compress/bzip2")
		}
	})
}

// FuzzDeltaDecode: any input of whole elements decodes to as many bytes,
// the running sum; others fail with ErrCorrupt.
func FuzzDeltaDecode(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 3, 0}, 2, false, byte('i'), 2, byte('i'), 1<<20)
	f.Add([]byte{1, 2, 3}, 4, true, byte('f'), 8, byte('f'), 1<<20)
	f.Add([]byte{1, 2, 3, 4}, 8, false, byte('u'), 1, byte('i'), 16)
	f.Fuzz(func(t *testing.T, src []byte, size int, be bool, kind byte, asSize int, asKind byte, max int) {
		ok := func(size int, kind byte) bool {
			return (size == 1 || size == 2 || size == 4 || size == 8) && (kind == 'i' || kind == 'u' || kind == 'f') && (kind != 'f' || size >= 4)
		}
		if !ok(size, kind) || !ok(asSize, asKind) || (kind == 'f') != (asKind == 'f') || max < 0 || max > 1<<20 {
			return
		}
		dt := deltaType{deltaElem{kind: kind, size: size, bigEndian: be}, deltaElem{kind: asKind, size: asSize, bigEndian: be}}
		out, err := dt.decode(src, max)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(out) > max || len(out) != len(src)/asSize*size {
			t.Fatalf("%d bytes from %d (bound %d)", len(out), len(src), max)
		}
		if asSize != size {
			return
		}
		if kind != 'f' && size == 2 && !be && len(src) >= 4 {
			a, b := binary.LittleEndian.Uint16(src), binary.LittleEndian.Uint16(src[2:])
			if binary.LittleEndian.Uint16(out[2:]) != a+b {
				t.Fatal("not the running sum")
			}
		}
	})
}

// TestImportV3Delta: numcodecs' Delta as a v3 array-to-array codec (before
// a big-endian bytes codec, then gzip) is undone on the elements in the
// bytes codec's order.
func TestImportV3Delta(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "s.zarr")
	writeFile(t, filepath.Join(store, "zarr.json"), `{"zarr_format":3,"node_type":"group"}`)
	writeFile(t, filepath.Join(store, "d", "zarr.json"), `{"zarr_format":3,"node_type":"array","shape":[6],"data_type":"int32",
		"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,
		"codecs":[{"name":"numcodecs.delta","configuration":{"dtype":"<i4"}},{"name":"bytes","configuration":{"endian":"big"}},{"name":"gzip","configuration":{"level":1}}]}`)
	want := []int32{5, -3, 100, 100, 7, 1 << 30}
	for c := 0; c < 2; c++ {
		vals := make([]int32, 4)
		copy(vals, want[4*c:min(len(want), 4*c+4)])
		raw := make([]byte, 16)
		prev := int32(0)
		for i, v := range vals {
			binary.BigEndian.PutUint32(raw[4*i:], uint32(v-prev))
			prev = v
		}
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, err := w.Write(raw)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		writeFile(t, filepath.Join(store, "d", "c", fmt.Sprint(c)), z.String())
	}
	f := testfile.Create(t, filepath.Join(dir, "o.scc"), nil)
	defer f.Close(context.Background())
	rep, err := Import(bg, store, f, Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Skipped)
	ds, err := f.OpenDataset(context.Background(), "d", nil)
	require.NoError(t, err)
	defer ds.Close(context.Background())
	got := make([]int32, 6)
	require.NoError(t, engine.ReadSlice(bg, ds, engine.All(ds.Shape()), got))
	assert.Equal(t, want, got)
}
