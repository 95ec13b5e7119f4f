package zarr

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
)

// benchBytes is the size of the benchmark's dataset (1 GiB for a full run: go test -run '^$' -bench ExportImport ./interop/zarr -args
// -zarr.bytes=1073741824).
var (
	benchBytes   = flag.Int64("zarr.bytes", 64<<20, "decoded bytes of BenchmarkExportImport's dataset")
	benchWorkers = flag.Int("zarr.workers", 0, "Options.Workers for BenchmarkExportImport (0: the default)")
)

// BenchmarkExportImport exports a shuffle+zlib dataset (sub-benchmark
// zlib: chunks copied byte for byte both ways, none inflated) and a
// shuffle+deflate one (deflate: scc's raw DEFLATE stream, rewrapped with
// one inflate per chunk for the zlib checksum) to Zarr v2 and imports it
// back, and beside it runs zarr-python's zarr.copy_all over the same store
// (the baseline: it decodes and re-encodes every chunk). It prints MB/s of
// decoded data for each and how the chunks crossed.
func BenchmarkExportImport(b *testing.B) {
	needReaderB(b)
	b.Run("zlib", func(b *testing.B) { benchExportImport(b, "zlib(4)", engine.Zlib(4)) })
	b.Run("deflate", func(b *testing.B) { benchExportImport(b, "deflate(4)", engine.Deflate(4)) })
}

func benchExportImport(b *testing.B, fname string, compressor engine.Filter) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src.scc")
	const chunkElems = 256 << 10 // 1 MiB float32 chunks
	n := uint64(*benchBytes / 4)
	n -= n % chunkElems
	if n == 0 {
		n = chunkElems
	}
	size := int64(n * 4)
	f, err := engine.Create(context.Background(), src, &engine.Options{NoSync: true})
	must(b, err)
	ds, err := f.CreateDataset(context.Background(), "data", engine.DatasetSpec{
		Type: engine.Float32, Shape: []uint64{n}, Chunk: []uint64{chunkElems},
		Filters: []engine.Filter{engine.Shuffle(), compressor},
	})
	must(b, err)
	buf := make([]byte, chunkElems*4)
	for c := uint64(0); c < n/chunkElems; c++ {
		for i := uint64(0); i < chunkElems; i++ {
			x := float64(c*chunkElems + i)
			// A smooth signal with a little noise: shuffle+deflate make
			// it about 2-3× smaller, as for typical sensor data.
			v := float32(math.Sin(x/5000)*100 + float64((i*2654435761)%97)/97)
			binary.LittleEndian.PutUint32(buf[i*4:], math.Float32bits(v))
		}
		must(b, ds.Write(bg, engine.Box([]uint64{c * chunkElems}, []uint64{chunkElems}), buf))
	}
	must(b, f.Close(context.Background()))

	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		store := filepath.Join(dir, fmt.Sprintf("store%d", it))
		f, err := engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
		must(b, err)
		t0 := time.Now()
		rep, err := Export(bg, f, store, Options{Version: 2, Workers: *benchWorkers})
		must(b, err)
		exp := time.Since(t0)
		must(b, f.Close(context.Background()))

		back := filepath.Join(dir, fmt.Sprintf("back%d.scc", it))
		g, err := engine.Create(context.Background(), back, &engine.Options{NoSync: true})
		must(b, err)
		t0 = time.Now()
		irep, err := Import(bg, store, g, Options{Workers: *benchWorkers})
		must(b, err)
		must(b, g.Close(context.Background()))
		imp := time.Since(t0)

		b.StopTimer()
		out, err := exec.Command(python, filepath.Join(testdataB(b), "zarr2.py"), "copy", store, filepath.Join(dir, fmt.Sprintf("pycopy%d", it))).Output()
		if err != nil {
			b.Fatalf("zarr.copy_all: %v: %s", err, stderr(err))
		}
		secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		must(b, err)
		b.StartTimer()

		mbs := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
		py := time.Duration(secs * float64(time.Second))
		d, id := rep.Datasets[0], irep.Datasets[0]
		fmt.Fprintf(os.Stdout, "zarr v2, %s shuffle+%s float32, %d chunks of 1 MiB:\n", humanMiB(size), fname, d.Chunks)
		fmt.Fprintf(os.Stdout, "  scc export        %8.1f MB/s  (%d copied raw, %d of them not decoded at all; %d deflate streams rewrapped after one inflate; %d re-encoded)\n", mbs(exp), d.Copied, d.Untouched, d.Rewrapped, d.Reencoded)
		fmt.Fprintf(os.Stdout, "  scc import        %8.1f MB/s  (%d copied raw, %d of them not decoded at all; %d unwrapped after an inflate; %d re-encoded)\n", mbs(imp), id.Copied, id.Untouched, id.Rewrapped, id.Reencoded)
		fmt.Fprintf(os.Stdout, "  zarr.copy_all     %8.1f MB/s  (baseline: decode + re-encode)\n", mbs(py))
		fmt.Fprintf(os.Stdout, "  ratio: export %.1f×, import %.1f× the baseline\n", py.Seconds()/exp.Seconds(), py.Seconds()/imp.Seconds())
		b.ReportMetric(mbs(exp), "export-MB/s")
		b.ReportMetric(mbs(imp), "import-MB/s")
		b.ReportMetric(mbs(py), "copy_all-MB/s")
	}
}

func humanMiB(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

func needReaderB(b *testing.B) {
	if out, err := exec.Command(python, "-c", "import zarr").CombinedOutput(); err != nil {
		b.Fatalf("zarr-python is missing (%v: %s); run `make interop-deps`", err, out)
	}
}

func testdataB(b *testing.B) string {
	p, err := filepath.Abs("testdata")
	must(b, err)
	return p
}
