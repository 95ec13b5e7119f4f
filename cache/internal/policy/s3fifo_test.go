package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// s3Harness drives an s3fifoPolicy directly, with distinct keys per chunk
// so the ghost queue tells chunks apart.
type s3Harness struct {
	p   *s3fifoPolicy[*tEntry, *tGroup, tNodes]
	ds  map[int]*tGroup
	all map[string]*tEntry
}

func newS3Harness(second bool) *s3Harness {
	return &s3Harness{p: &s3fifoPolicy[*tEntry, *tGroup, tNodes]{secondChance: second}, ds: map[int]*tGroup{}, all: map[string]*tEntry{}}
}

func (h *s3Harness) add(ds int, id uint64, partial bool) *tEntry {
	d := h.ds[ds]
	if d == nil {
		d = &tGroup{id: ds}
		h.ds[ds] = d
	}
	e := &tEntry{g: d, id: id, partial: partial}
	d.size++
	e.linked = true
	h.p.Add(e)
	h.all[name(e)] = e
	return e
}

func (h *s3Harness) inMain(e *tEntry) bool { return e.counter&s3InMain != 0 }

// victims nominates up to n victims like Cache.evict's first pass, checking
// the nominate contract: no entry offered twice, no entry of a dataset
// offered after that dataset answered exhausted.
func (h *s3Harness) victims(t *testing.T, n int, blocked map[*tEntry]bool) []string {
	t.Helper()
	var out []*tEntry
	offered := map[*tEntry]bool{}
	gone := map[*tGroup]bool{}
	h.p.Nominate(func(e *tEntry) Verdict {
		if len(out) >= n {
			return Stop
		}
		if offered[e] {
			t.Fatalf("%s offered twice in one round", name(e))
		}
		if gone[e.g] {
			t.Fatalf("%s offered after its dataset answered exhausted", name(e))
		}
		offered[e] = true
		if m := e.g.min; m > 0 && e.g.size-int64(countDS(out, e.g)) <= m {
			gone[e.g] = true
			return Exhausted
		}
		if blocked[e] {
			return Skip
		}
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
	h.check(t)
	return names
}

func countDS(es []*tEntry, d *tGroup) int {
	n := 0
	for _, e := range es {
		if e.g == d {
			n++
		}
	}
	return n
}

// check verifies the queue counts and the ghost bound.
func (h *s3Harness) check(t *testing.T) {
	t.Helper()
	count := func(l *List[*tEntry], main bool) int {
		n := 0
		for e := l.head; e != nil; e = e.next {
			if (e.counter&s3InMain != 0) != main {
				t.Fatalf("%s on the wrong queue", name(e))
			}
			n++
		}
		return n
	}
	if s, m := count(&h.p.small, false), count(&h.p.main, true); s != h.p.nSmall || m != h.p.nMain {
		t.Fatalf("counts small %d/%d main %d/%d", s, h.p.nSmall, m, h.p.nMain)
	}
	if g, c := h.p.ghost.len(), max(h.p.peak*9/10, 1); g > c || len(h.p.ghost.ring)-h.p.ghost.head > 2*c+16 {
		t.Fatalf("ghost holds %d keys in a ring of %d, bound %d", g, len(h.p.ghost.ring)-h.p.ghost.head, c)
	}
	if _, err := Contents[*tEntry](h.p, 1<<20); err != nil {
		t.Fatal(err)
	}
}

func TestS3FIFOScanResistance(t *testing.T) {
	h := newS3Harness(false)
	var hot []*tEntry
	for i := 0; i < 10; i++ {
		hot = append(hot, h.add(1, uint64(i), false))
	}
	for _, e := range hot[:5] {
		h.p.Touch(e)
	}
	// A scan of 20 chunks seen once: the cache keeps 10, evicting one per
	// insert. The five accessed chunks are promoted to main on their way
	// out of small and survive; everything else goes.
	for i := 100; i < 120; i++ {
		h.add(1, uint64(i), false)
		if v := h.victims(t, 1, nil); len(v) != 1 {
			t.Fatalf("no victim: %v", v)
		}
	}
	for _, e := range hot[:5] {
		if !e.linked || !h.inMain(e) {
			t.Fatalf("hot chunk %s evicted by a scan (linked %v)", name(e), e.linked)
		}
	}
	for _, e := range hot[5:] {
		if e.linked {
			t.Fatalf("unused chunk %s survived the scan", name(e))
		}
	}
}

func TestS3FIFOGhostSendsReturningChunksToMain(t *testing.T) {
	h := newS3Harness(false)
	a := h.add(1, 1, false)
	h.add(1, 2, false)
	if v := h.victims(t, 1, nil); fmt.Sprint(v) != "[1/1]" {
		t.Fatalf("victims %v", v)
	}
	if h.p.ghost.len() != 1 {
		t.Fatalf("ghost holds %d keys", h.p.ghost.len())
	}
	a2 := h.add(1, 1, false) // 1/1 comes back while remembered
	if !h.inMain(a2) || h.p.ghost.len() != 0 {
		t.Fatalf("returning chunk not sent to main (main %v, ghost %d)", h.inMain(a2), h.p.ghost.len())
	}
	b := h.add(1, 3, false) // never seen: small
	if h.inMain(b) || a == a2 {
		t.Fatal("new chunk placed in main")
	}
	// A chunk evicted from main leaves no ghost.
	h2 := newS3Harness(false)
	m := h2.add(1, 7, false)
	h2.victims(t, 1, nil)
	m = h2.add(1, 7, false)
	if !h2.inMain(m) {
		t.Fatal("not in main")
	}
	if v := h2.victims(t, 1, nil); fmt.Sprint(v) != "[1/7]" || h2.p.ghost.len() != 0 {
		t.Fatalf("victims %v ghost %d", v, h2.p.ghost.len())
	}
}

func TestS3FIFOMainFrequencyIsTwoBitClock(t *testing.T) {
	h := newS3Harness(false)
	// Put a, b, c in main: accessed while in small, promoted when a scan
	// chunk d pushes them out of small.
	var es []*tEntry
	for i := 0; i < 3; i++ {
		es = append(es, h.add(1, uint64(i), false))
		h.p.Touch(es[i])
	}
	h.add(1, 3, false)
	if v := h.victims(t, 1, nil); fmt.Sprint(v) != "[1/3]" {
		t.Fatalf("victims %v", v)
	}
	for _, e := range es {
		if !h.inMain(e) || e.counter&s3FreqMask != 0 {
			t.Fatalf("%s not promoted with its frequency cleared: %b", name(e), e.counter)
		}
	}
	for k := 0; k < 5; k++ {
		h.p.Touch(es[0]) // saturates at 3
	}
	h.p.Touch(es[1])
	if f := es[0].counter & s3FreqMask; f != s3MaxFreq {
		t.Fatalf("frequency %d, want saturation at %d", f, s3MaxFreq)
	}
	// Oldest first; a (f=3) and b (f=1) are reinserted with f-1, c goes.
	if v := h.victims(t, 1, nil); fmt.Sprint(v) != "[1/2]" {
		t.Fatalf("victims %v", v)
	}
	// Now b has f=0 and a f=2: b goes, then a needs two more passes.
	if v := h.victims(t, 2, nil); fmt.Sprint(v) != "[1/1 1/0]" {
		t.Fatalf("victims %v", v)
	}
}

func TestS3FIFOExhaustedDatasetSitsOutTheRound(t *testing.T) {
	h := newS3Harness(false)
	for i := 0; i < 6; i++ {
		h.add(1, uint64(i), false) // dataset 1: oldest
	}
	h.add(2, 0, false)
	h.add(2, 1, false)
	h.ds[1].min = 6
	e := h.all["1/3"]
	h.p.Touch(e)
	// Dataset 1 is at its minimum: the round takes dataset 2's chunks and
	// offers none of dataset 1's after its first refusal (checked in
	// victims); 1/3 is not promoted by a round it sat out.
	if v := h.victims(t, 4, nil); fmt.Sprint(v) != "[2/0 2/1]" {
		t.Fatalf("victims %v", v)
	}
	if h.inMain(e) || e.counter&s3FreqMask != 1 {
		t.Fatalf("exhausted dataset's chunk was aged or promoted: counter %b", e.counter)
	}
	h.ds[1].min = 0
	if v := h.victims(t, 1, nil); fmt.Sprint(v) != "[1/0]" {
		t.Fatalf("victims %v", v)
	}
}

func TestS3FIFOPartialSecondPass(t *testing.T) {
	for _, second := range []bool{true, false} {
		h := newS3Harness(second)
		p := h.add(1, 0, true) // partial, oldest
		h.add(1, 1, false)
		v := h.victims(t, 1, nil)
		if second && fmt.Sprint(v) != "[1/1]" || !second && fmt.Sprint(v) != "[1/0]" {
			t.Fatalf("second=%v victims %v", second, v)
		}
		if second {
			if !h.inMain(p) {
				t.Fatal("partial chunk not given its pass in main")
			}
			if v := h.victims(t, 1, nil); fmt.Sprint(v) != "[1/0]" {
				t.Fatalf("second pass not used up: %v", v)
			}
		}
	}
}

// TestS3FIFORandomOps checks the nominate contract (terminates, never
// offers an entry twice or after its dataset's refusal) and the queue
// counts over random adds, touches, removals, blocked entries and minimums.
func TestS3FIFORandomOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	h := newS3Harness(true)
	var live []*tEntry
	for op := 0; op < 20000; op++ {
		switch r := rng.IntN(10); {
		case r < 4 || len(live) == 0:
			live = append(live, h.add(rng.IntN(4), uint64(op), rng.IntN(4) == 0))
		case r < 7:
			h.p.Touch(live[rng.IntN(len(live))])
		case r < 8:
			i := rng.IntN(len(live))
			e := live[i]
			h.p.Remove(e) // a drop outside eviction (flush, extent change)
			e.linked = false
			e.g.size--
			live = append(live[:i], live[i+1:]...)
		default:
			blocked := map[*tEntry]bool{}
			for _, e := range live {
				if rng.IntN(3) == 0 {
					blocked[e] = true
				}
			}
			for _, d := range h.ds {
				d.min = int64(rng.IntN(3))
			}
			h.victims(t, 1+rng.IntN(5), blocked)
			live = live[:0]
			for _, e := range h.all {
				if e.linked {
					live = append(live, e)
				}
			}
		}
		h.p.Touch(&tEntry{}) // a stale record of an entry never linked
	}
	h.check(t)
}

func TestGhostFIFOBounded(t *testing.T) {
	var g ghostFIFO
	for i := uint64(0); i < 10000; i++ {
		g.push(i, 100)
		if i%3 == 0 {
			g.take(i) // ghost hits leave stale records
		}
		if g.len() > 100 || len(g.ring)-g.head > 2*100+16 || len(g.ring) > 4*100+100 {
			t.Fatalf("ghost %d live, ring %d (head %d)", g.len(), len(g.ring), g.head)
		}
	}
	if !g.take(9998) || g.take(9998) || g.take(5) {
		t.Fatal("ghost membership wrong")
	}
	g.push(1, 100)
	g.push(1, 100) // pushed twice: one live record
	if g.len() > 100 || !g.take(1) || g.take(1) {
		t.Fatal("duplicate push")
	}
}
