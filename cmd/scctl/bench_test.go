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
	for _, f := range []string{"report.md", "report.json", "BENCHMARKS.md"} {
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

func TestBenchBenchmarksPage(t *testing.T) {
	page := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	code, _, stderr := runCmd(t, "bench", "manyds", "--tiny", "--no-peers", "--benchmarks", page, "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| command | `scctl bench manyds --tiny --no-peers --benchmarks " + page + " --dir ",
		"| Go | ", "### manyds", "| memory per idle open dataset",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("page lacks %q:\n%s", want, b)
		}
	}
	if !strings.Contains(stderr, "wrote "+page) {
		t.Errorf("stderr %q", stderr)
	}
}

func TestCommandLineQuotes(t *testing.T) {
	got := commandLine("scctl bench", []string{"all", "--quick", "--out", "my dir", "it's", ""})
	want := `scctl bench all --quick --out 'my dir' 'it'\''s' ''`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
