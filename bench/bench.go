// Package bench is scc's benchmark suite: scenarios that measure the engine
// side by side with what its users would pick instead (HDF5's h5perf_serial,
// h5py, zarr-python, and the Go caches otter and ristretto), each figure
// printed beside its peer's figure from the same run and the ratio between
// them (DESIGN.md "Measured, not assumed").
//
// Every scenario is a library function (Run with its name) so that scctl
// runs it, and a Go benchmark in bench_test.go runs a small version of it.
// A peer that is not installed is reported as missing and the rest still
// runs; `make bench-peers` installs them.
//
// The package also holds the ingest job behind `scctl ingest` (ingest.go),
// because the ingest scenario is the same workload.
//
// Concurrency: a Run call is not meant to be shared; scenarios start their
// own goroutines and wait for them. Different Run calls may run at once but
// then measure each other.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/scc-dev/scc/engine/filter"
)

// ErrUnknownScenario is returned by Run for a name that is not a scenario.
var ErrUnknownScenario = errors.New("bench: unknown scenario")

// Options configure a run of one or more scenarios. The zero value runs the
// full-size versions in os.TempDir() without writing any files of results.
type Options struct {
	// Quick selects the small versions: `scctl bench all --quick` must stay
	// well under 10 minutes on 2 cores with every peer installed.
	Quick bool
	// Tiny selects versions small enough for unit tests (seconds in all).
	Tiny bool
	// Full selects the full size of scenarios whose default is already a
	// quick one (zarrbench: the public benchmark's 1024³ array instead of
	// 256³). Exclusive with Tiny.
	Full bool
	// InnerChunk is the inner chunk side of zarrbench's sharded variant
	// (default a quarter of the chunk side: 64³ in the full run's 256³).
	InnerChunk int
	// Dir is where scenario files are created (and removed afterwards).
	// Default os.TempDir().
	Dir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Peers overrides peer discovery (tests use it to hide peers); nil
	// means FindPeers.
	Peers *Peers
}

// Validate reports whether o is usable.
func (o Options) Validate() error {
	if o.Quick && o.Tiny {
		return fmt.Errorf("bench: Quick and Tiny are exclusive")
	}
	if o.InnerChunk < 0 {
		return fmt.Errorf("bench: InnerChunk %d", o.InnerChunk)
	}
	if o.Full && (o.Tiny || o.Quick) {
		return fmt.Errorf("bench: Full excludes Quick and Tiny")
	}
	if o.Dir != "" && !strings.HasPrefix(o.Dir, "s3://") { // s3://: the s3 scenario's bucket
		st, err := os.Stat(o.Dir)
		if err != nil {
			return fmt.Errorf("bench: Dir: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("bench: Dir %s is not a directory", o.Dir)
		}
	}
	return nil
}

// size picks the figure for the run's size class.
func (o Options) size(full, quick, tiny int) int {
	switch {
	case o.Tiny:
		return tiny
	case o.Quick:
		return quick
	}
	return full
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Target is a goal a figure is held to. Kind "ratio" is met when Figure.Ratio is
// at least Value; kind "max" is met when Figure.SCC is at most Value.
type Target struct {
	Kind  string  `json:"kind"`
	Value float64 `json:"value"`
}

func (t Target) String() string {
	switch t.Kind {
	case "ratio":
		return fmt.Sprintf("≥ %.2g×", t.Value)
	case "max":
		return "≤ " + trimFloat(t.Value)
	}
	return ""
}

// Figure is one measured number of scc beside its peer's.
//
// Ratio is always "how many times better scc is": scc/peer when higher is
// better (throughput), peer/scc when lower is better (bytes, latency). It
// is nil when the peer is missing.
type Figure struct {
	Scenario string `json:"scenario"`
	// Key names the figure within its scenario in a form fit for a Go
	// benchmark unit (no spaces): "write", "w4", "g=2", ...
	Key            string   `json:"key"`
	Metric         string   `json:"metric"`
	Unit           string   `json:"unit"`
	HigherIsBetter bool     `json:"higher_is_better"`
	SCC            float64  `json:"scc"`
	Peer           string   `json:"peer,omitempty"`
	PeerValue      *float64 `json:"peer_value,omitempty"`
	Ratio          *float64 `json:"ratio,omitempty"`
	Target         *Target  `json:"target,omitempty"`
	// Status is "met", "not met", "no peer" (a ratio target whose peer is
	// missing) or "" when the figure has no target.
	Status string `json:"status,omitempty"`
	Note   string `json:"note,omitempty"`
}

// finish fills Ratio and Status.
func (f *Figure) finish() {
	f.Ratio = nil
	if f.PeerValue != nil && *f.PeerValue > 0 && f.SCC > 0 {
		r := f.SCC / *f.PeerValue
		if !f.HigherIsBetter {
			r = *f.PeerValue / f.SCC
		}
		f.Ratio = &r
	}
	f.Status = ""
	if f.Target == nil {
		return
	}
	switch f.Target.Kind {
	case "ratio":
		switch {
		case f.Ratio == nil:
			f.Status = "no peer"
		case *f.Ratio >= f.Target.Value:
			f.Status = "met"
		default:
			f.Status = "not met"
		}
	case "max":
		if f.SCC <= f.Target.Value {
			f.Status = "met"
		} else {
			f.Status = "not met"
		}
	}
}

// Line is one curve of a plot.
type Line struct {
	Label string    `json:"label"`
	X     []float64 `json:"x"`
	Y     []float64 `json:"y"`
}

// Series is the data of one plot (plot.go draws it as a PNG).
type Series struct {
	File   string `json:"file"` // PNG file name inside the output directory
	Title  string `json:"title"`
	XLabel string `json:"x_label"`
	YLabel string `json:"y_label"`
	Lines  []Line `json:"lines"`
}

// Machine describes where the figures came from.
type Machine struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPU        string `json:"cpu,omitempty"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	MemTotal   string `json:"mem_total,omitempty"`
	// Inflater is the DEFLATE decoder the binary was built with
	// (filter.Inflater: the bundled libdeflate with cgo, pure Go
	// without), which the deflate scenarios' figures depend on.
	Inflater string `json:"inflater,omitempty"`
}

// ThisMachine reads the machine's description.
func ThisMachine() Machine {
	m := Machine{
		OS: runtime.GOOS, Arch: runtime.GOARCH, NumCPU: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		Inflater: filter.Inflater,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && k == "MemTotal" {
				var kb int64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
					m.MemTotal = HumanBytes(kb << 10)
				}
				break
			}
		}
	}
	return m
}

// Report is the outcome of a run.
type Report struct {
	Machine  Machine   `json:"machine"`
	Quick    bool      `json:"quick"`
	Tiny     bool      `json:"tiny,omitempty"`
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Figures  []Figure  `json:"figures"`
	Series   []Series  `json:"series,omitempty"`
	Missing  []string  `json:"missing_peers,omitempty"`
	Errors   []string  `json:"errors,omitempty"`
	Scenario []string  `json:"scenarios"`
}

func (r *Report) add(f Figure) {
	f.finish()
	r.Figures = append(r.Figures, f)
}

func (r *Report) missing(what string) {
	for _, m := range r.Missing {
		if m == what {
			return
		}
	}
	r.Missing = append(r.Missing, what)
}

// Scenario is one runnable comparison.
type Scenario struct {
	Name        string
	Description string
	run         func(ctx context.Context, o Options, p *Peers, r *Report) error
}

// Scenarios lists every scenario in the order `all` runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{"h5perf", "the h5perf_serial workload through scc beside h5perf_serial (HDF5)", runH5perf},
		{"seqread", "sequential read of unfiltered chunks beside raw pread of the same bytes", runSeqRead},
		{"ingest", "append frames with deflate level 1 beside h5py and zarr", runIngestScenario},
		{"randread", "random reads across 64 datasets, cache smaller than the working set, beside h5py and zarr", runRandRead},
		{"manyds", "memory per open dataset beside h5py", runManyDatasets},
		{"cachemap", "resident-chunk lookup throughput beside otter v2 and ristretto (module bench/peers)", runCacheMap},
		{"adaptive", "adaptive cache sizing on a phase-changing trace beside fixed caches at its minimum and maximum", runAdaptive},
		{"s3", "scan and random reads over S3 (MinIO, +10 ms per request) beside a naive one-chunk-per-GET reader", runS3},
		{"image", "open/close round robin (Cache image RFC): read calls and time per cycle with a cache image beside without", runImage},
		{"zarrbench", "the public Zarr benchmark (uint16 array, 256³ by default, 1024³ with --full): read_all, read_chunks at 1/2/4/8, roundtrip, raw and zstd, beside zarr-python and the pread floor, with peak RSS; and its sharded variant (inner chunks a quarter of the chunk side, --inner-chunk), with random inner chunk reads, beside zarr-python unsharded and on inner-size chunks, zarrita on the Zarr v3 sharded export, the codec and pread floors (and the codec placing each inner chunk into one array buffer), the published zarrs/TensorStore figures, and the file beside its export", runZarrBench},
		{"virtual", "many writer processes, one array: ingest by N processes into N files + a virtual dataset beside one process with N goroutines, reads of the virtual dataset beside the sources directly and h5py's VDS, latency of a reader following live writers", runVirtual},
		{"serve", "scctl serve: 1, 8 and 64 HTTP clients reading random chunks of the zarrbench array (zstd, sent as stored) beside Go's http.FileServer and python3 -m http.server on its Zarr export, and Flush-to-visible latency of a reader polling the served view", runServe},
	}
}

// Names lists the scenario names.
func Names() []string {
	var n []string
	for _, s := range Scenarios() {
		n = append(n, s.Name)
	}
	return n
}

// Run runs the named scenarios ("all" means every one). A scenario that
// fails is recorded in Report.Errors and the others still run; the error
// returned is only for bad arguments or a cancelled context.
func Run(ctx context.Context, names []string, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var todo []Scenario
	all := Scenarios()
	for _, n := range names {
		if n == "all" {
			todo = append(todo[:0], all...)
			break
		}
		found := false
		for _, s := range all {
			if s.Name == n {
				todo = append(todo, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: %q (have %s, all)", ErrUnknownScenario, n, strings.Join(Names(), ", "))
		}
	}
	if len(todo) == 0 {
		return nil, fmt.Errorf("%w: none given", ErrUnknownScenario)
	}
	p := o.Peers
	if p == nil {
		p = FindPeers(ctx)
	}
	r := &Report{Machine: ThisMachine(), Quick: o.Quick, Tiny: o.Tiny, Started: time.Now().UTC()}
	start := time.Now()
	for _, s := range todo {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		o.logf("== %s: %s", s.Name, s.Description)
		r.Scenario = append(r.Scenario, s.Name)
		t0 := time.Now()
		if err := s.run(ctx, o, p, r); err != nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", s.Name, err))
			o.logf("   %s failed: %v", s.Name, err)
		}
		o.logf("   %s took %.1fs", s.Name, time.Since(t0).Seconds())
	}
	r.Seconds = time.Since(start).Seconds()
	sort.Strings(r.Missing)
	return r, nil
}

// HumanBytes formats n as B, KiB, MiB, GiB or TiB.
func HumanBytes(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := ""
	switch {
	case i == 0:
		s = fmt.Sprintf("%d B", n)
	case v < 10:
		s = fmt.Sprintf("%.2f %s", v, units[i])
	case v < 100:
		s = fmt.Sprintf("%.1f %s", v, units[i])
	default:
		s = fmt.Sprintf("%.0f %s", v, units[i])
	}
	if neg {
		s = "-" + s
	}
	return s
}

// ParseBytes parses sizes like "64MiB", "64M", "1.5GiB", "4096" or "512k".
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	mult := float64(1)
	for _, u := range []struct {
		suf string
		m   float64
	}{{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
		{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10},
		{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: bad size %q", s)
	}
	if v < 0 || math.IsNaN(v) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("bench: bad size %q", s)
	}
	return int64(v * mult), nil
}

func trimFloat(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func ptr(v float64) *float64 { return &v }

const mib = 1 << 20

// mibps converts bytes over a duration to MiB/s (h5perf's "MB/s").
func mibps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / mib / d.Seconds()
}
