package cache_test

import (
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/resource"
)

// TestCutSubListIsResourceCut: the cache's sub-list rule is the project's
// one splitting rule, resource.Cut (cache may not import resource, so it
// keeps a copy; this test is the only place the two meet). Size hints are
// at least 1 in the cache (group.hint), and a budget below 1 (more in
// flight than the active limit) cuts after every chunk in both.
func TestCutSubListIsResourceCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 5000 {
		hints := make([]int64, rng.IntN(12))
		for i := range hints {
			hints[i] = 1 + rng.Int64N(40)
		}
		s := rng.Int64N(120) - 20
		got := cache.CutSubListHints(s, hints)
		want, _ := resource.Cut(s, len(hints), func(i int) int64 { return hints[i] })
		if got != want {
			t.Fatalf("iter %d: budget %d hints %v: cache cuts at %d, resource.Cut at %d", iter, s, hints, got, want)
		}
	}
}
