package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/scc-dev/scc/bench"
)

// TestIngestAdaptive: --adaptive lets the cache resize (a frame larger
// than the active limit forces a flash increase), and the summary and the
// JSON show the size over time.
func TestIngestAdaptive(t *testing.T) {
	code, out, stderr := runCmd(t, "ingest", "--quiet", "--json", "--datasets", "1", "--writers", "1", "--readers", "1",
		"--frames", "6", "--frame", "64x64", "--filter", "none", "--cache", "2KiB", "--adaptive", "--adaptive-max", "64KiB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r bench.IngestResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Resizes < 1 || len(r.CacheSizes) == 0 {
		t.Fatalf("resizes %d, samples %v", r.Resizes, r.CacheSizes)
	}
	last := r.CacheSizes[len(r.CacheSizes)-1]
	if last.Size <= 2<<10 || last.Size > 64<<10 || r.CacheQuiescent != last.Size {
		t.Fatalf("final size %d (quiescent %d): the 8 KiB frames did not grow the 2 KiB cache within 64 KiB", last.Size, r.CacheQuiescent)
	}
	code, out, stderr = runCmd(t, "ingest", "--quiet", "--datasets", "1", "--writers", "1", "--readers", "0",
		"--frames", "3", "--frame", "64x64", "--filter", "none", "--cache", "2KiB", "--adaptive")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "cache size") || !strings.Contains(out, "resizes") || !strings.Contains(out, "size/resident") {
		t.Fatalf("summary without the size over time:\n%s", out)
	}
	for _, args := range [][]string{{"--adaptive-max", "1MiB"}, {"--adaptive", "--adaptive-max", "lots"}, {"--adaptive", "--adaptive-max", "1KiB"}} {
		if code, _, stderr := runCmd(t, append([]string{"ingest", "--quiet"}, args...)...); code != 2 {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}

// TestBenchAdaptive: the adaptive scenario reports the adaptive cache
// beside the fixed ones, its targets, and its size over time.
func TestBenchAdaptive(t *testing.T) {
	code, out, stderr := runCmd(t, "bench", "adaptive", "--tiny", "--no-peers", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"| adaptive | hit ratio, adaptive vs fixed at the maximum", "| fixed-max |", "| fixed-min |",
		"hit ratio points behind the fixed maximum", "≤ 5 points", "average resident bytes, % of the maximum", "≤ 60",
		"average cache size in phase scan", "adaptive size over time (MiB; | = phase start;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"fixed-min hit ratio", "fixed-max hit ratio", "adaptive  hit ratio"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
}
