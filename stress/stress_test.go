package stress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"
)

// Every test ends with goleak.VerifyNone(t, goleak.IgnoreCurrent()): the
// arguments are evaluated when the defer is set up, so the goroutines that
// existed when the test began (ants starts its default pool's purgers at
// package init) are ignored and everything the test started must be gone.

// long reports whether the long stress runs are wanted (SCC_STRESS=long).
func long() bool { return os.Getenv("SCC_STRESS") == "long" }

// seeds returns the seeds a test runs: SCC_STRESS_SEED when set (replay),
// else one fresh seed (three in long mode). Every seed is logged with the
// command that replays it.
func seeds(t *testing.T) []uint64 {
	t.Helper()
	if s := os.Getenv("SCC_STRESS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SCC_STRESS_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d from SCC_STRESS_SEED", n)
		return []uint64{n}
	}
	n := 1
	if long() {
		n = 3
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = rand.Uint64() >> 1
		t.Logf("seed %d (replay: SCC_STRESS_SEED=%d go test -race ./stress -run '%s')", out[i], out[i], t.Name())
	}
	return out
}

// sizes picks per-goroutine operation counts: the short run (make test)
// stays within a few seconds per count under the race detector on 2 cores.
func sizes(g int) (ops, linOps int) {
	switch {
	case g >= 64:
		ops, linOps = 40, 60
	case g >= 16:
		ops, linOps = 100, 100
	case g >= 4:
		ops, linOps = 200, 150
	default:
		ops, linOps = 300, 200
	}
	if long() {
		ops *= 10
		linOps *= 5
	}
	return ops, linOps
}

func goroutineCounts() []int {
	if long() {
		return []int{1, 2, 4, 8, 16, 32, 64}
	}
	return SuiteGoroutines
}

func logReport(t *testing.T, rep Report) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(rep.String()), "\n") {
		t.Log(line)
	}
}

// TestStressModel is the main stress run: 1..64 goroutines write disjoint
// stripes of six datasets in two files sharing one 8 KiB cache, read their
// own and each other's elements, flush, reopen handles, while extents grow;
// between phases extents shrink and grow, datasets and files are reopened,
// crash images are checked. Every read is compared with the model.
func TestStressModel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, seed := range seeds(t) {
		for _, g := range goroutineCounts() {
			t.Run(fmt.Sprintf("seed=%d/goroutines=%d", seed, g), func(t *testing.T) {
				ops, _ := sizes(g)
				rep, err := Run(context.Background(), t, Config{Seed: seed, Goroutines: g, Files: 2, Ops: ops})
				logReport(t, rep)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Mismatches != 0 || rep.ReadsChecked == 0 || rep.Ops.Writes == 0 {
					t.Fatalf("mismatches %d, reads checked %d, writes %d", rep.Mismatches, rep.ReadsChecked, rep.Ops.Writes)
				}
				// The cache is far smaller than the data: the workload must
				// have evicted, or it did not test what it claims to.
				if rep.Evictions == 0 {
					t.Fatalf("no evictions: the cache was not under pressure")
				}
			})
		}
	}
}

// TestStressLatencyManyFiles widens race windows with driver latency and
// spreads the load over four files sharing the cache.
func TestStressLatencyManyFiles(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, seed := range seeds(t) {
		ops := 80
		if long() {
			ops = 800
		}
		rep, err := Run(context.Background(), t, Config{
			Seed: seed, Goroutines: 8, Files: 4, Datasets: 2, Ops: ops, Phases: 4,
			Latency: 50 * time.Microsecond,
		})
		logReport(t, rep)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Ops.FileReopens == 0 && rep.Ops.Extents == 0 && rep.Ops.DatasetReopens == 0 {
			t.Fatal("no structural change between phases")
		}
	}
}

// TestStressDetectsCorruptRead: one flipped byte in a buffer a read
// returned must show as a mismatch, with the seed in the failure.
func TestStressDetectsCorruptRead(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var hits int
	cfg := Config{Seed: 7, Goroutines: 2, Ops: 60, hooks: &hooks{
		afterRead: func(worker, op int, buf []byte) {
			if worker == 0 && len(buf) > 0 {
				// A bit of the middle element's low half, which encodes
				// the element's own position: never a valid value.
				buf[len(buf)/2/8*8] ^= 0x40
				hits++ // worker 0 only: no race
			}
		},
	}}
	rep, err := Run(context.Background(), t, cfg)
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("err %v, want ErrMismatch", err)
	}
	if hits == 0 || rep.Mismatches < int64(hits) {
		t.Fatalf("%d corrupted reads, %d mismatches reported", hits, rep.Mismatches)
	}
	if len(rep.Failures) == 0 || !strings.Contains(rep.Failures[0], "SCC_STRESS_SEED=7") {
		t.Fatalf("failure does not name the seed: %q", rep.Failures)
	}
	if !strings.Contains(err.Error(), "SCC_STRESS_SEED=7") {
		t.Fatalf("error does not name the seed: %v", err)
	}
}

// TestStressDetectsLostWrite: writes the model records but the engine
// never receives must show as mismatches (own reads, verification, or the
// crash check).
func TestStressDetectsLostWrite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Seed: 11, Goroutines: 3, Ops: 90, hooks: &hooks{
		skipWrite: func(worker, op int) bool { return worker == 1 && op%5 == 0 },
	}}
	rep, err := Run(context.Background(), t, cfg)
	if !errors.Is(err, ErrMismatch) || rep.Mismatches == 0 {
		t.Fatalf("err %v, %d mismatches: lost writes went unnoticed", err, rep.Mismatches)
	}
}

// TestStressLinearizability: overlapping whole-region writes and reads on
// shared regions spanning several chunks must form a linearizable history
// per region (SCC design §5.2: overlapping requests in receipt order).
func TestStressLinearizability(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, seed := range seeds(t) {
		for _, g := range goroutineCounts() {
			t.Run(fmt.Sprintf("seed=%d/goroutines=%d", seed, g), func(t *testing.T) {
				_, linOps := sizes(g)
				rep, err := RunLinearizability(context.Background(), t, Config{
					Seed: seed, Goroutines: g, LinOps: linOps, LinTimeout: 30 * time.Second,
				})
				logReport(t, rep)
				if err != nil {
					t.Fatal(err)
				}
				if rep.LinHistories == 0 || rep.Ops.LinWrites == 0 || rep.Ops.LinReads == 0 {
					t.Fatalf("nothing checked: %+v", rep.Ops)
				}
			})
		}
	}
}

// TestStressLastWriterWins is the issue-4 acceptance test: many goroutines
// overwrite one region at once; the result is one request's value
// everywhere, never a mix, and it is the last write of a linearization.
func TestStressLastWriterWins(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, seed := range seeds(t) {
		for _, g := range []int{2, 4, 16, 64} {
			t.Run(fmt.Sprintf("seed=%d/goroutines=%d", seed, g), func(t *testing.T) {
				trials := 6
				if long() {
					trials = 40
				}
				rep, err := RunLastWriter(context.Background(), t, Config{Seed: seed, Goroutines: g, LinOps: 32, LinTrials: trials})
				logReport(t, rep)
				if err != nil {
					t.Fatal(err)
				}
				if rep.LinHistories != int64(trials) {
					t.Fatalf("%d histories checked, want %d", rep.LinHistories, trials)
				}
			})
		}
	}
}

// mixHook makes every third shared-region write store a different id in
// the second half of its buffer: a torn request, as an engine that
// interleaves overlapping writes per chunk would produce.
func mixHook() *hooks {
	return &hooks{linWrite: func(id int64, buf []byte) {
		if id%3 != 0 {
			return
		}
		for p := len(buf) / 2 / 8 * 8; p < len(buf); p += 8 {
			buf[p+4] ^= 0x10 // id bits: another write's id, same element
		}
	}}
}

// TestLinearizabilityDetectsTornWrite: torn writes make reads see a mix and
// the history non-linearizable.
func TestLinearizabilityDetectsTornWrite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rep, err := RunLinearizability(context.Background(), t, Config{Seed: 5, Goroutines: 1, LinOps: 120, hooks: mixHook()})
	if !errors.Is(err, ErrNotLinearizable) || rep.MixedReads == 0 || rep.LinViolations == 0 {
		t.Fatalf("err %v, mixed reads %d, violations %d: torn writes went unnoticed", err, rep.MixedReads, rep.LinViolations)
	}
}

// TestLastWriterDetectsTornWrite: the acceptance check fails on a region
// left as a mix.
func TestLastWriterDetectsTornWrite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := &hooks{linWrite: func(id int64, buf []byte) {
		for p := len(buf) / 2 / 8 * 8; p < len(buf); p += 8 {
			buf[p+4] ^= 0x10
		}
	}}
	rep, err := RunLastWriter(context.Background(), t, Config{Seed: 5, Goroutines: 2, LinOps: 32, LinTrials: 2, hooks: h})
	if !errors.Is(err, ErrNotLinearizable) || rep.MixedReads == 0 {
		t.Fatalf("err %v, mixed reads %d: a mixed region went unnoticed", err, rep.MixedReads)
	}
}

func wr(client, region int, id, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: linInput{region: region, write: true, id: id}, Call: call, Output: int64(0), Return: ret}
}

func rd(client, region int, out, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: linInput{region: region}, Call: call, Output: out, Return: ret}
}

// TestCheckHistory: the porcupine register model accepts what a register
// allows and rejects stale reads and mixes, per region.
func TestCheckHistory(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cases := []struct {
		name string
		h    []porcupine.Operation
		bad  int64
	}{
		{"sequential", []porcupine.Operation{wr(0, 0, 1, 1, 2), rd(1, 0, 1, 3, 4), wr(0, 0, 2, 5, 6), rd(1, 0, 2, 7, 8)}, 0},
		{"stale read", []porcupine.Operation{wr(0, 0, 1, 1, 2), wr(0, 0, 2, 3, 4), rd(1, 0, 1, 5, 6)}, 1},
		{"concurrent read may see either", []porcupine.Operation{wr(0, 0, 1, 1, 2), wr(0, 0, 2, 3, 8), rd(1, 0, 1, 4, 5), rd(2, 0, 2, 6, 7)}, 0},
		{"no going back", []porcupine.Operation{wr(0, 0, 1, 1, 2), wr(0, 0, 2, 3, 10), rd(1, 0, 2, 4, 5), rd(2, 0, 1, 6, 7)}, 1},
		{"mixed read", []porcupine.Operation{wr(0, 0, 1, 1, 2), rd(1, 0, outMixed, 3, 4)}, 1},
		{"fill before any write", []porcupine.Operation{rd(1, 0, 0, 1, 2), wr(0, 0, 1, 3, 4)}, 0},
		{"two regions, one bad", []porcupine.Operation{wr(0, 0, 1, 1, 2), rd(1, 1, 1, 3, 4), wr(0, 1, 2, 5, 6)}, 1},
	}
	for _, c := range cases {
		var rep Report
		checkHistory(&rep, registerModel(0), c.h, 10*time.Second, 1)
		if rep.LinViolations != c.bad || rep.LinUnknown != 0 {
			t.Errorf("%s: %d violations (%d unknown), want %d: %v", c.name, rep.LinViolations, rep.LinUnknown, c.bad, rep.Failures)
		}
	}
}

// randomHistory builds a small random history of one region: each client
// issues a few writes (unique ids) and reads that return an id a write of
// the history wrote (or 0), with random overlapping intervals.
func randomHistory(rng *rand.Rand, clients, ops int) []porcupine.Operation {
	var h []porcupine.Operation
	var id int64
	for c := 0; c < clients; c++ {
		var t int64
		for i := 0; i < ops; i++ {
			call := t + rng.Int64N(3)
			ret := call + 1 + rng.Int64N(6)
			t = ret + 1
			if rng.IntN(2) == 0 {
				id++
				h = append(h, wr(c, 0, id, call, ret))
			} else {
				h = append(h, rd(c, 0, -1, call, ret))
			}
		}
	}
	for i := range h {
		if !h[i].Input.(linInput).write {
			h[i].Output = rng.Int64N(id + 1)
		}
	}
	return h
}

// TestAbstractUnobservedKeepsVerdicts: renaming unread writes does not
// change porcupine's verdict on random histories (both verdicts occur).
func TestAbstractUnobservedKeepsVerdicts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rng := rand.New(rand.NewPCG(3, 4))
	m := registerModel(0)
	m.Partition = nil
	var ok, illegal int
	for i := 0; i < 400; i++ {
		h := randomHistory(rng, 1+rng.IntN(3), 1+rng.IntN(4))
		a := porcupine.CheckOperations(m, h)
		b := porcupine.CheckOperations(m, abstractUnobserved(h))
		if a != b {
			t.Fatalf("history %v: verdict %v, with unread writes renamed %v", h, a, b)
		}
		if a {
			ok++
		} else {
			illegal++
		}
	}
	if ok == 0 || illegal == 0 {
		t.Fatalf("random histories gave %d linearizable, %d not: the test does not exercise both", ok, illegal)
	}
}

// TestLastWriterMatchesPorcupine: the linear-time last-writer criterion
// agrees with porcupine on random histories of concurrent writes followed
// by a read, and the linearization it returns is valid.
func TestLastWriterMatchesPorcupine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rng := rand.New(rand.NewPCG(5, 6))
	m := registerModel(0)
	m.Partition = nil
	var ok, illegal int
	for i := 0; i < 500; i++ {
		var h []porcupine.Operation
		var id, end int64
		for c := 0; c < 1+rng.IntN(4); c++ {
			var tm int64
			for j := 0; j < 1+rng.IntN(3); j++ {
				call := tm + rng.Int64N(4)
				ret := call + 1 + rng.Int64N(8)
				tm = ret + 1
				id++
				h = append(h, wr(c, 0, id, call, ret))
				end = max(end, ret)
			}
		}
		h = append(h, rd(9, 0, rng.Int64N(id+1), end+1, end+2))
		want := porcupine.CheckOperations(m, h)
		lin, got := lastWriter(0, h)
		if got != want {
			t.Fatalf("history %v: lastWriter %v, porcupine %v", h, got, want)
		}
		if !got {
			illegal++
			continue
		}
		ok++
		// Replay the linearization: it must respect real time and the model.
		var state int64
		for k, op := range lin {
			for _, later := range lin[k+1:] {
				if later.Return < op.Call {
					t.Fatalf("linearization %v breaks real-time order", lin)
				}
			}
			in := op.Input.(linInput)
			if in.write {
				state = in.id
			} else if op.Output.(int64) != state {
				t.Fatalf("linearization %v: read returns %v in state %d", lin, op.Output, state)
			}
		}
	}
	if ok == 0 || illegal == 0 {
		t.Fatalf("%d linearizable, %d not: the test does not exercise both", ok, illegal)
	}
}

// TestConfigValidate: bad sizes are typed errors, also through Run.
func TestConfigValidate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	bad := []Config{
		{Goroutines: -1}, {Files: -2}, {Datasets: 65}, {Ops: -1}, {Phases: -1},
		{CacheBytes: -1}, {Latency: -1}, {SharedRegions: -2}, {LinOps: -1}, {LinTrials: -1}, {LinTimeout: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c, err)
		}
	}
	ctx := context.Background()
	if _, err := Run(ctx, nil, Config{Goroutines: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Run: %v", err)
	}
	if _, err := RunLinearizability(ctx, nil, Config{Ops: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("RunLinearizability: %v", err)
	}
	if _, err := RunLastWriter(ctx, nil, Config{Files: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("RunLastWriter: %v", err)
	}
	if _, err := RunSuite(ctx, Config{Datasets: -1}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("RunSuite: %v", err)
	}
}

// TestRunSuite runs the CLI entry point small and checks its report and
// log; a cancelled context stops it with the context's error.
func TestRunSuite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var log bytes.Buffer
	rep, err := RunSuite(context.Background(), Config{Seed: 42, Goroutines: 3, Ops: 60, LinOps: 40, LinTrials: 2}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if rep.Seed != 42 || rep.Ops.Writes == 0 || rep.Ops.LinWrites == 0 || rep.ReadsChecked == 0 || rep.LinHistories == 0 {
		t.Fatalf("report %+v", rep)
	}
	if s := log.String(); !strings.Contains(s, "seed=42") || !strings.Contains(s, "suite done") {
		t.Fatalf("log lacks the seed or the summary:\n%s", s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunSuite(ctx, Config{Seed: 1, Goroutines: 2, Ops: 20}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled suite: %v", err)
	}
}
