package hdf5

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// TestGroupsRoundTrip exports a nested tree to HDF5 and imports it back:
// every group (an empty one too) is an HDF5 group holding its attributes,
// and the import recreates the groups with their attributes.
func TestGroupsRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	entry, err := f.CreateGroup(ctx, "entry")
	must(err)
	must(entry.SetAttr(ctx, "NX_class", engine.StringAttr("NXentry")))
	ds, err := f.CreateDataset(ctx, "entry/data/data", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{2, 3}, Chunk: []uint64{1, 3}})
	must(err)
	must(engine.WriteSlice(ctx, ds, engine.All([]uint64{2, 3}), []int32{1, 2, 3, 4, 5, 6}))
	data, err := f.OpenGroup(ctx, "entry/data")
	must(err)
	must(data.SetAttr(ctx, "gain", engine.ArrayAttr([]float64{1.5, 2})))
	empty, err := f.CreateGroup(ctx, "entry/empty")
	must(err)
	must(empty.SetAttr(ctx, "note", engine.StringAttr("nothing here")))
	must(f.Flush(ctx))
	paths := []string{"entry", "entry/data", "entry/empty"}
	want := map[string][]engine.Attr{}
	for _, p := range paths {
		g, err := f.OpenGroup(ctx, p)
		must(err)
		want[p], err = g.Attrs()
		must(err)
	}

	h5path := filepath.Join(dir, "tree.h5")
	_, err = Export(ctx, f, h5path, nil)
	must(err)
	hf, err := h5.Open(h5path)
	must(err)
	groups, err := hf.Groups()
	must(err)
	if !slices.Equal(groups, paths) {
		t.Fatalf("HDF5 groups %q, want %q", groups, paths)
	}
	for _, p := range paths {
		attrs, skipped, err := hf.ReadGroupAttrs(p)
		must(err)
		if len(attrs) != len(want[p]) || len(skipped) != 0 || attrs[0].Name != want[p][0].Name {
			t.Fatalf("HDF5 group %s attributes %v (skipped %v), want %v", p, attrs, skipped, want[p])
		}
	}
	must(hf.Close())

	g := testfile.Create(t, filepath.Join(dir, "back.scc"), &engine.Options{NoSync: true})
	defer g.Close(ctx)
	rep, err := Import(ctx, h5path, g, nil)
	must(err)
	if len(rep.GroupAttrNotes) != 0 {
		t.Fatalf("notes %q", rep.GroupAttrNotes)
	}
	for _, p := range paths {
		gg, err := g.OpenGroup(ctx, p)
		must(err)
		got, err := gg.Attrs()
		must(err)
		sameAttrs(t, p, want[p], got)
	}
	b, err := g.OpenDataset(ctx, "entry/data/data", nil)
	must(err)
	defer b.Close(ctx)
	buf := make([]int32, 6)
	must(engine.ReadSlice(ctx, b, engine.All([]uint64{2, 3}), buf))
	if !slices.Equal(buf, []int32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("elements %v", buf)
	}
}
