package filter

import (
	"testing"
)

// benchPipelines are the pipelines the speed figures are quoted for. Each
// Benchmark{Encode,Decode} also runs a .../copy sub-benchmark: allocating and
// copying the same 1 MiB, the floor any filter is measured against.
var benchPipelines = [][]Spec{
	{shuf, zstd1},
	{shuf, zstd1, crc},
	{defl1},
	{shuf, defl1},
	{lz4s},
	{shuf, lz4s},
	{crc},
}

const benchChunk = 1 << 20

func copyBaseline(b *testing.B, src []byte) {
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		dst := make([]byte, len(src))
		copy(dst, src)
	}
}

func BenchmarkEncode(b *testing.B) {
	src := detectorData(benchChunk)
	for _, specs := range benchPipelines {
		p := mustPipeline(b, specs, 2)
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			var image []byte
			for b.Loop() {
				var err error
				if image, _, err = p.Encode(src); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(src))/float64(len(image)), "ratio")
		})
	}
	b.Run("copy", func(b *testing.B) { copyBaseline(b, src) })
}

func BenchmarkDecode(b *testing.B) {
	src := detectorData(benchChunk)
	for _, specs := range benchPipelines {
		p := mustPipeline(b, specs, 2)
		image, mask, err := p.Encode(src)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Decode(image, mask, len(src)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(src))/float64(len(image)), "ratio")
		})
	}
	b.Run("copy", func(b *testing.B) { copyBaseline(b, src) })
}

// BenchmarkDecodeParallel decodes with every core sharing one pipeline, the
// way the cache's pool uses it.
func BenchmarkDecodeParallel(b *testing.B) {
	src := detectorData(benchChunk)
	for _, specs := range benchPipelines[:1] {
		p := mustPipeline(b, specs, 2)
		image, mask, _ := p.Encode(src)
		b.Run(p.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.Decode(image, mask, len(src)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				dst := make([]byte, len(src))
				copy(dst, src)
			}
		})
	})
}
