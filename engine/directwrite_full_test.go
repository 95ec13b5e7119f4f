package engine

import (
	"bytes"
	"context"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// A stream of whole 4 KiB chunks (below the 16 KiB bypass threshold of a
// 64 KiB cache) four times the cache's size: once the cache is at its
// quiescent limit the chunks go straight from the caller's buffer to the
// file instead of evicting the ones cached, and the file reads back equal
// after a reopen. (Resident bytes pass the quiescent limit only by what
// index blocks and chunk headers add to the size hints.)
func TestDirectWriteStreamThroughFullCache(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 10}}
	const rows = 64
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{rows, dwRow}, Chunk: []uint64{1, dwRow}}
	f := tCreate(t, mem, opts)
	ds, err := f.CreateDataset(ctx, "d", spec)
	must(t, err)
	c := f.Cache()
	before := c.Stats()
	for r := range uint64(rows) {
		must(t, ds.Write(ctx, Box([]uint64{r, 0}, []uint64{1, dwRow}), pattern(dwRow, byte(r))))
	}
	st := c.Stats().Sub(before)
	if st.DirectWrites < rows-16 || st.Evictions != 0 || c.Stats().PeakResidentBytes > c.Stats().QuiescentLimit+dwRow {
		t.Fatalf("%d chunks through a 16-chunk cache: %d direct, %d created, %d evictions, peak %d",
			rows, st.DirectWrites, st.Creates, st.Evictions, c.Stats().PeakResidentBytes)
	}
	must(t, f.Close(ctx))
	g := tOpen(t, mem, &Options{ReadOnly: true})
	ds, err = g.OpenDataset(ctx, "d", nil)
	must(t, err)
	got := make([]byte, dwRow)
	for r := range uint64(rows) {
		must(t, ds.Read(ctx, Box([]uint64{r, 0}, []uint64{1, dwRow}), got))
		if !bytes.Equal(got, pattern(dwRow, byte(r))) {
			t.Fatalf("row %d read back wrong", r)
		}
	}
}
