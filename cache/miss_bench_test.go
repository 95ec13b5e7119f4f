package cache

import (
	"fmt"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

// BenchmarkMissOverhead measures the cache's own cost per missing chunk at
// one goroutine, where the layout's work is trivial (16-byte chunks of the
// fake layout): "fill" reads chunks that exist nowhere (lookup, fill, no
// I/O); "load" reads stored chunks through a cache that holds only a few,
// so every read evicts one and loads one (one vector read, one decode).
// Beside it, the same number of plain hits from the same run.
func BenchmarkMissOverhead(b *testing.B) {
	for _, kind := range []string{"fill", "load", "hit"} {
		b.Run(kind, func(b *testing.B) {
			e := newEnv(b, Config{QuiescentBytes: 64 * 16, ActiveMultiplier: 1, BypassBytes: -1})
			d, l := e.dataset(1, -1, 16)
			const n = 256
			if kind != "fill" {
				for i := 0; i < n; i++ {
					must(b, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, byte(i)), uint64(i))}))
				}
				must(b, e.c.Flush(bg))
			}
			buf := make([]byte, 16)
			req := []Request{fullReq(d, l, buf, 0)}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				switch kind {
				case "fill":
					req[0].Coord = layout.Coord{uint64(n + i)}
				case "load":
					req[0].Coord = layout.Coord{uint64(i * 7 % n)}
				default:
					req[0].Coord = layout.Coord{uint64(n - 1)}
				}
				if err := e.c.Read(bg, req); err != nil {
					b.Fatal(fmt.Errorf("read %d: %w", i, err))
				}
			}
		})
	}
}
