package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/vfd"
)

// TestCheckHugeIndexEntry: an index entry whose address or size does not
// fit an int64 (or whose end wraps) is a PROBLEM for Check and ErrCorrupt
// for every reader, never a panic: converted to int64 it is negative and
// would pass a signed bound.
func TestCheckHugeIndexEntry(t *testing.T) {
	for _, layout := range []LayoutKind{Chunked, Sparse, Vlen} {
		for _, e := range []index.Entry{
			{Addr: format.DataStart, Size: 1 << 63, Sum: 1, Mask: 1},
			{Addr: format.DataStart, Size: ^uint64(0), Sum: 1, Mask: 1},
			{Addr: 1<<63 - 8, Size: 64, Sum: 1, Mask: 1},
			{Addr: ^uint64(0) - 8, Size: 64, Sum: 1, Mask: 1},
			{Addr: 1 << 63, Size: 64, Sum: 1, Mask: 1},
		} {
			t.Run(fmt.Sprintf("%v/%x+%x", layout, e.Addr, e.Size), func(t *testing.T) {
				checkHugeEntry(t, layout, e)
			})
		}
	}
}

func checkHugeEntry(t *testing.T, layout LayoutKind, e index.Entry) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil, noCheck("an index entry is damaged on purpose"))
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}, Layout: layout}
	d, err := f.CreateDataset("d", spec)
	if err != nil {
		t.Fatal(err)
	}
	if layout != Vlen {
		if err := d.Write(ctx, All([]uint64{4}), fillBytes(4, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ix, err := d.s.idx.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Put(ctx, []uint64{1}, e); err != nil {
		t.Fatal(err)
	}
	d.s.dirty.Store(true)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Check(ctx, drv)
	if !errors.Is(err, ErrCorrupt) || r == nil || len(r.Problems) == 0 {
		t.Fatalf("Check = %+v, %v; want a problem and ErrCorrupt", r, err)
	}
	t.Log(r.Problems)
	if _, err := OpenWith(drv, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("writable open: %v, want ErrCorrupt", err)
	}
	ro, err := OpenWith(drv, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rd, err := ro.OpenDataset("d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.ChunkExtents(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ChunkExtents: %v, want ErrCorrupt", err)
	}
	var rerr error
	if layout == Vlen {
		_, rerr = rd.ReadVlen(ctx, All([]uint64{8}))
	} else {
		rerr = rd.Read(ctx, All([]uint64{8}), make([]byte, 8))
	}
	if !errors.Is(rerr, ErrCorrupt) {
		t.Fatalf("read: %v, want ErrCorrupt", rerr)
	}
}
