package cache_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/resource"
)

// TestCutIsResourceCut: the cache splits sub-lists and write-back rounds
// by the project's one splitting rule, resource.Cut. cache may not import
// resource, so it keeps a copy (cache/io.go cut); this test, where the two
// meet, checks they agree on random inputs, including oversized items,
// zero and negative sizes, and budgets below 1 (more in flight than the
// active limit).
func TestCutIsResourceCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 20000 {
		sizes := make([]int64, rng.IntN(12))
		for i := range sizes {
			sizes[i] = rng.Int64N(45) - 3
		}
		budget := rng.Int64N(120) - 20
		if iter%100 == 0 {
			budget = math.MaxInt64
			for i := range sizes {
				sizes[i] = math.MaxInt64 - rng.Int64N(3)
			}
		}
		size := func(i int) int64 { return sizes[i] }
		got := cache.Cut(budget, len(sizes), size)
		want, _ := resource.Cut(budget, len(sizes), size)
		if got != want {
			t.Fatalf("iter %d: budget %d sizes %v: cache cuts at %d, resource.Cut at %d", iter, budget, sizes, got, want)
		}
	}
}
