package resource

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

func TestCutExamples(t *testing.T) {
	cases := []struct {
		budget int64
		sizes  []int64
		end    int
		bytes  int64
	}{
		{10, nil, 0, 0},
		{10, []int64{4, 6, 1}, 2, 10},
		{10, []int64{25, 1}, 1, 25}, // oversized: alone
		{10, []int64{3, 25}, 1, 3},  // oversized after others: cut before it
		{10, []int64{0, 0, 10, 0, 1}, 4, 10},
		{0, []int64{1, 1}, 1, 1},     // budget below 1 counts as 1
		{-5, []int64{0, 1, 1}, 2, 1}, // zero sizes always fit
		{5, []int64{-3, 5}, 2, 5},    // negative sizes count as 0
		{math.MaxInt64, []int64{math.MaxInt64, 1}, 1, math.MaxInt64},
	}
	for _, c := range cases {
		end, bytes := Cut(c.budget, len(c.sizes), func(i int) int64 { return c.sizes[i] })
		if end != c.end || bytes != c.bytes {
			t.Errorf("Cut(%d, %v) = (%d, %d), want (%d, %d)", c.budget, c.sizes, end, bytes, c.end, c.bytes)
		}
	}
}

// TestSplitIsRepeatedCut: Split is exactly Cut applied to the rest until
// nothing is left (one rule, two forms).
func TestSplitIsRepeatedCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 2000 {
		budget := 1 + rng.Int64N(30)
		sizes := make([]int64, rng.IntN(15))
		for i := range sizes {
			sizes[i] = rng.Int64N(budget + 10)
		}
		got, err := Split(budget, sizes)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for start := 0; start < len(sizes); i++ {
			rest := sizes[start:]
			n, bytes := Cut(budget, len(rest), func(j int) int64 { return rest[j] })
			if i >= len(got) || got[i] != (Range{start, start + n, bytes}) {
				t.Fatalf("iter %d: Split(%d, %v) = %v; Cut gives sub-list %d = %v", iter, budget, sizes, got, i, Range{start, start + n, bytes})
			}
			start += n
		}
		if i != len(got) {
			t.Fatalf("iter %d: Split gave %d sub-lists, Cut %d", iter, len(got), i)
		}
	}
}

// TestBatchesWithinCapacity: the engine's use of the rule (batches of
// uniform chunk size, budget BatchBytes) and Admitter.Split yield batches
// within capacity — within BatchBytes, indeed — unless a single chunk is
// larger, which then is a batch alone; and every batch is admitted.
func TestBatchesWithinCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := range 500 {
		capacity := 1 + rng.Int64N(100)
		a := newAdmitter(t, capacity)
		if b := a.BatchBytes(); b < 1 || b > capacity || b != max(capacity/2, 1) {
			t.Fatalf("capacity %d: BatchBytes %d", capacity, b)
		}
		// Uniform sizes, as the engine cuts them.
		chunk := rng.Int64N(capacity + 20)
		n := rng.IntN(50)
		total := 0
		for rest := n; rest > 0; {
			k, bytes := Cut(a.BatchBytes(), rest, func(int) int64 { return chunk })
			if k < 1 || bytes != int64(k)*chunk {
				t.Fatalf("iter %d: Cut of %d×%d gave (%d, %d)", iter, rest, chunk, k, bytes)
			}
			if bytes > a.BatchBytes() && k != 1 {
				t.Fatalf("iter %d: batch of %d chunks, %d bytes over budget %d", iter, k, bytes, a.BatchBytes())
			}
			if k < rest && bytes+chunk <= a.BatchBytes() {
				t.Fatalf("iter %d: batch of %d could have taken one more %d-byte chunk", iter, k, chunk)
			}
			mustAdmit(t, a, bytes)() // nothing else is in: never waits
			total += k
			rest -= k
		}
		if total != n {
			t.Fatalf("iter %d: batches cover %d of %d", iter, total, n)
		}
		// Mixed sizes through Admitter.Split.
		sizes := make([]int64, rng.IntN(30))
		for i := range sizes {
			sizes[i] = rng.Int64N(capacity + 20)
		}
		rs, err := a.Split(math.MaxInt64, sizes)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Bytes > capacity && r.End-r.Start != 1 {
				t.Fatalf("iter %d: sub-list %+v over capacity %d", iter, r, capacity)
			}
			if r.Bytes > a.BatchBytes() && r.End-r.Start != 1 {
				t.Fatalf("iter %d: sub-list %+v over batch budget %d", iter, r, a.BatchBytes())
			}
		}
	}
}

// TestSetCapacityWakesWaiters: growing the capacity admits the waiters
// that fit now, in order; shrinking it admits nothing new until releases
// bring the bytes in use under it, and charges later requests at most the
// new capacity.
func TestSetCapacityWakesWaiters(t *testing.T) {
	a := newAdmitter(t, 10)
	r8 := mustAdmit(t, a, 8)
	w5 := async(a, context.Background(), 5)
	waitWaiting(t, a, 1)
	w4 := async(a, context.Background(), 4)
	waitWaiting(t, a, 2)
	notYet(t, w5, "5 beside 8 of 10")
	a.SetCapacity(13)
	r5 := admitted(t, w5) // 13 in use
	waitWaiting(t, a, 1)
	notYet(t, w4, "4 beside 13 of 13")
	a.SetCapacity(17)
	r4 := admitted(t, w4)
	if a.InUse() != 17 || a.Capacity() != 17 {
		t.Fatalf("InUse %d Capacity %d, want 17 17", a.InUse(), a.Capacity())
	}

	// Shrink below what is in: nothing new until releases make room.
	a.SetCapacity(6)
	w1 := async(a, context.Background(), 1)
	waitWaiting(t, a, 1)
	r8() // 9 in, capacity 6
	waitWaiting(t, a, 1)
	notYet(t, w1, "1 beside 9 of 6")
	r5() // 4 in
	r1 := admitted(t, w1)
	// A request over the new capacity is charged the new capacity and runs
	// alone.
	big := async(a, context.Background(), 100)
	waitWaiting(t, a, 1)
	r4()
	waitWaiting(t, a, 1)
	notYet(t, big, "oversized beside 1")
	r1()
	rBig := admitted(t, big)
	if a.InUse() != 6 {
		t.Fatalf("InUse with oversized = %d, want the new capacity 6", a.InUse())
	}
	rBig()
	if a.InUse() != 0 || a.Waiting() != 0 {
		t.Fatalf("end state: %d in use, %d waiting", a.InUse(), a.Waiting())
	}
	a.SetCapacity(0)
	if a.Capacity() != 1 {
		t.Fatalf("SetCapacity(0): Capacity %d, want 1", a.Capacity())
	}
}

// TestFIFOAcrossSetCapacity: a capacity change admits waiters strictly in
// arrival order: a small one behind a large head waits even when it alone
// would fit.
func TestFIFOAcrossSetCapacity(t *testing.T) {
	a := newAdmitter(t, 10)
	r := mustAdmit(t, a, 6)
	big := async(a, context.Background(), 8)
	waitWaiting(t, a, 1)
	small := async(a, context.Background(), 2)
	waitWaiting(t, a, 2)
	a.SetCapacity(12) // small would fit (6+2), the head (8) does not
	notYet(t, small, "small behind a waiting head")
	notYet(t, big, "8 beside 6 of 12")
	a.SetCapacity(14)
	rb := admitted(t, big)
	waitWaiting(t, a, 1)
	notYet(t, small, "2 beside 14 of 14")
	r()
	admitted(t, small)()
	rb()
}

func TestNewForCache(t *testing.T) {
	for _, c := range []struct{ limit, want int64 }{{0, 1}, {-3, 1}, {1 << 20, 1 << 20}} {
		if got := NewForCache(c.limit).Capacity(); got != c.want {
			t.Errorf("NewForCache(%d).Capacity() = %d, want %d", c.limit, got, c.want)
		}
	}
}
