package hdf5

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// writeH5py makes the files h5py writes the way users write them: gzip +
// shuffle, chunked, unlimited, fill values, partial edge chunks, chunks
// never written, nested groups, a contiguous dataset, big-endian elements,
// fletcher32, gzip level 0 and incompressible chunks. It saves each
// dataset's expected little-endian elements beside the file and lists them
// in a JSON index.
const writeH5py = `
import sys, json, h5py, numpy as np
path, outdir = sys.argv[1], sys.argv[2]
exp = []
def save(name, arr, mode, chunks=None):
    p = "%s/%d.bin" % (outdir, len(exp))
    le = arr.astype(arr.dtype.newbyteorder("<"))
    le.tofile(p)
    exp.append({"name": name, "dtype": le.dtype.str, "shape": list(arr.shape), "data": p, "mode": mode,
                "chunks": list(chunks) if chunks else None})
rng = np.random.default_rng(1)
with h5py.File(path, "w") as f:
    a = (np.arange(37*23, dtype="<u2").reshape(37, 23) // 3).astype("<u2")
    d = f.create_dataset("frames", shape=(37, 23), maxshape=(None, 23), chunks=(8, 16), dtype="<u2",
                         compression="gzip", compression_opts=4, shuffle=True)
    d[...] = a
    d.attrs["units"] = "counts"
    d.attrs["gain"] = np.float32(1.5)
    f.attrs["run"] = 7
    save("frames", a, "raw", (8, 16))
    g = f.create_group("grp/sub")
    b = np.full((20, 9), -3.5, dtype="<f8")
    d = g.create_dataset("sparse", shape=(20, 9), maxshape=(None, None), chunks=(6, 4), dtype="<f8",
                         compression="gzip", fillvalue=-3.5)
    b[0:6, 0:4] = np.linspace(0, 1, 24).reshape(6, 4)
    d[0:6, 0:4] = b[0:6, 0:4]
    save("grp/sub/sparse", b, "raw", (6, 4))
    c = rng.integers(-2**31, 2**31, size=(50, 40), dtype="<i4")
    f.create_dataset("contig", data=c)
    save("contig", c, "re-encoded")
    be = (np.arange(100) * 1000003).astype(">i8")
    f.create_dataset("bigendian", data=be, chunks=(16,), compression="gzip", shuffle=True)
    save("bigendian", be, "re-encoded", (16,))
    bf = np.full(20, -7, dtype=">i4")
    bf[0:5] = np.arange(5)
    d = f.create_dataset("befill", shape=(20,), chunks=(5,), dtype=">i4", fillvalue=-7, compression="gzip")
    d[0:5] = bf[0:5]
    save("befill", bf, "re-encoded", (5,))
    fl = np.arange(64, dtype="<f4") / 3
    f.create_dataset("fletcher", data=fl, chunks=(10,), fletcher32=True, shuffle=True, compression="gzip")
    save("fletcher", fl, "re-encoded", (10,))
    z = np.arange(300, dtype="<i2")
    f.create_dataset("gzip0", data=z, chunks=(64,), compression="gzip", compression_opts=0)
    save("gzip0", z, "raw", (64,))
    n = rng.integers(0, 256, size=(3000,), dtype="<u1")
    f.create_dataset("noise", data=n, chunks=(512,), compression="gzip", shuffle=True, maxshape=(None,))
    save("noise", n, "raw", (512,))
    p = np.arange(10, dtype="<u8")
    f.create_dataset("plain", data=p, chunks=(4,), maxshape=(None,))
    save("plain", p, "raw", (4,))
json.dump(exp, open(outdir + "/exp.json", "w"))
`

type h5pyDataset struct {
	Name   string   `json:"name"`
	Dtype  string   `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	Data   string   `json:"data"`
	Mode   Mode     `json:"mode"`
	Chunks []uint64 `json:"chunks"`
}

func TestImportFromH5py(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "in.h5")
	runPython(t, writeH5py, h5path, dir)
	var exp []h5pyDataset
	b, err := os.ReadFile(filepath.Join(dir, "exp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	sccPath := filepath.Join(dir, "out.scc")
	f := testfile.Create(t, sccPath, &engine.Options{NoSync: true})
	rep, err := Import(ctx, h5path, f, &Options{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("import report:\n%s", rep)
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Reopen: Import flushed, so everything is committed.
	f, err = engine.Open(ctx, sccPath, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	byName := map[string]DatasetReport{}
	for _, d := range rep.Datasets {
		byName[d.Name] = d
	}
	if len(rep.Datasets) != len(exp) {
		t.Fatalf("%d datasets imported, want %d", len(rep.Datasets), len(exp))
	}
	for _, e := range exp {
		d := byName[e.Name]
		if d.Mode != e.Mode {
			t.Errorf("%s: mode %s, want %s", e.Name, d.Mode, e.Mode)
		}
		switch {
		case e.Name == "noise" || e.Name == "gzip0":
			// Deflate grew these chunks: scc's deflate must shrink, so
			// they go through HDF5's decoder and scc's encoder.
			if d.CopiedChunks == d.Chunks || !strings.Contains(d.Reason, "re-encoded") {
				t.Errorf("%s: %d of %d chunks copied (%q)", e.Name, d.CopiedChunks, d.Chunks, d.Reason)
			}
		case e.Mode != Reencoded && d.CopiedChunks != d.Chunks:
			t.Errorf("%s: only %d of %d chunks copied raw", e.Name, d.CopiedChunks, d.Chunks)
		}
		ds, err := f.OpenDataset(ctx, e.Name, nil)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		if dtypeOf(ds.Type()) != strings.Replace(e.Dtype, "|", "<", 1) {
			t.Errorf("%s: type %v, want %s", e.Name, ds.Type(), e.Dtype)
		}
		if e.Chunks != nil && !equalU64(ds.Chunk(), e.Chunks) {
			t.Errorf("%s: chunk %v, want %v", e.Name, ds.Chunk(), e.Chunks)
		}
		want, _ := os.ReadFile(e.Data)
		got := make([]byte, len(want))
		if err := ds.Read(ctx, engine.Box(make([]uint64, len(e.Shape)), e.Shape), got); err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: data differs from what h5py wrote", e.Name)
		}
		ds.Close(ctx)
	}
	// h5py's attributes cross (TestAttrs covers every kind).
	if byName["frames"].AttrsNotImported != 0 || rep.RootAttrsNotImported != 0 {
		t.Errorf("attributes left behind: %v, root %v", byName["frames"].AttrNotes, rep.RootAttrNotes)
	}
	if v, err := f.Attr("run"); err != nil {
		t.Errorf("root attribute run: %v", err)
	} else if n, err := engine.Scalar[int64](v); err != nil || n != 7 {
		t.Errorf("root attribute run = %v %v", n, err)
	}
	if sp := byName["grp/sub/sparse"]; sp.Chunks != 1 {
		t.Errorf("sparse: %d chunks imported, want the 1 h5py stored", sp.Chunks)
	}
	ds, _ := f.OpenDataset(ctx, "frames", nil)
	if ms := ds.MaxShape(); ms[0] != engine.Unlimited || ms[1] != 23 {
		t.Errorf("frames: max shape %v", ms)
	}
	ds.Close(ctx)
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRoundTrip: scc → HDF5 → scc keeps every element, the pipeline and the
// chunking, with every chunk copied (no re-encode either way). A Zlib
// pipeline crosses byte for byte both ways (the same bytes in scc, in the
// HDF5 file and back in scc) with no chunk decoded except the edge chunks
// import verifies; a raw Deflate pipeline (files written before Zlib) is
// rewrapped on export and then copied as Zlib.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		compressor engine.Filter
		expMode    Mode
	}{
		{"zlib", engine.Zlib(5), Raw},
		{"deflate", engine.Deflate(5), Rewrapped},
	} {
		t.Run(tc.name, func(t *testing.T) { testRoundTrip(t, tc.compressor, tc.expMode) })
	}
}

func testRoundTrip(t *testing.T, compressor engine.Filter, expMode Mode) {
	ctx := context.Background()
	dir := t.TempDir()
	src := testfile.Create(t, filepath.Join(dir, "a.scc"), &engine.Options{NoSync: true})
	defer src.Close(ctx)
	spec := engine.DatasetSpec{Type: engine.Float32, Shape: []uint64{33, 17}, MaxShape: []uint64{engine.Unlimited, 17},
		Chunk: []uint64{8, 8}, Filters: []engine.Filter{engine.Shuffle(), compressor}, Fill: f32bytes(2.5)}
	ds, err := src.CreateDataset(ctx, "x/y", spec)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(engine.Float32, 20*17, 3)
	if err := ds.Write(ctx, engine.Box([]uint64{0, 0}, []uint64{20, 17}), data); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 33*17*4)
	if err := ds.Read(ctx, engine.Box([]uint64{0, 0}, []uint64{33, 17}), want); err != nil {
		t.Fatal(err)
	}
	h5path := filepath.Join(dir, "b.h5")
	erep, err := Export(ctx, src, h5path, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := erep.Datasets[0]
	wantUntouched := 0
	if expMode == Raw {
		wantUntouched = 9
	}
	if e.Mode != expMode || e.Chunks != 9 || e.CopiedChunks != 9 || e.UntouchedChunks != wantUntouched {
		t.Fatalf("export report %+v", e)
	}
	dst := testfile.Create(t, filepath.Join(dir, "c.scc"), &engine.Options{NoSync: true})
	defer dst.Close(ctx)
	rep, err := Import(ctx, h5path, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 3×3 chunks stored; the third column is an edge chunk (17 = 2×8+1),
	// which import decodes once to check its padding.
	d := rep.Datasets[0]
	if d.Name != "x/y" || d.Mode != Raw || d.CopiedChunks != d.Chunks || d.Chunks != 3*3 || d.UntouchedChunks != 6 {
		t.Fatalf("report %+v", d)
	}
	back, err := dst.OpenDataset(ctx, "x/y", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := back.Read(ctx, engine.Box([]uint64{0, 0}, []uint64{33, 17}), got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(back.Fill(), spec.Fill) || back.MaxShape()[0] != engine.Unlimited {
		t.Fatal("round trip differs")
	}
	if fs := back.Filters(); len(fs) != 2 || fs[0].String() != "shuffle" || fs[1].String() != "zlib(5)" {
		t.Fatalf("filters %v", fs)
	}
	// The stored chunks: the HDF5 file holds scc's zlib image (or scc's
	// raw DEFLATE stream inside a zlib wrapper), and the imported scc
	// dataset holds the HDF5 file's bytes.
	h, err := h5.Open(h5path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	hd, err := h.OpenDataset("x/y")
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	for r := uint64(0); r < 3; r++ {
		for c := uint64(0); c < 3; c++ {
			coords := []uint64{r, c}
			a, am, err := ds.ReadChunkRaw(ctx, coords)
			if err != nil {
				t.Fatal(err)
			}
			off := []uint64{r * 8, c * 8}
			hm, size, err := hd.ChunkInfo(off)
			if err != nil {
				t.Fatal(err)
			}
			hb := make([]byte, size)
			if _, err := hd.ReadChunk(off, hb); err != nil {
				t.Fatal(err)
			}
			b, bm, err := back.ReadChunkRaw(ctx, coords)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(hb, b) || hm != bm || am != bm {
				t.Fatalf("chunk %v: HDF5's bytes were not imported byte for byte", coords)
			}
			if expMode == Raw && !bytes.Equal(a, hb) {
				t.Fatalf("chunk %v: scc's zlib image was not exported byte for byte", coords)
			}
			if expMode == Rewrapped && !bytes.Equal(a, hb[2:len(hb)-4]) {
				t.Fatalf("chunk %v: scc's DEFLATE stream is not inside the HDF5 chunk", coords)
			}
		}
	}
}

// TestImportRefusals: an unsupported dataset is skipped with its reason
// and the others imported; with Strict it fails the whole import before
// anything is created, with a typed error; so does a name that exists.
func TestImportRefusals(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "s.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("ok", data=np.arange(10, dtype="<i4"))
    f.create_dataset("regs", data=[f["ok"].regionref[0:2]], dtype=h5py.regionref_dtype)
    f.create_dataset("fixed", data=np.array([b"a", b"bc"]))
    f.create_dataset("cplx", (3,), dtype=[("a", "<i4"), ("s", h5py.string_dtype())])
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "d.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	_, err := Import(ctx, h5path, f, &Options{Strict: true})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"regs": region references`) || !strings.Contains(err.Error(), `"cplx": element type compound`) {
		t.Fatalf("strict import of unsupported types: %v", err)
	}
	if n := testfile.DatasetNames(t, f); len(n) != 0 {
		t.Fatalf("a refused import created %v", n)
	}
	rep, err := Import(ctx, h5path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := testfile.DatasetNames(t, f); len(n) != 2 || n[0] != "fixed" || n[1] != "ok" || len(rep.Skipped) != 2 {
		t.Fatalf("partial import: datasets %v, skipped %v", n, rep.Skipped)
	}
	if !strings.Contains(rep.String(), "/cplx                    skipped: element type compound") {
		t.Errorf("report:\n%s", rep)
	}
	// A second time the name exists.
	if _, err := Import(ctx, h5path, f, &Options{Datasets: []string{"ok"}}); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("second import: %v", err)
	}
	if _, err := Import(ctx, filepath.Join(dir, "d.scc"), f, nil); !errors.Is(err, ErrHDF5) {
		t.Fatalf("import of a non-HDF5 file: %v", err)
	}
	if _, err := Import(ctx, h5path, f, &Options{DeflateLevel: 11}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("bad options: %v", err)
	}
}

// TestImportDamagedChunk: a deflated chunk damaged on disk is never
// silently imported data (the Adler-32 fails, and HDF5's own decoder, tried
// next, fails too): verifying, the dataset is skipped and named with the
// library's error (with Strict the import fails with it).
func TestImportDamagedChunk(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "dmg.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("d", data=(np.arange(4096, dtype="<u4") // 5), chunks=(1024,), compression="gzip", shuffle=True)
    info = d.id.get_chunk_info(1)
    off, size = info.byte_offset, info.size
with open(sys.argv[1], "r+b") as g:
    g.seek(off + size // 2)
    b = g.read(1)
    g.seek(off + size // 2)
    g.write(bytes([b[0] ^ 0x10]))
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "d.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	vrep, err := Import(ctx, h5path, f, &Options{Verify: true})
	if err != nil || len(vrep.Skipped) != 1 || vrep.Skipped[0].Path != "/d" || len(vrep.Datasets) != 0 ||
		!strings.Contains(vrep.Skipped[0].Reason, "can't read data: inflate() failed") {
		t.Fatalf("import of a damaged chunk, verifying: %v %+v", err, vrep)
	}
	if _, err := f.OpenDataset(ctx, "d", nil); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the skipped dataset is in the file: %v", err)
	}
	_, err = Import(ctx, h5path, f, &Options{Verify: true, Strict: true})
	if !errors.Is(err, ErrHDF5) {
		t.Fatalf("strict import of a damaged chunk, verifying: %v", err)
	}
	// The error says what failed and why, not libhdf5's whole stack of
	// internal functions.
	if msg := err.Error(); !strings.Contains(msg, "can't read data: inflate() failed") || strings.Contains(msg, "H5Z_pipeline") {
		t.Errorf("error message: %s", msg)
	}
	// Without Verify the chunk is stored uninflated, and every read of it
	// fails as corrupt (its Adler-32 or DEFLATE body does not check out),
	// never returning wrong elements.
	g := testfile.Create(t, filepath.Join(dir, "e.scc"), &engine.Options{NoSync: true}, testfile.NoCheck("the test imports a damaged zlib chunk without verifying, which stores it as it is"))
	defer g.Close(ctx)
	rep, err := Import(ctx, h5path, g, nil)
	if err != nil || rep.Datasets[0].UntouchedChunks != 4 {
		t.Fatalf("import of a damaged chunk, not verifying: %v %+v", err, rep)
	}
	ds, err := g.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024*4)
	if err := ds.Read(ctx, engine.Box([]uint64{1024}, []uint64{1024}), buf); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("read of the damaged chunk: %v, want ErrCorrupt", err)
	}
	if err := ds.Read(ctx, engine.Box([]uint64{0}, []uint64{1024}), buf); err != nil {
		t.Fatalf("read of an intact chunk: %v", err)
	}
}

// TestExportRefusals: an existing destination is never overwritten, and a
// chunk HDF5 refuses fails clearly without leaving a file.
func TestExportRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "a.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	if _, err := f.CreateDataset(ctx, "wide", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{8}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.h5")
	if _, err := Export(ctx, f, out, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("chunk beyond a fixed max shape: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("refused export left %s (%v)", out, err)
	}
	if err := os.WriteFile(out, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(ctx, f, out, &Options{Datasets: []string{}}); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("export over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "precious" {
		t.Fatal("export overwrote an existing file")
	}
	// A virtual dataset HDF5 export cannot express (a source named by
	// URL) is refused before a file is made, and the error names it.
	g := testfile.Create(t, filepath.Join(dir, "b.scc"), &engine.Options{NoSync: true, Virtual: absentURLs})
	defer g.Close(ctx)
	if _, err := g.CreateDataset(ctx, "src", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{8}, Chunk: []uint64{4}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateVirtualDataset(ctx, "v", engine.VirtualSpec{Type: engine.Uint8, Shape: []uint64{8}, Mappings: []engine.VirtualMapping{
		{Virtual: engine.Box([]uint64{0}, []uint64{4}), Dataset: "src", Source: engine.Box([]uint64{0}, []uint64{4})},
		{Virtual: engine.Box([]uint64{4}, []uint64{4}), File: "s3://bucket/a.scc", Dataset: "d", Source: engine.Box([]uint64{0}, []uint64{4})},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := g.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "y.h5")
	if _, err := Export(ctx, g, out2, nil); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `virtual dataset "v": mapping 1 (s3://bucket/a.scc:d): source named by URL`) {
		t.Fatalf("export of a virtual dataset: %v, want ErrUnsupported naming the mapping", err)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Fatalf("refused export left %s (%v)", out2, err)
	}
}

// TestImportContiguousChunking: an unchunked HDF5 dataset gets the chunk
// shape Options.Chunk asks for, or whole rows of about 1 MiB, and the
// pipeline Options.Filters names.
func TestImportContiguousChunking(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "c.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("big", data=np.arange(600*1000, dtype="<f8").reshape(600, 1000))
`, h5path)
	want := make([]byte, 600*1000*8)
	for i := 0; i < 600*1000; i++ {
		copy(want[8*i:], f64bytes(float64(i)))
	}
	for _, tc := range []struct {
		opts  *Options
		chunk []uint64
		fl    string
	}{
		{nil, []uint64{131, 1000}, "[shuffle zlib(1)]"},
		{&Options{Chunk: []uint64{100, 250}, Filters: []engine.Filter{engine.LZ4()}}, []uint64{100, 250}, "[lz4]"},
	} {
		f := testfile.Create(t, filepath.Join(t.TempDir(), "d.scc"), &engine.Options{NoSync: true})
		rep, err := Import(ctx, h5path, f, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := f.OpenDataset(ctx, "big", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !equalU64(ds.Chunk(), tc.chunk) || fmt.Sprint(ds.Filters()) != tc.fl || rep.Datasets[0].Mode != Reencoded {
			t.Errorf("chunk %v filters %v mode %s, want %v %s re-encoded", ds.Chunk(), ds.Filters(), rep.Datasets[0].Mode, tc.chunk, tc.fl)
		}
		got := make([]byte, len(want))
		if err := ds.Read(ctx, engine.Box([]uint64{0, 0}, []uint64{600, 1000}), got); err != nil || !bytes.Equal(got, want) {
			t.Errorf("contiguous import differs (%v)", err)
		}
		f.Close(ctx)
	}
}

// TestImportShrunkEdgeChunk: an HDF5 dataset shrunk after writing. scc's
// stored chunks hold the fill value outside the extent (growing shows
// fill), and WriteChunkRawChecked refuses an edge chunk whose padding is
// not fill, sending it through the engine instead (libhdf5 1.10 resets the
// padding on a shrink, so here the chunks copy raw). Either way, growing
// the imported dataset shows fill, not the elements cut off in HDF5.
func TestImportShrunkEdgeChunk(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "shrunk.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("d", data=np.arange(1, 11, dtype="<i4"), chunks=(4,), maxshape=(None,), compression="gzip", shuffle=True)
    d.resize((6,))
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "s.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", rep)
	ds, err := f.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.SetExtent(ctx, []uint64{10}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 40)
	if err := ds.Read(ctx, engine.Box([]uint64{0}, []uint64{10}), got); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		want := uint32(0)
		if i < 6 {
			want = uint32(i + 1)
		}
		if v := uint32(got[4*i]) | uint32(got[4*i+1])<<8 | uint32(got[4*i+2])<<16 | uint32(got[4*i+3])<<24; v != want {
			t.Fatalf("element %d is %d, want %d", i, v, want)
		}
	}
}

// TestImportSparseHugeGrid: three chunks stored in a grid of 10^9 cells
// (a long unlimited axis). Import lists the stored chunks instead of
// asking HDF5 about every cell, which would not finish within the test's
// timeout.
func TestImportSparseHugeGrid(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "sparse.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("s", shape=(10**12,), maxshape=(None,), chunks=(1000,), dtype="<i2", compression="gzip", fillvalue=-1)
    for k in (0, 123456789, 10**9 - 1):
        d[k*1000:(k+1)*1000] = np.arange(1000, dtype="<i2") + k % 1000
`, h5path)
	f := testfile.Create(t, filepath.Join(dir, "s.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, h5path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Datasets[0]; d.Chunks != 3 || d.CopiedChunks != 3 {
		t.Fatalf("report %+v", d)
	}
	ds, err := f.OpenDataset(ctx, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4000)
	k := uint64(123456789)
	if err := ds.Read(ctx, engine.Box([]uint64{k*1000 - 1000}, []uint64{2000}), got); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		want := int16(-1)
		if i >= 1000 {
			want = int16(i-1000) + int16(k%1000)
		}
		if v := int16(uint16(got[2*i]) | uint16(got[2*i+1])<<8); v != want {
			t.Fatalf("element %d: %d, want %d", i, v, want)
		}
	}
}

// TestExportSparseHugeGrid: an scc dataset with two chunks in a grid of
// 10^9 cells exports its two stored chunks (not a walk of the grid) and
// comes back whole.
func TestExportSparseHugeGrid(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := testfile.Create(t, filepath.Join(dir, "a.scc"), &engine.Options{NoSync: true})
	defer src.Close(ctx)
	ds, err := src.CreateDataset(ctx, "s", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{1e12}, MaxShape: []uint64{engine.Unlimited},
		Chunk: []uint64{1000}, Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(1)}})
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(engine.Int16, 1000, 4)
	for _, k := range []uint64{7, 1e9 - 1} {
		if err := ds.Write(ctx, engine.Box([]uint64{k * 1000}, []uint64{1000}), data); err != nil {
			t.Fatal(err)
		}
	}
	h5path := filepath.Join(dir, "b.h5")
	rep, err := Export(ctx, src, h5path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Datasets[0]; d.Chunks != 2 || d.CopiedChunks != 2 {
		t.Fatalf("export report %+v", d)
	}
	dst := testfile.Create(t, filepath.Join(dir, "c.scc"), &engine.Options{NoSync: true})
	defer dst.Close(ctx)
	if _, err := Import(ctx, h5path, dst, nil); err != nil {
		t.Fatal(err)
	}
	back, err := dst.OpenDataset(ctx, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2000)
	if err := back.Read(ctx, engine.Box([]uint64{(1e9 - 1) * 1000}, []uint64{1000}), got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("last chunk differs (%v)", err)
	}
}
