package s3_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd/s3"
	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// TestEngineFailedWriteNotApplied: rows of a filtered dataset, each a
// chunk above the bypass threshold of a 512 KiB cache, so that each Write
// writes its chunk back at once, are ingested while the network drops the
// GETs the driver's read-modify-write of partly covered pages needs
// (retries off). A Write that returns an error must not be applied: once
// the network is back, Flush commits every acknowledged row and none of
// the failed ones (each reads as the fill value). Keeping a failed
// write-back's chunk dirty committed exactly the rows whose Write had
// failed.
func TestEngineFailedWriteNotApplied(t *testing.T) {
	ctx := context.Background()
	p := s3.NewProxy(t)
	defer p.Close()
	key := s3.TestKey(t)
	d := mustDrv(t, key, p.Endpoint(), func(o *s3.Options) {
		create(o)
		o.MaxRetries = -1
		o.PageSize, o.MaxDirtyBytes = 4096, 8<<10
	})
	f, err := engine.Create(ctx, "", &engine.Options{Driver: d, CacheConfig: cache.Config{QuiescentBytes: 512 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	const rowCols = 48 << 10 // int32: 192 KiB rows, above the 128 KiB bypass threshold
	const rows = 24
	ds, err := f.CreateDataset(ctx, "rows", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{rows, rowCols},
		Chunk: []uint64{1, rowCols}, Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}})
	if err != nil {
		t.Fatal(err)
	}
	rowData := func(r int) []byte {
		b := make([]byte, rowCols*4)
		rng := rand.New(rand.NewPCG(uint64(r), 1))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	rowSel := func(r int) engine.Selection {
		return engine.Box([]uint64{uint64(r), 0}, []uint64{1, rowCols})
	}
	var drop atomic.Bool
	p.SetFault(func(_ int64, r *http.Request) s3test.Fault {
		return s3test.Fault{Drop: drop.Load() && r.Method == http.MethodGet}
	})
	failed := map[int]bool{}
	for r := 0; r < rows; r++ {
		drop.Store(r%2 == 1)
		if err := ds.Write(ctx, rowSel(r), rowData(r)); err != nil {
			if !errors.Is(err, engine.ErrIO) {
				t.Fatalf("row %d: %v, want engine.ErrIO", r, err)
			}
			failed[r] = true
		}
	}
	drop.Store(false)
	p.SetFault(nil)
	if len(failed) == 0 {
		t.Fatal("no Write failed: the dropped GETs were not needed")
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d.Close()
	rd := mustDrv(t, key, "", readOnly)
	g, err := engine.Open(ctx, "", &engine.Options{Driver: rd, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	rds, err := g.OpenDataset(ctx, "rows", nil)
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, rowCols*4)
	got := make([]byte, rowCols*4)
	for r := 0; r < rows; r++ {
		if err := rds.Read(ctx, rowSel(r), got); err != nil {
			t.Fatal(err)
		}
		want, what := rowData(r), "acknowledged"
		if failed[r] {
			want, what = zero, "failed"
		}
		if string(got) != string(want) {
			t.Fatalf("%s row %d: committed contents differ", what, r)
		}
	}
	t.Logf("%d of %d Writes failed", len(failed), rows)
}
