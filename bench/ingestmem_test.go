package bench

import (
	"context"
	"testing"
)

// BenchmarkIngestPeakHeap runs the ingest job (the `scctl ingest` defaults,
// or 512x512 frames through a 64 MiB cache) and reports its peak Go heap
// beside the cache's active limit and the target for it, 1.25 × the
// active limit + 32 MiB (heap/target ≤ 1 meets it). The peak depends on
// GOGC and GOMEMLIMIT (README "Sizing memory"); run with the process
// defaults to see what a user gets.
func BenchmarkIngestPeakHeap(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  IngestConfig
	}{
		{"defaults", IngestConfig{}},
		{"512x512-64MiB", IngestConfig{Height: 512, Width: 512, Frames: 512, CacheBytes: 64 << 20}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var peak, limit int64
			for i := 0; i < b.N; i++ {
				cfg := bc.cfg
				cfg.Dir = b.TempDir()
				res, err := Ingest(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				peak, limit = max(peak, res.PeakHeap), res.CacheActive
				b.SetBytes(res.BytesWritten)
			}
			target := float64(limit)*1.25 + 32<<20
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(limit)/(1<<20), "active-limit-MiB")
			b.ReportMetric(target/(1<<20), "target-MiB")
			b.ReportMetric(float64(peak)/target, "heap/target")
			b.ReportMetric(float64(peak)/float64(limit), "heap/limit")
		})
	}
}
