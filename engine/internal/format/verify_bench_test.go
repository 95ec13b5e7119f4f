package format

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkVerifiedRead is the ceiling of a verified sequential read on
// the machine running it, and the check of where to compute the checksum: 256 MiB
// of 1 MiB chunks read back from the page cache by pread, alone (raw),
// each followed by Checksum of its bytes (pread+crc, what scc's direct
// reads do), with the checksum pipelined on another goroutine over
// slices of the chunk as they arrive (pipelined-K), and with pread and
// checksum interleaved slice by slice on one goroutine (interleaved-K).
// Each sub-benchmark reports MiB/s; all but raw also report their ratio
// to pread+crc measured in the same run. (At GOMAXPROCS 2 neither variant
// beat pread+crc: the bytes are in the reading core's cache.)
func BenchmarkVerifiedRead(b *testing.B) {
	const chunk, n = 1 << 20, 256
	path := filepath.Join(b.TempDir(), "chunks")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for i := int64(0); i < n; i++ {
		if _, err := f.WriteAt(buf, i*chunk); err != nil {
			b.Fatal(err)
		}
	}
	var sink uint32
	read := func(p []byte, off int64) {
		if _, err := f.ReadAt(p, off); err != nil {
			b.Fatal(err)
		}
	}
	pass := map[string]func(){
		"raw": func() {
			for i := int64(0); i < n; i++ {
				read(buf, i*chunk)
			}
		},
		"pread+crc": func() {
			for i := int64(0); i < n; i++ {
				read(buf, i*chunk)
				sink += Checksum(buf)
			}
		},
	}
	names := []string{"raw", "pread+crc"}
	for _, k := range []int{2, 4, 16} {
		seg := chunk / k
		names = append(names, fmt.Sprintf("pipelined-%d", k), fmt.Sprintf("interleaved-%d", k))
		pass[names[len(names)-2]] = func() {
			for i := int64(0); i < n; i++ {
				ch := make(chan int, k)
				done := make(chan uint32)
				go func() {
					var s uint32
					for j := range ch {
						s = crc32.Update(s, castagnoli, buf[j*seg:(j+1)*seg])
					}
					done <- s
				}()
				for j := 0; j < k; j++ {
					read(buf[j*seg:(j+1)*seg], i*chunk+int64(j*seg))
					ch <- j
				}
				close(ch)
				sink += <-done
			}
		}
		pass[names[len(names)-1]] = func() {
			for i := int64(0); i < n; i++ {
				var s uint32
				for j := 0; j < k; j++ {
					read(buf[j*seg:(j+1)*seg], i*chunk+int64(j*seg))
					s = crc32.Update(s, castagnoli, buf[j*seg:(j+1)*seg])
				}
				sink += s
			}
		}
	}
	best := func(fn func()) float64 {
		fn() // warm
		d := time.Duration(1<<63 - 1)
		for r := 0; r < 3; r++ {
			t0 := time.Now()
			fn()
			d = min(d, time.Since(t0))
		}
		return float64(n) / d.Seconds()
	}
	var base float64
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			var mibps float64
			for i := 0; i < b.N; i++ {
				mibps = best(pass[name])
			}
			b.ReportMetric(mibps, "MiB/s")
			if name == "pread+crc" {
				base = mibps
			} else if name != "raw" && base > 0 {
				b.ReportMetric(mibps/base, "x-pread+crc")
			}
		})
	}
	_ = sink
}
