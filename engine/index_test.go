package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestColdLookupReads appends many single-element chunks along the unlimited
// dimension (the extensible array), reopens the file on the I/O-counting
// driver, and reads random single chunks cold: each read may cost at most 3
// index block reads plus the chunk itself. 100,000 chunks here; 1,000,000
// with SCC_STRESS=long.
func TestColdLookupReads(t *testing.T) {
	ctx := context.Background()
	n := uint64(100_000)
	if os.Getenv("SCC_STRESS") == "long" {
		n = 1_000_000
	}
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20}})
	ds, err := f.CreateDataset(ctx, "t", DatasetSpec{Type: Uint8, Shape: []uint64{0}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{1}})
	must(t, err)
	must(t, ds.SetExtent(ctx, []uint64{n}))
	vals := make([]byte, n)
	for i := range vals {
		vals[i] = byte(i*31 + 7)
	}
	must(t, ds.Write(ctx, All([]uint64{n}), vals))
	must(t, f.Close(ctx))

	cnt := vfd.NewCounting(mem)
	f = tOpen(t, cnt, &Options{ReadOnly: true})
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "t", nil)
	must(t, err)
	if k := ds.IndexKind(); k != "extensible-array" {
		t.Fatalf("index kind %s", k)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	worst := int64(0)
	for i := 0; i < 20; i++ {
		// A fresh file each time, so every lookup starts cold.
		f2 := tOpen(t, cnt, &Options{ReadOnly: true})
		ds2, err := f2.OpenDataset(ctx, "t", nil)
		must(t, err)
		k := rng.Uint64N(n)
		before := cnt.Snapshot()
		buf := make([]byte, 1)
		must(t, ds2.Read(ctx, Box([]uint64{k}, []uint64{1}), buf))
		d := cnt.Snapshot().Sub(before)
		reads := d.Ops[vfd.OpRead] + d.Ops[vfd.OpReadV]
		if buf[0] != vals[k] {
			t.Fatalf("chunk %d holds %d, want %d", k, buf[0], vals[k])
		}
		if reads > 4 {
			t.Fatalf("cold read of chunk %d of %d took %d reads: more than 3 index blocks plus the chunk", k, n, reads)
		}
		worst = max(worst, reads)
		must(t, f2.Close(ctx))
	}
	t.Logf("%d chunks: a cold single-chunk read took at most %d reads (index blocks + chunk)", n, worst)
}
