package engine

import (
	"sync"
	"testing"
)

// TestIndexChargesNeverRunAhead: the cache's resident total counts the
// index bytes each lazyIndex charges, and a charge that takes it below zero
// is an impossible state (the cache asserts it under the invariants tag).
// Two accounts racing must therefore reach the cache in the order their
// figures were swapped in: an uncharge overtaking the charge it undoes
// would drive the total negative, however briefly.
func TestIndexChargesNeverRunAhead(t *testing.T) {
	var (
		mu       sync.Mutex
		sum, low int64
	)
	li := &lazyIndex{charge: func(d int64) {
		mu.Lock()
		sum += d
		low = min(low, sum)
		mu.Unlock()
	}}
	const goroutines, rounds = 8, 20000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				li.chargeBytes(int64((i+g)%2) * 4096)
			}
		}()
	}
	wg.Wait()
	li.chargeBytes(0)
	if sum != 0 || low < 0 {
		t.Fatalf("charged total %d at the end (want 0), lowest %d (want ≥ 0)", sum, low)
	}
}
