package vfd

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkWriteFrameAlignment is the measurement behind the engine's
// page-aligned chunk frames (engine/space.go allocFrame): 64 chunk frames
// (the chunk's bytes, then its 4-byte checksum, one WriteV each, as a
// whole-chunk write goes out) into a new file, placed as the allocator
// packs them (the first 26 bytes past a page boundary, each frame right
// after the last) and page-aligned (each frame at the next page boundary),
// in the same iteration, the order alternating; and the raw floor, the
// chunks alone with one pwrite each at page-aligned offsets. No Sync: the
// page cache's speed, on the file system of the benchmark's temporary
// directory (TMPDIR=/dev/shm for tmpfs). Metrics: packed-MB/s,
// aligned-MB/s, raw-MB/s and the ratios aligned/packed and aligned/raw.
func BenchmarkWriteFrameAlignment(b *testing.B) {
	for _, chunk := range []int{256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("chunk-%dKiB", chunk>>10), func(b *testing.B) {
			const n = 64
			buf := make([]byte, chunk)
			for j := range buf {
				buf[j] = byte(j * 7)
			}
			sum := []byte{1, 2, 3, 4}
			dir := b.TempDir()
			files := 0
			write := func(mode int) time.Duration {
				files++
				name := filepath.Join(dir, fmt.Sprintf("w%d", files))
				f, err := Open(name, os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer os.Remove(name)
				defer f.Close()
				f.SetWriteBehind(0)
				off := int64(8192 + 26)
				if mode != 0 {
					off = 8192
				}
				t0 := time.Now()
				for range n {
					exts := []Extent{{Off: off, Buf: buf}, {Off: off + int64(chunk), Buf: sum}}
					if mode == 2 {
						exts = exts[:1]
					}
					if err := f.WriteV(exts); err != nil {
						b.Fatal(err)
					}
					switch mode {
					case 0:
						off += int64(chunk) + 4
					case 1:
						off = (off + int64(chunk) + 4 + 4095) &^ 4095
					case 2:
						off += int64(chunk)
					}
				}
				return time.Since(t0)
			}
			var took [3]time.Duration
			for i := 0; b.Loop(); i++ {
				for j := range 3 {
					m := (i + j) % 3
					took[m] += write(m)
				}
			}
			mb := float64(n*chunk) * float64(b.N) / 1e6
			b.ReportMetric(mb/took[0].Seconds(), "packed-MB/s")
			b.ReportMetric(mb/took[1].Seconds(), "aligned-MB/s")
			b.ReportMetric(mb/took[2].Seconds(), "raw-MB/s")
			b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "aligned/packed")
			b.ReportMetric(took[2].Seconds()/took[1].Seconds(), "aligned/raw")
		})
	}
}
