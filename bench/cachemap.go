package bench

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// LookupFigure is one line of bench/peers' BenchmarkLookup output.
type LookupFigure struct {
	Impl       string  // scc, otter, ristretto
	Goroutines int     // g=N
	NsPerOp    float64 // wall time per lookup over all goroutines
	Mops       float64 // million lookups per second
}

// ParseLookupBench reads `go test -bench Lookup` output of bench/peers:
// lines like "BenchmarkLookup/otter/g=2-2  1000000  45.6 ns/op  21.9 Mlookups/s".
func ParseLookupBench(out string) ([]LookupFigure, error) {
	var figs []LookupFigure
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 4 || !strings.HasPrefix(fl[0], "BenchmarkLookup/") {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(fl[0], "BenchmarkLookup/"), "/")
		if len(parts) != 2 || !strings.HasPrefix(parts[1], "g=") {
			continue
		}
		gs := strings.TrimPrefix(parts[1], "g=")
		if i := strings.IndexByte(gs, '-'); i >= 0 {
			gs = gs[:i]
		}
		g, err := strconv.Atoi(gs)
		if err != nil {
			return nil, fmt.Errorf("%w: %q", ErrPeerOutput, sc.Text())
		}
		f := LookupFigure{Impl: parts[0], Goroutines: g}
		for i := 2; i+1 < len(fl); i++ {
			v, err := strconv.ParseFloat(fl[i], 64)
			if err != nil {
				continue
			}
			switch fl[i+1] {
			case "ns/op":
				f.NsPerOp = v
			case "Mlookups/s":
				f.Mops = v
			}
		}
		if f.Mops == 0 && f.NsPerOp > 0 {
			f.Mops = 1e3 / f.NsPerOp
		}
		figs = append(figs, f)
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("%w: no BenchmarkLookup lines", ErrPeerOutput)
	}
	return figs, nil
}

// ProcessCPUSeconds is the CPU time (user + system) the process has used
// so far, 0 where unknown: BenchmarkLookup (bench/peers) divides its
// lookups by it too, a figure that other processes' load on a shared
// machine moves far less than the lookups per wall second.
func ProcessCPUSeconds() float64 { return cpuSeconds() }

// MedianLookups folds the repeated runs of each implementation and
// goroutine count (go test -count) into one figure each, in the order
// they first appear: the median of their Mlookups/s and, separately, of
// their ns/op. On a machine others share, one run of an implementation
// may land in a burst of their load that the peers' runs missed; the
// implementations' runs alternate with -count, and the median of each
// leaves such a run out.
func MedianLookups(figs []LookupFigure) []LookupFigure {
	type key struct {
		impl string
		g    int
	}
	var order []key
	runs := map[key][]LookupFigure{}
	for _, f := range figs {
		k := key{f.Impl, f.Goroutines}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], f)
	}
	median := func(v []float64) float64 {
		sort.Float64s(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	out := make([]LookupFigure, 0, len(order))
	for _, k := range order {
		rs := runs[k]
		mops, ns := make([]float64, len(rs)), make([]float64, len(rs))
		for i, f := range rs {
			mops[i], ns[i] = f.Mops, f.NsPerOp
		}
		out = append(out, LookupFigure{Impl: k.impl, Goroutines: k.g, Mops: median(mops), NsPerOp: median(ns)})
	}
	return out
}

// lookupCount is how many times runCacheMap runs each benchmark (go test
// -count): three, so that the median (MedianLookups) drops one disturbed
// run.
const lookupCount = 3

// runCacheMap is scenario (e). The Go peers live in the separate module
// bench/peers so the engine never depends on them; this runs its benchmark
// with the go command.
func runCacheMap(ctx context.Context, o Options, p *Peers, r *Report) error {
	if p.Go == "" || p.PeersDir == "" {
		what := "go command"
		if p.Go != "" {
			what = "bench/peers module (run from the scc checkout or set SCC_ROOT)"
		}
		r.missing("otter v2 and ristretto (" + what + ")")
		return nil
	}
	bt := map[bool]string{true: "100ms", false: "1s"}[o.Quick || o.Tiny]
	count := lookupCount
	if o.Tiny {
		bt, count = "2000x", 1
	}
	args := []string{"test", "-run", "^$", "-bench", "^BenchmarkLookup$", "-benchtime", bt, "-count", strconv.Itoa(count), "."}
	o.logf("   go %s (in %s)", strings.Join(args, " "), p.PeersDir)
	cmd := exec.CommandContext(ctx, p.Go, args...)
	cmd.Dir = p.PeersDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if !strings.Contains(string(out), "BenchmarkLookup/") {
			// It never got to run: most often the module cache lacks
			// otter or ristretto and the proxy is out of reach. That is a
			// missing peer, not a failed scenario.
			r.missing("otter v2 and ristretto (go test in bench/peers did not run: " + lastLines(string(out), 2) + ")")
			return nil
		}
		return fmt.Errorf("go test in %s: %w: %s", p.PeersDir, err, lastLines(string(out), 8))
	}
	figs, err := ParseLookupBench(string(out))
	if err != nil {
		return err
	}
	figs = MedianLookups(figs)
	by := map[string]map[int]LookupFigure{}
	var gs []int
	for _, f := range figs {
		if by[f.Impl] == nil {
			by[f.Impl] = map[int]LookupFigure{}
		}
		if _, ok := by["scc"][f.Goroutines]; !ok && f.Impl == "scc" {
			gs = append(gs, f.Goroutines)
		}
		by[f.Impl][f.Goroutines] = f
	}
	sort.Ints(gs)
	var lines []Line
	for _, impl := range []string{"scc", "otter", "otter-sync", "ristretto"} {
		l := Line{Label: impl}
		for _, g := range gs {
			if f, ok := by[impl][g]; ok {
				l.X, l.Y = append(l.X, float64(g)), append(l.Y, f.Mops)
			}
		}
		if len(l.X) > 0 {
			lines = append(lines, l)
		}
	}
	for _, g := range gs {
		s := by["scc"][g]
		o.logf("   g=%d: scc %.2f, otter %.2f, otter-sync %.2f, ristretto %.2f Mlookups/s (median of %d runs)", g, s.Mops, by["otter"][g].Mops, by["otter-sync"][g].Mops, by["ristretto"][g].Mops, count)
		// otter-sync: otter with its maintenance on the calling goroutine
		// (bench/peers newOtterSync), for reference: scc, like otter's
		// default, replays its access records on a goroutine of its own.
		for _, peer := range []string{"otter", "otter-sync", "ristretto"} {
			f := Figure{Scenario: "cachemap", Key: fmt.Sprintf("g%d", g), Metric: fmt.Sprintf("resident-chunk lookup + 64 B copy, %d goroutine(s)", g),
				Unit: "Mlookups/s", HigherIsBetter: true, SCC: s.Mops, Peer: peer}
			switch peer {
			case "otter":
				f.Peer = "otter v2"
				f.Target = &Target{Kind: "ratio", Value: 0.8}
			case "otter-sync":
				f.Peer = "otter v2, maintenance on the caller"
			}
			if pf, ok := by[peer][g]; ok {
				f.PeerValue = ptr(pf.Mops)
			}
			r.add(f)
		}
	}
	r.Series = append(r.Series, Series{File: "cachemap_throughput_vs_goroutines.png",
		Title: "resident-chunk lookup", XLabel: "goroutines", YLabel: "million lookups/s", Lines: lines})
	return nil
}
