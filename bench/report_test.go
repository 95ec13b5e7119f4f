package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeReport is a run of two scenarios, one of them with a missing peer,
// on a made-up machine.
func fakeReport() *Report {
	peer := 50.0
	r := &Report{
		Machine: Machine{OS: "linux", Arch: "amd64", CPU: "Test CPU 9000", NumCPU: 2, GOMAXPROCS: 2,
			GoVersion: "go1.99", MemTotal: "8.0 GiB", Inflater: "pure Go"},
		Quick:    true,
		Started:  time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC),
		Seconds:  42,
		Scenario: []string{"seqread", "manyds"},
		Missing:  []string{"h5py"},
		Errors:   []string{"manyds: h5py not found"},
	}
	r.add(Figure{Scenario: "seqread", Key: "read", Metric: "sequential read", Unit: "MiB/s",
		HigherIsBetter: true, SCC: 100, Peer: "raw pread", PeerValue: &peer,
		Target: &Target{Kind: "ratio", Value: 0.8}, Note: "page cache warm"})
	r.add(Figure{Scenario: "manyds", Key: "mem", Metric: "memory per dataset", Unit: "B",
		SCC: 1000, Peer: "h5py", Target: &Target{Kind: "max", Value: 2048}})
	return r
}

func TestWriteBenchmarksPage(t *testing.T) {
	var b bytes.Buffer
	if err := fakeReport().WriteBenchmarks(&b, Page{Command: "scctl bench seqread manyds --quick --benchmarks BENCHMARKS.md"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"| command | `scctl bench seqread manyds --quick --benchmarks BENCHMARKS.md` |",
		"| date | 2030-01-02 03:04 UTC |",
		"| size | --quick, 42 s |",
		"| CPU | Test CPU 9000 |",
		"| cores | 2 (GOMAXPROCS 2) |",
		"| memory | 8.0 GiB |",
		"| kernel | ",
		"| Go | go1.99 |",
		"Missing peers (install them with `make bench-peers`): h5py.",
		"**error:** manyds: h5py not found",
		"### seqread\n",
		"| figure | scc | peer | peer value | ratio | target | status |",
		// The figure beside its baseline and the ratio between them.
		"| sequential read | 100 MiB/s | raw pread | 50.0 MiB/s | 2.00× | ≥ 0.8× | **met** |",
		"- page cache warm\n",
		"### manyds\n",
		"| memory per dataset | 1000 B | h5py | missing | – | ≤ 2048 B | **met** |",
		"Everything below is static text",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	// The scenarios come in the order they ran, the static part after them.
	if i, j, k := strings.Index(page, "### seqread"), strings.Index(page, "### manyds"), strings.Index(page, "Everything below is static"); !(i < j && j < k) {
		t.Errorf("order: seqread at %d, manyds at %d, static part at %d", i, j, k)
	}
	if strings.Contains(page, "{{") || strings.Contains(page, "<no value>") {
		t.Errorf("template left unexpanded:\n%s", page)
	}
}

// A scenario that printed nothing says so instead of an empty table, and a
// page written without a command names the scenarios that ran.
func TestWriteBenchmarksPageFailedScenario(t *testing.T) {
	r := fakeReport()
	r.Scenario = append(r.Scenario, "image")
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := r.WriteBenchmarksFile(path, Page{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if !strings.Contains(page, "### image\n") || !strings.Contains(page, "No figures: the scenario failed") {
		t.Errorf("failed scenario not reported:\n%s", page)
	}
	if !strings.Contains(page, "| command | `scctl bench seqread manyds image` |") {
		t.Errorf("default command:\n%s", page)
	}
}

// The Markdown table printed on stdout keeps its one-table form.
func TestMarkdownTable(t *testing.T) {
	var b bytes.Buffer
	if err := fakeReport().Markdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| scenario | figure | scc | peer | peer value | ratio | target | status |",
		"| seqread | sequential read | 100 MiB/s | raw pread | 50.0 MiB/s | 2.00× | ≥ 0.8× | **met** |",
		"- seqread: page cache warm\n",
		"Machine: linux/amd64, Test CPU 9000, 2 CPUs (GOMAXPROCS 2), 8.0 GiB RAM, go1.99, inflater pure Go. Run: --quick, 2030-01-02 03:04 UTC, 42 s.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
