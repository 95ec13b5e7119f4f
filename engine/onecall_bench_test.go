package engine

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// BenchmarkOneCallRead reads a 256³ uint16 array of 64³ chunks (the public
// Zarr benchmark's quick size and values: 64 chunks of 512 KiB, whose 128-byte rows
// lie apart in the caller's buffer) from a file in the page cache, stored
// unfiltered and with zstd, two ways from a freshly opened file each pass:
// the whole array in one Read into one buffer, and chunk by chunk from
// GOMAXPROCS goroutines into a buffer each. The one call should run at
// the speed of the per-chunk goroutines (its chunks decoded and scattered
// on the cache's workers in parallel); it reports both figures from the
// same run and their ratio. Best of 3 passes each.
func BenchmarkOneCallRead(b *testing.B) {
	ctx := context.Background()
	const side, edge = 256, 64
	shape := []uint64{side, side, side}
	grid := uint64(side / edge)
	chunks := int(grid * grid * grid)
	total := side * side * side * 2
	// The benchmark's values: (g2 + g1²/32 + g0³) mod 65536.
	data := make([]byte, total)
	for g0 := range uint64(side) {
		for g1 := range uint64(side) {
			for g2 := range uint64(side) {
				v := (g2 + g1*g1/32 + g0*g0*g0) % 65536
				i := 2 * ((g0*side+g1)*side + g2)
				data[i], data[i+1] = byte(v), byte(v>>8)
			}
		}
	}
	for _, codec := range []struct {
		name    string
		filters []Filter
	}{{"raw", nil}, {"zstd", []Filter{Zstd(3)}}} {
		b.Run(codec.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "a.scc")
			f, err := Create(ctx, path, &Options{NoSync: true})
			must(b, err)
			ds, err := f.CreateDataset(ctx, "a", DatasetSpec{Type: Uint16, Shape: shape, Chunk: []uint64{edge, edge, edge}, Filters: codec.filters})
			must(b, err)
			must(b, ds.Write(ctx, All(shape), data))
			must(b, f.Close(ctx))
			open := func() (*File, *Dataset) {
				f, err := Open(ctx, path, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 256 << 20}})
				must(b, err)
				ds, err := f.OpenDataset(ctx, "a", nil)
				must(b, err)
				return f, ds
			}
			buf := make([]byte, total)
			procs := runtime.GOMAXPROCS(0)
			bufs := make([][]byte, procs)
			for i := range bufs {
				bufs[i] = make([]byte, edge*edge*edge*2)
			}
			oneCall := func() {
				f, ds := open()
				defer f.Close(ctx)
				must(b, ds.Read(ctx, All(shape), buf))
			}
			perChunk := func() {
				f, ds := open()
				defer f.Close(ctx)
				var next atomic.Int64
				var wg sync.WaitGroup
				var failed atomic.Pointer[error]
				for g := range procs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							k := uint64(next.Add(1) - 1)
							if k >= uint64(chunks) {
								return
							}
							start := []uint64{k / (grid * grid) * edge, k / grid % grid * edge, k % grid * edge}
							if err := ds.Read(ctx, Box(start, []uint64{edge, edge, edge}), bufs[g]); err != nil {
								failed.CompareAndSwap(nil, &err)
								return
							}
						}
					}()
				}
				wg.Wait()
				if p := failed.Load(); p != nil {
					b.Fatal(*p)
				}
			}
			var one, per float64
			for b.Loop() {
				one = bestMiBps(total, oneCall)
				per = bestMiBps(total, perChunk)
			}
			oneCall()
			for i := 0; i < total; i += 4099 {
				if buf[i] != data[i] {
					b.Fatalf("byte %d: %d, wrote %d", i, buf[i], data[i])
				}
			}
			b.ReportMetric(one, "onecall-MiB/s")
			b.ReportMetric(per, "perchunk-MiB/s")
			b.ReportMetric(one/per, "onecall/perchunk")
		})
	}
}
