package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestIngestProcs: ingest --procs runs writer processes (this test binary
// again), each into its own file beside --file, and a virtual dataset in
// --file over them; afterwards every frame of the virtual dataset holds
// exactly what its writer wrote, and every file checks clean.
func TestIngestProcs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	vpath := filepath.Join(dir, "run.scc")
	const procs, frames, h, w = 3, 5, 8, 4
	code, out, stderr := runCmd(t, "ingest", "--procs", fmt.Sprint(procs), "--frames", fmt.Sprint(frames),
		"--frame", fmt.Sprintf("%dx%d", h, w), "--filter", "shuffle+deflate1", "--cache", "1MiB", "--file", vpath)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	var sources []string
	for i := 0; i < procs; i++ {
		sources = append(sources, filepath.Join(dir, fmt.Sprintf("run-w%d.scc", i)))
	}
	for _, p := range append([]string{vpath}, sources...) {
		testfile.CheckAtCleanup(t, p)
	}
	for _, want := range []string{
		"scc ingest: 3 writer processes × 5 frames of 64 B (uint16), shuffle+deflate(1), into 3 files + a virtual dataset",
		"written", "read+verified", "15 frames through the virtual dataset, every one checked",
		"file           " + vpath + ` (virtual dataset "frames"), sources ` + strings.Join(sources, ", "),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	f, err := engine.Open(ctx, vpath, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "frames", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(ctx)
	if ds.Layout() != engine.Virtual || fmt.Sprint(ds.Shape()) != fmt.Sprint([]uint64{procs * frames, h, w}) {
		t.Fatalf("layout %v shape %v", ds.Layout(), ds.Shape())
	}
	got := make([]byte, procs*frames*h*w*2)
	if err := ds.Read(ctx, engine.All(ds.Shape()), got); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, h*w*2)
	for g := 0; g < procs*frames; g++ {
		bench.FillFrame(want, 0, g)
		if !bytes.Equal(got[g*len(want):(g+1)*len(want)], want) {
			t.Fatalf("frame %d differs from what writer %d wrote as its frame %d", g, g%procs, g/procs)
		}
	}
	// Each writer's own file holds its frames in order.
	for i, p := range sources {
		sf, err := engine.Open(ctx, p, &engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		sds, err := sf.OpenDataset(ctx, "frames", nil)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, frames*h*w*2)
		if err := sds.Read(ctx, engine.All(sds.Shape()), buf); err != nil || sds.Shape()[0] != frames {
			t.Fatalf("%s: %v %v", p, sds.Shape(), err)
		}
		for j := 0; j < frames; j++ {
			if err := bench.VerifyFrame(buf[j*len(want):(j+1)*len(want)], 0, j*procs+i); err != nil {
				t.Fatalf("%s frame %d: %v", p, j, err)
			}
		}
		sds.Close(ctx)
		sf.Close(ctx)
	}
}

func TestIngestProcsJSONTemp(t *testing.T) {
	code, out, stderr := runCmd(t, "ingest", "--json", "--quiet", "--procs", "2", "--frames", "3", "--frame", "4x4", "--filter", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("--quiet printed %q", stderr)
	}
	var r bench.VirtualIngestResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Writers != 2 || r.Frames != 3 || r.FramesVerified != 6 || r.BytesWritten != 6*32 || r.VirtualPath != "" || r.Filters != "none" {
		t.Fatalf("%+v", r)
	}
}

func TestIngestProcsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--procs", "-1"}, {"--procs", "2", "--writers", "2"}, {"--procs", "2", "--datasets", "1"},
		{"--procs", "2", "--readers", "0"}, {"--procs", "2", "-image"}, {"--procs", "2", "--file", "s3://b/k.scc"},
		{"--procs", "2", "--file", t.TempDir() + "/v.h5"},
	} {
		code, _, stderr := runCmd(t, append([]string{"ingest", "--quiet"}, args...)...)
		if code != 2 {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}
