package policy

import (
	"fmt"
	"testing"
)

// policyHarness drives a policy directly, as the cache does under its
// policy lock.
type policyHarness struct {
	p  Policy[*tEntry]
	ds map[int]*tGroup
}

func newHarness(k Kind, second bool) *policyHarness {
	return &policyHarness{p: newTest(k, second), ds: map[int]*tGroup{}}
}

func (h *policyHarness) add(ds int, id uint64, partial bool) *tEntry {
	d := h.ds[ds]
	if d == nil {
		d = &tGroup{id: ds}
		h.ds[ds] = d
	}
	e := &tEntry{g: d, id: id, partial: partial}
	d.size++
	e.linked = true
	h.p.Add(e)
	return e
}

// victims nominates n entries (all evictable unless blocked), honouring
// per-group minimums like the cache's first eviction pass, and removes
// them.
func (h *policyHarness) victims(n int, blocked map[*tEntry]bool) []string {
	var out []*tEntry
	round := map[*tGroup]int64{}
	taken := map[*tEntry]bool{}
	h.p.Nominate(func(e *tEntry) Verdict {
		if len(out) >= n {
			return Stop
		}
		if taken[e] {
			panic("entry offered twice in one round")
		}
		if m := e.g.min; m > 0 && e.g.size-round[e.g] <= m {
			return Exhausted
		}
		if blocked[e] {
			return Skip
		}
		taken[e] = true
		round[e.g]++
		out = append(out, e)
		return Take
	})
	var names []string
	for _, e := range out {
		h.p.Remove(e)
		e.linked = false
		e.g.size--
		names = append(names, name(e))
	}
	return names
}

func eq(a []string, b ...string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestTwoStageLRUOrderAndExhaustedList(t *testing.T) {
	h := newHarness(TwoStageLRU, true)
	a0 := h.add(1, 0, false)
	h.add(1, 1, false)
	h.add(2, 0, false)
	h.add(2, 1, false)
	h.add(2, 2, false)
	h.p.Touch(a0) // dataset 1 becomes MRU again; chunk 1/0 its MRU chunk
	// Dataset 2 is the LRU dataset: its chunks go first, oldest first.
	if v := h.victims(2, nil); !eq(v, "2/0", "2/1") {
		t.Fatalf("victims %v", v)
	}
	// With dataset 2 at its minimum it sits out; dataset 1 nominates.
	h.ds[2].min = 1
	if v := h.victims(1, nil); !eq(v, "1/1") {
		t.Fatalf("victims %v", v)
	}
	// After the round dataset 2 is back on the list (at the LRU end).
	p := h.p.(*twoStageLRU[*tEntry, *tGroup, tNodes])
	if h.ds[2].exhausted || !h.ds[2].onList || p.tail != h.ds[2] {
		t.Fatal("exhausted dataset not returned to the LRU end")
	}
	h.ds[2].min = 0
	if v := h.victims(5, nil); !eq(v, "2/2", "1/0") {
		t.Fatalf("victims %v", v)
	}
	if p.head != nil || p.tail != nil {
		t.Fatal("empty policy still lists datasets")
	}
}

func TestTwoStageLRUSecondChance(t *testing.T) {
	for _, second := range []bool{true, false} {
		h := newHarness(TwoStageLRU, second)
		h.add(1, 0, true) // partial, oldest
		h.add(1, 1, false)
		v := h.victims(1, nil)
		if second && !eq(v, "1/1") || !second && !eq(v, "1/0") {
			t.Fatalf("second=%v victims %v", second, v)
		}
		// Once its second pass is used up, the partial chunk goes.
		if v := h.victims(1, nil); second && !eq(v, "1/0") {
			t.Fatalf("second pass not consumed: %v", v)
		}
	}
}

func TestPoliciesSkipBlockedAndTerminate(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			h := newHarness(kind.k, true)
			var es []*tEntry
			for i := 0; i < 10; i++ {
				es = append(es, h.add(i%3, uint64(i), i%2 == 0))
			}
			blocked := map[*tEntry]bool{}
			for _, e := range es {
				blocked[e] = true
			}
			if v := h.victims(3, blocked); len(v) != 0 {
				t.Fatalf("took blocked entries %v", v)
			}
			delete(blocked, es[4])
			if v := h.victims(3, blocked); !eq(v, "1/4") {
				t.Fatalf("victims %v", v)
			}
			if v := h.victims(100, nil); len(v) != 9 {
				t.Fatalf("could evict %d of 9", len(v))
			}
		})
	}
}

func TestPolicyOrders(t *testing.T) {
	mk := func(k Kind) (*policyHarness, []*tEntry) {
		h := newHarness(k, false)
		var es []*tEntry
		for i := 0; i < 4; i++ {
			es = append(es, h.add(1, uint64(i), false))
		}
		return h, es
	}
	h, es := mk(LRU)
	h.p.Touch(es[0])
	if v := h.victims(2, nil); !eq(v, "1/1", "1/2") {
		t.Fatalf("lru %v", v)
	}
	h, es = mk(MRU)
	h.p.Touch(es[1])
	if v := h.victims(2, nil); !eq(v, "1/1", "1/3") {
		t.Fatalf("mru %v", v)
	}
	h, es = mk(LFU)
	for i := 0; i < 3; i++ {
		h.p.Touch(es[0])
		h.p.Touch(es[2])
	}
	h.p.Touch(es[3])
	if v := h.victims(2, nil); !eq(v, "1/1", "1/3") {
		t.Fatalf("lfu %v", v)
	}
	// SIEVE: visited chunks survive a sweep; a scan of new chunks goes
	// before the repeatedly used ones.
	h, es = mk(SIEVE)
	h.p.Touch(es[0])
	h.p.Touch(es[1])
	for i := 10; i < 14; i++ {
		h.add(1, uint64(i), false) // one-time scan
	}
	v := h.victims(4, nil)
	for _, name := range v {
		if name == "1/0" || name == "1/1" {
			t.Fatalf("sieve evicted a hot chunk: %v", v)
		}
	}
	// Random: every entry is eventually offered.
	h, _ = mk(Random)
	if v := h.victims(4, nil); len(v) != 4 {
		t.Fatalf("random %v", v)
	}
}

// TestContentsFindsDamage: Contents lists every entry of a sound policy
// once, and reports a damaged structure (a back link, or the random
// policy's index) instead of listing it.
func TestContentsFindsDamage(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			h := newHarness(kind.k, false)
			var es []*tEntry
			for i := 0; i < 6; i++ {
				es = append(es, h.add(i%2, uint64(i), false))
			}
			got, err := Contents(h.p, 100)
			if err != nil || len(got) != len(es) {
				t.Fatalf("sound policy: %d entries of %d, %v", len(got), len(es), err)
			}
			if kind.k == Random {
				es[2].counter = 5
			} else {
				es[2].prev = es[2]
			}
			if _, err := Contents(h.p, 100); err == nil {
				t.Fatal("damage not reported")
			}
		})
	}
}
