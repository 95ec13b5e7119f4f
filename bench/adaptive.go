package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
)

// The adaptive scenario: one phase-changing trace of
// whole-frame reads (a hot set, a working set that fits the maximum, a
// scan larger than it, the hot set again, the working set again) through
// three caches on the same file in the same run: fixed at the adaptive
// minimum, fixed at the maximum, and adaptive between the two. Targets:
// the adaptive hit ratio within 5 points of the fixed maximum's, with
// average resident bytes at most 60 % of the maximum.

// AdaptiveConfig is the adaptive scenario's workload.
type AdaptiveConfig struct {
	Frames, Side  int   // frames of Side×Side uint16, one per chunk (deflate 1)
	MinFrames     int   // adaptive minimum (and the small fixed cache), in frames
	MaxFrames     int   // adaptive maximum (and the large fixed cache), in frames
	PhaseAccesses int   // accesses per random phase
	EpochAccesses int64 // adaptive epoch length
	Seed          uint64
}

// Validate reports whether c is runnable.
func (c AdaptiveConfig) Validate() error {
	switch {
	case c.Side < 3 || c.Side > 1<<12 || c.Frames < 8 || c.Frames > 1<<20:
		return fmt.Errorf("bench: adaptive: %d frames of side %d", c.Frames, c.Side)
	case c.MinFrames < 1 || c.MaxFrames < c.MinFrames || c.MaxFrames*2 > c.Frames:
		return fmt.Errorf("bench: adaptive: cache of %d..%d frames for %d frames (the scan must exceed twice the maximum)", c.MinFrames, c.MaxFrames, c.Frames)
	case c.PhaseAccesses < 1 || c.EpochAccesses < 1:
		return fmt.Errorf("bench: adaptive: %d accesses per phase, epoch %d", c.PhaseAccesses, c.EpochAccesses)
	}
	return nil
}

// FrameBytes is one frame's decoded size.
func (c AdaptiveConfig) FrameBytes() int64 { return int64(c.Side) * int64(c.Side) * 2 }

func adaptiveSize(o Options) AdaptiveConfig {
	return AdaptiveConfig{
		Frames:        o.size(2048, 1024, 128),
		Side:          o.size(64, 64, 16),
		MinFrames:     o.size(32, 16, 4),
		MaxFrames:     o.size(512, 256, 32),
		PhaseAccesses: o.size(12000, 5000, 400),
		EpochAccesses: int64(o.size(512, 256, 64)),
		Seed:          11,
	}
}

// adaptivePhase is one phase of the trace.
type adaptivePhase struct {
	Name  string
	Start int // index of its first access
}

// Trace returns the frame indices to read and the phases.
func (c AdaptiveConfig) Trace() ([]int, []adaptivePhase) {
	r := rand.New(rand.NewPCG(c.Seed, 0xada))
	hot, ws := max(c.MaxFrames/6, 1), c.MaxFrames*3/4
	var seq []int
	var ph []adaptivePhase
	random := func(name string, n int) {
		ph = append(ph, adaptivePhase{name, len(seq)})
		for i := 0; i < c.PhaseAccesses; i++ {
			seq = append(seq, r.IntN(n))
		}
	}
	random(fmt.Sprintf("hot set (%d frames)", hot), hot)
	random(fmt.Sprintf("working set (%d frames)", ws), ws)
	ph = append(ph, adaptivePhase{fmt.Sprintf("scan (%d frames)", c.Frames), len(seq)})
	for i := 0; i < c.Frames; i++ {
		seq = append(seq, i)
	}
	random("hot set again", hot)
	random("working set again", ws)
	return seq, ph
}

// AdaptiveRun is one cache's pass over the trace.
type AdaptiveRun struct {
	Name         string
	HitRatio     float64
	MBps         float64 // decoded MiB/s
	AvgResident  float64 // bytes, sampled every adaptiveSample accesses
	PhaseSize    []float64
	Size         []int64 // quiescent size every adaptiveSample accesses
	Resident     []int64 // resident bytes every adaptiveSample accesses
	Stats        cache.Stats
	SampledEvery int
}

const adaptiveSample = 16

// AdaptiveTraceRun reads the trace from path through a fresh cache made
// with cfg, verifying every frame.
func AdaptiveTraceRun(ctx context.Context, path string, c AdaptiveConfig, seq []int, ph []adaptivePhase, name string, cfg cache.Config) (*AdaptiveRun, error) {
	cc, err := cache.New(cfg)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	f, err := engine.Open(ctx, path, &engine.Options{Cache: cc, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "frames", nil)
	if err != nil {
		return nil, err
	}
	s := uint64(c.Side)
	buf := make([]byte, c.FrameBytes())
	run := &AdaptiveRun{Name: name, SampledEvery: adaptiveSample}
	before := cc.Stats()
	var elapsed time.Duration
	t0 := time.Now()
	for i, fr := range seq {
		if err := ds.Read(ctx, engine.Box([]uint64{uint64(fr), 0, 0}, []uint64{1, s, s}), buf); err != nil {
			return nil, err
		}
		if err := VerifyFrame(buf, 0, fr); err != nil {
			return nil, err
		}
		if i%adaptiveSample == 0 {
			// The clock stops while sampling: Stats is not part of the
			// workload.
			elapsed += time.Since(t0)
			st := cc.Stats()
			run.Size = append(run.Size, st.QuiescentLimit)
			run.Resident = append(run.Resident, st.ResidentBytes)
			t0 = time.Now()
		}
	}
	elapsed += time.Since(t0)
	st := cc.Stats().Sub(before)
	run.Stats = st
	if st.Hits+st.Misses > 0 {
		run.HitRatio = float64(st.Hits) / float64(st.Hits+st.Misses)
	}
	run.MBps = mibps(int64(len(seq))*c.FrameBytes(), elapsed)
	var sum float64
	for _, r := range run.Resident {
		sum += float64(r)
	}
	run.AvgResident = sum / float64(max(len(run.Resident), 1))
	for k, p := range ph {
		end := len(seq)
		if k+1 < len(ph) {
			end = ph[k+1].Start
		}
		lo, hi := p.Start/adaptiveSample, min((end+adaptiveSample-1)/adaptiveSample, len(run.Size))
		var t float64
		for _, v := range run.Size[lo:hi] {
			t += float64(v)
		}
		run.PhaseSize = append(run.PhaseSize, t/float64(max(hi-lo, 1)))
	}
	return run, nil
}

// AdaptiveCaches returns the three cache configurations compared: fixed
// at the minimum, fixed at the maximum, adaptive between them (starting
// at the minimum). Active limit = quiescent size, no per-dataset minimum,
// no bypass, so the three differ only in size.
func (c AdaptiveConfig) AdaptiveCaches() (names []string, cfgs []cache.Config) {
	minB, maxB := int64(c.MinFrames)*c.FrameBytes(), int64(c.MaxFrames)*c.FrameBytes()
	base := cache.Config{ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1}
	fixedMin, fixedMax, adaptive := base, base, base
	fixedMin.QuiescentBytes = minB
	fixedMax.QuiescentBytes = maxB
	adaptive.QuiescentBytes = minB
	adaptive.Adaptive = cache.AdaptiveConfig{Enabled: true, MinBytes: minB, MaxBytes: maxB, EpochAccesses: c.EpochAccesses}
	return []string{"fixed-min", "fixed-max", "adaptive"}, []cache.Config{fixedMin, fixedMax, adaptive}
}

// adaptiveFile writes the scenario's one dataset.
func adaptiveFile(ctx context.Context, path string, c AdaptiveConfig) error {
	f, err := engine.Create(ctx, path, nil)
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	s := uint64(c.Side)
	ds, err := f.CreateDataset(ctx, "frames", engine.DatasetSpec{
		Type: engine.Uint16, Shape: []uint64{uint64(c.Frames), s, s},
		Chunk: []uint64{1, s, s}, Filters: []engine.Filter{engine.Deflate(1)},
	})
	if err != nil {
		return err
	}
	buf := make([]byte, c.FrameBytes())
	for fr := 0; fr < c.Frames; fr++ {
		FillFrame(buf, 0, fr)
		if err := ds.Write(ctx, engine.Box([]uint64{uint64(fr), 0, 0}, []uint64{1, s, s}), buf); err != nil {
			return err
		}
	}
	if err := f.Flush(ctx); err != nil {
		return err
	}
	return f.Close(ctx)
}

// runAdaptive is the adaptive scenario.
func runAdaptive(ctx context.Context, o Options, _ *Peers, r *Report) error {
	c := adaptiveSize(o)
	if err := c.Validate(); err != nil {
		return err
	}
	dir, cleanup, err := tempDir(o, "adaptive")
	if err != nil {
		return err
	}
	defer cleanup()
	path := filepath.Join(dir, "adaptive.scc")
	if err := adaptiveFile(ctx, path, c); err != nil {
		return err
	}
	seq, ph := c.Trace()
	names, cfgs := c.AdaptiveCaches()
	runs := map[string]*AdaptiveRun{}
	for i, n := range names {
		run, err := AdaptiveTraceRun(ctx, path, c, seq, ph, n, cfgs[i])
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		runs[n] = run
		o.logf("   %-9s hit ratio %.3f, %.1f MiB/s, average resident %s", n, run.HitRatio, run.MBps, HumanBytes(int64(run.AvgResident)))
	}
	ad, fmax, fmin := runs["adaptive"], runs["fixed-max"], runs["fixed-min"]
	maxB := float64(int64(c.MaxFrames) * c.FrameBytes())
	note := adaptiveNote(ad, ph, len(seq))
	add := func(f Figure) {
		f.Scenario, f.Note = "adaptive", note
		r.add(f)
	}
	add(Figure{Key: "hits", Metric: "hit ratio, adaptive vs fixed at the maximum", Unit: "%", HigherIsBetter: true,
		SCC: 100 * ad.HitRatio, Peer: "fixed-max", PeerValue: ptr(100 * fmax.HitRatio)})
	add(Figure{Key: "hits-min", Metric: "hit ratio, adaptive vs fixed at the minimum", Unit: "%", HigherIsBetter: true,
		SCC: 100 * ad.HitRatio, Peer: "fixed-min", PeerValue: ptr(100 * fmin.HitRatio)})
	add(Figure{Key: "hit-gap", Metric: "hit ratio points behind the fixed maximum", Unit: "points",
		SCC: 100 * (fmax.HitRatio - ad.HitRatio), Target: &Target{Kind: "max", Value: 5}})
	add(Figure{Key: "resident", Metric: "average resident bytes, % of the maximum", Unit: "%",
		SCC: 100 * ad.AvgResident / maxB, Peer: "fixed-max", PeerValue: ptr(100 * fmax.AvgResident / maxB),
		Target: &Target{Kind: "max", Value: 60}})
	add(Figure{Key: "read", Metric: "read throughput, adaptive vs fixed at the maximum", Unit: "MiB/s", HigherIsBetter: true,
		SCC: ad.MBps, Peer: "fixed-max", PeerValue: ptr(fmax.MBps)})
	add(Figure{Key: "read-min", Metric: "read throughput, adaptive vs fixed at the minimum", Unit: "MiB/s", HigherIsBetter: true,
		SCC: ad.MBps, Peer: "fixed-min", PeerValue: ptr(fmin.MBps)})
	for k, p := range ph {
		add(Figure{Key: fmt.Sprintf("size-%d", k+1), Metric: "average cache size in phase " + p.Name, Unit: "MiB",
			SCC: ad.PhaseSize[k] / (1 << 20), Peer: "fixed-max", PeerValue: ptr(fmax.PhaseSize[k] / (1 << 20))})
	}
	var lines []Line
	for _, n := range names {
		run := runs[n]
		x := make([]float64, len(run.Resident))
		yr := make([]float64, len(run.Resident))
		for i, v := range run.Resident {
			x[i], yr[i] = float64(i*adaptiveSample), float64(v)/(1<<20)
		}
		lines = append(lines, Line{Label: n + " resident", X: x, Y: yr})
		if n == "adaptive" {
			ys := make([]float64, len(run.Size))
			for i, v := range run.Size {
				ys[i] = float64(v) / (1 << 20)
			}
			lines = append(lines, Line{Label: "adaptive size", X: x, Y: ys})
		}
	}
	r.Series = append(r.Series, Series{File: "adaptive.png", Title: "cache size over a phase-changing trace",
		XLabel: "access", YLabel: "MiB", Lines: lines})
	return nil
}

// adaptiveNote is the adaptive cache's size over time in one line: the
// size at 24 evenly spaced points of the trace, phase starts marked.
func adaptiveNote(ad *AdaptiveRun, ph []adaptivePhase, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "adaptive size over time (MiB; | = phase start; %d resize decisions, %d grows, %d shrinks, %d flash): ",
		ad.Stats.Resizes, ad.Stats.ResizeGrows, ad.Stats.ResizeShrinks, ad.Stats.FlashIncreases)
	const points = 24
	next := 0
	for k := 0; k < points; k++ {
		at := k * n / points
		for next < len(ph) && ph[next].Start <= at {
			b.WriteString("| ")
			next++
		}
		i := min(at/adaptiveSample, len(ad.Size)-1)
		if i >= 0 {
			fmt.Fprintf(&b, "%.2g ", float64(ad.Size[i])/(1<<20))
		}
	}
	return strings.TrimSpace(b.String())
}
