package vfd

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
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
