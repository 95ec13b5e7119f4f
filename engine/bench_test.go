package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

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
// raw/*. scc-write-direct and scc-write-bypass write whole chunks with a
// cache too small to keep them: direct from the caller's buffer, and the
// bypass path it replaces (Config.NoDirectWrites).
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
			f, err := Create(ctx, path, opts)
			must(b, err)
			ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, chunk}, Chunk: []uint64{1, chunk}})
			must(b, err)
			for r := uint64(0); r < rows; r++ {
				must(b, ds.Write(ctx, Box([]uint64{r, 0}, []uint64{1, chunk}), data))
			}
			must(b, f.Close(ctx))
		}
	})
	// Whole-chunk writes with a cache smaller than four chunks (bypass
	// threshold 512 KiB < 1 MiB chunks): by default they go from the
	// caller's buffer to the file (cache/directwrite.go); with
	// NoDirectWrites each chunk is created, gathered, encoded (a copy with
	// its checksum), written and dropped. Same bytes, same fsync at Close.
	// The fullcache pair: a 16 MiB cache keeps 1 MiB chunks (bypass
	// threshold 4 MiB), so the stream fills it; from then on the chunks go
	// direct (the cache is full, directWorthIt), where with NoDirectWrites
	// each is gathered into the cache and evicts (writes back) another.
	// (DirectWriteBytes -1 in these: 1 MiB chunks would otherwise go
	// direct by size alone; BenchmarkDirectWriteBytes measures that rule.)
	for _, mode := range []struct {
		name  string
		off   bool
		cache int64
		kept  int64 // chunks the cache keeps before it is full
	}{{"scc-write-direct", false, 2 << 20, 0}, {"scc-write-bypass", true, 2 << 20, 0},
		{"scc-write-fullcache-direct", false, 16 << 20, 16}, {"scc-write-fullcache-cached", true, 16 << 20, 16}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(total)
			small := &Options{CacheConfig: cache.Config{QuiescentBytes: mode.cache, NoDirectWrites: mode.off, DirectWriteBytes: -1}}
			for i := 0; i < b.N; i++ {
				f, err := Create(ctx, path, small)
				must(b, err)
				ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, chunk}, Chunk: []uint64{1, chunk}})
				must(b, err)
				for r := uint64(0); r < rows; r++ {
					must(b, ds.Write(ctx, Box([]uint64{r, 0}, []uint64{1, chunk}), data))
				}
				st := f.Cache().Stats()
				must(b, f.Close(ctx))
				// All of them direct, but those the cache kept (a few more
				// than fill it once: the trim leaves it a little below
				// the quiescent limit between writes).
				if want := int64(rows) - 2*mode.kept; !mode.off && st.DirectWrites < want {
					b.Fatalf("%d direct writes, want %d", st.DirectWrites, want)
				}
			}
		})
	}
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
			f, err := Open(ctx, path, &Options{ReadOnly: true, CacheConfig: opts.CacheConfig})
			must(b, err)
			ds, err := f.OpenDataset(ctx, "d", nil)
			must(b, err)
			for r := uint64(0); r < rows; r++ {
				must(b, ds.Read(ctx, Box([]uint64{r, 0}, []uint64{1, chunk}), buf))
			}
			must(b, f.Close(ctx))
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

// BenchmarkDirectWriteBytes is the measurement behind
// cache.Config.DirectWriteBytes: 64 MiB of whole unfiltered chunks of 16
// KiB to 1 MiB written into a default 256 MiB cache (room for all of
// them), then Flush and Close without fsync (Options.NoSync, h5perf's
// durability), on tmpfs (/dev/shm) where there is one, else the test's
// temporary directory. Each iteration writes the file twice, by default
// (chunks from 64 KiB go from the caller's buffer to the file) and with
// DirectWriteBytes -1 (every chunk copied into the cache, copied into its
// image at Flush and written): metrics direct-MB/s, cached-MB/s and ratio
// (direct/cached) from the same iterations.
func BenchmarkDirectWriteBytes(b *testing.B) {
	ctx := context.Background()
	const total = 64 << 20
	path := filepath.Join(tmpfsDir(b), "dw.scc")
	for _, side := range []uint64{128, 256, 512, 1024} { // 16 KiB .. 1 MiB
		chunk := side * side
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			data := make([]byte, chunk)
			for i := range data {
				data[i] = byte(i * 7)
			}
			n := uint64(total) / chunk
			rows := uint64(1)
			for rows*rows < n {
				rows *= 2
			}
			shape := []uint64{rows * side, (n / rows) * side}
			write := func(min int64) time.Duration {
				t0 := time.Now()
				f, err := Create(ctx, path, &Options{NoSync: true, CacheConfig: cache.Config{DirectWriteBytes: min}})
				must(b, err)
				ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: shape, Chunk: []uint64{side, side}})
				must(b, err)
				for r := uint64(0); r < shape[0]/side; r++ {
					for c := uint64(0); c < shape[1]/side; c++ {
						must(b, ds.Write(ctx, Box([]uint64{r * side, c * side}, []uint64{side, side}), data))
					}
				}
				direct := f.Cache().Stats().DirectWrites
				must(b, f.Close(ctx))
				el := time.Since(t0)
				if (min == 0 && chunk >= 64<<10) != (direct > 0) {
					b.Fatalf("DirectWriteBytes %d, %d KiB chunks: %d direct writes", min, chunk>>10, direct)
				}
				must(b, os.Remove(path))
				return el
			}
			var dT, cT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dT += write(0)
				cT += write(-1)
			}
			mb := float64(total) * float64(b.N) / 1e6
			b.ReportMetric(mb/dT.Seconds(), "direct-MB/s")
			b.ReportMetric(mb/cT.Seconds(), "cached-MB/s")
			b.ReportMetric(cT.Seconds()/dT.Seconds(), "ratio")
		})
	}
}

// BenchmarkLateSum writes 64 MiB of whole unfiltered chunks directly
// (NoSync, tmpfs when there is one, else or with SCC_BENCH_DIR there) with each chunk's checksum computed
// beside its write (cache.Config.LateSumBytes, cache/latesum.go) and
// before it on the writing goroutine, passes of both interleaved, chunk
// size by chunk size: "ratio" (beside over before) is what sets
// LateSumBytes' default, on a machine with a core to spare. The quarter
// rows write each chunk in four quarter-chunk boxes, so that it is
// completed in memory and written back (cache/completed.go).
func BenchmarkLateSum(b *testing.B) {
	ctx := context.Background()
	const total = 64 << 20
	dir := os.Getenv("SCC_BENCH_DIR") // a disk's directory, for its rows
	if dir == "" {
		dir = tmpfsDir(b)
	}
	path := filepath.Join(dir, "ls.scc")
	for _, row := range []struct {
		side    uint64
		quarter bool
	}{{256, false}, {362, false}, {512, false}, {724, false}, {1024, false}, {2048, false}, {1024, true}, {2048, true}} { // 64 KiB .. 4 MiB
		side, chunk := row.side, row.side*row.side
		name := fmt.Sprintf("chunk=%dKiB", chunk>>10)
		if row.quarter {
			name = fmt.Sprintf("quarters/chunk=%dKiB", chunk>>10)
		}
		b.Run(name, func(b *testing.B) {
			data := make([]byte, chunk)
			for i := range data {
				data[i] = byte(i * 7)
			}
			n := uint64(total) / chunk
			write := func(late int64) time.Duration {
				f, err := Create(ctx, path, &Options{NoSync: true, CacheConfig: cache.Config{LateSumBytes: late}})
				must(b, err)
				ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{n * side, side}, Chunk: []uint64{side, side}})
				must(b, err)
				t0 := time.Now()
				h := side / 2
				for r := uint64(0); r < n; r++ {
					if !row.quarter {
						must(b, ds.Write(ctx, Box([]uint64{r * side, 0}, []uint64{side, side}), data))
						continue
					}
					for q := uint64(0); q < 4; q++ {
						must(b, ds.Write(ctx, Box([]uint64{r*side + q/2*h, q % 2 * h}, []uint64{h, h}), data[:h*h]))
					}
				}
				el := time.Since(t0)
				if st := f.Cache().Stats(); !row.quarter && st.DirectWrites != int64(n) {
					b.Fatalf("%d direct writes of %d", st.DirectWrites, n)
				} else if row.quarter && st.ChunksFlushed != int64(n) {
					b.Fatalf("%d chunks written back of %d", st.ChunksFlushed, n)
				}
				must(b, f.Close(ctx))
				must(b, os.Remove(path))
				return el
			}
			var lT, sT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				lT += write(1)
				sT += write(-1)
			}
			mb := float64(total) * float64(b.N) / 1e6
			b.ReportMetric(mb/lT.Seconds(), "beside-MB/s")
			b.ReportMetric(mb/sT.Seconds(), "before-MB/s")
			b.ReportMetric(sT.Seconds()/lT.Seconds(), "ratio")
		})
	}
}

// tmpfsDir returns a directory on tmpfs (/dev/shm) where there is one,
// else the test's temporary directory; it is removed after the test.
func tmpfsDir(tb testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "scc-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return tb.TempDir()
}

// BenchmarkWriteBackBorrowed is the measurement behind
// denseLayout.EncodeBorrowed: 64 MiB of unfiltered chunks of 256 KiB and 1
// MiB, each written in two halves (partial writes, which go through the
// cache), into a default cache (room for all of them), then Close without
// fsync (Options.NoSync), on tmpfs where there is one. Each iteration
// writes the file twice: with the write-back sending each chunk's own
// buffer (the default) and with borrowImages off (each chunk copied into a
// pooled image first, as before): metrics borrowed-MB/s, copied-MB/s and
// ratio (borrowed/copied) from the same iterations.
func BenchmarkWriteBackBorrowed(b *testing.B) {
	ctx := context.Background()
	const total = 64 << 20
	path := filepath.Join(tmpfsDir(b), "wb.scc")
	defer func(v bool) { borrowImages = v }(borrowImages)
	for _, side := range []uint64{512, 1024} { // 256 KiB, 1 MiB
		chunk := side * side
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			half := make([]byte, chunk/2)
			for i := range half {
				half[i] = byte(i * 7)
			}
			n := uint64(total) / chunk
			shape := []uint64{side, n * side}
			write := func(borrow bool) time.Duration {
				borrowImages = borrow
				t0 := time.Now()
				f, err := Create(ctx, path, &Options{NoSync: true})
				must(b, err)
				ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: shape, Chunk: []uint64{side, side}})
				must(b, err)
				for c := uint64(0); c < n; c++ {
					for r := uint64(0); r < side; r += side / 2 {
						must(b, ds.Write(ctx, Box([]uint64{r, c * side}, []uint64{side / 2, side}), half))
					}
				}
				st := f.Cache().Stats()
				must(b, f.Close(ctx))
				el := time.Since(t0)
				if st.DirectWrites != 0 {
					b.Fatalf("%d direct writes; want every chunk through the cache", st.DirectWrites)
				}
				must(b, os.Remove(path))
				return el
			}
			var bT, cT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bT += write(true)
				cT += write(false)
			}
			mb := float64(total) * float64(b.N) / 1e6
			b.ReportMetric(mb/bT.Seconds(), "borrowed-MB/s")
			b.ReportMetric(mb/cT.Seconds(), "copied-MB/s")
			b.ReportMetric(cT.Seconds()/bT.Seconds(), "ratio")
		})
	}
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
			f, err := Create(ctx, "", &Options{Driver: vfd.NewMem(), CacheConfig: cache.Config{QuiescentBytes: 16 << 20}})
			must(b, err)
			defer f.Close(ctx)
			ds, err := f.CreateDataset(ctx, "frames", DatasetSpec{Type: Uint16, Shape: []uint64{0, 64}, MaxShape: kind.max, Chunk: []uint64{64, 64}})
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

// BenchmarkCompressedIngest: 8 writer goroutines write 1 MiB uint16 frames
// (one chunk each, detector-like data) with shuffle+zstd(1) into 4 datasets,
// then Flush, at GOMAXPROCS=1 and 2 (the cache is built after GOMAXPROCS is
// set, so its encode workers follow it). procs-2 also reports the speedup
// over procs-1 from the same run (goal ≥ 1.8 on 2 cores).
func BenchmarkCompressedIngest(b *testing.B) {
	const frames = 32 // per dataset per op
	frame := make([]byte, 512*1024*2)
	rng := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < len(frame); i += 2 {
		v := 1000 + (i/2)%512/8 + rng.IntN(16)
		frame[i], frame[i+1] = byte(v), byte(v>>8)
	}
	var mbps [3]float64
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("procs-%d", procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			ctx := context.Background()
			b.SetBytes(4 * frames * int64(len(frame)))
			start := time.Now()
			for i := 0; i < b.N; i++ {
				f, err := Create(ctx, "", &Options{Driver: vfd.NewMem(), CacheConfig: cache.Config{QuiescentBytes: 64 << 20}})
				must(b, err)
				var dss [4]*Dataset
				for d := range dss {
					dss[d], err = f.CreateDataset(ctx, name(d), DatasetSpec{
						Type: Uint16, Shape: []uint64{frames, 512, 1024}, Chunk: []uint64{1, 512, 1024},
						Filters: []Filter{Shuffle(), Zstd(1)},
					})
					must(b, err)
				}
				var wg sync.WaitGroup
				for w := 0; w < 8; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						ds := dss[w%4]
						for k := uint64(w / 4); k < frames; k += 2 {
							if err := ds.Write(ctx, Box([]uint64{k, 0, 0}, []uint64{1, 512, 1024}), frame); err != nil {
								b.Error(err)
								return
							}
						}
					}(w)
				}
				wg.Wait()
				must(b, f.Close(ctx))
			}
			mbps[procs] = float64(b.N) * 4 * frames * float64(len(frame)) / 1e6 / time.Since(start).Seconds()
			if procs == 2 && mbps[1] > 0 {
				b.ReportMetric(mbps[2]/mbps[1], "x-vs-procs-1")
			}
		})
	}
}

// BenchmarkColdReadZstd reads 64 one-MiB chunks stored with shuffle+zstd(1)
// in one request from a freshly opened file (every chunk loaded with one
// vector read and decoded on the cache's workers), with 1 and 2 decode
// workers. GOMAXPROCS is set to the worker count too: the pool runs a task
// on the submitting goroutine when its queue is full, so without that a
// "1 worker" run would still decode on two cores. workers-2 reports its
// speedup over workers-1 from the same run.
func BenchmarkColdReadZstd(b *testing.B) {
	ctx := context.Background()
	const chunks = 64
	mem := vfd.NewMem()
	f, err := Create(ctx, "", &Options{Driver: mem})
	must(b, err)
	ds, err := f.CreateDataset(ctx, "z", DatasetSpec{Type: Uint16, Shape: []uint64{chunks, 512, 1024}, Chunk: []uint64{1, 512, 1024}, Filters: []Filter{Shuffle(), Zstd(1)}})
	must(b, err)
	all := All([]uint64{chunks, 512, 1024})
	data := compressibleBytes(rand.New(rand.NewPCG(9, 9)), int(all.NumElements())*2)
	must(b, ds.Write(ctx, all, data))
	must(b, f.Close(ctx))
	buf := make([]byte, len(data))
	var mbps [3]float64
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers-%d", workers), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(workers))
			b.SetBytes(int64(len(data)))
			start := time.Now()
			for i := 0; i < b.N; i++ {
				f, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 256 << 20, Workers: workers}})
				must(b, err)
				ds, err := f.OpenDataset(ctx, "z", nil)
				must(b, err)
				must(b, ds.Read(ctx, all, buf))
				must(b, f.Close(ctx))
			}
			mbps[workers] = float64(b.N) * float64(len(data)) / 1e6 / time.Since(start).Seconds()
			if workers == 2 && mbps[1] > 0 {
				b.ReportMetric(mbps[2]/mbps[1], "x-vs-workers-1")
			}
		})
	}
}
