package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// BenchmarkPrefetchSeqRead reads a shuffle+zstd dataset of 64 chunks of
// 256 KiB front to back, one chunk per Read, from a cold cache, with
// prefetch on (…/prefetch) and off (…/baseline) in the same run; the
// prefetch run also reports its speed over the baseline. The reader
// spends 200 µs per chunk on its own work (as an analysis loop would),
// which is the time prefetch can overlap with decoding.
func BenchmarkPrefetchSeqRead(b *testing.B) {
	const n, rows, cols = 64, 256, 512 // chunk: 256×512 uint16 = 256 KiB
	ctx := context.Background()
	mem := vfd.NewMem()
	f, err := engine.Create(ctx, "", &engine.Options{Driver: mem, CacheConfig: cache.Config{QuiescentBytes: 64 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	ds, err := f.CreateDataset(ctx, "frames", engine.DatasetSpec{
		Type: engine.Uint16, Shape: []uint64{n, rows, cols}, Chunk: []uint64{1, rows, cols},
		Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)},
	})
	if err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, rows*cols*2)
	for i := range frame {
		frame[i] = byte(i*7/5) ^ byte(i>>9)
	}
	for k := uint64(0); k < n; k++ {
		if err := ds.Write(ctx, engine.Box([]uint64{k, 0, 0}, []uint64{1, rows, cols}), frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(ctx); err != nil {
		b.Fatal(err)
	}
	var secs [2]float64
	for k, name := range []string{"baseline", "prefetch"} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(n * int64(len(frame)))
			var total time.Duration
			var st cache.Stats
			for i := 0; i < b.N; i++ {
				f, err := engine.Open(ctx, "", &engine.Options{Driver: mem, ReadOnly: true, CacheConfig: cache.Config{
					QuiescentBytes: 16 << 20, Prefetch: k == 1, PrefetchChunks: 4}})
				if err != nil {
					b.Fatal(err)
				}
				ds, err := f.OpenDataset(ctx, "frames", nil)
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, len(frame))
				t0 := time.Now()
				for c := uint64(0); c < n; c++ {
					if err := ds.Read(ctx, engine.Box([]uint64{c, 0, 0}, []uint64{1, rows, cols}), buf); err != nil {
						b.Fatal(err)
					}
					work(200 * time.Microsecond)
				}
				total += time.Since(t0)
				st = f.Cache().Stats()
				if err := f.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
			secs[k] = total.Seconds() / float64(b.N)
			b.ReportMetric(float64(st.PrefetchHits), "prefetch-hits")
			if k == 1 && secs[1] > 0 {
				b.ReportMetric(secs[0]/secs[1], "x-vs-baseline")
			}
		})
	}
}

// work spins for d (the reader's own computation).
func work(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}
