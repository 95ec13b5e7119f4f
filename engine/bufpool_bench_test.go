package engine

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// BenchmarkSteadyStateChunkIO measures what one chunk costs the Go heap
// once the cache is full (the goal: nothing on the steady-state path
// allocates per chunk). write: each op overwrites a whole 128 KiB chunk of a
// 64-chunk dataset through a 16-chunk cache, so each op also evicts (encodes
// and writes) a dirty chunk; read: each op reads a whole chunk that is not
// resident, so each op loads and decodes one and evicts a clean one. It
// reports heap bytes allocated per chunk beside the chunk's size, the
// baseline an engine that allocates a fresh buffer per chunk pays at least
// once (before recycled buffers it paid about four times: chunk, read
// image, encoded image, its checksummed copy).
func BenchmarkSteadyStateChunkIO(b *testing.B) {
	ctx := context.Background()
	const h, w = 256, 256 // uint16: 128 KiB chunks
	const chunkBytes = h * w * 2
	const rows = 64
	for _, pc := range []struct {
		name    string
		filters []Filter
	}{{"none", nil}, {"shuffle+zstd", []Filter{Shuffle(), Zstd(1)}}} {
		// A real file: the memory driver's own growth would be counted.
		f, err := Create(ctx, filepath.Join(b.TempDir(), "s.scc"), &Options{CacheConfig: cache.Config{QuiescentBytes: 8 * chunkBytes, PreEncodeBytes: -1}})
		must(b, err)
		ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: []uint64{rows, h, w}, Chunk: []uint64{1, h, w}, Filters: pc.filters})
		must(b, err)
		buf := make([]byte, chunkBytes)
		for i := range buf {
			buf[i] = byte(i>>9) + byte(i&3)
		}
		sel := func(i int) Selection { return Box([]uint64{uint64(i % rows), 0, 0}, []uint64{1, h, w}) }
		for i := 0; i < 2*rows; i++ { // fill the cache and the pools
			must(b, ds.Write(ctx, sel(i), buf))
		}
		must(b, f.Flush(ctx))
		for _, op := range []string{"write", "read"} {
			b.Run(pc.name+"/"+op, func(b *testing.B) {
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// Stride 17 over 64 rows: the next chunk is never among
					// the 16 most recent ones, so each read is a miss.
					if op == "write" {
						must(b, ds.Write(ctx, sel(i*17), buf))
					} else {
						must(b, ds.Read(ctx, sel(i*17), buf))
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&m1)
				per := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(b.N)
				b.SetBytes(chunkBytes)
				b.ReportMetric(per, "heap-B/chunk")
				b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/chunk")
				b.ReportMetric(chunkBytes, "baseline-chunk-B")
				b.ReportMetric(per/chunkBytes, "heap/chunk-ratio")
			})
		}
		must(b, f.Close(ctx))
	}
}
