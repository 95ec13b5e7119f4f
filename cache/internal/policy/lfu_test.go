package policy

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
		p := &lfuPolicy[*tEntry, *tGroup, tNodes]{}
		n := 1 + rng.IntN(40)
		for i := 0; i < n; i++ {
			e := &tEntry{id: uint64(i), linked: true}
			p.Add(e)
			for k := rng.IntN(4); k > 0; k-- {
				p.Touch(e)
			}
		}
		var want []*tEntry
		for e := p.l.tail; e != nil; e = e.prev {
			want = append(want, e)
		}
		sort.SliceStable(want, func(i, j int) bool { return want[i].counter < want[j].counter })
		limit := rng.IntN(n + 2)
		var got []*tEntry
		p.Nominate(func(e *tEntry) Verdict {
			if len(got) == limit {
				return Stop
			}
			got = append(got, e)
			return []Verdict{Take, Skip, Exhausted}[rng.IntN(3)]
		})
		if len(got) != min(limit, n) {
			t.Fatalf("offered %d of %d with limit %d", len(got), n, limit)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("round %d: offer %d is chunk %d (counter %d), want chunk %d (counter %d)",
					round, i, got[i].id, got[i].counter, want[i].id, want[i].counter)
			}
		}
	}
}
