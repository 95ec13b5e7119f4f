package cache

import (
	"fmt"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

// BenchmarkHitAdaptive is BenchmarkHit's cache case with adaptive sizing
// off (the baseline) and on, side by side from the same run: what the
// epoch bookkeeping costs a hit (every 256th hit of a stripe looks at the
// epoch; the rest pay only the modulo).
func BenchmarkHitAdaptive(b *testing.B) {
	const n = 1024
	for _, g := range []int{1, 2, 8} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("goroutines=%d/adaptive=%v", g, on), func(b *testing.B) {
				cfg := Config{QuiescentBytes: 64 << 20}
				if on {
					cfg.Adaptive = AdaptiveConfig{Enabled: true, MinBytes: 64 << 20, EpochAccesses: 1024}
				}
				e := newEnv(b, cfg)
				d, l := e.dataset(1, -1, 8, 8)
				for i := 0; i < n; i++ {
					must(b, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i/32), uint64(i%32))}))
				}
				coords := make([]layout.Coord, n)
				for i := range coords {
					coords[i] = layout.Coord{uint64(i / 32), uint64(i % 32)}
				}
				before := e.c.Stats()
				b.ResetTimer()
				parallel(b, g, func(w, i int, buf []byte) error {
					reqs := [1]Request{{Dataset: d, Coord: coords[(i*7+w*131)%n], Full: true, Piece: &fakePiece{n: 64, buf: buf}}}
					return e.c.Read(bg, reqs[:])
				})
				b.StopTimer()
				s := e.c.Stats().Sub(before)
				if s.Misses != 0 {
					b.Fatalf("misses %d", s.Misses)
				}
				if on {
					b.ReportMetric(float64(s.AdaptiveEpochs), "epochs")
				}
			})
		}
	}
}
