package cache

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestLFUNominateOrder checks that LFU offers chunks in ascending counter
// order, ties oldest first — the order of a stable sort of the list from
// its tail — through both the linear scans and the heap that follows them,
// whatever the cache answers.
func TestLFUNominateOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 200; round++ {
		p := &lfuPolicy{}
		n := 1 + rng.IntN(40)
		for i := 0; i < n; i++ {
			e := &entry{coord: Coord{uint64(i)}, linked: true}
			p.add(e)
			for k := rng.IntN(4); k > 0; k-- {
				p.touch(e)
			}
		}
		var want []*entry
		for e := p.l.tail; e != nil; e = e.pprev {
			want = append(want, e)
		}
		sort.SliceStable(want, func(i, j int) bool { return want[i].counter < want[j].counter })
		limit := rng.IntN(n + 2)
		var got []*entry
		p.nominate(func(e *entry) verdict {
			if len(got) == limit {
				return stop
			}
			got = append(got, e)
			return []verdict{take, skip, exhausted}[rng.IntN(3)]
		})
		if len(got) != min(limit, n) {
			t.Fatalf("offered %d of %d with limit %d", len(got), n, limit)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("round %d: offer %d is chunk %d (counter %d), want chunk %d (counter %d)",
					round, i, got[i].coord[0], got[i].counter, want[i].coord[0], want[i].counter)
			}
		}
	}
}
