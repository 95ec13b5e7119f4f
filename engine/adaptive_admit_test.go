package engine

import (
	"context"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestAdmitterFollowsCacheResize: the engine's admission control (package
// resource) follows the cache's active limit when SetConfig or adaptive
// sizing changes it.
func TestAdmitterFollowsCacheResize(t *testing.T) {
	c, err := cache.New(cache.Config{QuiescentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	defer f.Close(context.Background())
	cfg := c.Config()
	for _, q := range []int64{8 << 20, 256 << 10} {
		cfg.QuiescentBytes = q
		if err := c.SetConfig(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		if got, want := f.admit.Capacity(), c.Stats().ActiveLimit; got != want || want != 2*q {
			t.Fatalf("quiescent %d: admitter capacity %d, active limit %d", q, got, want)
		}
	}
	cfg.Adaptive = cache.AdaptiveConfig{Enabled: true, InitialBytes: 64 << 10, MinBytes: 64 << 10, MaxBytes: 4 << 20}
	if err := c.SetConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	// Chunks of 256 KiB on a 128 KiB active limit: the first miss is a
	// flash increase (admission cuts larger requests into batches of half
	// the limit, so through the engine it is a chunk larger than the
	// limit that flashes), which the admitter follows. The write covers
	// half of each chunk: whole filtered chunks the cache would not keep
	// are encoded from the caller's buffer and never reach the cache's
	// memory (cache/directwrite_encode.go), a part is written through it.
	ds, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{1024, 1024}, Chunk: []uint64{256, 1024},
		Filters: []Filter{Deflate(1)}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if err := ds.Write(t.Context(), Box([]uint64{0, 0}, []uint64{1024, 512}), buf[:512<<10]); err != nil {
		t.Fatal(err)
	}
	if err := ds.Read(t.Context(), Box([]uint64{0, 0}, []uint64{1024, 1024}), buf); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.QuiescentLimit <= 64<<10 || st.FlashIncreases == 0 {
		t.Fatalf("no growth: size %d, log %+v", st.QuiescentLimit, st.ResizeLog)
	}
	if got := f.admit.Capacity(); got != st.ActiveLimit {
		t.Fatalf("after adaptive growth: admitter capacity %d, active limit %d", got, st.ActiveLimit)
	}
}
