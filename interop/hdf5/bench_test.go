package hdf5

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
)

// benchSize is the logical size BenchmarkExportImport moves (`make
// bench-hdf5` passes 1GiB; the default keeps a plain `go test -bench` run
// short).
var (
	benchSize    = flag.String("hdf5.size", "64MiB", "logical bytes for BenchmarkExportImport (KiB/MiB/GiB suffixes)")
	benchFilters = flag.String("hdf5.filters", "shuffle+zlib", "pipeline for BenchmarkExportImport: shuffle+zlib (chunks copied byte for byte, none inflated), shuffle+deflate (scc's raw DEFLATE: rewrapped on export) or shuffle (copied byte for byte)")
)

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suf) {
			s, mult = strings.TrimSuffix(s, suf), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// h5pyCopy copies dataset "data" from src to a new file dst with h5py's
// Group.copy (H5Ocopy) and prints the seconds the copy and close took,
// excluding the interpreter's start.
const h5pyCopy = `
import sys, time, h5py
t, c = time.perf_counter(), time.process_time()
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "w") as b:
    a.copy(a["data"], b)
print(time.perf_counter() - t, time.process_time() - c)
`

// BenchmarkExportImport exports a shuffle+zlib(1) dataset (or, with
// -hdf5.filters, shuffle+deflate(1) or shuffle only) of 1 MiB chunks (uint16, a noisy ramp: about 3:1) from scc to HDF5 and imports the
// result back, and prints both rates beside h5py copying the same dataset
// from the exported file to a new one in the same run. Rates are logical
// (decoded) MB/s; files are in the page cache (written just before); the
// scc side skips fsync (NoSync) as h5py does.
func BenchmarkExportImport(b *testing.B) {
	needReaders(b)
	size, err := parseSize(*benchSize)
	if err != nil || size < 1<<20 {
		b.Fatalf("bad -hdf5.size %q", *benchSize)
	}
	ctx := context.Background()
	dir := b.TempDir()
	const rows, cols = 512, 1024 // one chunk: 1 MiB of uint16
	frames := uint64(size / (rows * cols * 2))
	filters := []engine.Filter{engine.Shuffle(), engine.Zlib(1)}
	switch *benchFilters {
	case "shuffle+zlib":
	case "shuffle+deflate":
		filters[1] = engine.Deflate(1)
	case "shuffle":
		filters = filters[:1]
	default:
		b.Fatalf("bad -hdf5.filters %q", *benchFilters)
	}
	srcPath := filepath.Join(dir, "src.scc")
	f, err := engine.Create(ctx, srcPath, &engine.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	ds, err := f.CreateDataset(ctx, "data", engine.DatasetSpec{Type: engine.Uint16,
		Shape: []uint64{frames, rows, cols}, MaxShape: []uint64{engine.Unlimited, rows, cols},
		Chunk: []uint64{1, rows, cols}, Filters: filters})
	if err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, rows*cols*2)
	x := uint32(1)
	for i := uint64(0); i < frames; i++ {
		for j := 0; j < rows*cols; j++ {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			binary.LittleEndian.PutUint16(frame[2*j:], uint16(j/64+int(i))+uint16(x&15))
		}
		if err := ds.Write(ctx, engine.Box([]uint64{i, 0, 0}, []uint64{1, rows, cols}), frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(ctx); err != nil {
		b.Fatal(err)
	}
	logical := float64(frames * rows * cols * 2)
	b.ResetTimer()
	mbps := func(d time.Duration) float64 { return logical / 1e6 / d.Seconds() }
	for n := 0; n < b.N; n++ {
		src, err := engine.Open(ctx, srcPath, &engine.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		h5path := filepath.Join(dir, fmt.Sprintf("out%d.h5", n))
		t0, c0 := time.Now(), cpuTime()
		erep, err := Export(ctx, src, h5path, nil)
		exp, expCPU := time.Since(t0), cpuTime()-c0
		src.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		dst, err := engine.Create(ctx, filepath.Join(dir, fmt.Sprintf("back%d.scc", n)), &engine.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		t0, c0 = time.Now(), cpuTime()
		irep, err := Import(ctx, h5path, dst, nil)
		imp, impCPU := time.Since(t0), cpuTime()-c0
		if cerr := dst.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
		out, err := exec.Command(python, "-c", h5pyCopy, h5path, filepath.Join(dir, fmt.Sprintf("copy%d.h5", n))).CombinedOutput()
		if err != nil {
			b.Fatalf("h5py copy: %v\n%s", err, out)
		}
		var secs, cpuSecs float64
		if _, err := fmt.Sscan(string(out), &secs, &cpuSecs); err != nil {
			b.Fatalf("h5py copy printed %q", out)
		}
		h5 := time.Duration(secs * float64(time.Second))
		h5CPU := time.Duration(cpuSecs * float64(time.Second))
		e, i := erep.Datasets[0], irep.Datasets[0]
		fmt.Printf("hdf5 %s %s logical (%.1f MiB stored): export %.0f MB/s (%s, %d/%d chunks copied, %d not decoded at all), import %.0f MB/s (%s, %d/%d copied, %d not decoded at all), h5py copy %.0f MB/s; export/h5py %.2fx, import/h5py %.2fx\n",
			*benchFilters, *benchSize, float64(e.StoredBytes)/(1<<20), mbps(exp), e.Mode, e.CopiedChunks, e.Chunks, e.UntouchedChunks,
			mbps(imp), i.Mode, i.CopiedChunks, i.Chunks, i.UntouchedChunks, mbps(h5), h5.Seconds()/exp.Seconds(), h5.Seconds()/imp.Seconds())
		// CPU time is the steadier figure on a loaded machine.
		fmt.Printf("hdf5 %s %s CPU seconds: export %.2f, import %.2f, h5py copy %.2f; export/h5py %.2fx, import/h5py %.2fx (h5py's CPU over ours)\n",
			*benchFilters, *benchSize, expCPU.Seconds(), impCPU.Seconds(), h5CPU.Seconds(), h5CPU.Seconds()/expCPU.Seconds(), h5CPU.Seconds()/impCPU.Seconds())
		b.ReportMetric(mbps(exp), "export-MB/s")
		b.ReportMetric(mbps(imp), "import-MB/s")
		b.ReportMetric(mbps(h5), "h5py-copy-MB/s")
		b.ReportMetric(h5.Seconds()/exp.Seconds(), "export/h5py")
		b.ReportMetric(h5.Seconds()/imp.Seconds(), "import/h5py")
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
