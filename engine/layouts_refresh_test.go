package engine

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// TestLayoutsRefresh: a read-only File following a writer sees each new
// commit of sparse, contiguous and variable-length datasets after Refresh
// (dsState.adopt: the contiguous extent and checksums come from the new
// header; sparse selections cached by stored version are never stale).
func TestLayoutsRefresh(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "f.scc")
	w := tCreatePath(t, path, nil)
	defer w.Close(ctx)
	sp, err := w.CreateDataset(ctx, "sp", DatasetSpec{Type: Uint8, Shape: []uint64{100}, Chunk: []uint64{10}, Layout: Sparse})
	must(t, err)
	ct, err := w.CreateDataset(ctx, "ct", DatasetSpec{Type: Uint8, Shape: []uint64{100}})
	must(t, err)
	vl, err := w.CreateDataset(ctx, "vl", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{2}, Layout: Vlen})
	must(t, err)
	write := func(round byte) {
		must(t, sp.Write(ctx, Box([]uint64{uint64(round) * 3}, []uint64{2}), []byte{round, round}))
		if round > 1 {
			must(t, sp.Erase(ctx, Box([]uint64{uint64(round-1) * 3}, []uint64{1})))
		}
		must(t, ct.Write(ctx, Box([]uint64{uint64(round) * 10}, []uint64{10}), bytes.Repeat([]byte{round}, 10)))
		must(t, vl.WriteStrings(ctx, Box([]uint64{uint64(round) % 4}, []uint64{1}), []string{string(bytes.Repeat([]byte{'a' + round}, int(round)))}))
		must(t, w.Flush(ctx))
	}
	write(1)
	r, err := Open(ctx, path, &Options{ReadOnly: true})
	must(t, err)
	defer r.Close(ctx)
	rsp, err := r.OpenDataset(ctx, "sp", nil)
	must(t, err)
	rct, err := r.OpenDataset(ctx, "ct", nil)
	must(t, err)
	rvl, err := r.OpenDataset(ctx, "vl", nil)
	must(t, err)
	for round := byte(2); round <= 4; round++ {
		// Warm the reader's caches with the old state, then move on.
		_, err := rsp.DefinedElements(ctx, All([]uint64{100}))
		must(t, err)
		write(round)
		must(t, r.Refresh(ctx))
		wpos, err := sp.DefinedElements(ctx, All([]uint64{100}))
		must(t, err)
		rpos, err := rsp.DefinedElements(ctx, All([]uint64{100}))
		must(t, err)
		if !slices.Equal(wpos, rpos) {
			t.Fatalf("round %d: sparse defined %v, writer %v", round, rpos, wpos)
		}
		wb, rb := make([]byte, 100), make([]byte, 100)
		must(t, ct.Read(ctx, All([]uint64{100}), wb))
		must(t, rct.Read(ctx, All([]uint64{100}), rb))
		if !bytes.Equal(wb, rb) {
			t.Fatalf("round %d: contiguous differs", round)
		}
		ws, err := vl.ReadStrings(ctx, All([]uint64{4}))
		must(t, err)
		rs, err := rvl.ReadStrings(ctx, All([]uint64{4}))
		must(t, err)
		if !slices.Equal(ws, rs) {
			t.Fatalf("round %d: vlen %q, writer %q", round, rs, ws)
		}
	}
}
