package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Check of a virtual dataset's file checks that file: a damaged source is
// the source's problem (scctl check --sources reports it), not damage of
// the file that names it, and a missing one reads as the fill value.
func TestCheckVirtualIgnoresSources(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := vcache(t)
	src, err := Create(ctx, filepath.Join(dir, "src.scc"), &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := src.CreateDataset(ctx, "a", DatasetSpec{Type: Uint32, Shape: []uint64{4, 6}, Chunk: []uint64{2, 6}})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteSlice(ctx, a, All([]uint64{4, 6}), frameData(1, 24)); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	vpath := filepath.Join(dir, "v.scc")
	f, err := Create(ctx, vpath, &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{8, 6}, Mappings: []VirtualMapping{
		{Virtual: Box([]uint64{0, 0}, []uint64{4, 6}), File: "src.scc", Dataset: "a", Source: Box([]uint64{0, 0}, []uint64{4, 6})},
		{Virtual: Box([]uint64{4, 0}, []uint64{4, 6}), File: "gone.scc", Dataset: "a", Source: Box([]uint64{0, 0}, []uint64{4, 6})},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := Check(ctx, vpath, nil); err != nil {
		t.Fatalf("intact sources: %v %+v", err, rep)
	}
	if err := os.WriteFile(filepath.Join(dir, "src.scc"), make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(ctx, vpath, nil)
	if err != nil {
		t.Fatalf("a damaged source made its virtual file fail Check: %v %+v", err, rep)
	}
	if rep.Datasets != 1 {
		t.Fatalf("checked %d datasets, want 1", rep.Datasets)
	}
}
