package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestDeletedHandleStorage: a deleted dataset's handle answers ErrDeleted
// from Storage and ChunkExtents too, on every layout, rather than
// describing space that is free (and may already hold another dataset).
func TestDeletedHandleStorage(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	specs := map[string]DatasetSpec{
		"dense":  {Type: Uint16, Shape: []uint64{16, 16}, Chunk: []uint64{8, 8}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"contig": {Type: Uint16, Shape: []uint64{16, 16}, Layout: Contiguous},
		"sparse": {Type: Uint16, Shape: []uint64{16, 16}, Chunk: []uint64{8, 8}, Layout: Sparse},
		"vlen":   {Type: Uint8, Shape: []uint64{8, 8}, Chunk: []uint64{4, 4}, Layout: Vlen},
	}
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	handles := map[string]*Dataset{}
	for name, spec := range specs {
		d, err := f.CreateDataset(ctx, name, spec)
		must(err, name)
		handles[name] = d
	}
	must(handles["dense"].Write(ctx, All([]uint64{16, 16}), fillBytes(512, 1)), "write dense")
	must(handles["contig"].Write(ctx, All([]uint64{16, 16}), fillBytes(512, 2)), "write contig")
	v, err := f.CreateVirtualDataset(ctx, "virtual", VirtualSpec{Type: Uint16, Shape: []uint64{16, 16}, Mappings: []VirtualMapping{
		{Virtual: Box([]uint64{0, 0}, []uint64{16, 16}), Dataset: "dense", Source: Box([]uint64{0, 0}, []uint64{16, 16})},
	}})
	must(err, "virtual")
	handles["virtual"] = v
	must(f.Flush(ctx), "flush")
	for name, d := range handles {
		_, err := d.Storage(ctx)
		must(err, name+" Storage")
		_, err = d.ChunkExtents(ctx)
		must(err, name+" ChunkExtents")
	}
	wantDeleted := func(name, call string, got any, err error) {
		t.Helper()
		if !errors.Is(err, ErrDeleted) || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: %s after delete = %+v, %v; want ErrDeleted naming the dataset", name, call, got, err)
		}
	}
	for name, d := range handles {
		must(f.Delete(ctx, name, nil), "delete "+name)
		st, err := d.Storage(ctx)
		wantDeleted(name, "Storage", st, err)
		ext, err := d.ChunkExtents(ctx)
		wantDeleted(name, "ChunkExtents", ext, err)
	}
	must(f.Flush(ctx), "flush")
	for name, d := range handles {
		st, err := d.Storage(ctx)
		wantDeleted(name, "Storage", st, err)
		ext, err := d.ChunkExtents(ctx)
		wantDeleted(name, "ChunkExtents", ext, err)
		must(d.Close(ctx), "close "+name)
	}
}
