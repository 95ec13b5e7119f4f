//go:build cgo

package filter

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zlib"
)

// The cgo build's inflater (libdeflate) against the pure-Go one (inflate.go),
// under every output bound: every stream the Go inflater decodes,
// libdeflate decodes to the same bytes; every failure wraps ErrCorrupt;
// nothing is written past the bound. libdeflate is the more lenient of the
// two on invalid streams: it decoded a bit-flipped stream that both
// klauspost/compress and zlib reject ("invalid distance code"), as its
// speed-first checks allow. That is not a way for corruption to pass: every
// chunk image scc reads has its checksum verified before it is inflated
// (the chunk frame's CRC32C; a zlib stream's own Adler-32 is checked by
// libdeflate too). Every cgo build runs this file.

// inflateStreams returns raw DEFLATE and zlib streams of varied data at
// every level, and the data.
func inflateStreams(t testing.TB) (raws, zlibs, plains [][]byte) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 100, 4096, 32 << 10, 200 << 10} {
		for kind := 0; kind < 3; kind++ {
			p := make([]byte, n)
			for i := range p {
				switch kind {
				case 0: // noise: stored blocks
					p[i] = byte(rng.Uint32())
				case 1: // a frame-like ramp with noise: dynamic Huffman
					p[i] = byte(i>>5) + byte(rng.IntN(4))
				case 2: // runs: long matches
					p[i] = byte(i / 700)
				}
			}
			for level := 1; level <= 9; level += 4 {
				var rb, zb bytes.Buffer
				fw, err := flate.NewWriter(&rb, level)
				if err != nil {
					t.Fatal(err)
				}
				zw, err := zlib.NewWriterLevel(&zb, level)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range []interface {
					Write([]byte) (int, error)
					Close() error
				}{fw, zw} {
					if _, err := w.Write(p); err != nil {
						t.Fatal(err)
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
				}
				raws, zlibs, plains = append(raws, rb.Bytes()), append(zlibs, zb.Bytes()), append(plains, p)
			}
		}
	}
	return raws, zlibs, plains
}

// checkInflateAgrees decodes src with both inflaters into buffers of
// capacity bound and fails unless they agree.
func checkInflateAgrees(t testing.TB, src []byte, bound int, zlib bool) {
	t.Helper()
	ld, gof := inflateRaw, inflateRawGo
	if zlib {
		ld, gof = inflateZlib, inflateZlibGo
	}
	got, errLD := ld(make([]byte, 0, bound), src)
	want, errGo := gof(make([]byte, 0, bound), src)
	for _, err := range []error{errLD, errGo} {
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
	}
	if errGo == nil && errLD != nil {
		t.Fatalf("zlib=%v bound %d, %d-byte stream %x: libdeflate %v, Go %v", zlib, bound, len(src), src, errLD, errGo)
	}
	if errGo == nil && !bytes.Equal(got, want) {
		t.Fatalf("zlib=%v bound %d: libdeflate decoded %d bytes, Go %d, differing", zlib, bound, len(got), len(want))
	}
	if len(got) > bound {
		t.Fatalf("libdeflate decoded %d bytes into a bound of %d", len(got), bound)
	}
}

func TestInflateLibdeflateAgrees(t *testing.T) {
	if Inflater != "libdeflate" {
		t.Fatalf("Inflater = %q in a cgo build", Inflater)
	}
	raws, zlibs, plains := inflateStreams(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range raws {
		n := len(plains[i])
		for _, zl := range []bool{false, true} {
			s := raws[i]
			if zl {
				s = zlibs[i]
			}
			// Valid, at the exact bound, with room, and one byte short.
			got, err := inflateRaw(make([]byte, 0, n), raws[i])
			if err != nil || !bytes.Equal(got, plains[i]) {
				t.Fatalf("stream %d: %v", i, err)
			}
			for _, bound := range []int{n, n + 100, max(n-1, 0)} {
				checkInflateAgrees(t, s, bound, zl)
			}
			if len(s) == 0 {
				continue
			}
			// Truncated and with trailing bytes: both must fail.
			dec := inflateRaw
			if zl {
				dec = inflateZlib
			}
			for _, bad := range [][]byte{s[:len(s)-1], s[:len(s)/2], append(append([]byte(nil), s...), 0, 1)} {
				if _, err := dec(make([]byte, 0, n+8), bad); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("stream %d zlib=%v: %d of %d bytes decoded with %v", i, zl, len(bad), len(s), err)
				}
				checkInflateAgrees(t, bad, n+8, zl)
			}
			// Flipped bits.
			for k := 0; k < 8; k++ {
				bad := append([]byte(nil), s...)
				bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
				checkInflateAgrees(t, bad, n, zl)
			}
		}
	}
	// A zlib stream whose Adler-32 is wrong decodes fully and still fails.
	z := append([]byte(nil), zlibs[len(zlibs)-1]...)
	z[len(z)-1] ^= 0xff
	if _, err := inflateZlib(make([]byte, 0, 1<<20), z); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad Adler-32: %v", err)
	}
}

// TestInflateLibdeflateAllocs: the hot path allocates nothing once the pool
// holds a decompressor.
func TestInflateLibdeflateAllocs(t *testing.T) {
	if raceEnabled {
		// The decompressors come from a sync.Pool, which -race empties at
		// random (a CI run counted 1.0 allocation per inflate); make test's
		// pass without -race counts them.
		t.Skip("allocation count under -race")
	}
	raws, _, plains := inflateStreams(t)
	i := len(raws) - 2
	dst := make([]byte, 0, len(plains[i]))
	if _, err := inflateRaw(dst, raws[i]); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = inflateRaw(dst, raws[i]) }); n > 0 {
		t.Fatalf("%.1f allocations per inflate", n)
	}
}

// FuzzInflateLibdeflate feeds both inflaters arbitrary streams and output
// bounds: what the Go inflater decodes, libdeflate decodes to the same
// bytes, and libdeflate stays inside the bound.
func FuzzInflateLibdeflate(f *testing.F) {
	raws, zlibs, _ := inflateStreams(f)
	for i := 0; i < len(raws); i += 7 {
		f.Add(raws[i], uint16(len(raws[i])*4), false)
		f.Add(zlibs[i], uint16(len(zlibs[i])*4), true)
	}
	f.Fuzz(func(t *testing.T, src []byte, bound uint16, zlib bool) {
		if zlib && CheckZlibHeader(src) != nil {
			return // the codec checks the framing before inflating
		}
		checkInflateAgrees(t, src, int(bound), zlib)
	})
}

// BenchmarkInflateLibdeflate inflates the same raw DEFLATE streams with
// libdeflate and with the pure-Go inflater in one run, and reports both
// rates and their ratio: a 32 KiB frame of uint16 samples like the
// randread scenario's (a ramp with small noise, level 1) and a 1 MiB one.
func BenchmarkInflateLibdeflate(b *testing.B) {
	for _, n := range []int{32 << 10, 1 << 20} {
		raw := make([]byte, n)
		rng := rand.New(rand.NewPCG(5, 6))
		for i := 0; i+1 < n; i += 2 {
			v := uint16(i>>7&0x3ff) + uint16(i>>1&63) + uint16(rng.IntN(8))
			raw[i], raw[i+1] = byte(v), byte(v>>8)
		}
		var comp bytes.Buffer
		w, err := flate.NewWriter(&comp, 1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Write(raw); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		src, dst := comp.Bytes(), make([]byte, 0, n)
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			rate := func(f func([]byte, []byte) ([]byte, error)) float64 {
				const reps = 64
				start := time.Now()
				for range reps {
					if out, err := f(dst, src); err != nil || len(out) != n {
						b.Fatalf("inflate: %d bytes, %v", len(out), err)
					}
				}
				return float64(reps*n) / time.Since(start).Seconds() / 1e6
			}
			var ld, gof float64
			for b.Loop() {
				ld += rate(inflateRaw)
				gof += rate(inflateRawGo)
			}
			b.ReportMetric(ld/float64(b.N), "libdeflate-MB/s")
			b.ReportMetric(gof/float64(b.N), "go-MB/s")
			b.ReportMetric(ld/gof, "ratio")
			b.ReportMetric(float64(n)/float64(len(src)), "compression")
		})
	}
}
