package vfd

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The vector benchmarks compare one ReadV/WriteV (preadv/pwritev over runs of
// adjacent extents) with the baseline a caller would otherwise write: a loop
// of ReadAt/WriteAt over the same extents on the same file. Both report MB/s;
// compare .../vector with .../loop of the same layout. The file is a real
// temporary file, so reads come from the page cache and the figures measure
// system-call and copy cost, not the disk.

const (
	benchExtents = 256
	benchExtent  = 4 << 10
)

// benchLayout returns the extents for a layout: "adjacent" is one contiguous
// 1 MiB run (coalesced into a single system call); "scattered" leaves a 4 KiB
// gap after every extent and shuffles them (no coalescing possible).
func benchLayout(layout string) []Extent {
	exts := make([]Extent, benchExtents)
	stride := int64(benchExtent)
	if layout == "scattered" {
		stride *= 2
	}
	for i := range exts {
		exts[i] = Extent{Off: int64(i) * stride, Buf: make([]byte, benchExtent)}
	}
	if layout == "scattered" {
		rng := rand.New(rand.NewPCG(1, 1))
		rng.Shuffle(len(exts), func(i, j int) { exts[i], exts[j] = exts[j], exts[i] })
	}
	return exts
}

func benchFile(b *testing.B) *File {
	f, err := Open(filepath.Join(b.TempDir(), "bench"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	f.SetWriteBehind(0) // these measure system calls, not the device
	if err := f.Truncate(2 * benchExtents * benchExtent); err != nil {
		b.Fatal(err)
	}
	return f
}

func BenchmarkReadV(b *testing.B) {
	for _, layout := range []string{"adjacent", "scattered"} {
		b.Run(layout, func(b *testing.B) {
			f := benchFile(b)
			exts := benchLayout(layout)
			b.Run("vector", func(b *testing.B) {
				b.SetBytes(benchExtents * benchExtent)
				for b.Loop() {
					if err := f.ReadV(exts); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("loop", func(b *testing.B) {
				b.SetBytes(benchExtents * benchExtent)
				for b.Loop() {
					for _, e := range exts {
						if _, err := f.ReadAt(e.Buf, e.Off); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		})
	}
}

func BenchmarkWriteV(b *testing.B) {
	for _, layout := range []string{"adjacent", "scattered"} {
		b.Run(layout, func(b *testing.B) {
			f := benchFile(b)
			exts := benchLayout(layout)
			b.Run("vector", func(b *testing.B) {
				b.SetBytes(benchExtents * benchExtent)
				for b.Loop() {
					if err := f.WriteV(exts); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("loop", func(b *testing.B) {
				b.SetBytes(benchExtents * benchExtent)
				for b.Loop() {
					for _, e := range exts {
						if _, err := f.WriteAt(e.Buf, e.Off); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		})
	}
}

// BenchmarkWriteBehind is the measurement behind DefaultWriteBehind: 256
// MiB written to a new file in the test's temporary directory (on this
// machine's disk unless TMPDIR says otherwise), then Sync, as a Flush of a
// durable file does. Each iteration writes the file with the write-behind
// given and with none (a Sync that finds every page still dirty), in the
// same minutes: metrics behind-MB/s, none-MB/s and ratio (behind/none). The
// write and the Sync are both timed. The behind=…/write=1MiB rows write in
// 1 MiB WriteV calls; write=64MiB writes 64 MiB per WriteV, as a
// write-back of many chunks does, where the hint must come from inside the
// call (File.wrote counts each system call): counted per WriteV, its ratio
// was that of one hint per 64 MiB.
func BenchmarkWriteBehind(b *testing.B) {
	const total = 256 << 20
	dir := b.TempDir()
	write := func(wb int64, exts []Extent) time.Duration {
		path := filepath.Join(dir, "wb")
		f, err := Open(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		f.SetWriteBehind(wb)
		t0 := time.Now()
		for off := int64(0); off < total; {
			for i := range exts {
				exts[i].Off = off
				off += int64(len(exts[i].Buf))
			}
			if err := f.WriteV(exts); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		el := time.Since(t0)
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			b.Fatal(err)
		}
		return el
	}
	for _, c := range []struct{ wb, call int64 }{
		{DefaultWriteBehind, 1 << 20}, {8 << 20, 1 << 20}, {32 << 20, 1 << 20}, {DefaultWriteBehind, 64 << 20},
	} {
		b.Run(fmt.Sprintf("behind=%dMiB/write=%dMiB", c.wb>>20, c.call>>20), func(b *testing.B) {
			// The call's bytes as 1 MiB extents, as chunks are.
			exts := make([]Extent, c.call>>20)
			for i := range exts {
				buf := make([]byte, 1<<20)
				for j := range buf {
					buf[j] = byte(i + j*13)
				}
				exts[i].Buf = buf
			}
			var on, off time.Duration
			for b.Loop() {
				on += write(c.wb, exts)
				off += write(0, exts)
			}
			mb := float64(total) * float64(b.N) / 1e6
			b.ReportMetric(mb/on.Seconds(), "behind-MB/s")
			b.ReportMetric(mb/off.Seconds(), "none-MB/s")
			b.ReportMetric(off.Seconds()/on.Seconds(), "ratio")
		})
	}
}

// BenchmarkWriteCallSize is the measurement behind writeCallMax: 64 MiB of
// adjacent 1 MiB extents written into a new file with one WriteV, as the
// cache's write-back writes a run of chunks, with write calls capped at
// writeCallMax and uncapped (one pwritev for the run), in the same
// iteration, the order alternating. No Sync: this is the page cache's
// speed. The files stay until the benchmark ends, so that every write
// fills new page-cache memory, as a stream of ingest does (a file removed
// before the next write would hand that write the pages it freed). Metrics:
// capped-MB/s, uncapped-MB/s and ratio (capped/uncapped). Run it with a
// fixed count (-benchtime 8x): each iteration keeps 128 MiB dirty.
func BenchmarkWriteCallSize(b *testing.B) {
	const total, piece = 64 << 20, 1 << 20
	exts := make([]Extent, total/piece)
	for i := range exts {
		buf := make([]byte, piece)
		for j := range buf {
			buf[j] = byte(i + j*7)
		}
		exts[i] = Extent{Off: int64(i) * piece, Buf: buf}
	}
	dir := b.TempDir()
	files := 0
	write := func(limit int) time.Duration {
		defer func(n int) { writeCallMax = n }(writeCallMax)
		writeCallMax = limit
		files++
		f, err := Open(filepath.Join(dir, fmt.Sprintf("w%d", files)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		f.SetWriteBehind(0)
		t0 := time.Now()
		if err := f.WriteV(exts); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	capped := writeCallMax
	var on, off time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			on += write(capped)
			off += write(1 << 62)
		} else {
			off += write(1 << 62)
			on += write(capped)
		}
	}
	mb := float64(total) * float64(b.N) / 1e6
	b.ReportMetric(mb/on.Seconds(), "capped-MB/s")
	b.ReportMetric(mb/off.Seconds(), "uncapped-MB/s")
	b.ReportMetric(off.Seconds()/on.Seconds(), "ratio")
}
