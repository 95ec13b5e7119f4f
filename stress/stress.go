// Package stress is scc's race-detector stress suite and the reference model
// it is checked against (DESIGN.md, package table: "race-detector stress
// suites and the reference model they are checked against").
//
// Three workloads, each driven by one seed so that a failure replays:
//
//   - Run: many goroutines read, write, flush and reopen handles on several
//     datasets of one or more files sharing one tiny cache (so chunks are
//     evicted and reloaded all along), while one more goroutine grows
//     extents under them (SCC design §5.2: SetExtent drains in-flight I/O).
//     A coordinator quiesces the workers between phases to verify every
//     element, shrink and grow extents, close and reopen datasets and files,
//     and check what a crash would leave (vfd.Crash) against the writes that
//     a successful Flush acknowledged. Every goroutine owns disjoint stripes
//     of every dataset, so the model of its own elements is exact; reads of
//     other goroutines' elements are checked against the interval of values
//     the owner had acknowledged before the read and issued by its end.
//   - RunLinearizability: whole-region writes and reads on shared regions
//     that span several chunks, recorded with call/return times and checked
//     with porcupine against a register per region (SCC design §5.2: the
//     serialization module runs overlapping requests in receipt order).
//   - RunLastWriter: the issue-4 acceptance check: many goroutines overwrite
//     one region spanning many chunks at once; afterwards the region holds
//     the value of exactly one request everywhere, and it is the last write
//     of a linearization of the history.
//
// RunSuite runs them all for the command-line tool. The functions are safe
// to call concurrently with each other; each builds its own files and cache.
package stress

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/scc-dev/scc/cache"
)

// Errors returned by the workloads; check with errors.Is. A failing run
// still returns its Report, with the first failures described in it.
var (
	// ErrMismatch: a read returned bytes the reference model rules out.
	ErrMismatch = errors.New("stress: read differs from the reference model")
	// ErrNotLinearizable: a history of shared-region requests has no
	// linearization, or a region ended as a mix of several writes.
	ErrNotLinearizable = errors.New("stress: history is not linearizable")
	// ErrUnverified: the linearizability checker ran out of time (LinTimeout)
	// before it could decide.
	ErrUnverified = errors.New("stress: linearizability check timed out")
	// ErrInvalidConfig is returned (wrapped) by Config.Validate.
	ErrInvalidConfig = errors.New("stress: invalid config")
)

// Config sizes a stress run. The zero value is valid: every zero field takes
// its documented default.
type Config struct {
	// Seed drives every random choice: geometry, filters, replacement
	// policy, operations, selections. The same seed replays the same
	// per-goroutine operation sequences (goroutine interleaving is the
	// scheduler's). Zero is a seed like any other.
	Seed uint64
	// Goroutines issuing requests at once. Default 4. RunSuite with 0 runs
	// 1, 4, 16 and 64.
	Goroutines int
	// Files sharing the one cache. Default 1.
	Files int
	// Datasets per file. Default 3.
	Datasets int
	// Ops is the number of operations each goroutine issues in Run, spread
	// over the phases. Default 300.
	Ops int
	// Phases of Run: between two phases the coordinator verifies every
	// element and changes extents, reopens datasets and files. Default 3.
	Phases int
	// CacheBytes is the shared cache's quiescent budget. Default 8 KiB:
	// far below the data, so chunks are evicted and reloaded all along.
	CacheBytes int64
	// Latency, when positive, delays one driver operation in eight by this
	// much, to widen race windows. Default 0 (none).
	Latency time.Duration
	// NoCrashCheck turns off the check, at every phase end, that a crash
	// image (vfd.Crash, unsynced writes randomly kept or torn) opens, passes
	// engine.Check and holds at least every write a successful Flush
	// acknowledged.
	NoCrashCheck bool
	// SharedRegions is the number of shared regions of RunLinearizability.
	// Default max(4, Goroutines/4): about four goroutines per region keep
	// the histories decidable by porcupine in seconds (with 16 per region
	// they can take minutes), while neighbouring regions still share edge
	// chunks. RunSuite skips the linearizability workloads when it is -1.
	SharedRegions int
	// LinOps is the number of requests each goroutine issues in
	// RunLinearizability, and (divided by 16, at least 2) the writes each
	// goroutine issues per trial in RunLastWriter. Default 100.
	LinOps int
	// LinTrials is the number of independent trials of RunLastWriter.
	// Default 4.
	LinTrials int
	// LinTimeout bounds the porcupine check of one history partition.
	// Default 1 minute.
	LinTimeout time.Duration

	// hooks are test-only fault injections into the harness itself, to show
	// that the checks catch what they claim to.
	hooks *hooks
}

// hooks let a test corrupt the harness's own buffers. All fields optional.
type hooks struct {
	// afterRead may modify the buffer a model-checked read returned, before
	// the check (worker index and the worker's op number).
	afterRead func(worker, op int, buf []byte)
	// skipWrite, when it returns true, makes a worker record a write in the
	// model without sending it to the engine (a lost write).
	skipWrite func(worker, op int) bool
	// linWrite may modify the buffer of a shared-region write of id.
	linWrite func(id int64, buf []byte)
}

// Validate reports whether c (after defaults) is usable.
func (c Config) Validate() error {
	switch {
	case c.Goroutines < 0 || c.Goroutines > 4096:
		return fmt.Errorf("%w: Goroutines %d (0..4096)", ErrInvalidConfig, c.Goroutines)
	case c.Files < 0 || c.Files > 64:
		return fmt.Errorf("%w: Files %d (0..64)", ErrInvalidConfig, c.Files)
	case c.Datasets < 0 || c.Datasets > 64:
		return fmt.Errorf("%w: Datasets %d (0..64)", ErrInvalidConfig, c.Datasets)
	case c.Ops < 0:
		return fmt.Errorf("%w: Ops %d < 0", ErrInvalidConfig, c.Ops)
	case c.Phases < 0 || c.Phases > 10000:
		return fmt.Errorf("%w: Phases %d (0..10000)", ErrInvalidConfig, c.Phases)
	case c.CacheBytes < 0:
		return fmt.Errorf("%w: CacheBytes %d < 0", ErrInvalidConfig, c.CacheBytes)
	case c.Latency < 0:
		return fmt.Errorf("%w: Latency %v < 0", ErrInvalidConfig, c.Latency)
	case c.SharedRegions < -1 || c.SharedRegions > 1024:
		return fmt.Errorf("%w: SharedRegions %d (-1..1024)", ErrInvalidConfig, c.SharedRegions)
	case c.LinOps < 0:
		return fmt.Errorf("%w: LinOps %d < 0", ErrInvalidConfig, c.LinOps)
	case c.LinTrials < 0:
		return fmt.Errorf("%w: LinTrials %d < 0", ErrInvalidConfig, c.LinTrials)
	case c.LinTimeout < 0:
		return fmt.Errorf("%w: LinTimeout %v < 0", ErrInvalidConfig, c.LinTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Goroutines == 0 {
		c.Goroutines = 4
	}
	if c.Files == 0 {
		c.Files = 1
	}
	if c.Datasets == 0 {
		c.Datasets = 3
	}
	if c.Ops == 0 {
		c.Ops = 300
	}
	if c.Phases == 0 {
		c.Phases = 3
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = 8 << 10
	}
	if c.SharedRegions == 0 {
		c.SharedRegions = max(4, c.Goroutines/4)
	}
	if c.LinOps == 0 {
		c.LinOps = 100
	}
	if c.LinTrials == 0 {
		c.LinTrials = 4
	}
	if c.LinTimeout == 0 {
		c.LinTimeout = time.Minute
	}
	return c
}

// Logger receives progress lines; testing.TB satisfies it.
type Logger interface {
	Logf(format string, args ...any)
}

// WriterLogger adapts an io.Writer to Logger, one line per call. A nil
// writer discards.
func WriterLogger(w io.Writer) Logger { return writerLogger{w} }

type writerLogger struct{ w io.Writer }

func (l writerLogger) Logf(format string, args ...any) {
	if l.w == nil {
		return
	}
	s := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	_, _ = io.WriteString(l.w, s)
}

// OpCounts counts the operations a run completed, by kind.
type OpCounts struct {
	Writes         int64 // model-checked writes of a goroutine's own elements
	Reads          int64 // reads of a goroutine's own elements, checked exactly
	CrossReads     int64 // reads across every goroutine's elements, checked by interval
	Flushes        int64 // File.Flush calls by workers and the coordinator
	HandleReopens  int64 // a worker closed its dataset handle and opened a new one
	Stats          int64 // Cache.Stats / Dataset.CacheStats snapshots taken under load
	Grows          int64 // SetExtent growing a dataset while workers ran
	Extents        int64 // SetExtent (grow or shrink) between phases
	DatasetReopens int64 // every handle of a dataset closed, then reopened
	FileReopens    int64 // file closed, checked with engine.Check, reopened
	Verifies       int64 // whole-dataset reads checked exactly while quiescent
	CrashChecks    int64 // crash images opened, checked and compared with the model
	LinWrites      int64 // shared-region writes (linearizability workloads)
	LinReads       int64 // shared-region reads (linearizability workloads)
}

func (o *OpCounts) add(p OpCounts) {
	o.Writes += p.Writes
	o.Reads += p.Reads
	o.CrossReads += p.CrossReads
	o.Flushes += p.Flushes
	o.HandleReopens += p.HandleReopens
	o.Stats += p.Stats
	o.Grows += p.Grows
	o.Extents += p.Extents
	o.DatasetReopens += p.DatasetReopens
	o.FileReopens += p.FileReopens
	o.Verifies += p.Verifies
	o.CrashChecks += p.CrashChecks
	o.LinWrites += p.LinWrites
	o.LinReads += p.LinReads
}

// Report is what a run did and found. A clean run has Mismatches,
// LinViolations and MixedReads all zero.
type Report struct {
	Seed       uint64
	Goroutines int // largest goroutine count of the run(s)
	Ops        OpCounts
	// ReadsChecked counts reads compared with the model, ElementsChecked the
	// elements in them.
	ReadsChecked    int64
	ElementsChecked int64
	// Mismatches counts elements a read returned that the model rules out
	// (plus crash-image elements below what a Flush acknowledged).
	Mismatches int64
	// LinHistories counts history partitions checked with porcupine,
	// LinViolations those without a linearization, LinUnknown those the
	// checker could not decide in time.
	LinHistories  int64
	LinViolations int64
	LinUnknown    int64
	// MixedReads counts shared-region reads that returned elements of
	// several writes (never linearizable for whole-region writes).
	MixedReads int64
	// Evictions and PeakResidentBytes come from the shared cache's stats.
	Evictions         int64
	PeakResidentBytes int64
	// Failures describes the first problems found (at most a few dozen).
	Failures []string
	Duration time.Duration
}

// maxFailures bounds Report.Failures.
const maxFailures = 32

func (r *Report) fail(format string, args ...any) {
	if len(r.Failures) < maxFailures {
		r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
	}
}

// add merges o into r (RunSuite's total).
func (r *Report) add(o Report) {
	r.Goroutines = max(r.Goroutines, o.Goroutines)
	r.Ops.add(o.Ops)
	r.ReadsChecked += o.ReadsChecked
	r.ElementsChecked += o.ElementsChecked
	r.Mismatches += o.Mismatches
	r.LinHistories += o.LinHistories
	r.LinViolations += o.LinViolations
	r.LinUnknown += o.LinUnknown
	r.MixedReads += o.MixedReads
	r.Evictions += o.Evictions
	r.PeakResidentBytes = max(r.PeakResidentBytes, o.PeakResidentBytes)
	for _, f := range o.Failures {
		if len(r.Failures) < maxFailures {
			r.Failures = append(r.Failures, f)
		}
	}
	r.Duration += o.Duration
}

func (r *Report) takeCacheStats(st cache.Stats) {
	r.Evictions += st.Evictions
	r.PeakResidentBytes = max(r.PeakResidentBytes, st.PeakResidentBytes)
}

// String is a multi-line summary.
func (r Report) String() string {
	var b strings.Builder
	o := r.Ops
	fmt.Fprintf(&b, "seed %d, up to %d goroutines, %v\n", r.Seed, r.Goroutines, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "ops: writes %d, reads %d, cross-reads %d, flushes %d, handle reopens %d, stats %d\n",
		o.Writes, o.Reads, o.CrossReads, o.Flushes, o.HandleReopens, o.Stats)
	fmt.Fprintf(&b, "     grows %d, extent changes %d, dataset reopens %d, file reopens %d, verifies %d, crash checks %d\n",
		o.Grows, o.Extents, o.DatasetReopens, o.FileReopens, o.Verifies, o.CrashChecks)
	fmt.Fprintf(&b, "     shared-region writes %d, reads %d\n", o.LinWrites, o.LinReads)
	fmt.Fprintf(&b, "checked: %d reads, %d elements; mismatches %d\n", r.ReadsChecked, r.ElementsChecked, r.Mismatches)
	fmt.Fprintf(&b, "linearizability: %d histories, %d violations, %d undecided, %d mixed reads\n",
		r.LinHistories, r.LinViolations, r.LinUnknown, r.MixedReads)
	fmt.Fprintf(&b, "cache: %d evictions, peak resident %d bytes\n", r.Evictions, r.PeakResidentBytes)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "FAIL: %s\n", f)
	}
	return b.String()
}

// replay is the hint appended to every failure.
func replay(seed uint64) string {
	return fmt.Sprintf("seed %d (replay: SCC_STRESS_SEED=%d go test -race ./stress)", seed, seed)
}
