package filter

import (
	"bytes"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
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

// zarrBenchChunk is one 256³ uint16 chunk of the public Zarr benchmark's
// 1024³ array (value (g2 + g1²/32 + g0³) mod 65536 over the global
// coordinates), the chunk at grid position (1, 2, 3), little-endian.
func zarrBenchChunk() []byte {
	const side = 256
	b := make([]byte, 2*side*side*side)
	o0, o1, o2 := uint64(1*side), uint64(2*side), uint64(3*side)
	i := 0
	for l0 := uint64(0); l0 < side; l0++ {
		g0 := o0 + l0
		for l1 := uint64(0); l1 < side; l1++ {
			g1 := o1 + l1
			base := g1*g1/32 + g0*g0*g0
			for l2 := uint64(0); l2 < side; l2++ {
				v := uint16((o2 + l2 + base) % 65536)
				b[i], b[i+1] = byte(v), byte(v>>8)
				i += 2
			}
		}
	}
	return b
}

// BenchmarkDecodeZarrChunk decodes one zstd chunk of the Zarr benchmark's
// array (zstd level 3, the level that benchmark's zstd level 0 stands for)
// through the pipeline, the way the cache does (DecodeVerifiedTo into a
// recycled chunk buffer), and with the build's zstd decoder called directly
// on the same bytes into the same buffer, alternating, and reports both
// speeds and their ratio: what the pipeline costs on top of the codec.
func BenchmarkDecodeZarrChunk(b *testing.B) {
	src := zarrBenchChunk()
	p := mustPipeline(b, []Spec{{ID: Zstd, Level: 3}}, 2)
	image, mask, err := p.Encode(src)
	if err != nil || mask != 0 {
		b.Fatal(mask, err)
	}
	dst := make([]byte, len(src))
	var pipe, codec time.Duration
	// Alternate which goes first, so neither always meets the other's
	// cache footprint.
	first := true
	for b.Loop() {
		for _, pipeline := range []bool{first, !first} {
			t0 := time.Now()
			var out []byte
			var err error
			if pipeline {
				out, err = p.DecodeVerifiedTo(dst, image, mask, len(src))
			} else {
				out, err = zstdDecode(dst[:0], image, true)
			}
			d := time.Since(t0)
			if err != nil || len(out) != len(src) {
				b.Fatal(err)
			}
			if pipeline {
				pipe += d
			} else {
				codec += d
			}
		}
		first = !first
	}
	if !bytes.Equal(dst, src) {
		b.Fatal("decoded bytes differ")
	}
	mbs := func(d time.Duration) float64 { return float64(len(src)) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbs(pipe), "pipeline-MB/s")
	b.ReportMetric(mbs(codec), "codec-MB/s")
	b.ReportMetric(codec.Seconds()/pipe.Seconds(), "pipeline/codec-speed")
	b.ReportMetric(float64(len(src))/float64(len(image)), "ratio")
}

// zstdImpl is one zstd implementation the codec can use; zstdImpls lists
// those this build has (a cgo build adds libzstd), for the benchmarks and
// fuzz targets that hold them side by side.
type zstdImpl struct {
	name   string
	encode func(level int, dst, src []byte) ([]byte, bool)
	decode func(dst, src []byte, trusted bool) ([]byte, error)
}

var zstdImpls = []zstdImpl{{
	name: "klauspost",
	encode: func(level int, dst, src []byte) ([]byte, bool) {
		return zstdEncodeGo(zstd.EncoderLevelFromZstd(level), dst, src)
	},
	decode: zstdDecodeGo,
}}

// BenchmarkZstdCodecs encodes one 512 KiB chunk of the Zarr benchmark's
// array at level 3 into a buffer of the codec's encodeCap, and decodes each
// implementation's frame of it (trusted, as the cache does) into a buffer of
// its exact size, with every implementation the build has. The
// implementations take turns inside each iteration, so a shared machine's
// noise falls on all of them alike: each reports its <name>-MB/s, and with
// two, their ratio (the first over the pure-Go one).
func BenchmarkZstdCodecs(b *testing.B) {
	src := zarrBenchChunk()[:512<<10]
	const level, reps = 3, 8
	frames := make([][]byte, len(zstdImpls))
	for i, im := range zstdImpls {
		out, ok := im.encode(level, make([]byte, 0, len(src)-1), src)
		if !ok {
			b.Fatalf("%s: not compressible", im.name)
		}
		frames[i] = out
		for _, dec := range zstdImpls {
			if got, err := dec.decode(make([]byte, 0, len(src)), out, true); err != nil || !bytes.Equal(got, src) {
				b.Fatalf("%s's frame decoded by %s: %v", im.name, dec.name, err)
			}
		}
	}
	// sideBySide runs f(i) reps times per implementation per iteration and
	// reports each one's rate.
	sideBySide := func(b *testing.B, f func(i int)) {
		secs := make([]float64, len(zstdImpls))
		for b.Loop() {
			for i := range zstdImpls {
				t0 := time.Now()
				for range reps {
					f(i)
				}
				secs[i] += time.Since(t0).Seconds()
			}
		}
		rate := func(i int) float64 { return float64(reps*len(src)*b.N) / 1e6 / secs[i] }
		for i, im := range zstdImpls {
			b.ReportMetric(rate(i), im.name+"-MB/s")
		}
		if len(zstdImpls) > 1 {
			b.ReportMetric(rate(len(zstdImpls)-1)/rate(0), "ratio")
		}
	}
	b.Run("encode", func(b *testing.B) {
		dst := make([]byte, 0, len(src)-1)
		sideBySide(b, func(i int) {
			if _, ok := zstdImpls[i].encode(level, dst, src); !ok {
				b.Fatal("not compressible")
			}
		})
		for i, im := range zstdImpls {
			b.ReportMetric(float64(len(src))/float64(len(frames[i])), im.name+"-compression")
		}
	})
	for j, frame := range frames {
		b.Run("decode/frame-of-"+zstdImpls[j].name, func(b *testing.B) {
			dst := make([]byte, 0, len(src))
			sideBySide(b, func(i int) {
				if out, err := zstdImpls[i].decode(dst, frame, true); err != nil || len(out) != len(src) {
					b.Fatal(err)
				}
			})
		})
	}
}
