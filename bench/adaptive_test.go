package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
)

func TestAdaptiveBenchConfig(t *testing.T) {
	for _, o := range []Options{{}, {Quick: true}, {Tiny: true}} {
		if err := adaptiveSize(o).Validate(); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	for _, bad := range []AdaptiveConfig{
		{Frames: 100, Side: 2, MinFrames: 1, MaxFrames: 10, PhaseAccesses: 1, EpochAccesses: 1},
		{Frames: 100, Side: 8, MinFrames: 20, MaxFrames: 10, PhaseAccesses: 1, EpochAccesses: 1},
		{Frames: 100, Side: 8, MinFrames: 1, MaxFrames: 60, PhaseAccesses: 1, EpochAccesses: 1},
		{Frames: 100, Side: 8, MinFrames: 1, MaxFrames: 10, PhaseAccesses: 0, EpochAccesses: 1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	c := adaptiveSize(Options{Tiny: true})
	seq, ph := c.Trace()
	if len(ph) != 5 || len(seq) != 4*c.PhaseAccesses+c.Frames {
		t.Fatalf("%d phases, %d accesses", len(ph), len(seq))
	}
	for i, fr := range seq {
		if fr < 0 || fr >= c.Frames {
			t.Fatalf("access %d: frame %d", i, fr)
		}
	}
	// The scan is sequential over every frame, the hot set smaller than
	// the working set, which fits the maximum.
	for i := 0; i < c.Frames; i++ {
		if seq[ph[2].Start+i] != i {
			t.Fatalf("scan access %d reads %d", i, seq[ph[2].Start+i])
		}
	}
}

// TestAdaptiveTraceRuns: the three caches of the scenario over the same
// trace: the larger fixed cache hits more, the adaptive cache stays
// within its bounds and changes size, and the figures add up.
func TestAdaptiveTraceRuns(t *testing.T) {
	c := adaptiveSize(Options{Tiny: true})
	path := filepath.Join(t.TempDir(), "a.scc")
	ctx := context.Background()
	if err := adaptiveFile(ctx, path, c); err != nil {
		t.Fatal(err)
	}
	seq, ph := c.Trace()
	names, cfgs := c.AdaptiveCaches()
	runs := map[string]*AdaptiveRun{}
	for i, n := range names {
		r, err := AdaptiveTraceRun(ctx, path, c, seq, ph, n, cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		runs[n] = r
		if r.Stats.Hits+r.Stats.Misses < int64(len(seq)) || len(r.PhaseSize) != len(ph) {
			t.Fatalf("%s: %d accesses counted, %d phase sizes", n, r.Stats.Hits+r.Stats.Misses, len(r.PhaseSize))
		}
	}
	minB, maxB := int64(c.MinFrames)*c.FrameBytes(), int64(c.MaxFrames)*c.FrameBytes()
	if runs["fixed-max"].HitRatio <= runs["fixed-min"].HitRatio {
		t.Fatalf("fixed max hit ratio %.3f <= fixed min %.3f", runs["fixed-max"].HitRatio, runs["fixed-min"].HitRatio)
	}
	ad := runs["adaptive"]
	lo, hi := ad.Size[0], ad.Size[0]
	for _, s := range ad.Size {
		if s < minB || s > maxB {
			t.Fatalf("adaptive size %d outside [%d, %d]", s, minB, maxB)
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	if lo == hi || ad.Stats.Resizes == 0 {
		t.Fatalf("adaptive cache never changed size (%d): %+v", lo, ad.Stats)
	}
	for _, s := range runs["fixed-max"].Size {
		if s != maxB {
			t.Fatalf("fixed cache size %d", s)
		}
	}
}

func TestSizeSamplerBounded(t *testing.T) {
	var s sizeSampler
	for i := 0; i < 10000; i++ {
		s.add(time.Duration(i), cache.Stats{QuiescentLimit: int64(i)})
	}
	if n := len(s.samples); n >= maxSizeSamples || n < maxSizeSamples/4 {
		t.Fatalf("%d samples kept", n)
	}
	for i := 1; i < len(s.samples); i++ {
		if d := s.samples[i].Size - s.samples[i-1].Size; d != int64(s.every) {
			t.Fatalf("uneven spacing %d at %d (every %d)", d, i, s.every)
		}
	}
	for _, n := range []int{1, 4, 8, 1000} {
		got := SizeTimeline(s.samples, n)
		if pts := strings.Count(got, "s "); pts < 1 || pts > n+1 || pts > len(s.samples) {
			t.Fatalf("timeline of %d points for n=%d: %q", pts, n, got)
		}
	}
	if SizeTimeline(nil, 4) != "" {
		t.Fatal("timeline of nothing")
	}
}
