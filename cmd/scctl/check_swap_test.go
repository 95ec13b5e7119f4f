package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestCheckSwappedChunks: two frames of equal size swapped on disk, in a
// dataset whose pipeline ends with CRC32C, are a PROBLEM for check and
// make dump fail instead of printing the swapped values.
func TestCheckSwappedChunks(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/swap.scc"
	f := testfile.Create(t, path, nil, testfile.NoCheck("two chunks are swapped on disk on purpose"))
	ds, err := f.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{2, 256}, Chunk: []uint64{1, 256},
		Filters: []engine.Filter{engine.Zstd(1), engine.CRC32C()}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	for i := range buf {
		buf[i] = byte(i%16 + 16*(i/256))
	}
	if err := ds.Write(ctx, engine.All([]uint64{2, 256}), buf); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ext, err := ds.ChunkExtents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ext) != 2 || ext[0].Size != ext[1].Size {
		t.Fatalf("fixture: chunks %+v", ext)
	}
	if code, out, stderr := runCmd(t, "dump", "--dataset", "d", path); code != 0 {
		t.Fatalf("dump of the intact file: exit %d\n%s%s", code, out, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, c := ext[0], ext[1]
	fa := append([]byte(nil), b[a.Off:a.Off+a.Size]...)
	copy(b[a.Off:], b[c.Off:c.Off+c.Size])
	copy(b[c.Off:], fa)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "check", path)
	if code != 1 || !strings.Contains(out, "PROBLEM:") {
		t.Fatalf("check of swapped chunks: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := runCmd(t, "dump", "--dataset", "d", path); code == 0 {
		t.Fatalf("dump of swapped chunks exits 0:\n%s", out)
	}
}
