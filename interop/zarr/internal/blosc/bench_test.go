package blosc

import (
	"bytes"
	"testing"
)

// BenchmarkDecode decodes large frames numcodecs wrote, one per compressor
// and shuffle, each beside a plain copy of the same decoded bytes: the
// MB/s of the two lines compare the decoder with memory bandwidth.
func BenchmarkDecode(b *testing.B) {
	g, err := generate("bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range g.cases {
		raw, frame := g.raw(c), g.frame(c)
		dst := make([]byte, len(raw))
		b.Run(c.Name+"/copy", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				copy(dst, raw)
			}
		})
		b.Run(c.Name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportMetric(float64(len(raw))/float64(len(frame)), "ratio")
			for b.Loop() {
				out, err := Decode(dst, frame, len(raw))
				if err != nil {
					b.Fatal(err)
				}
				dst = out
			}
			if !bytes.Equal(dst, raw) {
				b.Fatal("decoded bytes differ")
			}
		})
	}
}
