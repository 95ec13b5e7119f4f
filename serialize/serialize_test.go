package serialize

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hangGuard is a hang detector, not a timing assertion: the bound is far
// beyond any legitimate wait. It panics to dump every goroutine's stack.
const hangGuard = 30 * time.Second

func box2(ds, x0, x1, y0, y1 uint64) Region {
	return Region{Dataset: ds, Lo: []uint64{x0, y0}, Hi: []uint64{x1, y1}}
}

func rd(rs ...Region) Request { return Request{Regions: rs} }
func wr(rs ...Region) Request { return Request{Regions: rs, Write: true} }

// mustAcquire acquires r on the calling goroutine; it fails (instead of
// hanging) if r would block, which is how tests prove two requests hold at
// the same time.
func mustAcquire(t *testing.T, s *Serializer, r Request) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	rel, err := s.Acquire(ctx, r)
	if err != nil {
		t.Fatalf("Acquire(%+v) = %v (it should not have waited)", r, err)
	}
	return rel
}

type result struct {
	release func()
	err     error
}

// async starts an Acquire on its own goroutine.
func async(s *Serializer, ctx context.Context, r Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		rel, err := s.Acquire(ctx, r)
		ch <- result{rel, err}
	}()
	return ch
}

func asyncExclusive(s *Serializer, ctx context.Context, ds uint64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		rel, err := s.AcquireExclusive(ctx, ds)
		ch <- result{rel, err}
	}()
	return ch
}

// waitWaiting spins until exactly n requests are blocked.
func waitWaiting(t *testing.T, s *Serializer, n int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for s.Waiting() != n {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("hang: Waiting()=%d, want %d", s.Waiting(), n))
		}
		runtime.Gosched()
	}
}

func get(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hangGuard):
		panic("hang: request never granted")
	}
}

func granted(t *testing.T, ch <-chan result) func() {
	t.Helper()
	r := get(t, ch)
	if r.err != nil {
		t.Fatalf("Acquire: %v", r.err)
	}
	return r.release
}

func notYet(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s was granted too early (err %v)", what, r.err)
	default:
	}
}

// inFlight counts the entries in every list, checking the empty-list count.
func inFlight(s *Serializer) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		empty := 0
		for _, l := range sh.lists {
			n += len(l.entries)
			if len(l.entries) == 0 {
				empty++
			}
		}
		if empty != sh.empty {
			panic(fmt.Sprintf("shard %d: %d empty lists, counted %d", i, empty, sh.empty))
		}
		sh.mu.Unlock()
	}
	return n
}

// TestEmptyListsSwept: datasets that are no longer used do not keep map
// entries forever.
func TestEmptyListsSwept(t *testing.T) {
	s := New()
	for ds := range uint64(5000) {
		mustAcquire(t, s, wr(box2(ds, 0, 1, 0, 1)))()
	}
	total := 0
	for i := range s.shards {
		total += len(s.shards[i].lists)
	}
	if total > numShards*(maxEmptyLists+1) {
		t.Fatalf("%d lists kept for 5000 finished datasets", total)
	}
	if inFlight(s) != 0 {
		t.Fatal("entries left")
	}
}

func TestInvalid(t *testing.T) {
	s := New()
	bad := []Request{
		wr(Region{Dataset: 1, Lo: []uint64{0}, Hi: []uint64{1, 2}}),
		wr(Region{Dataset: 1, Lo: []uint64{3, 0}, Hi: []uint64{2, 1}}),
	}
	for _, r := range bad {
		if _, err := s.Acquire(context.Background(), r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Acquire(%+v) = %v, want ErrInvalid", r, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(ctx, wr(box2(1, 0, 1, 0, 1))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(cancelled) = %v", err)
	}
	if _, err := s.AcquireExclusive(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireExclusive(cancelled) = %v", err)
	}
	// The cancelled attempts left nothing behind.
	mustAcquire(t, s, wr(box2(1, 0, 9, 0, 9)))()
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d entries left after release", n)
	}
}

func TestEmptyRegionsNeverWait(t *testing.T) {
	s := New()
	rel := mustAcquire(t, s, wr(box2(1, 0, 10, 0, 10)))
	defer rel()
	// Empty boxes (lo == hi) and requests without regions touch nothing.
	mustAcquire(t, s, wr(box2(1, 3, 3, 0, 10)))()
	mustAcquire(t, s, wr())()
	ex := mustAcquire(t, s, Request{})
	ex()
	ex() // idempotent
}

func TestDisjointRunConcurrently(t *testing.T) {
	s := New()
	a := mustAcquire(t, s, wr(box2(1, 0, 4, 0, 4)))
	// Same dataset, touching but disjoint ([0,4) and [4,8)).
	b := mustAcquire(t, s, wr(box2(1, 4, 8, 0, 4)))
	c := mustAcquire(t, s, wr(box2(1, 0, 4, 4, 8)))
	// Same coordinates, other datasets.
	d := mustAcquire(t, s, wr(box2(2, 0, 4, 0, 4)))
	e := mustAcquire(t, s, rd(box2(3, 0, 4, 0, 4)))
	for _, r := range []func(){a, b, c, d, e} {
		r()
	}
}

func TestSameShardDatasetsIndependent(t *testing.T) {
	// Two datasets that share a shard (and so a mutex) still never wait
	// for each other, even when one is locked exclusively.
	var other uint64
	for other = 2; shardOf(other) != shardOf(1); other++ {
	}
	s := New()
	a := mustAcquire(t, s, wr(box2(1, 0, 4, 0, 4)))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	x, err := s.AcquireExclusive(ctx, other)
	if err != nil {
		t.Fatalf("exclusive on a same-shard dataset waited: %v", err)
	}
	b := mustAcquire(t, s, wr(box2(1, 4, 8, 0, 4)))
	a()
	x()
	b()
}

func TestOverlappingReadsRunTogether(t *testing.T) {
	s := New()
	a := mustAcquire(t, s, rd(box2(1, 0, 8, 0, 8)))
	b := mustAcquire(t, s, rd(box2(1, 2, 6, 2, 6)))
	c := mustAcquire(t, s, rd(box2(1, 0, 8, 0, 8), box2(2, 0, 1, 0, 1)))
	a()
	b()
	c()
}

func TestWriteSerializes(t *testing.T) {
	for _, first := range []bool{true, false} {
		for _, second := range []bool{true, false} {
			if !first && !second {
				continue
			}
			t.Run(fmt.Sprintf("w%v-w%v", first, second), func(t *testing.T) {
				s := New()
				a := mustAcquire(t, s, Request{Regions: []Region{box2(1, 0, 4, 0, 4)}, Write: first})
				ch := async(s, context.Background(), Request{Regions: []Region{box2(1, 3, 9, 3, 9)}, Write: second})
				waitWaiting(t, s, 1)
				notYet(t, ch, "overlapping request")
				a()
				granted(t, ch)()
			})
		}
	}
}

// TestNoStarvation: a later read does not overtake an earlier waiting
// write, although it is compatible with the read currently running.
func TestNoStarvation(t *testing.T) {
	s := New()
	r1 := mustAcquire(t, s, rd(box2(1, 0, 4, 0, 4)))
	w2 := async(s, context.Background(), wr(box2(1, 0, 4, 0, 4)))
	waitWaiting(t, s, 1)
	r3 := async(s, context.Background(), rd(box2(1, 1, 2, 1, 2)))
	waitWaiting(t, s, 2)
	notYet(t, r3, "later read")
	r1()
	relW2 := granted(t, w2)
	waitWaiting(t, s, 1)
	notYet(t, r3, "later read while the write runs")
	relW2()
	granted(t, r3)()
}

// TestCancelWaiting: a cancelled waiter is removed; a request that waited
// only for it proceeds, one that also waits for the running request does not.
func TestCancelWaiting(t *testing.T) {
	s := New()
	w1 := mustAcquire(t, s, wr(box2(1, 0, 4, 0, 4)))
	ctx, cancel := context.WithCancel(context.Background())
	w2 := async(s, ctx, wr(box2(1, 2, 8, 2, 8))) // overlaps w1
	waitWaiting(t, s, 1)
	r3 := async(s, context.Background(), rd(box2(1, 6, 8, 6, 8))) // overlaps w2 only
	waitWaiting(t, s, 2)
	r4 := async(s, context.Background(), rd(box2(1, 3, 7, 3, 7))) // overlaps w1 and w2
	waitWaiting(t, s, 3)
	notYet(t, r3, "r3 behind w2")
	cancel()
	if r := get(t, w2); !errors.Is(r.err, context.Canceled) || r.release != nil {
		t.Fatalf("cancelled waiter: %+v", r)
	}
	relR3 := granted(t, r3) // w1 still held
	waitWaiting(t, s, 1)
	notYet(t, r4, "r4 behind w1")
	w1()
	granted(t, r4)()
	relR3()
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d entries left", n)
	}
}

// TestExclusiveDrain: AcquireExclusive waits for every in-flight request on
// its dataset (even disjoint ones) and holds every later one, on that
// dataset only.
func TestExclusiveDrain(t *testing.T) {
	s := New()
	r1 := mustAcquire(t, s, rd(box2(1, 0, 1, 0, 1)))
	w2 := mustAcquire(t, s, wr(box2(1, 5, 6, 5, 6)))
	ex := asyncExclusive(s, context.Background(), 1)
	waitWaiting(t, s, 1)
	r4 := async(s, context.Background(), rd(box2(1, 9, 10, 9, 10))) // disjoint from all
	waitWaiting(t, s, 2)
	other := mustAcquire(t, s, wr(box2(2, 0, 1, 0, 1)))
	r1()
	notYet(t, ex, "exclusive with w2 in flight")
	w2()
	relEx := granted(t, ex)
	waitWaiting(t, s, 1)
	notYet(t, r4, "request behind exclusive")
	// A second exclusive queues behind the first too.
	ex2 := asyncExclusive(s, context.Background(), 1)
	waitWaiting(t, s, 2)
	relEx()
	relR4 := granted(t, r4)
	notYet(t, ex2, "second exclusive while r4 runs")
	relR4()
	granted(t, ex2)()
	other()
}

func TestExclusiveCancel(t *testing.T) {
	s := New()
	w := mustAcquire(t, s, wr(box2(1, 0, 1, 0, 1)))
	ctx, cancel := context.WithCancel(context.Background())
	ex := asyncExclusive(s, ctx, 1)
	waitWaiting(t, s, 1)
	r := async(s, context.Background(), rd(box2(1, 4, 5, 4, 5)))
	waitWaiting(t, s, 2)
	cancel()
	if res := get(t, ex); !errors.Is(res.err, context.Canceled) {
		t.Fatalf("exclusive after cancel: %v", res.err)
	}
	granted(t, r)() // waited only for the exclusive
	w()
}

// TestMultiDataset: a request over two datasets is ordered on both, and
// requests listing the datasets in opposite orders do not deadlock.
func TestMultiDataset(t *testing.T) {
	s := New()
	a := mustAcquire(t, s, wr(box2(1, 0, 2, 0, 2), box2(2, 0, 2, 0, 2)))
	b := async(s, context.Background(), wr(box2(2, 1, 3, 1, 3), box2(1, 5, 6, 5, 6)))
	waitWaiting(t, s, 1)
	// c overlaps b on dataset 1 only: it waits for b (earlier, waiting).
	c := async(s, context.Background(), rd(box2(1, 5, 6, 5, 6)))
	waitWaiting(t, s, 2)
	// d is disjoint from all on dataset 1: it runs now.
	mustAcquire(t, s, wr(box2(1, 8, 9, 8, 9)))()
	a()
	relB := granted(t, b)
	notYet(t, c, "c behind b")
	relB()
	granted(t, c)()
}

func TestReleaseIdempotent(t *testing.T) {
	s := New()
	a := mustAcquire(t, s, wr(box2(1, 0, 2, 0, 2)))
	b := async(s, context.Background(), wr(box2(1, 0, 2, 0, 2)))
	waitWaiting(t, s, 1)
	c := async(s, context.Background(), wr(box2(1, 0, 2, 0, 2)))
	waitWaiting(t, s, 2)
	a()
	a() // must not count as b's second blocker release, nor for c
	relB := granted(t, b)
	notYet(t, c, "c behind b")
	relB()
	granted(t, c)()

	// Requests are recycled: a stale release (of an earlier use of the
	// same request object) must not release the current holder.
	for range 100 {
		old := mustAcquire(t, s, wr(box2(1, 0, 2, 0, 2)))
		old()
		cur := mustAcquire(t, s, wr(box2(1, 0, 2, 0, 2)))
		old()
		ch := async(s, context.Background(), wr(box2(1, 0, 2, 0, 2)))
		waitWaiting(t, s, 1)
		notYet(t, ch, "request behind the current holder after a stale release")
		cur()
		granted(t, ch)()
	}
}

// ---- reference model test ----

type modelReq struct {
	regions   []Region
	write     bool
	exclusive bool // regions[0].Dataset only
}

// refConflict is the specification, written independently of the code
// under test: same dataset, intersecting non-empty boxes, one writes; or an
// exclusive on the dataset.
func refConflict(a, b modelReq) bool {
	for _, x := range a.regions {
		for _, y := range b.regions {
			if x.Dataset != y.Dataset {
				continue
			}
			if a.exclusive || b.exclusive {
				return true
			}
			if !a.write && !b.write {
				continue
			}
			overlap := true
			for d := range x.Lo {
				lo := max(x.Lo[d], y.Lo[d])
				hi := min(x.Hi[d], y.Hi[d])
				if lo >= hi {
					overlap = false
				}
			}
			if overlap {
				return true
			}
		}
	}
	return false
}

type span struct {
	req        modelReq
	ticket     uint64
	start, end uint64
}

func randModelReq(rng *rand.Rand) modelReq {
	const grid, datasets = 6, 3
	if rng.IntN(20) == 0 {
		ds := uint64(rng.IntN(datasets) + 1)
		return modelReq{regions: []Region{{Dataset: ds}}, write: true, exclusive: true}
	}
	var m modelReq
	m.write = rng.IntN(5) < 2
	for range 1 + rng.IntN(2) {
		g := Region{Dataset: uint64(rng.IntN(datasets) + 1), Lo: make([]uint64, 2), Hi: make([]uint64, 2)}
		for d := range 2 {
			a, b := uint64(rng.IntN(grid)), uint64(rng.IntN(grid))
			g.Lo[d], g.Hi[d] = min(a, b), max(a, b)+1
		}
		m.regions = append(m.regions, g)
	}
	return m
}

// TestModel: many goroutines acquire random regions (several datasets, some
// multi-dataset, some exclusive, some cancelled). Each held interval is
// stamped with a logical clock. Every pair of conflicting requests must not
// overlap in time and must have run in ticket order.
func TestModel(t *testing.T) {
	goroutines, per, rounds := 8, 250, 1
	if testing.Short() {
		per = 60
	}
	if os.Getenv("SCC_STRESS") == "long" {
		goroutines, rounds = 16, 100 // the pair check is quadratic: many rounds, not longer ones
	}
	s := New() // shared by all rounds: state left by one round would show in the next
	for round := range rounds {
		modelRound(t, s, uint64(round), goroutines, per)
		if t.Failed() {
			return
		}
	}
}

func modelRound(t *testing.T, s *Serializer, seed uint64, goroutines, per int) {
	var clock atomic.Uint64
	var mu sync.Mutex
	var spans []span
	var cancelled atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), seed))
			for range per {
				m := randModelReq(rng)
				var req *request
				if m.exclusive {
					req = s.buildExclusive(m.regions[0].Dataset)
				} else {
					var err error
					req, err = s.build(Request{Regions: m.regions, Write: m.write})
					if err != nil {
						t.Error(err)
						return
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(10) == 0 {
					go func() {
						runtime.Gosched()
						cancel()
					}()
				}
				rel, err := s.acquire(ctx, req)
				if err != nil {
					cancel()
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					cancelled.Add(1)
					continue
				}
				sp := span{req: m, ticket: req.ticket, start: clock.Add(1)}
				for range rng.IntN(4) {
					runtime.Gosched()
				}
				sp.end = clock.Add(1)
				rel.Release()
				cancel()
				mu.Lock()
				spans = append(spans, sp)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	conflicting := 0
	for i := range spans {
		for j := range spans {
			a, b := spans[i], spans[j]
			if a.ticket >= b.ticket || !refConflict(a.req, b.req) {
				continue
			}
			conflicting++
			if a.end >= b.start {
				t.Fatalf("conflicting requests overlapped or ran out of order:\n a ticket %d [%d,%d] %+v\n b ticket %d [%d,%d] %+v",
					a.ticket, a.start, a.end, a.req, b.ticket, b.start, b.end, b.req)
			}
		}
	}
	if conflicting < len(spans) {
		t.Fatalf("model too sparse: %d conflicting pairs among %d requests", conflicting, len(spans))
	}
	if n := inFlight(s); n != 0 {
		t.Fatalf("%d entries left after all releases", n)
	}
	if s.Waiting() != 0 {
		t.Fatalf("Waiting() = %d", s.Waiting())
	}
	t.Logf("%d requests, %d cancelled, %d conflicting pairs checked", len(spans), cancelled.Load(), conflicting)
}

// ---- benchmarks ----

// BenchmarkAcquireUncontended: one goroutine, Acquire+release of a 2-D
// region, against a bare sync.Mutex Lock+Unlock (the floor for any
// exclusion) as baseline.
func BenchmarkAcquireUncontended(b *testing.B) {
	r := wr(box2(7, 0, 4, 0, 4))
	b.Run("scc", func(b *testing.B) {
		s := New()
		ctx := context.Background()
		b.ReportAllocs()
		for range b.N {
			rel, err := s.Acquire(ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			rel()
		}
	})
	b.Run("baseline", func(b *testing.B) {
		var mu sync.Mutex
		for range b.N {
			mu.Lock()
			mu.Unlock() //nolint:staticcheck // the empty section is the point
		}
	})
}

// BenchmarkDisjoint8: 8 goroutines, each writing its own disjoint region of
// one dataset and copying 16 KiB inside (a small chunk piece being gathered).
// Baseline: one mutex for the dataset (the HDF5 model: one lock serialises
// all I/O). The serializer lets the copies run in parallel, so on N idle
// cores it can approach N× the baseline, minus its bookkeeping.
func BenchmarkDisjoint8(b *testing.B) {
	const piece = 16 << 10
	parallelism := (8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	b.Run("scc", func(b *testing.B) {
		s := New()
		var ids atomic.Uint64
		b.SetBytes(piece)
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			id := ids.Add(1)
			src, dst := make([]byte, piece), make([]byte, piece)
			r := wr(box2(1, id, id+1, 0, 4))
			ctx := context.Background()
			for pb.Next() {
				rel, err := s.Acquire(ctx, r)
				if err != nil {
					panic(err)
				}
				copy(dst, src)
				rel()
			}
		})
	})
	b.Run("baseline", func(b *testing.B) {
		var mu sync.Mutex
		b.SetBytes(piece)
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			src, dst := make([]byte, piece), make([]byte, piece)
			for pb.Next() {
				mu.Lock()
				copy(dst, src)
				mu.Unlock()
			}
		})
	})
}
