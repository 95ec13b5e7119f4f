package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
)

// TestVirtualScenario runs the "virtual" scenario at its tiny size as on
// a machine without peers: every figure is there with a positive value
// (the latency ones at least zero), the in-process baselines beside
// ingest and reads, no h5py value, and no error (every frame the reads
// and the follower saw was checked on the way).
func TestVirtualScenario(t *testing.T) {
	var log bytes.Buffer
	rep, err := Run(context.Background(), []string{"virtual"}, Options{Tiny: true, Dir: t.TempDir(), Log: &log, Peers: NoPeers()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 0 {
		t.Fatalf("errors: %v\n%s", rep.Errors, log.String())
	}
	t.Log(log.String())
	figs := map[string]Figure{}
	for _, f := range rep.Figures {
		figs[f.Key] = f
	}
	for _, k := range []string{"ingest-p1", "ingest-p2", "ingest-p4", "read-g1", "read-g4"} {
		f, ok := figs[k]
		if !ok || f.SCC <= 0 || f.PeerValue == nil || *f.PeerValue <= 0 || f.Ratio == nil {
			t.Errorf("%s: %+v", k, f)
		}
	}
	for _, k := range []string{"h5py-read-g1", "h5py-read-g4"} {
		if f, ok := figs[k]; !ok || f.SCC <= 0 || f.PeerValue != nil {
			t.Errorf("%s: %+v", k, f)
		}
	}
	for _, k := range []string{"follow-p50", "follow-p99"} {
		if f, ok := figs[k]; !ok || f.SCC < 0 || f.Unit != "ms" {
			t.Errorf("%s: %+v", k, f)
		}
	}
	if f50, f99 := figs["follow-p50"], figs["follow-p99"]; f50.SCC > f99.SCC {
		t.Errorf("median %v above p99 %v", f50.SCC, f99.SCC)
	}
	if !strings.Contains(strings.Join(rep.Missing, ";"), "python3") {
		t.Errorf("missing peers %v", rep.Missing)
	}
}

// TestVirtualIngestFrames runs the multi-process ingest and reads the
// virtual dataset back frame by frame, element by element, against
// FillFrame: frame g is the one writer g%N wrote as its frame g/N.
func TestVirtualIngestFrames(t *testing.T) {
	ctx := context.Background()
	cfg := VirtualIngestConfig{Dir: t.TempDir(), Writers: 3, Frames: 7, Height: 4, Width: 6, CacheBytes: 1 << 20, FlushEvery: 2, Verify: true}
	res, err := VirtualIngest(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.FramesVerified != 21 || res.BytesWritten != 21*48 || res.WriteMBps <= 0 || len(res.SourcePaths) != 3 {
		t.Fatalf("%+v", res)
	}
	for _, p := range append([]string{res.VirtualPath}, res.SourcePaths...) {
		rep, err := engine.Check(ctx, p, nil)
		if err != nil || len(rep.Problems) != 0 {
			t.Fatalf("%s: %v %v", p, err, rep)
		}
	}
	ds := openFrames(t, res.VirtualPath)
	if s := ds.Shape(); s[0] != 21 || s[1] != 4 || s[2] != 6 || ds.Layout() != engine.Virtual {
		t.Fatalf("shape %v layout %v", s, ds.Layout())
	}
	got := make([]byte, 21*48)
	if err := ds.Read(ctx, engine.All(ds.Shape()), got); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 48)
	for g := 0; g < 21; g++ {
		FillFrame(want, 0, g)
		if !bytes.Equal(got[g*48:(g+1)*48], want) {
			t.Fatalf("frame %d: %v, want %v", g, got[g*48:(g+1)*48], want)
		}
	}
	// The same frames read from the sources directly.
	if n, err := ReadSources(ctx, res.SourcePaths, 2, 1<<20, true); err != nil || n != 21 {
		t.Fatalf("sources: %d %v", n, err)
	}
}

// TestIngestOneProcess: the baseline's process, 3 goroutines sharing 22
// frames and growing the extent as they go, leaves a file whose dataset
// holds exactly frames 0..21, each the one FillFrame makes, and both its
// times are counted.
func TestIngestOneProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := dir + "/one.scc"
	tm, err := IngestOneProcess(ctx, path, VirtualIngestConfig{Dir: dir, Writers: 3, Frames: 7, Height: 4, Width: 6, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if tm.Wall <= 0 || tm.CPU <= 0 {
		t.Fatalf("%+v", tm)
	}
	if rep, err := engine.Check(ctx, path, nil); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("%v %v", err, rep)
	}
	ds := openFrames(t, path)
	if s := ds.Shape(); s[0] != 21 {
		t.Fatalf("shape %v", s)
	}
	got := make([]byte, 21*48)
	if err := ds.Read(ctx, engine.All(ds.Shape()), got); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 21; g++ {
		if err := VerifyFrame(got[g*48:(g+1)*48], 0, g); err != nil {
			t.Fatal(err)
		}
	}
	// Several goroutines take no acknowledgements: refused, not run.
	_, err = runProcs(ctx, []vwriterConfig{{Path: path, Writers: 1, Frames: 4, Height: 4, Width: 6, CacheBytes: 1 << 20, Goroutines: 2, FlushEvery: 1}}, nil)
	if err == nil || !strings.Contains(err.Error(), "FlushEvery") {
		t.Fatalf("%v", err)
	}
}

// TestVirtualIngestWriterFails: a writer process that cannot do its job
// (its file is not an scc file) fails the ingest with its message, and
// the other writers are stopped.
func TestVirtualIngestWriterFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := VirtualIngestConfig{Dir: t.TempDir(), Writers: 2, Frames: 3, Height: 4, Width: 4}
	_, sources, err := VirtualFiles(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sources[1], make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.withDefaults()
	_, err = runWriters(ctx, cfg, sources)
	if err == nil || !strings.Contains(err.Error(), "writer process 1") || !strings.Contains(err.Error(), "superblock") {
		t.Fatalf("%v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

func BenchmarkVirtual(b *testing.B) { benchScenario(b, "virtual") }

// openFrames opens path read-only and its dataset "frames", both closed at
// the test's end.
func openFrames(t *testing.T, path string) *engine.Dataset {
	t.Helper()
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(context.Background()) })
	ds, err := f.OpenDataset(context.Background(), "frames", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close(context.Background()) })
	return ds
}
