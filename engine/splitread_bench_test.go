package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
)

// BenchmarkSplitRead: reads of whole unfiltered chunks not resident, one
// chunk per Dataset.Read (h5perf's -x = -c workload), 128 MiB per pass from
// a file in the page cache, with the direct read split between the caller
// and a helper goroutine (cache/splitread.go, threshold set to split every
// chunk) and not split (SplitReadBytes -1), beside raw pread and pread +
// CRC32C of the same file in the same read size from the same run. Each
// figure is the best of 3 passes; the ratios printed are against pread +
// CRC (what a single-threaded verifying reader can do) and raw pread.
func BenchmarkSplitRead(b *testing.B) {
	ctx := context.Background()
	const total = 128 << 20
	for _, chunk := range []int{128 << 10, 256 << 10, 512 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) { splitReadBench(b, ctx, total, chunk) })
	}
}

func splitReadBench(b *testing.B, ctx context.Context, total, chunk int) {
	{
		path := filepath.Join(b.TempDir(), "split.scc")
		rows := writeRowChunks(b, ctx, path, total, chunk)
		buf := make([]byte, chunk)
		fh, err := os.Open(path)
		must(b, err)
		var sink uint32
		pread := func(crc bool) func() {
			return func() {
				for r := int64(0); r < int64(rows); r++ {
					if _, err := fh.ReadAt(buf, r*int64(chunk)); err != nil {
						b.Fatal(err)
					}
					if crc {
						sink += format.Checksum(buf)
					}
				}
			}
		}
		scc := func(split int64) (func(), func()) {
			f, err := Open(ctx, path, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 16 << 20, SplitReadBytes: split}})
			must(b, err)
			ds, err := f.OpenDataset(ctx, "d", nil)
			must(b, err)
			return func() {
					for r := uint64(0); r < rows; r++ {
						must(b, ds.Read(ctx, Box([]uint64{r, 0}, []uint64{1, uint64(chunk)}), buf))
					}
					if split > 0 && f.Cache().Stats().SplitReads == 0 {
						b.Fatal("no read was split")
					}
				}, func() {
					if st := f.Cache().Stats(); st.Loads != 0 {
						b.Fatalf("%d chunks loaded: the reads did not go direct", st.Loads)
					}
					must(b, f.Close(ctx))
				}
		}
		best := func(fn func()) float64 { return bestMiBps(total, fn) }
		func() {
			var raw, verified, one, two float64
			for i := 0; i < b.N; i++ {
				raw = best(pread(false))
				verified = best(pread(true))
				fn, done := scc(-1)
				one = best(fn)
				done()
				fn, done = scc(64 << 10)
				two = best(fn)
				done()
			}
			b.ReportMetric(raw, "raw-MiB/s")
			b.ReportMetric(verified, "pread+crc-MiB/s")
			b.ReportMetric(one, "scc-nosplit-MiB/s")
			b.ReportMetric(two, "scc-split-MiB/s")
			b.ReportMetric(two/verified, "split/pread+crc")
			b.ReportMetric(two/raw, "split/raw")
			b.ReportMetric(two/one, "split/nosplit")
		}()
		must(b, fh.Close())
		_ = sink
	}
}

// bestMiBps runs fn once to warm up, then 3 times, and returns total bytes
// over the fastest run, in MiB/s.
func bestMiBps(total int, fn func()) float64 {
	fn()
	d := time.Duration(1<<63 - 1)
	for r := 0; r < 3; r++ {
		t0 := time.Now()
		fn()
		d = min(d, time.Since(t0))
	}
	return float64(total>>20) / d.Seconds()
}

// writeRowChunks creates at path a file with dataset "d" of total bytes in
// unfiltered chunks of one row of chunk bytes each, writes it whole and
// closes it; it returns the row count.
func writeRowChunks(b *testing.B, ctx context.Context, path string, total, chunk int) uint64 {
	rows := uint64(total / chunk)
	f, err := Create(ctx, path, nil)
	must(b, err)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, uint64(chunk)}, Chunk: []uint64{1, uint64(chunk)}})
	must(b, err)
	data := make([]byte, total)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	must(b, ds.Write(ctx, All([]uint64{rows, uint64(chunk)}), data))
	must(b, f.Close(ctx))
	return rows
}
