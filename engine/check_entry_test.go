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
			{Addr: 1<<63 - 83, Size: 83, Sum: 1, Mask: 1}, // ends at 2^63: one past any offset
			{Addr: ^uint64(0) - 8, Size: 64, Sum: 1, Mask: 1},
			{Addr: 1 << 63, Size: 64, Sum: 1, Mask: 1},
		} {
			t.Run(fmt.Sprintf("%v/%x+%x", layout, e.Addr, e.Size), func(t *testing.T) {
				checkHugeEntry(t, layout, e, true)
			})
		}
	}
}

// FuzzCheckIndexEntry: any stored index entry naming a chunk that is not
// there is a PROBLEM for Check and an error for a read, never a panic.
func FuzzCheckIndexEntry(f *testing.F) {
	f.Add(uint8(0), uint64(format.DataStart), uint64(1)<<63)
	f.Add(uint8(1), uint64(1)<<63-8, uint64(64))
	f.Add(uint8(2), ^uint64(0)-8, uint64(64))
	f.Add(uint8(0), uint64(format.DataStart), uint64(100))
	f.Fuzz(func(t *testing.T, layout uint8, addr, size uint64) {
		if size == 0 {
			return // an absent entry
		}
		e := index.Entry{Addr: addr, Size: size, Sum: 1, Mask: 1}
		checkHugeEntry(t, []LayoutKind{Chunked, Sparse, Vlen}[layout%3], e, !entryFits(e, 1<<40))
	})
}

// checkHugeEntry stores e as chunk [1] of a dataset of the given layout
// and checks what Check, opens and reads make of it; huge: e cannot lie in
// any file, and every call that reads it must say so.
func checkHugeEntry(t *testing.T, layout LayoutKind, e index.Entry, huge bool) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil, noCheck("an index entry is damaged on purpose"))
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}, Layout: layout}
	d, err := f.CreateDataset(ctx, "d", spec)
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
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := Check(ctx, "", &Options{Driver: drv})
	if !errors.Is(err, ErrCorrupt) || r == nil || len(r.Problems) == 0 {
		t.Fatalf("Check = %+v, %v; want a problem and ErrCorrupt", r, err)
	}
	t.Log(r.Problems)
	if w, err := Open(ctx, "", &Options{Driver: drv}); huge && !errors.Is(err, ErrCorrupt) || err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("writable open: %v, want ErrCorrupt", err)
	} else if err == nil {
		w.Close(ctx)
	}
	ro, err := Open(ctx, "", &Options{Driver: drv, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(ctx)
	rd, err := ro.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.ChunkExtents(ctx); huge && !errors.Is(err, ErrCorrupt) || err != nil && !errors.Is(err, ErrCorrupt) {
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
