package hdf5

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// The real readers: h5py (Debian python3-h5py, run with /usr/bin/python3,
// not whatever python3 is first on PATH) and h5dump (hdf5-tools). `make
// interop-hdf5-deps` installs them. A missing reader fails the test: these
// tests are the proof that other tools read what scc writes.

const python = "/usr/bin/python3"

func needReaders(t testing.TB) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import h5py, numpy").CombinedOutput(); err != nil {
		t.Fatalf("h5py is missing (%v: %s); run `make interop-hdf5-deps`", err, out)
	}
	if _, err := exec.LookPath("h5dump"); err != nil {
		t.Fatalf("h5dump is missing (%v); run `make interop-hdf5-deps`", err)
	}
}

// runPython runs script with args and returns its stdout; a non-zero exit
// fails the test with the script's output.
func runPython(t testing.TB, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command(python, append([]string{"-c", script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// numpy dtype strings of scc's types, little-endian.
func dtypeOf(t engine.Type) string {
	return map[engine.Type]string{
		engine.Int8: "<i1", engine.Int16: "<i2", engine.Int32: "<i4", engine.Int64: "<i8",
		engine.Uint8: "<u1", engine.Uint16: "<u2", engine.Uint32: "<u4", engine.Uint64: "<u8",
		engine.Float32: "<f4", engine.Float64: "<f8",
		engine.Bool: "<b1", engine.Complex64: "<c8", engine.Complex128: "<c16",
	}[t]
}

// pattern fills n elements of t with compressible, position-dependent
// bytes (every byte of an element varies, so shuffle matters).
func pattern(t engine.Type, n int, seed int) []byte {
	size := t.Size()
	b := make([]byte, n*size)
	for i := 0; i < n; i++ {
		v := uint64(i/7+seed) * 0x0101010101010101
		for k := 0; k < size; k++ {
			b[i*size+k] = byte(v>>(8*k)) + byte(k)
		}
		if t == engine.Float32 || t == engine.Float64 {
			// Keep floats finite and exact: small integers.
			clear(b[i*size : (i+1)*size])
			if t == engine.Float32 {
				copy(b[i*size:], f32bytes(float32(i%1000)+0.5))
			} else {
				copy(b[i*size:], f64bytes(float64(i%1000)-0.25))
			}
		}
	}
	return b
}

// expectation is what a reader must find for one dataset.
type expectation struct {
	Name     string   `json:"name"`
	Dtype    string   `json:"dtype"`
	Shape    []uint64 `json:"shape"`
	MaxShape []any    `json:"maxshape"` // null for unlimited
	Chunks   []uint64 `json:"chunks"`
	Filters  []string `json:"filters"` // "shuffle", "gzip"
	Fill     string   `json:"fill"`    // hex of the fill element
	Data     string   `json:"data"`    // file holding the expected elements
}

// exportCase builds one scc dataset and its expected HDF5 form.
type exportCase struct {
	name    string
	spec    engine.DatasetSpec
	write   []uint64 // write the box [0, write); nil: the whole extent
	mode    Mode
	filters []string
}

func TestExportReadByH5pyAndH5dump(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	var cases []exportCase
	for i, typ := range engine.Types {
		if !typ.Numeric() {
			continue // the others: TestExportLayoutsReadByH5py
		}
		fl := [][]engine.Filter{nil, {engine.Shuffle()}, {engine.Shuffle(), engine.Deflate(1 + i%9)}, {engine.Shuffle(), engine.Zlib(1 + i%9)}}[i%4]
		mode := []Mode{Raw, Raw, Rewrapped, Raw}[i%4]
		names := [][]string{nil, {"shuffle"}, {"shuffle", "gzip"}, {"shuffle", "gzip"}}[i%4]
		cases = append(cases, exportCase{
			name:    "types/" + typ.String(),
			spec:    engine.DatasetSpec{Type: typ, Shape: []uint64{13, 11}, Chunk: []uint64{4, 8}, Filters: fl},
			mode:    mode,
			filters: names,
		})
	}
	fill := f64bytes(-7.5)
	cases = append(cases,
		// Unlimited growth dimension, partial edge chunks, a fill value,
		// and chunks never written (they must read as the fill value).
		exportCase{name: "frames", spec: engine.DatasetSpec{Type: engine.Float64, Shape: []uint64{10, 6, 5},
			MaxShape: []uint64{engine.Unlimited, 6, 5}, Chunk: []uint64{3, 4, 5}, Fill: fill,
			Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(6)}},
			write: []uint64{5, 6, 5}, mode: Rewrapped, filters: []string{"shuffle", "gzip"}},
		// The same with Zlib: the chunks are HDF5's deflate chunks as
		// they are (copied raw, none inflated).
		exportCase{name: "frames-zlib", spec: engine.DatasetSpec{Type: engine.Float64, Shape: []uint64{10, 6, 5},
			MaxShape: []uint64{engine.Unlimited, 6, 5}, Chunk: []uint64{3, 4, 5}, Fill: fill,
			Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(6)}},
			write: []uint64{5, 6, 5}, mode: Raw, filters: []string{"shuffle", "gzip"}},
		exportCase{name: "noise-zlib", spec: engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4096}, Chunk: []uint64{1024},
			Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(1)}}, mode: Raw, filters: []string{"shuffle", "gzip"}},
		// Deflate alone, two unlimited dimensions.
		exportCase{name: "grid", spec: engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{9, 9},
			MaxShape: []uint64{engine.Unlimited, engine.Unlimited}, Chunk: []uint64{4, 4},
			Filters: []engine.Filter{engine.Deflate(9)}}, mode: Rewrapped, filters: []string{"gzip"}},
		// No HDF5 counterpart: re-encoded to shuffle+deflate.
		exportCase{name: "zstd", spec: engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{100}, Chunk: []uint64{16},
			Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1), engine.CRC32C()}}, mode: Reencoded, filters: []string{"shuffle", "gzip"}},
		exportCase{name: "lz4", spec: engine.DatasetSpec{Type: engine.Int64, Shape: []uint64{40}, Chunk: []uint64{7},
			Filters: []engine.Filter{engine.LZ4()}}, mode: Reencoded, filters: []string{"gzip"}},
		// Incompressible chunks: scc skips deflate (mask bit), HDF5 must
		// honour the mask.
		exportCase{name: "noise", spec: engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4096}, Chunk: []uint64{1024},
			Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(1)}}, mode: Rewrapped, filters: []string{"shuffle", "gzip"}},
	)
	var exp []expectation
	for ci, c := range cases {
		ds, err := f.CreateDataset(ctx, c.name, c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := 1
		for _, s := range c.spec.Shape {
			n *= int(s)
		}
		full := make([]byte, n*c.spec.Type.Size())
		fillEl := ds.Fill()
		for i := 0; i < n; i++ {
			copy(full[i*len(fillEl):], fillEl)
		}
		box := c.write
		if box == nil {
			box = c.spec.Shape
		}
		m := 1
		for _, s := range box {
			m *= int(s)
		}
		data := pattern(c.spec.Type, m, ci)
		if strings.HasPrefix(c.name, "noise") {
			data = noise(m)
		}
		if err := ds.Write(ctx, engine.Box(make([]uint64, len(box)), box), data); err != nil {
			t.Fatal(err)
		}
		// The expected full extent: data inside box, fill elsewhere.
		if err := ds.Read(ctx, engine.Box(make([]uint64, len(box)), c.spec.Shape), full); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("exp%d.bin", ci))
		if err := os.WriteFile(path, full, 0o644); err != nil {
			t.Fatal(err)
		}
		e := expectation{Name: c.name, Dtype: dtypeOf(c.spec.Type), Shape: c.spec.Shape, Chunks: c.spec.Chunk,
			Filters: c.filters, Fill: fmt.Sprintf("%x", fillEl), Data: path}
		if e.Filters == nil {
			e.Filters = []string{}
		}
		maxShape := c.spec.MaxShape
		if maxShape == nil {
			maxShape = c.spec.Shape
		}
		for _, m := range maxShape {
			if m == engine.Unlimited {
				e.MaxShape = append(e.MaxShape, nil)
			} else {
				e.MaxShape = append(e.MaxShape, m)
			}
		}
		exp = append(exp, e)
		ds.Close(ctx)
	}
	// Export before any Flush: dirty cached chunks must be exported as
	// written.
	out := filepath.Join(dir, "out.h5")
	rep, err := Export(ctx, f, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export report:\n%s", rep)
	byName := map[string]DatasetReport{}
	for _, d := range rep.Datasets {
		byName[d.Name] = d
	}
	for _, c := range cases {
		d := byName[c.name]
		if d.Mode != c.mode {
			t.Errorf("%s: mode %s, want %s", c.name, d.Mode, c.mode)
		}
		if d.Chunks == 0 || (c.mode != Reencoded && d.CopiedChunks != d.Chunks) || (c.mode == Reencoded && d.CopiedChunks != 0) {
			t.Errorf("%s: %d chunks, %d copied", c.name, d.Chunks, d.CopiedChunks)
		}
		if (c.mode == Raw) != (d.UntouchedChunks == d.Chunks) {
			t.Errorf("%s (%s): %d of %d chunks not decoded at all", c.name, c.mode, d.UntouchedChunks, d.Chunks)
		}
	}
	if d := byName["frames"]; d.Chunks != 2*2 {
		t.Errorf("frames: %d chunks exported, want the 4 written", d.Chunks)
	}
	spec, _ := json.Marshal(exp)
	specPath := filepath.Join(dir, "exp.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	got := runPython(t, checkExportPy, out, specPath)
	if strings.TrimSpace(got) != fmt.Sprintf("ok %d", len(exp)) {
		t.Fatalf("h5py: %s", got)
	}
	// h5dump: the whole file parses, and a dataset dumped as binary is
	// the expected bytes.
	if b, err := exec.Command("h5dump", "-H", "-p", out).CombinedOutput(); err != nil {
		t.Fatalf("h5dump -H: %v\n%s", err, b)
	} else if !bytes.Contains(b, []byte("H5S_UNLIMITED")) || !bytes.Contains(b, []byte("DEFLATE")) || !bytes.Contains(b, []byte("SHUFFLE")) {
		t.Fatalf("h5dump -H output lacks unlimited dims or filters:\n%s", b)
	}
	for i, e := range exp {
		if e.Name != "frames" && e.Name != "zstd" && e.Name != "types/uint16" {
			continue
		}
		bin := filepath.Join(dir, fmt.Sprintf("dump%d.bin", i))
		if b, err := exec.Command("h5dump", "-d", "/"+e.Name, "-b", "LE", "-o", bin, out).CombinedOutput(); err != nil {
			t.Fatalf("h5dump -d %s: %v\n%s", e.Name, err, b)
		}
		want, _ := os.ReadFile(e.Data)
		gotb, err := os.ReadFile(bin)
		if err != nil || !bytes.Equal(gotb, want) {
			t.Fatalf("h5dump %s: %d bytes differ from the %d expected (%v)", e.Name, len(gotb), len(want), err)
		}
	}
}

const checkExportPy = `
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
exp = json.load(open(sys.argv[2]))
for e in exp:
    d = f[e["name"]]
    want = np.fromfile(e["data"], dtype=e["dtype"]).reshape(e["shape"])
    assert d.dtype == np.dtype(e["dtype"]), (e["name"], d.dtype)
    assert list(d.shape) == e["shape"], (e["name"], d.shape)
    assert list(d.maxshape) == e["maxshape"], (e["name"], d.maxshape, e["maxshape"])
    assert list(d.chunks) == e["chunks"], (e["name"], d.chunks)
    filters = (["shuffle"] if d.shuffle else []) + (["gzip"] if d.compression == "gzip" else [])
    pipeline = [k for k in d._filters]
    assert filters == e["filters"], (e["name"], filters, pipeline)
    fill = np.array(d.fillvalue, dtype=e["dtype"]).tobytes().hex()
    assert fill == e["fill"], (e["name"], fill, e["fill"])
    got = d[...]
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        raise SystemExit("%s: %d elements differ, first at %s: %r != %r" % (e["name"], len(bad), bad[0], got[tuple(bad[0])], want[tuple(bad[0])]))
    # Element by element through h5py's own indexing too, on a sample.
    for idx in list(np.ndindex(*d.shape))[:: max(1, d.size // 50)]:
        assert d[idx] == want[idx], (e["name"], idx)
print("ok", len(exp))
`
