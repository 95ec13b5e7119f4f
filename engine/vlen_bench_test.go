package engine

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// vlenPeer is h5py's side of BenchmarkVlenIngest: the same records, read
// from a file, written to a chunked dataset of variable-length strings in
// the same batches; the time includes closing the file and an fsync.
const vlenPeer = `
import json, os, sys, time
import h5py, numpy as np
recs = open(sys.argv[1], encoding="ascii").read().split("\n")
batch, chunk, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t0 = time.perf_counter()
f = h5py.File(out, "w")
ds = f.create_dataset("v", (len(recs),), dtype=h5py.string_dtype(), chunks=(chunk,))
for i in range(0, len(recs), batch):
    ds[i:i+batch] = np.array(recs[i:i+batch], dtype=object)
f.close()
fd = os.open(out, os.O_RDONLY)  # scc's Close syncs: so does this side
os.fsync(fd)
os.close(fd)
print(json.dumps({"seconds": time.perf_counter() - t0}))
`

// BenchmarkVlenIngest writes 200,000 small strings (10..60 bytes) in
// batches of 1,000 to a chunked variable-length dataset through scc
// (WriteStrings, then Flush and Close, with fsync) and through h5py
// (h5py.string_dtype, then close and an fsync of the file) in the same run, and reports records/s
// of both and their ratio (target: ≥ 3×). The h5py side
// runs with /usr/bin/python3 (Debian's python3-h5py) or $SCC_H5PY_PYTHON;
// skipped without it.
func BenchmarkVlenIngest(b *testing.B) {
	py := os.Getenv("SCC_H5PY_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if exec.Command(py, "-c", "import h5py, numpy").Run() != nil {
		b.Skip("no python with h5py")
	}
	ctx := context.Background()
	const n, batch, chunk = 200_000, 1000, 4096
	rng := rand.New(rand.NewPCG(5, 5))
	recs := make([]string, n)
	for i := range recs {
		b := make([]byte, 10+rng.IntN(51))
		for j := range b {
			b[j] = 'a' + byte(rng.IntN(26))
		}
		recs[i] = string(b)
	}
	dir := b.TempDir()
	recFile := filepath.Join(dir, "recs.txt")
	if err := os.WriteFile(recFile, []byte(strings.Join(recs, "\n")), 0o644); err != nil {
		b.Fatal(err)
	}
	var sccSec, h5Sec float64
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, "v.scc")
		os.Remove(path)
		t0 := time.Now()
		f, err := Create(ctx, path, nil)
		must(b, err)
		ds, err := f.CreateDataset(ctx, "v", DatasetSpec{Type: Uint8, Shape: []uint64{n}, Chunk: []uint64{chunk}, Layout: Vlen})
		must(b, err)
		for j := 0; j < n; j += batch {
			must(b, ds.WriteStrings(ctx, Box([]uint64{uint64(j)}, []uint64{batch}), recs[j:j+batch]))
		}
		must(b, f.Close(ctx))
		sccSec += time.Since(t0).Seconds()

		out, err := exec.Command(py, "-c", vlenPeer, recFile, "1000", "4096", filepath.Join(dir, "v.h5")).CombinedOutput()
		if err != nil {
			b.Fatalf("h5py: %v\n%s", err, out)
		}
		var r struct{ Seconds float64 }
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			b.Fatalf("h5py output %q: %v", out, err)
		}
		h5Sec += r.Seconds
	}
	b.ReportMetric(float64(n*b.N)/sccSec, "scc-records/s")
	b.ReportMetric(float64(n*b.N)/h5Sec, "h5py-records/s")
	b.ReportMetric(h5Sec/sccSec, "scc/h5py")
	// Spot-check: the file reads back.
	f, err := Open(ctx, filepath.Join(dir, "v.scc"), &Options{ReadOnly: true})
	must(b, err)
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "v", nil)
	must(b, err)
	got, err := ds.ReadStrings(ctx, Box([]uint64{n - 3}, []uint64{3}))
	must(b, err)
	if strings.Join(got, ",") != strings.Join(recs[n-3:], ",") {
		b.Fatalf("read back %q", got)
	}
}
