package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/bench"
)

func TestBenchTinyJSON(t *testing.T) {
	code, out, stderr := runCmd(t, "bench", "ingest", "--tiny", "--no-peers", "--json", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r bench.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) == 0 || r.Figures[0].Scenario != "ingest" || r.Figures[0].SCC <= 0 {
		t.Fatalf("%+v", r.Figures)
	}
	if !strings.Contains(stderr, "== ingest") || !strings.Contains(stderr, "missing peers:") {
		t.Fatalf("stderr %q", stderr)
	}
}

func TestBenchMarkdownAndFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "res")
	code, stdout, stderr := runCmd(t, "bench", "h5perf", "manyds", "--tiny", "--no-peers", "--out", out, "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"| scenario | figure | scc | peer | peer value | ratio | target | status |",
		"| h5perf | write", "| manyds | memory per idle open dataset", "no peer", "Missing peers"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"report.md", "report.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	if code, _, stderr := runCmd(t, "bench"); code != 2 || !strings.Contains(stderr, "name a scenario") {
		t.Fatalf("%d %q", code, stderr)
	}
	if code, _, stderr := runCmd(t, "bench", "nope", "--tiny"); code != 2 || !strings.Contains(stderr, "unknown scenario") {
		t.Fatalf("%d %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "bench", "all", "--tiny", "--quick"); code != 2 {
		t.Fatalf("tiny and quick: %d", code)
	}
}
