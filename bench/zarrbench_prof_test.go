package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
)

// BenchmarkZarrBenchSharded runs the sharded variant's scc rows on a
// reduced array (512³ uint16 in 256³ chunks of 64³ inner chunks, zstd 3:
// the full-size chunks, an eighth of their number), one goroutine, for
// profiles (-cpuprofile) of the rows as the scenario runs them. row-ms is
// the row's timed part, cores its CPU time over that.
func BenchmarkZarrBenchSharded(b *testing.B) {
	ctx := context.Background()
	c := ZarrBenchConfig{Side: 512, Chunk: 256}
	const inner = 64
	rmp := ramp(c.Side)
	dir := b.TempDir()
	path := filepath.Join(dir, "sharded.scc")
	if err := writeShardedZarrBenchFile(ctx, path, c, inner, rmp); err != nil {
		b.Fatal(err)
	}
	for _, row := range []string{"read_all", "read_chunks", "read_inner", "roundtrip"} {
		b.Run(row, func(b *testing.B) {
			b.SetBytes(c.arrayBytes())
			var sec, cpu float64
			for b.Loop() {
				out := filepath.Join(dir, "out.scc")
				res, err := sccShardRow(ctx, path, row, 1, c, inner, rmp, out)
				if err != nil {
					b.Fatal(err)
				}
				sec += res.Seconds
				cpu += res.CPUSeconds
			}
			b.ReportMetric(sec/float64(b.N)*1e3, "row-ms")
			b.ReportMetric(cpu/sec, "cores")
		})
	}
}

// BenchmarkZarrBenchShardedReads is the timed part of the sharded
// read_all, read_chunks and read_inner rows alone (no verification), one
// goroutine, on the array of BenchmarkZarrBenchSharded, for profiles.
func BenchmarkZarrBenchShardedReads(b *testing.B) {
	ctx := context.Background()
	c := ZarrBenchConfig{Side: 512, Chunk: 256}
	const inner = 64
	rmp := ramp(c.Side)
	path := filepath.Join(b.TempDir(), "sharded.scc")
	if err := writeShardedZarrBenchFile(ctx, path, c, inner, rmp); err != nil {
		b.Fatal(err)
	}
	ic := innerConfig(c, inner)
	order := innerOrder(ic)
	for _, row := range []string{"read_all", "read_chunks", "read_inner"} {
		b.Run(row, func(b *testing.B) {
			b.SetBytes(c.arrayBytes())
			all := destBufs(1, int(c.arrayBytes()))[0]
			dest := destBufs(1, c.chunkBytes())
			idest := destBufs(1, ic.chunkBytes())
			cpu0 := cpuSeconds()
			for b.Loop() {
				// A fresh cache and file each time, as every row has.
				cc, err := cache.New(zarrCacheConfig)
				if err != nil {
					b.Fatal(err)
				}
				f, err := engine.Open(ctx, path, &engine.Options{Cache: cc, ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				ds, err := f.OpenDataset(ctx, "a", nil)
				if err != nil {
					b.Fatal(err)
				}
				switch row {
				case "read_all":
					n := uint64(c.Side)
					err = ds.Read(ctx, engine.Box([]uint64{0, 0, 0}, []uint64{n, n, n}), all)
				case "read_chunks":
					err = eachChunk(ctx, c, dest, func(k int, buf []byte) error { return ds.Read(ctx, c.box(k), buf) })
				default:
					err = eachChunk(ctx, ic, idest, func(k int, buf []byte) error { return ds.Read(ctx, ic.box(order[k]), buf) })
				}
				if err != nil {
					b.Fatal(err)
				}
				f.Close(ctx)
				cc.Close()
			}
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
		})
	}
}
