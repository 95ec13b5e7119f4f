package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkConcurrentFlush: G goroutines each write a 64 KiB row of their
// own dataset and Flush, 16 times, into a file on disk with syncs (an
// ingest whose writers each make their data durable), with concurrent
// Flush calls sharing commits and each committing alone (shareFlushes),
// in the same iteration, the order alternating. Metrics: durable writes
// per second both ways and their ratio (shared/alone).
func BenchmarkConcurrentFlush(b *testing.B) {
	ctx := context.Background()
	const rounds, row = 16, 64 << 10
	for _, g := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("writers=%d", g), func(b *testing.B) {
			dir := b.TempDir()
			files := 0
			run := func(share bool) time.Duration {
				defer func(on bool) { shareFlushes = on }(shareFlushes)
				shareFlushes = share
				files++
				f, err := Create(ctx, filepath.Join(dir, fmt.Sprintf("f%d.scc", files)), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close(ctx)
				dss := make([]*Dataset, g)
				for i := range dss {
					if dss[i], err = f.CreateDataset(ctx, fmt.Sprintf("d%d", i), DatasetSpec{Type: Uint8, Shape: []uint64{rounds, row}, Chunk: []uint64{1, row}}); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, row)
				var wg sync.WaitGroup
				t0 := time.Now()
				for _, ds := range dss {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for r := range uint64(rounds) {
							if err := ds.Write(ctx, Box([]uint64{r, 0}, []uint64{1, row}), buf); err != nil {
								b.Error(err)
								return
							}
							if err := f.Flush(ctx); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				return time.Since(t0)
			}
			var on, off time.Duration
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					on += run(true)
					off += run(false)
				} else {
					off += run(false)
					on += run(true)
				}
			}
			n := float64(rounds * g * b.N)
			b.ReportMetric(n/on.Seconds(), "shared-writes/s")
			b.ReportMetric(n/off.Seconds(), "alone-writes/s")
			b.ReportMetric(off.Seconds()/on.Seconds(), "ratio")
		})
	}
}
