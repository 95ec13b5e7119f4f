package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// benchBytes is the size of the sequential benchmark's dataset: 1 GiB, or
// SCC_BENCH_BYTES.
func benchBytes() int64 {
	if s := os.Getenv("SCC_BENCH_BYTES"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 1<<20 {
			return n &^ (1<<20 - 1)
		}
	}
	return 1 << 30
}

// BenchmarkSequential writes then reads a dataset of benchBytes() in 1 MiB
// unfiltered chunks through scc (Write of whole chunks, Flush; then Read
// on a freshly opened file so every chunk is loaded), beside raw pwrite and
// pread of the same bytes in 1 MiB pieces to a plain file, with an fsync at
// the end of each write, in the same run. Compare the MB/s of scc/* with
// raw/*.
func BenchmarkSequential(b *testing.B) {
	ctx := context.Background()
	total := benchBytes()
	const chunk = 1 << 20
	rows := uint64(total / chunk)
	dir := b.TempDir()
	data := make([]byte, chunk)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(dir, "seq.scc")
	raw := filepath.Join(dir, "seq.raw")
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 256 << 20}}

	b.Run("scc-write", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			f, err := Create(path, opts)
			must(b, err)
			ds, err := f.CreateDataset("d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, chunk}, Chunk: []uint64{1, chunk}})
			must(b, err)
			for r := uint64(0); r < rows; r++ {
				must(b, ds.Write(ctx, Box([]uint64{r, 0}, []uint64{1, chunk}), data))
			}
			must(b, f.Close())
		}
	})
	b.Run("raw-pwrite", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			fh, err := os.Create(raw)
			must(b, err)
			for r := int64(0); r < int64(rows); r++ {
				_, err := fh.WriteAt(data, r*chunk)
				must(b, err)
			}
			must(b, fh.Sync())
			must(b, fh.Close())
		}
	})
	b.Run("scc-read", func(b *testing.B) {
		b.SetBytes(total)
		buf := make([]byte, chunk)
		for i := 0; i < b.N; i++ {
			f, err := Open(path, &Options{ReadOnly: true, CacheConfig: opts.CacheConfig})
			must(b, err)
			ds, err := f.OpenDataset("d")
			must(b, err)
			for r := uint64(0); r < rows; r++ {
				must(b, ds.Read(ctx, Box([]uint64{r, 0}, []uint64{1, chunk}), buf))
			}
			must(b, f.Close())
		}
	})
	b.Run("raw-pread", func(b *testing.B) {
		b.SetBytes(total)
		buf := make([]byte, chunk)
		for i := 0; i < b.N; i++ {
			fh, err := os.Open(raw)
			must(b, err)
			for r := int64(0); r < int64(rows); r++ {
				_, err := fh.ReadAt(buf, r*chunk)
				must(b, err)
			}
			must(b, fh.Close())
		}
	})
}

// BenchmarkAppendIngest appends one 64×64 uint16 frame per op (SetExtent,
// Write, and a Flush every 64 frames) to a dataset indexed by the
// extensible array (one unlimited dimension), beside the same append
// workload on a dataset whose two unlimited dimensions give it the general
// index. ns/op is the cost per appended frame. The file lives on the memory
// driver so that fsync does not drown the index's share of the cost.
func BenchmarkAppendIngest(b *testing.B) {
	ctx := context.Background()
	frame := make([]byte, 64*64*2)
	for i := range frame {
		frame[i] = byte(i)
	}
	for _, kind := range []struct {
		name string
		max  []uint64
	}{
		{"extensible-array", []uint64{Unlimited, 64}},
		{"general", []uint64{Unlimited, Unlimited}},
	} {
		b.Run(kind.name, func(b *testing.B) {
			f, err := CreateWith(vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 20}})
			must(b, err)
			defer f.Close()
			ds, err := f.CreateDataset("frames", DatasetSpec{Type: Uint16, Shape: []uint64{0, 64}, MaxShape: kind.max, Chunk: []uint64{64, 64}})
			must(b, err)
			if got := ds.IndexKind(); got != kind.name {
				b.Fatalf("index kind %s, want %s", got, kind.name)
			}
			b.SetBytes(int64(len(frame)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				n := uint64(i+1) * 64
				must(b, ds.SetExtent(ctx, []uint64{n, 64}))
				must(b, ds.Write(ctx, Box([]uint64{n - 64, 0}, []uint64{64, 64}), frame))
				if i%64 == 63 {
					must(b, f.Flush(ctx))
				}
			}
			must(b, f.Flush(ctx))
		})
	}
}
