package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHumanAndParseBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {32 << 20, "32.0 MiB"}, {3 << 30, "3.00 GiB"}, {-2048, "-2.00 KiB"}} {
		if got := HumanBytes(c.n); got != c.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		s    string
		want int64
	}{{"4096", 4096}, {"64MiB", 64 << 20}, {"64M", 64 << 20}, {"1.5GiB", 3 << 29}, {"512k", 512 << 10}, {" 2 mb ", 2 << 20}} {
		got, err := ParseBytes(c.s)
		if err != nil || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", c.s, got, err, c.want)
		}
	}
	for _, s := range []string{"", "MiB", "-1M", "12x", "1e30G", "NaN"} {
		if _, err := ParseBytes(s); err == nil {
			t.Errorf("ParseBytes(%q) accepted", s)
		}
	}
}

func TestFilterNames(t *testing.T) {
	if got := FilterNames(nil); got != "none" {
		t.Fatalf("FilterNames(nil) = %q", got)
	}
	if got := FilterNames([]engine.Filter{engine.Shuffle(), engine.Zstd(-5)}); got != engine.Shuffle().String()+"+"+engine.Zstd(-5).String() {
		t.Fatalf("FilterNames = %q", got)
	}
}

func TestFrameSelfDescribing(t *testing.T) {
	b := make([]byte, 2*64)
	FillFrame(b, 3, 70000)
	if err := VerifyFrame(b, 3, 70000); err != nil {
		t.Fatal(err)
	}
	if err := VerifyFrame(b, 3, 70001); !errors.Is(err, ErrVerify) {
		t.Fatalf("wrong index: %v", err)
	}
	if err := VerifyFrame(b, 2, 70000); !errors.Is(err, ErrVerify) {
		t.Fatalf("wrong dataset: %v", err)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if err := VerifyFrame(c, 3, 70000); !errors.Is(err, ErrVerify) {
			t.Fatalf("flip of byte %d not detected: %v", i, err)
		}
	}
	if err := VerifyFrame(b[:8], 3, 70000); !errors.Is(err, ErrVerify) {
		t.Fatalf("short frame: %v", err)
	}
	other := make([]byte, len(b))
	FillFrame(other, 3, 70001)
	if bytes.Equal(b[8:len(b)-4], other[8:len(b)-4]) {
		t.Fatal("frames of different indexes have the same payload")
	}
}

func TestIngestVerifiesEveryFrame(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ingest.scc")
	var calls int
	var last IngestProgress
	res, err := Ingest(context.Background(), IngestConfig{
		Path: path, Datasets: 3, Writers: 5, Readers: 2, Frames: 40, Height: 16, Width: 24,
		CacheBytes: 16 << 10, // a few frames: eviction all along
		Progress:   func(p IngestProgress) { calls++; last = p },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.FramesVerified != 120 || res.BytesWritten != 120*16*24*2 || res.BytesRead != res.BytesWritten {
		t.Fatalf("result %+v", res)
	}
	if calls == 0 || !last.Done || last.FramesWritten != 120 || last.FramesVerified != 120 {
		t.Fatalf("progress: %d calls, last %+v", calls, last)
	}
	if res.Evictions == 0 || res.PeakResident == 0 || res.CacheQuiescent != 16<<10 {
		t.Fatalf("cache figures %+v", res)
	}
	if res.Path != path || res.StoredBytes == 0 {
		t.Fatalf("path %q stored %d", res.Path, res.StoredBytes)
	}
	rep, err := engine.Check(context.Background(), path, nil)
	if err != nil || len(rep.Problems) != 0 || rep.Datasets != 3 || rep.Chunks != 120 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	// Every frame is where it belongs after reopening.
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	buf := make([]byte, 16*24*2)
	for d := 0; d < 3; d++ {
		ds, err := f.OpenDataset(context.Background(), testfile.DatasetNames(t, f)[d], nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Shape(); got[0] != 40 {
			t.Fatalf("dataset %d extent %v", d, got)
		}
		for fr := 0; fr < 40; fr++ {
			if err := ds.Read(context.Background(), engine.Box([]uint64{uint64(fr), 0, 0}, []uint64{1, 16, 24}), buf); err != nil {
				t.Fatal(err)
			}
			if err := VerifyFrame(buf, d, fr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestIngestTempFileRemovedAndWriteOnly(t *testing.T) {
	dir := t.TempDir()
	res, err := Ingest(context.Background(), IngestConfig{Dir: dir, Datasets: 2, Writers: 1, Readers: -1, Frames: 5, Height: 4, Width: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.FramesVerified != 0 || res.BytesWritten != 10*32 || res.Path != "" {
		t.Fatalf("%+v", res)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("temporary file left behind: %v", ents)
	}
}

func TestIngestConfigValidate(t *testing.T) {
	for _, c := range []IngestConfig{{Datasets: -1}, {Writers: -2}, {Readers: -2}, {Height: 2, Width: 2}, {CacheBytes: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
		if _, err := Ingest(context.Background(), c); err == nil {
			t.Errorf("Ingest(%+v) accepted", c)
		}
	}
	if err := (IngestConfig{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestIngestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Ingest(ctx, IngestConfig{Dir: t.TempDir(), Frames: 50, Height: 8, Width: 8}); err == nil {
		t.Fatal("cancelled ingest succeeded")
	}
}

// h5perfSample is h5perf_serial 1.10.8 output captured on this project's
// machine (trimmed of the parameter block's tail).
const h5perfSample = `HDF5 Library: Version 1.10.8
==== Parameters ====
IO API=posix hdf5
Dataset size=2KB 2KB
==== End of Parameters ====

Transfer Buffer Size (bytes): 262144
File Size(MB): 4.00
        IO API = POSIX
            Write (1 iteration(s)):
                Maximum Throughput: 115.59 MB/s
                Average Throughput: 115.59 MB/s
                Minimum Throughput: 115.59 MB/s
            Write Open-Close (1 iteration(s)):
                Maximum Throughput: 115.34 MB/s
                Average Throughput: 115.34 MB/s
                Minimum Throughput: 115.34 MB/s
            Read (1 iteration(s)):
                Average Throughput: 352.71 MB/s
            Read Open-Close (1 iteration(s)):
                Average Throughput: 352.14 MB/s
        IO API = HDF5
            Write (1 iteration(s)):
                Maximum Throughput: 261.69 MB/s
                Average Throughput: 261.69 MB/s
            Write Open-Close (1 iteration(s)):
                Average Throughput: 248.00 MB/s
            Read (1 iteration(s)):
                Average Throughput: 3656.76 MB/s
            Read Open-Close (1 iteration(s)):
                Average Throughput: 2688.23 MB/s
`

func TestParseH5perf(t *testing.T) {
	figs, err := ParseH5perf(h5perfSample)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"POSIX/Write": 115.59, "POSIX/Write Open-Close": 115.34, "POSIX/Read": 352.71, "POSIX/Read Open-Close": 352.14,
		"HDF5/Write": 261.69, "HDF5/Write Open-Close": 248, "HDF5/Read": 3656.76, "HDF5/Read Open-Close": 2688.23,
	}
	if len(figs) != len(want) {
		t.Fatalf("got %v", figs)
	}
	for k, v := range want {
		if figs[k] != v {
			t.Errorf("%s = %v, want %v", k, figs[k], v)
		}
	}
	if _, err := ParseH5perf("usage: h5perf_serial"); !errors.Is(err, ErrPeerOutput) {
		t.Fatalf("no figures: %v", err)
	}
	bad := strings.Replace(h5perfSample, "248.00 MB/s", "x MB/s", 1)
	if _, err := ParseH5perf(bad); !errors.Is(err, ErrPeerOutput) {
		t.Fatalf("bad number: %v", err)
	}
}

func TestH5perfConfig(t *testing.T) {
	c := H5perfConfig{Dims: [2]uint64{16 << 10, 16 << 10}, Transfer: [2]uint64{1 << 10, 1 << 10}, Chunk: [2]uint64{1 << 10, 1 << 10}}
	if got := strings.Join(c.Args(), " "); got != "-e 16K,16K -x 1K,1K -c 1K,1K" {
		t.Fatalf("args %q", got)
	}
	c.Transfer[0] = 1000
	if err := c.Validate(); err == nil {
		t.Fatal("transfer that does not tile accepted")
	}
	if err := (H5perfConfig{}).Validate(); err == nil {
		t.Fatal("zero config accepted")
	}
}

func TestH5perfSCC(t *testing.T) {
	res, err := H5perfSCC(context.Background(), H5perfConfig{
		Dims: [2]uint64{128, 96}, Transfer: [2]uint64{32, 48}, Chunk: [2]uint64{40, 40}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 128*96 || res.WriteMBps <= 0 || res.ReadMBps <= 0 || res.WriteCPU < 0 {
		t.Fatalf("%+v", res)
	}
}

// TestH5perfCPURatios: the raw ceiling's rows give the CPU time of scc's
// write passes beside the raw writer's, pass by pass (raw/scc, like the
// throughput ratio), which a loaded machine moves less than wall time; the
// CRC32C row also gives the raw writer of scc's chunk frames, the floor of
// the format, and the raw writer of those frames with the CRC32C computed
// on a second goroutine while the bytes are written.
func TestH5perfCPURatios(t *testing.T) {
	got := cpuRatios(sampled{0.040, 0.050, 0.020}, sampled{0.036, 0.040, 0.020})
	for _, want := range []string{"raw/scc 0.90×", "(0.80–1.00)", "scc 40 ms", "raw 36 ms"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
	if got := cpuRatios(sampled{0.04}, nil); got != "" {
		t.Errorf("no raw passes: %q", got)
	}
	rep, err := Run(context.Background(), []string{"h5perf"}, Options{Tiny: true, Dir: t.TempDir(), Peers: &Peers{}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range rep.Figures {
		if strings.HasPrefix(f.Key, "write-rawsum") {
			n++
			if !strings.Contains(f.Note, "CPU seconds per pass") {
				t.Errorf("%s: note %q gives no CPU time", f.Key, f.Note)
			}
			if !strings.Contains(f.Note, "in scc's chunk frames") || !strings.Contains(f.Note, "framed raw/scc") {
				t.Errorf("%s: note %q gives no floor of the format", f.Key, f.Note)
			}
			if !strings.Contains(f.Note, "with the CRC32C on a second goroutine") {
				t.Errorf("%s: note %q gives no floor with the checksum beside the write", f.Key, f.Note)
			}
		}
	}
	if n == 0 {
		t.Fatal("no raw ceiling rows")
	}
}

// TestH5perfGatherFloor: a row whose transfers are parts of chunks is
// also given beside the framed raw writer that first assembles each chunk
// from its transfers (the floor of partial-chunk writes); whole-chunk rows
// are not, and the gathering writer refuses them.
func TestH5perfGatherFloor(t *testing.T) {
	rep, err := Run(context.Background(), []string{"h5perf"}, Options{Tiny: true, Dir: t.TempDir(), Peers: &Peers{}})
	require.NoError(t, err)
	var keys []string
	for _, f := range rep.Figures {
		if strings.HasPrefix(f.Key, "write-rawgather-") {
			keys = append(keys, f.Key)
			assert.Contains(t, f.Note, "CPU seconds per pass")
			require.NotNil(t, f.PeerValue)
			assert.Positive(t, *f.PeerValue)
		}
	}
	assert.Contains(t, keys, "write-rawgather--e256x256-x32x32-c64x64")
	for _, k := range keys {
		assert.NotContains(t, k, "-x64x64-", "a whole-chunk row has no gather floor")
	}
	whole := H5perfConfig{Dims: [2]uint64{256, 256}, Transfer: [2]uint64{64, 64}, Chunk: [2]uint64{64, 64}, Dir: t.TempDir()}
	_, _, err = h5perfRawGather(context.Background(), whole)
	assert.Error(t, err)
}

const lookupSample = `goos: linux
BenchmarkLookup/scc/g=1-2         	  188872	      1246 ns/op	         0.8024 Mlookups/s
BenchmarkLookup/scc/g=8-2         	  114903	      3882 ns/op	         0.2576 Mlookups/s
BenchmarkLookup/otter/g=1-2       	 2252632	        50.34 ns/op	        19.86 Mlookups/s
BenchmarkLookup/ristretto/g=8     	 1000000	       500 ns/op
PASS
`

func TestParseLookupBench(t *testing.T) {
	figs, err := ParseLookupBench(lookupSample)
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 4 {
		t.Fatalf("%+v", figs)
	}
	if f := figs[2]; f.Impl != "otter" || f.Goroutines != 1 || f.Mops != 19.86 || f.NsPerOp != 50.34 {
		t.Fatalf("%+v", f)
	}
	if f := figs[3]; f.Impl != "ristretto" || f.Goroutines != 8 || f.Mops != 2 {
		t.Fatalf("Mops from ns/op: %+v", f)
	}
	if _, err := ParseLookupBench("PASS\n"); !errors.Is(err, ErrPeerOutput) {
		t.Fatal(err)
	}
}

// TestMedianLookups: repeated runs of one implementation and goroutine
// count fold into their median, in the order the pairs first appear; a
// pair run once keeps its figure.
func TestMedianLookups(t *testing.T) {
	figs := []LookupFigure{
		{Impl: "scc", Goroutines: 1, Mops: 10, NsPerOp: 100},
		{Impl: "otter", Goroutines: 1, Mops: 20, NsPerOp: 50},
		{Impl: "scc", Goroutines: 1, Mops: 2, NsPerOp: 500}, // a run in a burst of load
		{Impl: "scc", Goroutines: 2, Mops: 7, NsPerOp: 140},
		{Impl: "otter", Goroutines: 1, Mops: 18, NsPerOp: 55},
		{Impl: "scc", Goroutines: 1, Mops: 11, NsPerOp: 90},
	}
	got := MedianLookups(figs)
	want := []LookupFigure{
		{Impl: "scc", Goroutines: 1, Mops: 10, NsPerOp: 100},
		{Impl: "otter", Goroutines: 1, Mops: 19, NsPerOp: 52.5},
		{Impl: "scc", Goroutines: 2, Mops: 7, NsPerOp: 140},
	}
	assert.Equal(t, want, got)
}

func TestFigureFinish(t *testing.T) {
	f := Figure{HigherIsBetter: true, SCC: 30, PeerValue: ptr(10), Target: &Target{Kind: "ratio", Value: 2}}
	f.finish()
	if *f.Ratio != 3 || f.Status != "met" {
		t.Fatalf("%+v", f)
	}
	f = Figure{HigherIsBetter: true, SCC: 10, PeerValue: ptr(10), Target: &Target{Kind: "ratio", Value: 1.2}}
	f.finish()
	if *f.Ratio != 1 || f.Status != "not met" {
		t.Fatalf("%+v", f)
	}
	f = Figure{SCC: 1000, PeerValue: ptr(4000), Target: &Target{Kind: "max", Value: 2048}}
	f.finish()
	if *f.Ratio != 4 || f.Status != "met" {
		t.Fatalf("lower is better: %+v", f)
	}
	f = Figure{SCC: 3000, Target: &Target{Kind: "max", Value: 2048}}
	f.finish()
	if f.Ratio != nil || f.Status != "not met" {
		t.Fatalf("max without peer: %+v", f)
	}
	f = Figure{HigherIsBetter: true, SCC: 5, Target: &Target{Kind: "ratio", Value: 2}}
	f.finish()
	if f.Ratio != nil || f.Status != "no peer" {
		t.Fatalf("missing peer: %+v", f)
	}
}

func TestLRUHitRatio(t *testing.T) {
	k := func(i int) [2]int { return [2]int{0, i} }
	// a b a c b a with capacity 2: hits on the second a only
	// (b is evicted by c; a by b).
	seq := [][2]int{k(1), k(2), k(1), k(3), k(2), k(1)}
	if got := LRUHitRatio(seq, 2); got != 1.0/6 {
		t.Fatalf("capacity 2: %v", got)
	}
	if got := LRUHitRatio(seq, 3); got != 3.0/6 {
		t.Fatalf("capacity 3: %v", got)
	}
	if got := LRUHitRatio(seq, 0); got != 0 {
		t.Fatalf("capacity 0: %v", got)
	}
}

func TestLookupHarness(t *testing.T) {
	ctx := context.Background()
	h, err := NewLookupHarness(ctx, 300, 48)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := h.Reader()
	before := h.Stats()
	for i := 0; i < 300; i++ {
		b, err := r.Get(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, LookupValue(i, 48)) {
			t.Fatalf("chunk %d = %v", i, b[:4])
		}
	}
	st := h.Stats().Sub(before)
	if st.Hits != 300 || st.Misses != 0 || st.Loads != 0 {
		t.Fatalf("lookups were not all hits: %+v", st)
	}
	if _, err := NewLookupHarness(ctx, 0, 8); err == nil {
		t.Fatal("zero chunks accepted")
	}
}

func TestRandReadSCC(t *testing.T) {
	ctx := context.Background()
	c := RandReadConfig{Datasets: 5, Frames: 6, Side: 8, Reads: 200, Seed: 1}
	c.CacheBytes = c.WorkingSet() * 2
	path := filepath.Join(t.TempDir(), "rr.scc")
	if err := randReadFile(ctx, path, c); err != nil {
		t.Fatal(err)
	}
	seq := c.Sequence()
	res, err := RandReadSCC(ctx, path, c, seq, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Everything fits: only the first read of each of the 30 chunks misses
	// (concurrent first reads of one chunk may each count a miss).
	if res.Reads != 200 || res.HitRatio < 0.7 || res.MBps <= 0 {
		t.Fatalf("%+v", res)
	}
	small := c
	small.CacheBytes = c.FrameBytes() * 3
	res2, err := RandReadSCC(ctx, path, small, seq, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res2.HitRatio >= res.HitRatio {
		t.Fatalf("a 3-chunk cache hits as often (%v) as a whole one (%v)", res2.HitRatio, res.HitRatio)
	}
}

func TestManyDatasets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "many.scc")
	if err := ManyDatasetsFile(context.Background(), path, 50); err != nil {
		t.Fatal(err)
	}
	res, err := ManyDatasetsSCC(path, 50)
	if err != nil {
		t.Fatal(err)
	}
	if res.Datasets != 50 || res.PerDataset <= 0 {
		t.Fatalf("%+v", res)
	}
	if _, err := ManyDatasetsSCC(path, 51); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("opening a dataset that is not there: %v", err)
	}
}

func TestRunUnknown(t *testing.T) {
	if _, err := Run(context.Background(), []string{"nope"}, Options{Tiny: true}); !errors.Is(err, ErrUnknownScenario) {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), nil, Options{Tiny: true}); !errors.Is(err, ErrUnknownScenario) {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), []string{"all"}, Options{Tiny: true, Quick: true}); err == nil {
		t.Fatal("quick and tiny accepted")
	}
}

// TestRunAllWithoutPeers runs every tiny scenario as on a machine without
// any peer: every scc figure is there, every peer is named as missing,
// ratio targets say "no peer", and the files are written.
func TestRunAllWithoutPeers(t *testing.T) {
	var log bytes.Buffer
	dir := t.TempDir()
	rep, err := Run(context.Background(), []string{"all"}, Options{Tiny: true, Dir: dir, Log: &log, Peers: NoPeers()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 0 {
		t.Fatalf("errors: %v", rep.Errors)
	}
	if got := strings.Join(rep.Scenario, ","); got != strings.Join(Names(), ",") {
		t.Fatalf("scenarios %s", got)
	}
	missing := strings.Join(rep.Missing, ";")
	for _, m := range []string{"h5perf_serial", "python3", "otter"} {
		if !strings.Contains(missing, m) {
			t.Errorf("missing peers %q do not name %s", missing, m)
		}
	}
	seen := map[string]bool{}
	for _, f := range rep.Figures {
		seen[f.Scenario] = true
		// adaptive/hit-gap (points behind the fixed cache) may be 0 or less.
		if f.SCC <= 0 && f.Scenario != "manyds" && (f.Scenario != "adaptive" || f.Key != "hit-gap") {
			t.Errorf("%s/%s: scc figure %v", f.Scenario, f.Key, f.SCC)
		}
		if f.Scenario == "seqread" || f.Scenario == "s3" || f.Scenario == "image" || (f.Scenario == "adaptive" && f.Key != "hit-gap") ||
			(f.Scenario == "h5perf" && strings.HasPrefix(f.Key, "write-raw")) ||
			(f.Scenario == "zarrbench" && (strings.HasSuffix(f.Key, "/floor") || strings.HasSuffix(f.Key, "/percore") ||
				strings.HasSuffix(f.Key, "/bound") || strings.HasSuffix(f.Key, "/placed") || strings.Contains(f.Key, "/published-") || f.Key == "sharded/size")) ||
			(f.Scenario == "virtual" && (strings.HasPrefix(f.Key, "ingest-") || strings.HasPrefix(f.Key, "read-"))) ||
			(f.Scenario == "serve" && strings.HasSuffix(f.Key, "-go")) {
			// Their baselines (raw pread; the naive S3 reader; scc without
			// an image; fixed-size caches; h5perf's raw pwrite ceiling; the
			// zstd codec alone, also placing what it decodes; one process writing one file, the sources
			// read directly; Go's file server over the exported store; the
			// sharded file's own Zarr export; figures published elsewhere)
			// are measured in process or fixed, not peers.
			if f.PeerValue == nil || f.Ratio == nil {
				t.Errorf("%s/%s: no baseline", f.Scenario, f.Key)
			}
			continue
		}
		if f.PeerValue != nil || f.Ratio != nil {
			t.Errorf("%s/%s: peer value without peers", f.Scenario, f.Key)
		}
		if f.Target != nil && f.Target.Kind == "ratio" && f.Status != "no peer" {
			t.Errorf("%s/%s: status %q", f.Scenario, f.Key, f.Status)
		}
	}
	for _, s := range []string{"h5perf", "seqread", "ingest", "randread", "manyds", "adaptive"} {
		if !seen[s] {
			t.Errorf("no figure for %s", s)
		}
	}
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| scenario | figure | scc | peer |") || !strings.Contains(md.String(), "Missing peers") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	var js bytes.Buffer
	if err := rep.JSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Figures) != len(rep.Figures) {
		t.Fatalf("json round trip: %v", err)
	}
	out := filepath.Join(dir, "out")
	paths, err := rep.WriteFiles(out)
	if err != nil {
		t.Fatal(err)
	}
	pngs := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".png") {
			pngs++
			if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("%s is not a PNG", p)
			}
		}
	}
	if pngs < 3 {
		t.Fatalf("%d plots written: %v", pngs, paths)
	}
	// Scratch files are removed.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "out" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestRunWithPeers runs the tiny scenarios against whatever peers this
// machine has (make bench-peers installs them) and checks that each
// present peer produced its figure. The Go peers (cachemap) are left out:
// they need a module download.
func TestRunWithPeers(t *testing.T) {
	p := FindPeers(context.Background())
	if p.H5perf == "" && p.H5py == "" && p.Zarr == "" {
		t.Skip("no peers installed (make bench-peers)")
	}
	rep, err := Run(context.Background(), []string{"h5perf", "ingest", "randread", "manyds"},
		Options{Tiny: true, Dir: t.TempDir(), Peers: p})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 0 {
		t.Fatalf("errors: %v", rep.Errors)
	}
	for _, f := range rep.Figures {
		present := (strings.Contains(f.Peer, "h5perf") && p.H5perf != "") ||
			(strings.HasPrefix(f.Peer, "h5py") && p.H5py != "") || (strings.HasPrefix(f.Peer, "zarr") && p.Zarr != "")
		if present && (f.PeerValue == nil || *f.PeerValue <= 0 || f.Ratio == nil) {
			t.Errorf("%s/%s: peer %s has no figure", f.Scenario, f.Key, f.Peer)
		}
	}
}

func TestRandReadConfigValidate(t *testing.T) {
	good := RandReadConfig{Datasets: 2, Frames: 2, Side: 4, Reads: 1, CacheBytes: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []RandReadConfig{
		{Datasets: 0, Frames: 2, Side: 4, CacheBytes: 1}, {Datasets: 2, Frames: 0, Side: 4, CacheBytes: 1},
		{Datasets: 2, Frames: 2, Side: 2, CacheBytes: 1}, {Datasets: 2, Frames: 2, Side: 4},
		{Datasets: 2, Frames: 2, Side: 4, CacheBytes: 1, Reads: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := RandReadSCC(context.Background(), "unused", good, nil, 0); err == nil {
		t.Fatal("0 goroutines accepted")
	}
}

// TestCacheMapPeersThatCannotRun: a go command that fails before running
// any benchmark (offline module cache) makes the Go peers missing, not the
// scenario failed.
func TestCacheMapPeersThatCannotRun(t *testing.T) {
	fail, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false command")
	}
	rep, err := Run(context.Background(), []string{"cachemap"}, Options{Tiny: true,
		Peers: &Peers{Go: fail, PeersDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 0 || len(rep.Missing) != 1 || !strings.Contains(rep.Missing[0], "did not run") {
		t.Fatalf("errors %v missing %v", rep.Errors, rep.Missing)
	}
}

func TestSeqReadVerifies(t *testing.T) {
	res, err := SeqRead(context.Background(), t.TempDir(), 6, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 6*4096 || res.SCCMBps <= 0 || res.PreadMBps <= 0 || res.PreadSumMBps <= 0 {
		t.Fatalf("%+v", res)
	}
}

func TestSampledMedian(t *testing.T) {
	for _, c := range []struct {
		s    sampled
		want float64
	}{{nil, 0}, {sampled{5}, 5}, {sampled{9, 1, 4}, 4}, {sampled{4, 1, 9, 2}, 3}} {
		if got := c.s.median(); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.s, got, c.want)
		}
	}
	s := sampled{3000, 1000.4, 2000}
	if got, want := s.span(), "median of 3 passes, 1000–3000"; got != want {
		t.Errorf("span %q, want %q", got, want)
	}
	if s[0] != 3000 || s[1] != 1000.4 {
		t.Errorf("median reordered its passes: %v", s)
	}
	if h5perfSamples(Options{Quick: true}) < 3 || h5perfSamples(Options{}) < 3 {
		t.Error("h5perf rows of full and quick runs must be medians of at least 3 passes")
	}
}

// TestFillFrameValues: every element of a frame is its smooth value plus
// noise of 0..7, whatever the frame's length (the four-at-a-time loop and
// its tail) and index (base values that wrap around 2^16 in a lane).
func TestFillFrameValues(t *testing.T) {
	for _, n := range []int{8, 9, 10, 11, 64, 65, 300, 65536} {
		for _, idx := range []int{0, 1, 9361, 70000} {
			b := make([]byte, 2*n)
			FillFrame(b, 2, idx)
			if err := VerifyFrame(b, 2, idx); err != nil {
				t.Fatal(err)
			}
			base := uint16(idx * 7)
			seen := map[uint16]bool{}
			for i := 4; i < n-2; i++ {
				v := uint16(b[2*i]) | uint16(b[2*i+1])<<8
				noise := v - base - uint16(i>>6)&0x3ff - uint16(i&63)
				if noise > 7 {
					t.Fatalf("%d elements, frame %d, element %d: %d, noise %d", n, idx, i, v, noise)
				}
				seen[noise] = true
			}
			if n >= 300 && len(seen) != 8 {
				t.Fatalf("%d elements, frame %d: noise values %v", n, idx, seen)
			}
		}
	}
}
