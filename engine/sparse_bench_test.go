package engine

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// sparseBenchFiles builds, on in-memory drivers, the same data three
// ways: a Sparse dataset with 1 % of its elements defined (scattered at
// random), and Chunked datasets holding those values and the fill value
// everywhere else, unfiltered and with shuffle+zstd. 2048×2048 float32
// (16 MiB logical) in 256×256 chunks.
func sparseBenchFiles(b *testing.B) (sp, dense, zst *vfd.Mem, n int) {
	ctx := context.Background()
	shape := []uint64{2048, 2048}
	chunk := []uint64{256, 256}
	rng := rand.New(rand.NewPCG(1, 1))
	defined := map[[2]uint64]bool{}
	for len(defined) < int(shape[0]*shape[1]/100) {
		defined[[2]uint64{rng.Uint64N(shape[0]), rng.Uint64N(shape[1])}] = true
	}
	full := make([]byte, shape[0]*shape[1]*4)
	for p := range defined {
		binary.LittleEndian.PutUint32(full[(p[0]*shape[1]+p[1])*4:], math.Float32bits(1+rng.Float32()))
	}
	build := func(spec DatasetSpec, sparse bool) *vfd.Mem {
		mem := vfd.NewMem()
		f, err := Create(ctx, "", &Options{Driver: mem, CacheConfig: cache.Config{QuiescentBytes: 64 << 20}})
		must(b, err)
		ds, err := f.CreateDataset(ctx, "d", spec)
		must(b, err)
		if sparse {
			for p := range defined {
				i := (p[0]*shape[1] + p[1]) * 4
				must(b, ds.Write(ctx, Box(p[:], []uint64{1, 1}), full[i:i+4]))
			}
		} else {
			must(b, ds.Write(ctx, All(shape), full))
		}
		must(b, f.Close(ctx))
		return mem
	}
	sp = build(DatasetSpec{Type: Float32, Shape: shape, Chunk: chunk, Layout: Sparse}, true)
	dense = build(DatasetSpec{Type: Float32, Shape: shape, Chunk: chunk}, false)
	zst = build(DatasetSpec{Type: Float32, Shape: shape, Chunk: chunk, Filters: []Filter{Shuffle(), Zstd(1)}}, false)
	return sp, dense, zst, len(defined)
}

func storedBytes(b *testing.B, mem *vfd.Mem) float64 {
	f, err := Open(context.Background(), "", &Options{Driver: mem, ReadOnly: true})
	must(b, err)
	defer f.Close(context.Background())
	ds, err := f.OpenDataset(context.Background(), "d", nil)
	must(b, err)
	st, err := ds.Storage(context.Background())
	must(b, err)
	return float64(st.StoredBytes + st.IndexBytes)
}

// BenchmarkSparse1pct compares a sparse dataset with 1 % of its elements
// defined with the same data stored dense with fill values: stored bytes (reported by every sub-benchmark, target ≥ 20×
// smaller than dense), and, on a freshly opened file each iteration (cold
// cache), the time to find the defined elements of the whole dataset
// (sparse: DefinedElements; dense: Read everything and scan for values
// that are not the fill value) and to read them with their values
// (sparse: ReadDefined; dense: the same Read and scan, keeping values).
// Compare ns/op of sparse-* with dense-*; defined/s is elements found per
// second.
func BenchmarkSparse1pct(b *testing.B) {
	ctx := context.Background()
	sp, dense, zst, n := sparseBenchFiles(b)
	spB, dB, zB := storedBytes(b, sp), storedBytes(b, dense), storedBytes(b, zst)
	report := func(b *testing.B) {
		b.ReportMetric(spB, "sparse-stored-B")
		b.ReportMetric(dB/spB, "dense/sparse-stored")
		b.ReportMetric(zB/spB, "dense-zstd/sparse-stored")
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "defined/s")
	}
	open := func(b *testing.B, mem *vfd.Mem) (*File, *Dataset) {
		f, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 64 << 20}})
		must(b, err)
		ds, err := f.OpenDataset(ctx, "d", nil)
		must(b, err)
		return f, ds
	}
	all := All([]uint64{2048, 2048})
	denseScan := func(b *testing.B, mem *vfd.Mem, values bool) {
		buf := make([]byte, 2048*2048*4)
		for i := 0; i < b.N; i++ {
			f, ds := open(b, mem)
			must(b, ds.Read(ctx, all, buf))
			var pos []uint64
			var vals []byte
			for j := 0; j < len(buf); j += 4 {
				if binary.LittleEndian.Uint32(buf[j:]) != 0 {
					pos = append(pos, uint64(j/4))
					if values {
						vals = append(vals, buf[j:j+4]...)
					}
				}
			}
			if len(pos) != n {
				b.Fatalf("%d found, %d defined", len(pos), n)
			}
			f.Close(ctx)
		}
		report(b)
	}
	b.Run("sparse-DefinedElements", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			f, ds := open(b, sp)
			pos, err := ds.DefinedElements(ctx, all)
			must(b, err)
			if len(pos) != n {
				b.Fatalf("%d found, %d defined", len(pos), n)
			}
			f.Close(ctx)
		}
		report(b)
	})
	b.Run("sparse-ReadDefined", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			f, ds := open(b, sp)
			pos, _, err := ds.ReadDefined(ctx, all)
			must(b, err)
			if len(pos) != n {
				b.Fatalf("%d found, %d defined", len(pos), n)
			}
			f.Close(ctx)
		}
		report(b)
	})
	b.Run("dense-scan", func(b *testing.B) { denseScan(b, dense, false) })
	b.Run("dense-scan-values", func(b *testing.B) { denseScan(b, dense, true) })
	b.Run("dense-zstd-scan", func(b *testing.B) { denseScan(b, zst, false) })
}
