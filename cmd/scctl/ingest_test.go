package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/engine"
)

func TestIngestSmall(t *testing.T) {
	path := t.TempDir() + "/ingest.scc"
	code, out, stderr := runCmd(t, "ingest", "--datasets", "2", "--writers", "3", "--readers", "2",
		"--frames", "12", "--frame", "16x8", "--filter", "shuffle+lz4", "--cache", "4KiB", "--file", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"scc ingest: 2 datasets × 12 frames of 256 B (uint16), shuffle+lz4, 3 writers, 2 readers",
		"written", "read+verified", "24 frames, every one checked", "hit ratio", "evictions",
		"peak resident", "vs cache limit 4.00 KiB quiescent / 8.00 KiB active", "peak Go heap", "file           " + path,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "\r") || !strings.Contains(stderr, "100%") || !strings.Contains(stderr, "written 24/24") {
		t.Errorf("progress bar: %q", stderr)
	}
	// The file is kept and consistent.
	if code, out, _ := runCmd(t, "check", path); code != 0 {
		t.Fatalf("check: %d\n%s", code, out)
	}
}

func TestIngestJSON(t *testing.T) {
	code, out, stderr := runCmd(t, "ingest", "--json", "--quiet", "--datasets", "1", "--writers", "1",
		"--readers", "0", "--frames", "3", "--frame", "4x4", "--filter", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("--quiet printed %q", stderr)
	}
	var r bench.IngestResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.BytesWritten != 3*32 || r.Readers != 0 || r.FramesVerified != 0 || r.Filters != "none" || r.Path != "" {
		t.Fatalf("%+v", r)
	}
}

// TestIngestDefaults checks that scctl ingest with no arguments (make
// demo) runs bench.Ingest's documented default, the embedded demo job.
func TestIngestDefaults(t *testing.T) {
	cfg, asJSON, quiet, prof, err := parseIngest(nil, io.Discard)
	if err != nil || asJSON || quiet || prof != "" {
		t.Fatal(err)
	}
	want := bench.IngestConfig{Datasets: 4, Writers: 4, Readers: 2, Frames: 512, Height: 256, Width: 256,
		Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}, CacheBytes: 32 << 20}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults %+v\nwant %+v", cfg, want)
	}
}

func TestIngestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--frame", "16"}, {"--frame", "ax4"}, {"--filter", "snappy"}, {"--cache", "lots"},
		{"--datasets", "0"}, {"--writers", "0"}, {"--frames", "0"}, {"--readers", "-1"}, {"--frame", "2x2"}, {"extra"},
	} {
		code, _, stderr := runCmd(t, append([]string{"ingest"}, args...)...)
		if code != 2 {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}

// cancelOnWrite cancels a context at its first write (the first progress
// line: the job is running).
type cancelOnWrite struct {
	cancel func()
}

func (c cancelOnWrite) Write(p []byte) (int, error) {
	c.cancel()
	return len(p), nil
}

// TestIngestFailureDoesNotCommit: an ingest that fails (interrupted while
// writing) leaves its file as the last commit left it — created, empty —
// instead of committing the frames it got to on close.
func TestIngestFailureDoesNotCommit(t *testing.T) {
	path := t.TempDir() + "/cut.scc"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	err := cmdIngest(ctx, []string{"--datasets", "2", "--writers", "2", "--readers", "0",
		"--frames", "1000000", "--frame", "64x64", "--filter", "none", "--cache", "4MiB", "--file", path}, &out, cancelOnWrite{cancel})
	if err == nil {
		t.Fatalf("the interrupted ingest succeeded:\n%s", out.String())
	}
	f, oerr := engine.Open(path, &engine.Options{ReadOnly: true})
	if oerr != nil {
		t.Fatalf("the file is not readable after the failure (%v): %v", err, oerr)
	}
	defer f.Close()
	if ds := f.Datasets(); len(ds) != 0 || f.Generation() != 1 {
		t.Fatalf("after a failed ingest (%v) the file holds %v at generation %d: it was committed", err, ds, f.Generation())
	}
}
