package engine

import (
	"context"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestIndexMemoryInCacheBudget reads a file with a large extensible-array
// index cold and checks issue 5 §4: the index blocks the reads loaded are
// charged to the shared cache as metadata (exactly the index's MemBytes),
// chunks are evicted to make room for them so that chunks + metadata stay
// within the active limit, and a second pass over the same chunks does no
// index I/O (the blocks stayed in memory) even where the chunks themselves
// were evicted and must be read again.
func TestIndexMemoryInCacheBudget(t *testing.T) {
	ctx := context.Background()
	const n, row = 50_000, 256 // 50,000 chunks of one 256-byte row
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 20}})
	ds, err := f.CreateDataset("t", DatasetSpec{Type: Uint8, Shape: []uint64{n, row}, MaxShape: []uint64{Unlimited, row}, Chunk: []uint64{1, row}})
	must(t, err)
	vals := make([]byte, n*row)
	for i := range vals {
		vals[i] = byte(i/row*31 + 7)
	}
	must(t, ds.Write(ctx, All([]uint64{n, row}), vals))
	must(t, f.Close())

	cnt := vfd.NewCounting(mem)
	f = tOpen(t, cnt, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 512 << 10}})
	defer f.Close()
	ds, err = f.OpenDataset("t")
	must(t, err)
	if k := ds.IndexKind(); k != "extensible-array" {
		t.Fatalf("index kind %s", k)
	}
	c := f.Cache()
	limit := c.Stats().ActiveLimit
	idxMem := func() int64 {
		b := ds.s.idx.p.Load()
		if b == nil {
			return 0
		}
		return b.MemBytes()
	}
	var chunkMem int64
	read := func(first, count uint64) {
		t.Helper()
		start := c.Stats()
		buf := make([]byte, count*row)
		must(t, ds.Read(ctx, Box([]uint64{first, 0}, []uint64{count, row}), buf))
		for i := range buf {
			if want := byte((first+uint64(i/row))*31 + 7); buf[i] != want {
				t.Fatalf("element %d of row %d holds %d, want %d", i%row, first+uint64(i/row), buf[i], want)
			}
		}
		st := c.Stats()
		if st.MetadataBytes <= 0 || st.MetadataBytes != idxMem() {
			t.Fatalf("after reading rows [%d,%d): cache metadata %d, index memory %d", first, first+count, st.MetadataBytes, idxMem())
		}
		if st.Chunks > 0 {
			chunkMem = max(chunkMem, (st.ResidentBytes-st.MetadataBytes)/st.Chunks)
		}
		// Chunks were admitted against a total that already held the
		// metadata present when the read began; only blocks this read
		// loaded itself can be over the limit, until the next admission.
		if chunks := st.ResidentBytes - st.MetadataBytes; chunks > limit-start.MetadataBytes+chunkMem {
			t.Fatalf("after reading rows [%d,%d): %d chunk bytes with %d metadata bytes at the start, limit %d",
				first, first+count, chunks, start.MetadataBytes, limit)
		}
	}
	// Spread single-chunk reads load index blocks across the whole array.
	const stride = 2_000
	for k := uint64(0); k < n; k += stride {
		read(k, 1)
	}
	spread := c.Stats().MetadataBytes
	if spread < limit/4 {
		t.Fatalf("index memory %d is too small against the limit %d for the test to mean anything", spread, limit)
	}
	// Contiguous reads fill the rest of the budget with chunks.
	for k := uint64(0); k < 4_000; k += 200 {
		read(k, 200)
	}
	if st := c.Stats(); st.Evictions == 0 {
		t.Fatalf("no chunk was evicted: %+v", st)
	}
	// Second pass over the spread rows: chunks may be read again, index
	// blocks may not.
	before := cnt.Snapshot()
	for k := uint64(0); k < n; k += stride {
		read(k, 1)
	}
	d := cnt.Snapshot().Sub(before)
	if d.Ops[vfd.OpRead] != 0 {
		t.Fatalf("second pass read %d index blocks (%d bytes), want none", d.Ops[vfd.OpRead], d.Bytes[vfd.OpRead])
	}
	if d.Ops[vfd.OpReadV] == 0 {
		t.Fatalf("second pass read no chunk: the budget did not evict any, so the test shows nothing")
	}
	t.Logf("limit %d, index memory %d, chunk memory %d, second pass %d vector reads",
		limit, c.Stats().MetadataBytes, chunkMem, d.Ops[vfd.OpReadV])
	must(t, ds.Close())
	must(t, f.Close())
	if st := c.Stats(); st.MetadataBytes != 0 {
		t.Fatalf("metadata %d left charged after Close", st.MetadataBytes)
	}
}
