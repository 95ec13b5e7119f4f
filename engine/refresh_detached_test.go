package engine

import (
	"context"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestRefreshDropsDetachedChunks: a read-only File whose dataset handle was
// closed keeps the chunks cached for a warm reopen; a Refresh that adopts a
// newer header must drop them, or the reopened dataset reads the old state.
func TestRefreshDropsDetachedChunks(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	w := tCreate(t, mem, nil)
	ds, _ := w.CreateDataset("a", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{1, 1, 1, 1})
	w.Flush(ctx)
	r := tOpen(t, mem, &Options{ReadOnly: true})
	rd, _ := r.OpenDataset("a")
	buf := make([]byte, 4)
	rd.Read(ctx, Box([]uint64{0}, []uint64{4}), buf)
	rd.Close()
	ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{2, 2, 2, 2})
	w.Flush(ctx)
	r.Refresh(ctx)
	rd, _ = r.OpenDataset("a")
	rd.Read(ctx, Box([]uint64{0}, []uint64{4}), buf)
	if buf[0] != 2 {
		t.Fatalf("stale read after refresh: %v", buf)
	}
}
