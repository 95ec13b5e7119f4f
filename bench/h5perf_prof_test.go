package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/engine"
)

// BenchmarkH5perfWrite is the timed write phase of the h5perf rows (create,
// write every block, Flush, Close; NoSync) at the quick size, whole chunks
// and quarter chunks, beside the raw pwrite + CRC32C of the same bytes in
// scc's frames (framed), for profiles (-cpuprofile). SCC_BENCH_DIR puts
// the files elsewhere (/dev/shm for tmpfs). raw-ratio is the raw writer's
// CPU time over scc's, measured in the same run; gather-ratio, for quarter
// chunks, that of the raw writer that first assembles each chunk from its
// transfers (h5perfRawGather).
func BenchmarkH5perfWrite(b *testing.B) {
	ctx := context.Background()
	dir := os.Getenv("SCC_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	for _, row := range []struct {
		name string
		c    H5perfConfig
	}{
		{"whole", H5perfConfig{Dims: [2]uint64{8 << 10, 8 << 10}, Transfer: [2]uint64{1 << 10, 1 << 10}, Chunk: [2]uint64{1 << 10, 1 << 10}}},
		{"quarter", H5perfConfig{Dims: [2]uint64{8 << 10, 8 << 10}, Transfer: [2]uint64{512, 512}, Chunk: [2]uint64{1 << 10, 1 << 10}}},
	} {
		c := row.c
		c.Dir, c.NoSync = dir, true
		b.Run(row.name, func(b *testing.B) {
			nb := [2]uint64{c.Dims[0] / c.Transfer[0], c.Dims[1] / c.Transfer[1]}
			buf := make([]byte, c.Transfer[0]*c.Transfer[1])
			h5perfPattern(buf, 0)
			box := func(bi uint64) engine.Selection {
				r, col := bi/nb[1], bi%nb[1]
				return engine.Box([]uint64{r * c.Transfer[0], col * c.Transfer[1]}, c.Transfer[:])
			}
			path := filepath.Join(dir, "h5perf-bench.scc")
			defer os.Remove(path)
			b.SetBytes(int64(c.Dims[0] * c.Dims[1]))
			var sccCPU, rawCPU, gatherCPU, rawWall float64
			for b.Loop() {
				// The last pass's file goes before the clock runs: an
				// unlink of 64 MiB is not part of a write.
				b.StopTimer()
				os.Remove(path)
				b.StartTimer()
				if os.Getenv("SCC_BENCH_RAWFIRST") != "" {
					b.StopTimer()
					_, cpu, err := h5perfRawWrite(ctx, c, true, true)
					if err != nil {
						b.Fatal(err)
					}
					rawCPU += cpu
					b.StartTimer()
				}
				c0 := cpuSeconds()
				if err := h5perfWrite(ctx, c, path, buf, box, nb[0]*nb[1]); err != nil {
					b.Fatal(err)
				}
				sccCPU += cpuSeconds() - c0
				b.StopTimer()
				if os.Getenv("SCC_BENCH_RAWFIRST") == "" {
					v, cpu, err := h5perfRawWrite(ctx, c, true, true)
					if err != nil {
						b.Fatal(err)
					}
					rawCPU += cpu
					rawWall += float64(c.Dims[0]*c.Dims[1]) / (1 << 20) / v
				}
				if c.gathers() {
					_, cpu, err := h5perfRawGather(ctx, c)
					if err != nil {
						b.Fatal(err)
					}
					gatherCPU += cpu
				}
				b.StartTimer()
			}
			if sccCPU > 0 {
				b.ReportMetric(rawCPU/sccCPU, "raw-ratio")
				b.ReportMetric(sccCPU/float64(b.N)*1e3, "scc-cpu-ms")
				b.ReportMetric(rawCPU/float64(b.N)*1e3, "raw-cpu-ms")
				if rawWall > 0 {
					b.ReportMetric(rawWall/float64(b.N)*1e3, "raw-wall-ms")
				}
				if gatherCPU > 0 {
					b.ReportMetric(gatherCPU/sccCPU, "gather-ratio")
				}
			}
		})
	}
}
