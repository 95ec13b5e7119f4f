package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// BenchmarkSplitLoad: reads of parts of unfiltered chunks that are not
// resident (h5perf's partial-chunk workload: -x smaller than -c), 64 MiB
// per pass from a file in the page cache, each chunk read in 4 parts in
// order, so the first part loads the chunk through the cache and the
// other 3 hit it. The load's read is split between the caller and a helper
// (cache/splitload.go, SplitReadBytes at its 512 KiB default) and not split
// (SplitReadBytes -1), in the same run; best of 3 passes each.
func BenchmarkSplitLoad(b *testing.B) {
	ctx := context.Background()
	const total = 64 << 20
	for _, chunk := range []int{512 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "load.scc")
			rows := writeRowChunks(b, ctx, path, total, chunk)
			part := uint64(chunk / 4)
			buf := make([]byte, part)
			pass := func(split int64) float64 {
				f, err := Open(ctx, path, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 16 << 20, SplitReadBytes: split}})
				must(b, err)
				defer f.Close(ctx)
				ds, err := f.OpenDataset(ctx, "d", nil)
				must(b, err)
				mibps := bestMiBps(total, func() {
					for r := uint64(0); r < rows; r++ {
						for p := uint64(0); p < 4; p++ {
							must(b, ds.Read(ctx, Box([]uint64{r, p * part}, []uint64{1, part}), buf))
						}
					}
				})
				st := f.Cache().Stats()
				if st.Loads == 0 || (split >= 0) != (st.SplitReads > 0) { // 0: the default threshold
					b.Fatalf("SplitReadBytes %d: %d loads, %d split reads", split, st.Loads, st.SplitReads)
				}
				return mibps
			}
			var one, two float64
			for b.Loop() {
				one = pass(-1)
				two = pass(0)
			}
			b.ReportMetric(one, "nosplit-MiB/s")
			b.ReportMetric(two, "split-MiB/s")
			b.ReportMetric(two/one, "split/nosplit")
		})
	}
}
