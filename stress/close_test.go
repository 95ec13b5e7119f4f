package stress

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// TestStressCloseWhileTrimming: File.Close right after a burst of writes
// that left the cache over its quiescent budget, so that the cache's
// background trimmer is evicting the file's chunks while Close runs. Close
// must wait for those evictions, not fail with "chunks still in use" (the
// stress workloads hit this intermittently at their final Close).
func TestStressCloseWhileTrimming(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	rounds := 200
	if long() {
		rounds = 2000
	}
	for round := 0; round < rounds; round++ {
		c, err := cache.New(cache.Config{QuiescentBytes: 1 << 10, MinBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		drv := vfd.NewMem()
		f, err := engine.Create(ctx, "", &engine.Options{Driver: drv, Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := f.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Uint64, Shape: []uint64{8, 32}, Chunk: []uint64{2, 4}})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8*32*8)
		for i := range buf {
			buf[i] = byte(round + i)
		}
		if err := ds.Write(ctx, engine.Box([]uint64{0, 0}, []uint64{8, 32}), buf); err != nil {
			t.Fatal(err)
		}
		derr := ds.Close(ctx)
		ferr := f.Close(ctx)
		c.Close()
		if derr != nil || ferr != nil {
			t.Fatalf("round %d: dataset close: %v; file close: %v", round, derr, ferr)
		}
	}
}
