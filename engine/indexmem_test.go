package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// rowFile is a file with dataset "t" of n rows of row bytes, one chunk per
// row, an extensible-array index, row k holding k*31+7 in every byte.
func rowFile(t *testing.T, n, row uint64) (*vfd.Mem, []byte) {
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 20}})
	ds, err := f.CreateDataset("t", DatasetSpec{Type: Uint8, Shape: []uint64{n, row}, MaxShape: []uint64{Unlimited, row}, Chunk: []uint64{1, row}})
	must(t, err)
	vals := make([]byte, n*row)
	for i := range vals {
		vals[i] = byte(uint64(i)/row*31 + 7)
	}
	must(t, ds.Write(context.Background(), All([]uint64{n, row}), vals))
	must(t, f.Close())
	return mem, vals
}

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
	mem, _ := rowFile(t, n, row)

	cnt := vfd.NewCounting(mem)
	f := tOpen(t, cnt, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 512 << 10}})
	defer f.Close()
	ds, err := f.OpenDataset("t")
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

// TestIndexShedUnderPressure: an index larger than the whole cache. Read
// cold in spread single-row reads, its clean blocks would pile up as
// unevictable metadata far past the limit; instead the cache sheds them
// (cache.File.SetMetadataShedder → index.DropClean) when nothing else can
// go, so resident bytes stay near the limit, and the data reads right.
func TestIndexShedUnderPressure(t *testing.T) {
	ctx := context.Background()
	const n, row = 50_000, 16
	mem, vals := rowFile(t, n, row)
	// The whole index, read with room for it.
	g := tOpen(t, mem, &Options{ReadOnly: true})
	gds, err := g.OpenDataset("t")
	must(t, err)
	must(t, gds.Read(ctx, All([]uint64{n, row}), vals))
	full := gds.s.idx.p.Load().MemBytes()
	must(t, g.Close())

	const limit = 64 << 10
	f := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: limit, ActiveMultiplier: 1}})
	ds, err := f.OpenDataset("t")
	must(t, err)
	c := f.Cache()
	if full < 4*limit {
		t.Fatalf("index of %d bytes against a %d-byte cache: the test shows nothing", full, limit)
	}
	buf := make([]byte, row)
	for pass := 0; pass < 2; pass++ {
		for k := uint64(pass); k < n; k += 97 {
			must(t, ds.Read(ctx, Box([]uint64{k, 0}, []uint64{1, row}), buf))
			if want := byte(k*31 + 7); buf[0] != want || buf[row-1] != want {
				t.Fatalf("row %d holds %d, want %d", k, buf[0], want)
			}
		}
	}
	st := c.Stats()
	t.Logf("index %d bytes in full; cache limit %d, peak resident %d, metadata now %d, %d sheds", full, limit, st.PeakResidentBytes, st.MetadataBytes, st.MetadataSheds)
	if st.MetadataSheds == 0 {
		t.Fatal("the cache never shed index blocks")
	}
	// One index page (1024 entries, about 24 KiB: loaded, then charged)
	// and one chunk may be over the limit at a time; never the index.
	if st.PeakResidentBytes > limit+32<<10 {
		t.Fatalf("peak resident %d bytes against a limit of %d (index %d)", st.PeakResidentBytes, limit, full)
	}
	must(t, ds.Close())
}

// TestIndexShedConcurrent: shedding races readers, a writer republishing
// chunks (dirty index blocks, which stay) and commits, on a cache far
// smaller than the index, under -race; every read sees its row's bytes.
func TestIndexShedConcurrent(t *testing.T) {
	ctx := context.Background()
	const n, row = 20_000, 16
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 20}})
	ds, err := f.CreateDataset("t", DatasetSpec{Type: Uint8, Shape: []uint64{n, row}, MaxShape: []uint64{Unlimited, row}, Chunk: []uint64{1, row}})
	must(t, err)
	rowOf := func(k uint64) []byte { return bytes.Repeat([]byte{byte(k*31 + 7)}, row) }
	vals := make([]byte, 0, n*row)
	for k := uint64(0); k < n; k++ {
		vals = append(vals, rowOf(k)...)
	}
	must(t, ds.Write(ctx, All([]uint64{n, row}), vals))
	must(t, f.Close())

	f = tOpen(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 32 << 10, ActiveMultiplier: 1}})
	ds, err = f.OpenDataset("t")
	must(t, err)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			buf := make([]byte, row)
			for i := 0; i < 1500; i++ {
				k := rng.Uint64N(n)
				if err := ds.Read(ctx, Box([]uint64{k, 0}, []uint64{1, row}), buf); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(buf, rowOf(k)) {
					t.Errorf("row %d reads %v", k, buf[:4])
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		for i := 0; i < 1500; i++ {
			k := rng.Uint64N(n)
			if err := ds.Write(ctx, Box([]uint64{k, 0}, []uint64{1, row}), rowOf(k)); err != nil {
				t.Error(err)
				return
			}
			if i%300 == 299 {
				if err := f.Flush(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	wg.Wait()
	if st := f.Cache().Stats(); st.MetadataSheds == 0 {
		t.Fatalf("no shedding happened: %+v", st)
	}
	must(t, ds.Close())
}
