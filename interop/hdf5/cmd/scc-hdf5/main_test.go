package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
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
	f, err := engine.Create(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := f.CreateDataset("g/x", engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{100}, Chunk: []uint64{16},
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
	if err := f.Close(); err != nil {
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
	g, err := engine.Open(back, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bd, err := g.OpenDataset("g/x")
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
