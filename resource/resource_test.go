package resource

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// hangGuard is a hang detector, not a timing assertion.
const hangGuard = 30 * time.Second

func newAdmitter(t testing.TB, capacity int64) *Admitter {
	t.Helper()
	a, err := New(Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type result struct {
	release func()
	err     error
}

func async(a *Admitter, ctx context.Context, n int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		rel, err := a.Admit(ctx, n)
		ch <- result{rel, err}
	}()
	return ch
}

func waitWaiting(t *testing.T, a *Admitter, n int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for a.Waiting() != n {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("hang: Waiting()=%d, want %d", a.Waiting(), n))
		}
		runtime.Gosched()
	}
}

func get(ch <-chan result) result {
	select {
	case r := <-ch:
		return r
	case <-time.After(hangGuard):
		panic("hang: never admitted")
	}
}

func admitted(t *testing.T, ch <-chan result) func() {
	t.Helper()
	r := get(ch)
	if r.err != nil {
		t.Fatalf("Admit: %v", r.err)
	}
	return r.release
}

func notYet(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s admitted too early (err %v)", what, r.err)
	default:
	}
}

func mustAdmit(t *testing.T, a *Admitter, n int64) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	rel, err := a.Admit(ctx, n)
	if err != nil {
		t.Fatalf("Admit(%d) = %v (should not have waited)", n, err)
	}
	return rel
}

func TestValidate(t *testing.T) {
	for _, c := range []int64{0, -1} {
		if _, err := New(Options{Capacity: c}); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%d) = %v", c, err)
		}
	}
	a := newAdmitter(t, 10)
	if _, err := a.Admit(context.Background(), -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Admit(-1) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Admit(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Admit(cancelled) = %v", err)
	}
	if a.InUse() != 0 || a.Waiting() != 0 {
		t.Fatalf("state after rejected admits: %d in use, %d waiting", a.InUse(), a.Waiting())
	}
}

func TestAccounting(t *testing.T) {
	a := newAdmitter(t, 10)
	r1 := mustAdmit(t, a, 4)
	r2 := mustAdmit(t, a, 6)
	if a.InUse() != 10 {
		t.Fatalf("InUse = %d, want 10", a.InUse())
	}
	zero := mustAdmit(t, a, 0) // needs nothing: admitted even when full
	zero()
	r1()
	r1() // idempotent: must not free 4 more bytes
	if a.InUse() != 6 {
		t.Fatalf("InUse = %d, want 6", a.InUse())
	}
	r2()
	if a.InUse() != 0 {
		t.Fatalf("InUse = %d, want 0", a.InUse())
	}
}

// TestFIFO: a request that would fit waits behind an earlier one that does
// not (so the earlier, larger one is not starved).
func TestFIFO(t *testing.T) {
	a := newAdmitter(t, 10)
	// A newcomer that fits the free space still queues behind a waiter.
	part := mustAdmit(t, a, 5)
	big := async(a, context.Background(), 8)
	waitWaiting(t, a, 1)
	fits := async(a, context.Background(), 3)
	waitWaiting(t, a, 2)
	notYet(t, fits, "newcomer behind a waiter")
	part()
	relBig := admitted(t, big)
	notYet(t, fits, "3 bytes with 8 of 10 in use")
	relBig()
	admitted(t, fits)()

	full := mustAdmit(t, a, 10)
	w1 := async(a, context.Background(), 6)
	waitWaiting(t, a, 1)
	w2 := async(a, context.Background(), 6)
	waitWaiting(t, a, 2)
	w3 := async(a, context.Background(), 3)
	waitWaiting(t, a, 3)
	full()
	rel1 := admitted(t, w1)
	waitWaiting(t, a, 2)
	// 6+3 fits, but w3 arrived after w2, which does not fit.
	notYet(t, w3, "w3 behind w2")
	notYet(t, w2, "w2")
	rel1()
	rel2 := admitted(t, w2)
	rel3 := admitted(t, w3)
	if a.InUse() != 9 {
		t.Fatalf("InUse = %d, want 9", a.InUse())
	}
	rel2()
	rel3()
}

// TestFIFOOrderMany: waiters are admitted in arrival order.
func TestFIFOOrderMany(t *testing.T) {
	a := newAdmitter(t, 1)
	hold := mustAdmit(t, a, 1)
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := a.Admit(context.Background(), 1)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			rel()
		}()
		waitWaiting(t, a, i+1) // i is queued before i+1 starts
	}
	hold()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("admission order %v", order)
		}
	}
}

// TestOversizedRunsAlone: a request larger than the capacity waits until
// nothing is admitted, is charged the whole capacity, and keeps everything
// else out until released.
func TestOversizedRunsAlone(t *testing.T) {
	a := newAdmitter(t, 10)
	small := mustAdmit(t, a, 3)
	big := async(a, context.Background(), 25)
	waitWaiting(t, a, 1)
	after := async(a, context.Background(), 1)
	waitWaiting(t, a, 2)
	notYet(t, big, "oversized with 3 bytes in use")
	small()
	relBig := admitted(t, big)
	if a.InUse() != 10 {
		t.Fatalf("InUse with oversized = %d, want capacity 10", a.InUse())
	}
	waitWaiting(t, a, 1)
	notYet(t, after, "request while oversized runs")
	relBig()
	admitted(t, after)()
	// With nothing in use an oversized request is admitted at once.
	mustAdmit(t, a, math.MaxInt64)()
	if a.InUse() != 0 {
		t.Fatalf("InUse = %d", a.InUse())
	}
}

// TestCancelMidQueue: cancelling the head lets the waiters behind it in at
// once; cancelling one in the middle leaves the order of the rest intact.
func TestCancelMidQueue(t *testing.T) {
	a := newAdmitter(t, 10)
	hold := mustAdmit(t, a, 5)
	ctx1, cancel1 := context.WithCancel(context.Background())
	w1 := async(a, ctx1, 8) // head, does not fit
	waitWaiting(t, a, 1)
	w2 := async(a, context.Background(), 5) // fits, but behind w1
	waitWaiting(t, a, 2)
	notYet(t, w2, "w2 behind w1")
	cancel1()
	if r := get(w1); !errors.Is(r.err, context.Canceled) || r.release != nil {
		t.Fatalf("cancelled head: %+v", r)
	}
	rel2 := admitted(t, w2) // re-evaluated without any release
	if a.InUse() != 10 {
		t.Fatalf("InUse = %d", a.InUse())
	}

	// Middle: w3(4) head, w4(4) cancelled, w5(6) behind.
	w3 := async(a, context.Background(), 4)
	waitWaiting(t, a, 1)
	ctx4, cancel4 := context.WithCancel(context.Background())
	w4 := async(a, ctx4, 4)
	waitWaiting(t, a, 2)
	w5 := async(a, context.Background(), 6)
	waitWaiting(t, a, 3)
	cancel4()
	if r := get(w4); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled middle: %v", r.err)
	}
	waitWaiting(t, a, 2)
	hold()
	rel2()
	rel3 := admitted(t, w3)
	rel5 := admitted(t, w5)
	if a.InUse() != 10 {
		t.Fatalf("InUse = %d, want 10", a.InUse())
	}
	rel3()
	rel5()
	if a.InUse() != 0 || a.Waiting() != 0 {
		t.Fatalf("end state: %d in use, %d waiting", a.InUse(), a.Waiting())
	}
}

// TestCapacityNeverExceeded: many goroutines admit random sizes (some
// oversized, some cancelled). A reference count, raised after admission and
// lowered before release, never exceeds the capacity, and an oversized
// request is never admitted alongside anything.
func TestCapacityNeverExceeded(t *testing.T) {
	const capacity = 100
	a := newAdmitter(t, capacity)
	var held, holders, oversized atomic.Int64
	goroutines, per := 16, 300
	if testing.Short() {
		per = 50
	}
	if os.Getenv("SCC_STRESS") == "long" {
		per = 20000
	}
	var wg sync.WaitGroup
	var admittedCount, cancelledCount atomic.Int64
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range per {
				n := int64(1 + rng.IntN(60))
				if rng.IntN(25) == 0 {
					n = capacity + int64(rng.IntN(500))
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(8) == 0 {
					go func() { runtime.Gosched(); cancel() }()
				}
				rel, err := a.Admit(ctx, n)
				if err != nil {
					cancel()
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					cancelledCount.Add(1)
					continue
				}
				charge := min(n, capacity)
				if h := holders.Add(1); n > capacity && h != 1 {
					t.Errorf("oversized request admitted with %d other holders", h-1)
				}
				if n > capacity {
					oversized.Add(1)
				} else if oversized.Load() > 0 {
					t.Errorf("request admitted while an oversized one runs")
				}
				if h := held.Add(charge); h > capacity {
					t.Errorf("held %d > capacity %d", h, capacity)
				}
				if in := a.InUse(); in > capacity {
					t.Errorf("InUse %d > capacity", in)
				}
				for range rng.IntN(3) {
					runtime.Gosched()
				}
				held.Add(-charge)
				if n > capacity {
					oversized.Add(-1)
				}
				holders.Add(-1)
				rel()
				cancel()
				admittedCount.Add(1)
			}
		}()
	}
	wg.Wait()
	if a.InUse() != 0 || a.Waiting() != 0 {
		t.Fatalf("end state: %d in use, %d waiting", a.InUse(), a.Waiting())
	}
	t.Logf("%d admitted, %d cancelled", admittedCount.Load(), cancelledCount.Load())
}

// ---- Split ----

func TestSplitExamples(t *testing.T) {
	cases := []struct {
		budget int64
		sizes  []int64
		want   []Range
	}{
		{10, nil, nil},
		{10, []int64{10}, []Range{{0, 1, 10}}},
		{10, []int64{4, 6, 1}, []Range{{0, 2, 10}, {2, 3, 1}}},
		{10, []int64{3, 25, 3}, []Range{{0, 1, 3}, {1, 2, 25}, {2, 3, 3}}},
		{10, []int64{25, 0, 0}, []Range{{0, 1, 25}, {1, 3, 0}}},
		{10, []int64{0, 0, 10, 0}, []Range{{0, 4, 10}}},
		{math.MaxInt64, []int64{math.MaxInt64, 1}, []Range{{0, 1, math.MaxInt64}, {1, 2, 1}}},
	}
	for _, c := range cases {
		got, err := Split(c.budget, c.sizes)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Split(%d, %v) = %v, want %v", c.budget, c.sizes, got, c.want)
		}
	}
	if _, err := Split(0, []int64{1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("budget 0: %v", err)
	}
	if _, err := Split(5, []int64{1, -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative size: %v", err)
	}
	a := newAdmitter(t, 10)
	got, err := a.Split(1000, []int64{6, 6})
	if err != nil || len(got) != 2 {
		t.Fatalf("Admitter.Split did not cap the budget at capacity: %v %v", got, err)
	}
}

// feasible: a sub-list fits when its total is within budget, or it is a
// single (oversized) piece.
func feasible(budget int64, sizes []int64) bool {
	if len(sizes) == 1 {
		return true
	}
	var sum int64
	for _, s := range sizes {
		sum += s
	}
	return sum <= budget
}

// bruteMin tries every set of cut points.
func bruteMin(budget int64, sizes []int64) int {
	n := len(sizes)
	if n == 0 {
		return 0
	}
	best := n + 1
	for mask := 0; mask < 1<<(n-1); mask++ { // bit i: cut after i
		parts, start, ok := 0, 0, true
		for i := 0; i < n && ok; i++ {
			if i == n-1 || mask&(1<<i) != 0 {
				ok = feasible(budget, sizes[start:i+1])
				parts++
				start = i + 1
			}
		}
		if ok && parts < best {
			best = parts
		}
	}
	return best
}

func TestSplitMinimalVsBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		n := rng.IntN(11)
		budget := int64(1 + rng.IntN(20))
		sizes := make([]int64, n)
		for i := range sizes {
			sizes[i] = int64(rng.IntN(int(budget) + 8)) // some oversized, some zero
		}
		got, err := Split(budget, sizes)
		if err != nil {
			t.Fatal(err)
		}
		// Valid: consecutive, covering, each feasible, Bytes right.
		next := 0
		for _, r := range got {
			if r.Start != next || r.End <= r.Start {
				t.Fatalf("iter %d: ranges %v not consecutive for %v", iter, got, sizes)
			}
			var sum int64
			for _, s := range sizes[r.Start:r.End] {
				sum += s
			}
			if sum != r.Bytes || !feasible(budget, sizes[r.Start:r.End]) {
				t.Fatalf("iter %d: bad range %+v of %v (budget %d)", iter, r, sizes, budget)
			}
			next = r.End
		}
		if next != n {
			t.Fatalf("iter %d: ranges %v do not cover %d sizes", iter, got, n)
		}
		if want := bruteMin(budget, sizes); len(got) != want {
			t.Fatalf("iter %d: Split(%d, %v) = %d sub-lists %v, minimum is %d", iter, budget, sizes, len(got), got, want)
		}
	}
}

// ---- Estimator ----

func TestEstimator(t *testing.T) {
	if _, err := NewEstimator(EstimatorOptions{Weight: 1.5}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad weight: %v", err)
	}
	e, err := NewEstimator(EstimatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.ChunkBytes(1); ok {
		t.Fatal("history before any observation")
	}
	if got := e.Estimate(1, 10, 4096); got != 40960 {
		t.Fatalf("fallback estimate = %d", got)
	}
	e.Observe(1, 1000)
	if got, ok := e.ChunkBytes(1); !ok || got != 1000 {
		t.Fatalf("first observation: %d %v", got, ok)
	}
	e.Observe(1, 1800) // 1000 + (1800-1000)/8 = 1100
	if got, _ := e.ChunkBytes(1); got != 1100 {
		t.Fatalf("EWMA = %d, want 1100", got)
	}
	for range 200 { // converges to a new steady size
		e.Observe(1, 5000)
	}
	if got, _ := e.ChunkBytes(1); got != 5000 {
		t.Fatalf("converged to %d, want 5000", got)
	}
	if got := e.Estimate(1, 3, 1); got != 15000 {
		t.Fatalf("Estimate = %d", got)
	}
	if got := e.Estimate(1, math.MaxInt64/2, 1); got != math.MaxInt64 {
		t.Fatalf("Estimate did not saturate: %d", got)
	}
	if got := e.Estimate(1, -3, 1); got != 0 {
		t.Fatalf("negative chunks: %d", got)
	}
	e.Observe(1, -5) // ignored
	if got, _ := e.ChunkBytes(1); got != 5000 {
		t.Fatalf("negative observation changed the mean: %d", got)
	}
	if _, ok := e.ChunkBytes(2); ok {
		t.Fatal("datasets share history")
	}
	e.Forget(1)
	if _, ok := e.ChunkBytes(1); ok {
		t.Fatal("Forget kept history")
	}
}

// TestEstimatorConcurrent: concurrent observers lose no update structure: a
// constant size stays exact, and a mean of two alternating sizes stays
// between them (run under -race).
func TestEstimatorConcurrent(t *testing.T) {
	e, err := NewEstimator(EstimatorOptions{Weight: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				e.Observe(uint64(g%2), 4096)
				e.Observe(9, int64(1000+1000*(i%2)))
				if v, ok := e.ChunkBytes(uint64(g % 2)); !ok || v != 4096 {
					t.Errorf("constant average = %d %v", v, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v, _ := e.ChunkBytes(9); v < 1000 || v > 2000 {
		t.Fatalf("alternating mean %d outside [1000, 2000]", v)
	}
}

// ---- benchmarks ----

// BenchmarkAdmit: uncontended Admit+release against x/sync/semaphore's
// Weighted Acquire+Release (also FIFO, but without oversized handling or
// stats) as the baseline.
func BenchmarkAdmit(b *testing.B) {
	ctx := context.Background()
	b.Run("scc", func(b *testing.B) {
		a := newAdmitter(b, 1<<30)
		b.ReportAllocs()
		for range b.N {
			rel, err := a.Admit(ctx, 4096)
			if err != nil {
				b.Fatal(err)
			}
			rel()
		}
	})
	b.Run("baseline", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 30)
		b.ReportAllocs()
		for range b.N {
			if err := s.Acquire(ctx, 4096); err != nil {
				b.Fatal(err)
			}
			s.Release(4096)
		}
	})
}

// BenchmarkAdmitContended: 8 goroutines admitting 1/4 of the capacity each,
// so they queue; against semaphore.Weighted.
func BenchmarkAdmitContended(b *testing.B) {
	ctx := context.Background()
	par := (8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	b.Run("scc", func(b *testing.B) {
		a := newAdmitter(b, 1<<20)
		b.SetParallelism(par)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				rel, err := a.Admit(ctx, 1<<18)
				if err != nil {
					panic(err)
				}
				rel()
			}
		})
	})
	b.Run("baseline", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 20)
		b.SetParallelism(par)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Acquire(ctx, 1<<18); err != nil {
					panic(err)
				}
				s.Release(1 << 18)
			}
		})
	})
}
