package bench

import (
	"context"
	"testing"
)

// BenchmarkImage runs the cache image round robin (Cache image RFC's motivating
// case) and reports, per figure, scc with images beside scc without, from
// the same run.
func BenchmarkImage(b *testing.B) { benchScenario(b, "image") }

// TestImageScenario runs the tiny round robin: both variants read the same
// data, and with images every open reads less (the superblock slots and
// the image, whatever the number of datasets).
func TestImageScenario(t *testing.T) {
	for _, ro := range []bool{false, true} {
		res, err := ImageRoundRobin(context.Background(), t.TempDir(), ImageConfig{Files: 2, Datasets: 6, Chunks: 8, Touch: 2, Hot: 2, Cycles: 4, ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		w, n := res.WithImage, res.Without
		if w.OpenReads != 3 || (!ro && n.OpenReads <= w.OpenReads) || w.FirstHotReads != 3 || w.CycleReads != 3 || w.CycleReads >= n.CycleReads {
			t.Fatalf("read-only %v: with image %+v, without %+v", ro, w, n)
		}
	}
	rep, err := Run(context.Background(), []string{"image"}, Options{Tiny: true, Dir: t.TempDir()})
	if err != nil || len(rep.Errors) > 0 || len(rep.Figures) != 14 {
		t.Fatalf("%v %v %d figures", err, rep.Errors, len(rep.Figures))
	}
}
