package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestExportSkipsUnmappedDataset: `scctl export` of a file holding a
// dataset Zarr cannot hold (UTF-8 strings) exports the others and names
// it; --strict refuses and writes no store.
func TestExportSkipsUnmappedDataset(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src.scc")
	f := testfile.Create(t, src, nil)
	ds, err := f.CreateDataset(ctx, "ok", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Write(ctx, engine.All([]uint64{4}), []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateDataset(ctx, "names", engine.DatasetSpec{Type: engine.FixedString(8, engine.NullPad, engine.UTF8), Shape: []uint64{4}, Chunk: []uint64{2}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"zarr2", "zarr3"} {
		strict := filepath.Join(t.TempDir(), "strict")
		if code, out, stderr := runCmd(t, "export", "--format", format, "--strict", src, strict); code == 0 || !strings.Contains(stderr, `"names"`) {
			t.Fatalf("%s --strict: %d\n%s%s", format, code, out, stderr)
		}
		if _, err := os.Stat(strict); !os.IsNotExist(err) {
			t.Fatalf("%s --strict left a store: %v", format, err)
		}
		store := filepath.Join(t.TempDir(), "store")
		if code, out, stderr := runCmd(t, "export", "--format", format, src, store); code != 0 || !strings.Contains(out, "SKIPPED names: ") || !strings.Contains(out, "1 exported, 1 skipped") {
			t.Fatalf("%s: %d\n%s%s", format, code, out, stderr)
		}
		back := filepath.Join(t.TempDir(), "back.scc")
		if code, out, stderr := runCmd(t, "import", store, back); code != 0 {
			t.Fatalf("%s import: %d\n%s%s", format, code, out, stderr)
		}
	}
}
