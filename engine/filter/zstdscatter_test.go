//go:build cgo

package filter

import (
	"bytes"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine/filter/internal/libzstd"
)

// BenchmarkZstdScatter is the one-call read of a zstd array reduced to its
// two costs, on one goroutine: a 256³ uint16 chunk of the Zarr benchmark's
// array (32 MiB, level 3) decoded and its 512-byte rows scattered into
// their places in a 512³ array (256 MiB), the chunk's place moving over
// the eight each iteration. whole-MB/s decodes the chunk into a chunk
// buffer, then scatters it (the bytes go through memory twice: the buffer
// is larger than the caches); stream-MB/s decodes it 128 KiB at a time
// into one small buffer (libzstd keeps the window) and scatters each piece
// while it is in the core's cache; codec-MB/s is the decode alone into
// the warm chunk buffer, the floor. Each takes its turn in every
// iteration.
func BenchmarkZstdScatter(b *testing.B) {
	const side, row = 256, 512
	src := zarrBenchChunkAt(1, 2, 3)
	frame := make([]byte, len(src))
	n, err := libzstd.Compress(frame, src, 3)
	if err != nil {
		b.Fatal(err)
	}
	frame = frame[:n]
	dst := make([]byte, 8*len(src))
	for i := range dst {
		dst[i] = 1
	}
	chunk := make([]byte, len(src))
	piece := make([]byte, 128<<10)
	// place returns where chunk byte off (a row start) goes in dst for the
	// chunk at position pos of the 2x2x2 grid.
	const dRow, dPlane = 2 * row, 2 * side * 2 * row
	base := func(pos int) int {
		return (pos>>2&1)*side*dPlane + (pos>>1&1)*side*dRow + (pos&1)*row
	}
	scatter := func(pos, off int, b []byte) {
		o := base(pos)
		for len(b) > 0 {
			r := off / row
			in := off % row
			k := min(row-in, len(b))
			d := o + (r/side)*dPlane + (r%side)*dRow + in
			copy(dst[d:d+k], b[:k])
			b, off = b[k:], off+k
		}
	}
	check := func() {
		for z := range side {
			for y := range side {
				o := base(7) + z*dPlane + y*dRow
				if !bytes.Equal(dst[o:o+row], src[(z*side+y)*row:][:row]) {
					b.Fatalf("row (%d, %d) differs", z, y)
				}
			}
		}
	}
	var whole, stream, codec time.Duration
	turn := 0
	for b.Loop() {
		for j := range 3 {
			t0 := time.Now()
			switch (turn + j) % 3 {
			case 0:
				for pos := range 8 {
					if _, err := libzstd.Decompress(chunk, frame, true); err != nil {
						b.Fatal(err)
					}
					scatter(pos, 0, chunk)
				}
				whole += time.Since(t0)
			case 1:
				for pos := range 8 {
					off := 0
					if _, err := libzstd.DecompressStream(frame, piece, true, func(p []byte) error {
						scatter(pos, off, p)
						off += len(p)
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				stream += time.Since(t0)
			case 2:
				for range 8 {
					if _, err := libzstd.Decompress(chunk, frame, true); err != nil {
						b.Fatal(err)
					}
				}
				codec += time.Since(t0)
			}
		}
		turn++
		check()
		clear(dst[base(7):][:row])
	}
	mb := float64(8*len(src)*b.N) / 1e6
	b.ReportMetric(mb/whole.Seconds(), "whole-MB/s")
	b.ReportMetric(mb/stream.Seconds(), "stream-MB/s")
	b.ReportMetric(mb/codec.Seconds(), "codec-MB/s")
	b.ReportMetric(whole.Seconds()/stream.Seconds(), "stream/whole")
	b.ReportMetric(codec.Seconds()/stream.Seconds(), "stream/codec")
}
