package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCLI: export an scc file, import the result into a new scc file, and
// the exit statuses of bad usage and failures.
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "a.scc")
	f, err := engine.Create(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := f.CreateDataset(context.Background(), "g/x", engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{100}, Chunk: []uint64{16},
		Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(1)}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 400)
	for i := range buf {
		buf[i] = byte(i / 8)
	}
	if err := ds.Write(context.Background(), engine.Box([]uint64{0}, []uint64{100}), buf); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h5 := filepath.Join(dir, "b.h5")
	code, out, stderr := runCLI(t, "export", "-workers", "2", src, h5)
	if code != 0 || !strings.Contains(out, "g/x") || !strings.Contains(out, "rewrapped") {
		t.Fatalf("export: exit %d\n%s%s", code, out, stderr)
	}
	back := filepath.Join(dir, "c.scc")
	code, out, stderr = runCLI(t, "import", "-verify", "-datasets", "g/x", h5, back)
	if code != 0 || !strings.Contains(out, "chunks 7 (copied 7, 0 not decoded at all)") {
		t.Fatalf("import: exit %d\n%s%s", code, out, stderr)
	}
	g, err := engine.Open(context.Background(), back, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	bd, err := g.OpenDataset(context.Background(), "g/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 400)
	if err := bd.Read(context.Background(), engine.Box([]uint64{0}, []uint64{100}), got); err != nil || !bytes.Equal(got, buf) {
		t.Fatalf("imported data differs (%v)", err)
	}
	if code, _, _ := runCLI(t, "export", src); code != 2 {
		t.Errorf("one path: exit %d", code)
	}
	if code, _, _ := runCLI(t, "export", "-level", "12", src, filepath.Join(dir, "d.h5")); code != 2 {
		t.Errorf("bad level: exit %d", code)
	}
	if code, _, _ := runCLI(t, "copy"); code != 2 {
		t.Errorf("bad verb: exit %d", code)
	}
	if code, _, stderr := runCLI(t, "export", src, h5); code != 1 || stderr == "" {
		t.Errorf("export over an existing file: exit %d %q", code, stderr)
	}
	if code, _, _ := runCLI(t, "import", filepath.Join(dir, "missing.h5"), back); code != 1 {
		t.Errorf("missing input: exit %d", code)
	}
}

// python is Debian's interpreter, which has h5py (`make interop-hdf5-deps`).
const python = "/usr/bin/python3"

func writeH5(t *testing.T, path, script string) {
	t.Helper()
	out, err := exec.Command(python, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("h5py (run `make interop-hdf5-deps`): %v\n%s", err, out)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func sccDatasets(t *testing.T, path string) []string {
	t.Helper()
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	return testfile.DatasetNames(t, f)
}

// damagedH5 is a good dataset "a" and, after it in name order, a dataset
// "b" with one damaged deflate chunk, which an import with -verify fails on.
const damagedH5 = `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("a", data=np.arange(1000, dtype="<i4"), chunks=(100,), compression="gzip")
    d = f.create_dataset("b", data=(np.arange(4096, dtype="<u4") // 5), chunks=(1024,), compression="gzip", shuffle=True)
    info = d.id.get_chunk_info(1)
    off, size = info.byte_offset, info.size
with open(sys.argv[1], "r+b") as g:
    g.seek(off + size // 2)
    b = g.read(1)
    g.seek(off + size // 2)
    g.write(bytes([b[0] ^ 0x10]))
`

// TestImportAllOrNothing: an import that fails part way (with -strict, a
// chunk that cannot be decoded, met after another dataset was imported)
// leaves no scc file (before, the datasets imported ahead of the failure
// were committed and a rerun failed "exists"), leaves an existing one
// byte for byte as it was, and leaves no temporary file; an interrupted
// one likewise. Without -strict the damaged dataset is skipped and named.
func TestImportAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.h5")
	writeH5(t, bad, damagedH5)
	out := filepath.Join(dir, "out.scc")
	if code, _, stderr := runCLI(t, "import", "-verify", "-strict", bad, out); code != 1 || !strings.Contains(stderr, `"b"`) {
		t.Fatalf("import of a damaged file: exit %d: %s", code, stderr)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"bad.h5"}) {
		t.Fatalf("failed import left %v", got)
	}
	skipped := filepath.Join(dir, "skipped.scc")
	if code, stdout, stderr := runCLI(t, "import", "-verify", bad, skipped); code != 0 || !strings.Contains(stdout, "b ") || !strings.Contains(stdout, "skipped: the chunk at [1024] cannot be decoded") {
		t.Fatalf("import of a damaged file, not strict: exit %d: %s%s", code, stdout, stderr)
	}
	if got := sccDatasets(t, skipped); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("import of a damaged file holds %v, want [a]", got)
	}
	if err := os.Remove(skipped); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"bad.h5"}) {
		t.Fatalf("failed import left %v", got)
	}
	// Into an existing file (a merge): the file is as it was.
	good := filepath.Join(dir, "good.h5")
	writeH5(t, good, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("old", data=np.arange(10, dtype="<u2"))
`)
	if code, _, stderr := runCLI(t, "import", good, out); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI(t, "import", "-verify", "-strict", bad, out); code != 1 {
		t.Fatalf("merge of a damaged file: exit %d", code)
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
		t.Fatal("a failed merge changed the existing file")
	}
	if got := names(t, dir); !slices.Equal(got, []string{"bad.h5", "good.h5", "out.scc"}) {
		t.Fatalf("failed merge left %v", got)
	}
	// Interrupted: nothing new.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	if code := run(ctx, []string{"import", good, filepath.Join(dir, "new.scc")}, &o, &e); code != 1 {
		t.Fatalf("interrupted import: exit %d: %s", code, e.String())
	}
	if got := names(t, dir); !slices.Equal(got, []string{"bad.h5", "good.h5", "out.scc"}) {
		t.Fatalf("interrupted import left %v", got)
	}
}

// TestImportForceStrict: -force replaces the destination (the datasets it
// held are gone) where a plain import adds to it; an unsupported dataset is
// skipped, named and counted, and with -strict fails the import, which
// leaves nothing.
func TestImportForceStrict(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.h5"), filepath.Join(dir, "b.h5")
	writeH5(t, a, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("x", data=np.arange(10, dtype="<u2"))
`)
	writeH5(t, b, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("y", data=np.arange(10, dtype="<f4"))
    f.create_dataset("z", (3,), dtype=[("p", "<i4"), ("q", h5py.string_dtype())])
`)
	out := filepath.Join(dir, "o.scc")
	if code, _, stderr := runCLI(t, "import", a, out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "import", b, out)
	if code != 0 || !strings.Contains(stdout, "/z") || !strings.Contains(stdout, "compound") || !strings.Contains(stdout, "1 datasets imported, 1 skipped") {
		t.Fatalf("partial import: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := sccDatasets(t, out); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("merge: %v", got)
	}
	if code, _, stderr := runCLI(t, "import", "-force", a, out); code != 0 {
		t.Fatalf("-force: exit %d: %s", code, stderr)
	}
	if got := sccDatasets(t, out); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("-force kept the old datasets: %v", got)
	}
	strict := filepath.Join(dir, "s.scc")
	code, _, stderr = runCLI(t, "import", "-strict", b, strict)
	if code != 1 || !strings.Contains(stderr, `"z": element type compound`) {
		t.Fatalf("-strict: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(strict); !os.IsNotExist(err) {
		t.Fatalf("-strict refusal left a file (%v)", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"a.h5", "b.h5", "o.scc"}) {
		t.Fatalf("left %v", got)
	}
}

// TestExportForce: export refuses an existing destination unless -force,
// which replaces it whole; an interrupted export leaves nothing.
func TestExportForce(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "a.scc")
	f, err := engine.Create(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateDataset(context.Background(), "x", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{10}, Chunk: []uint64{4}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "b.h5")
	if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "export", src, out); code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("export over a file: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "export", "-force", src, out); code != 0 {
		t.Fatalf("-force: exit %d: %s", code, stderr)
	}
	back := filepath.Join(dir, "c.scc")
	if code, _, stderr := runCLI(t, "import", out, back); code != 0 {
		t.Fatalf("the replaced file does not import: exit %d: %s", code, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	if code := run(ctx, []string{"export", src, filepath.Join(dir, "d.h5")}, &o, &e); code != 1 {
		t.Fatalf("interrupted export: exit %d", code)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"a.scc", "b.h5", "c.scc"}) {
		t.Fatalf("left %v", got)
	}
}

// TestExportSourceFiles: an export of a virtual file whose mapping names
// another scc file writes that file's export beside OUT.h5 and prints it;
// -skip-sources leaves it out.
func TestExportSourceFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := engine.Create(ctx, filepath.Join(dir, "w0.scc"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateDataset(ctx, "x", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := engine.Create(ctx, filepath.Join(dir, "v.scc"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.CreateVirtualDataset(ctx, "x", engine.VirtualSpec{Type: engine.Uint8, Shape: []uint64{4}, Mappings: []engine.VirtualMapping{
		{Virtual: engine.Box([]uint64{0}, []uint64{4}), File: "w0.scc", Dataset: "x", Source: engine.Box([]uint64{0}, []uint64{4})},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "v.h5")
	code, stdout, stderr := runCLI(t, "export", filepath.Join(dir, "v.scc"), out)
	if code != 0 || !strings.Contains(stdout, "written as "+filepath.Join(filepath.Dir(out), "w0.h5")) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	out2 := filepath.Join(t.TempDir(), "v.h5")
	if code, stdout, stderr := runCLI(t, "export", "-skip-sources", filepath.Join(dir, "v.scc"), out2); code != 0 || strings.Contains(stdout, "written as") {
		t.Fatalf("-skip-sources: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(out2), "w0.h5")); !os.IsNotExist(err) {
		t.Fatalf("-skip-sources wrote w0.h5 (%v)", err)
	}
}
