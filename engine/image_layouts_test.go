package engine

import (
	"bytes"
	"context"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestImageWithOtherLayouts: a file whose sparse, contiguous and
// variable-length datasets are closed with a cache image reopens (read-only,
// which uses the image, and writable, which drops it) with the same
// elements, and Check passes.
func TestImageWithOtherLayouts(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{Image: ImageOptions{Generate: true}})
	sp, err := f.CreateDataset(ctx, "sparse", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{8}, Layout: Sparse})
	if err != nil {
		t.Fatal(err)
	}
	ct, err := f.CreateDataset(ctx, "contig", DatasetSpec{Type: Uint8, Shape: []uint64{16, 16}, Layout: Contiguous})
	if err != nil {
		t.Fatal(err)
	}
	vl, err := f.CreateDataset(ctx, "vlen", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{2}, Layout: Vlen})
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Write(ctx, Box([]uint64{9}, []uint64{3}), []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	grid := make([]byte, 256)
	for i := range grid {
		grid[i] = byte(i * 5)
	}
	if err := ct.Write(ctx, All([]uint64{16, 16}), grid); err != nil {
		t.Fatal(err)
	}
	words := []string{"a", "", "ccc", "dddd"}
	if err := vl.WriteStrings(ctx, All([]uint64{4}), words); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		g := tOpen(t, mem, &Options{ReadOnly: ro, Image: ImageOptions{Generate: true}})
		if !g.ImageInfo().Used {
			t.Fatalf("read-only %v: image not used (%+v)", ro, g.ImageInfo())
		}
		sp, _ := g.OpenDataset(ctx, "sparse", nil)
		got := make([]byte, 64)
		if err := sp.Read(ctx, All([]uint64{64}), got); err != nil || !bytes.Equal(got[9:12], []byte{1, 2, 3}) || got[8] != 0 {
			t.Fatalf("read-only %v: sparse %v %v", ro, got, err)
		}
		ct, _ := g.OpenDataset(ctx, "contig", nil)
		got = make([]byte, 256)
		if err := ct.Read(ctx, All([]uint64{16, 16}), got); err != nil || !bytes.Equal(got, grid) {
			t.Fatalf("read-only %v: contiguous differs: %v", ro, err)
		}
		vl, _ := g.OpenDataset(ctx, "vlen", nil)
		ss, err := vl.ReadStrings(ctx, All([]uint64{4}))
		if err != nil || len(ss) != 4 || ss[2] != "ccc" || ss[1] != "" {
			t.Fatalf("read-only %v: vlen %q %v", ro, ss, err)
		}
		if err := g.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRefreshDropsImageEntries: a read-only File that used a cache image
// drops the image's prefetched entries when Refresh moves it to a newer
// generation: they describe the image's generation, and a header among them
// could pass for a newer header at the same address (its checksum is blind
// to the index root; TestSWMRRefreshFollowsReusedHeaders).
func TestRefreshDropsImageEntries(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	imgFile(t, mem, &Options{Image: imgOpts})
	r := tOpen(t, mem, &Options{ReadOnly: true})
	if info := r.ImageInfo(); !info.Used || info.Prefetched.Entries == 0 {
		t.Fatalf("image not used: %+v", info)
	}
	w, err := Open(ctx, "", &Options{Driver: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil { // commits: drops the image record
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.ImageInfo().Prefetched.Entries; n != 0 {
		t.Fatalf("%d prefetched entries of the old generation left after Refresh", n)
	}
}
