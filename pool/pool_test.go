package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"
)

// leakCheck fails the test if it leaves goroutines behind. ants starts a
// package-level default pool (with its own goroutines) at init; IgnoreCurrent
// taken at the start of each test excludes it and anything else pre-existing.
func leakCheck(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func newPool(t *testing.T, o Options) *Pool {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// waitOrFail is a hang detector, not a timing assertion: the bound is far
// beyond any legitimate wait.
func waitOrFail(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		// Panic rather than Fatal: it dumps every goroutine's stack, and a
		// Fatal would hang in the pool's Close cleanup anyway.
		panic("hang: " + what)
	}
}

func TestOptionsValidateAndDefaults(t *testing.T) {
	for _, o := range []Options{{Workers: -1}, {QueueDepth: -1}, {Workers: 1 << 40}} {
		if err := o.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: Validate = %v, want ErrInvalid", o, err)
		}
		if _, err := New(o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: New = %v, want ErrInvalid", o, err)
		}
	}
	leakCheck(t)
	p := newPool(t, Options{})
	got := p.Options()
	if got.Workers != runtime.GOMAXPROCS(0) || got.QueueDepth != 4*got.Workers {
		t.Fatalf("defaults = %+v", got)
	}
}

func TestSubmitRunsAndReturnsError(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 2})
	want := errors.New("boom")
	ok, err := p.Submit(context.Background(), func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	bad, err := p.Submit(context.Background(), func() error { return want })
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.Wait(); err != nil {
		t.Fatalf("ok task: %v", err)
	}
	if err := bad.Wait(); !errors.Is(err, want) {
		t.Fatalf("bad task: %v", err)
	}
	<-bad.Done()
	if !errors.Is(bad.Err(), want) {
		t.Fatalf("Err() = %v", bad.Err())
	}
	if _, err := p.Submit(context.Background(), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil fn: %v", err)
	}
}

// TestNoTaskDropped: every accepted task runs exactly once, under many
// concurrent submitters and tasks returning nil (the ants PoolWithFunc trap
// is a nil *argument* dropping a task; this pool never passes nil to ants,
// and this test would catch any silently dropped task: its waiter would hang
// and the count would be short).
func TestNoTaskDropped(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 3, QueueDepth: 2})
	submitters, per := 16, 500
	if os.Getenv("SCC_STRESS") == "long" {
		per = 20000
	}
	var ran atomic.Int64
	counts := make([]atomic.Int32, submitters*per)
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tasks := make([]*Task, 0, per)
			for i := range per {
				id := s*per + i
				task, err := p.Submit(context.Background(), func() error {
					counts[id].Add(1)
					ran.Add(1)
					if id%7 == 0 {
						return fmt.Errorf("task %d", id)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				tasks = append(tasks, task)
			}
			for i, task := range tasks {
				id := s*per + i
				err := task.Wait()
				if (id%7 == 0) != (err != nil) {
					t.Errorf("task %d: err %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	if ran.Load() != int64(submitters*per) {
		t.Fatalf("ran %d tasks, want %d", ran.Load(), submitters*per)
	}
	for id := range counts {
		if c := counts[id].Load(); c != 1 {
			t.Fatalf("task %d ran %d times", id, c)
		}
	}
}

func TestPanicBecomesError(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 1, QueueDepth: 1})
	cause := errors.New("inner")
	for i := range 20 { // a single worker survives every panic
		task, err := p.Submit(context.Background(), func() error {
			if i%2 == 0 {
				panic(cause)
			}
			panic(fmt.Sprintf("value %d", i))
		})
		if err != nil {
			t.Fatal(err)
		}
		err = task.Wait()
		if !errors.Is(err, ErrPanic) {
			t.Fatalf("want ErrPanic, got %v", err)
		}
		var pe *PanicError
		if !errors.As(err, &pe) || len(pe.Stack) == 0 {
			t.Fatalf("no PanicError with stack: %v", err)
		}
		if i%2 == 0 && !errors.Is(err, cause) {
			t.Fatalf("panic(err) not unwrapped: %v", err)
		}
		if i%2 == 1 && pe.Value != fmt.Sprintf("value %d", i) {
			t.Fatalf("value = %v", pe.Value)
		}
		if !strings.Contains(string(pe.Stack), "pool_test") {
			t.Fatalf("stack does not show the panicking function:\n%s", pe.Stack)
		}
	}
	// The worker is still alive and serving.
	task, err := p.Submit(context.Background(), func() error { return nil })
	if err != nil || task.Wait() != nil {
		t.Fatal(err)
	}
}

func TestGoexitBecomesError(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 1, QueueDepth: 1})
	task, err := p.Submit(context.Background(), func() error { runtime.Goexit(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(); !errors.Is(err, ErrGoexit) {
		t.Fatalf("want ErrGoexit, got %v", err)
	}
	task, err = p.Submit(context.Background(), func() error { return nil })
	if err != nil || task.Wait() != nil {
		t.Fatalf("pool unusable after Goexit: %v", err)
	}
}

// fillPool occupies the single worker and fills the queue; it returns the
// channel that unblocks the worker.
func fillPool(t *testing.T, p *Pool) (release chan struct{}, tasks []*Task) {
	t.Helper()
	release = make(chan struct{})
	started := make(chan struct{})
	first, err := p.Submit(context.Background(), func() error {
		close(started)
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitOrFail(t, started, "first task start")
	tasks = append(tasks, first)
	for range p.Options().QueueDepth {
		task, err := p.Submit(context.Background(), func() error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	return release, tasks
}

func TestBackpressure(t *testing.T) {
	leakCheck(t)
	for _, depth := range []int{1, 2, 5} {
		t.Run(fmt.Sprint("depth", depth), func(t *testing.T) {
			p := newPool(t, Options{Workers: 1, QueueDepth: depth})
			release, tasks := fillPool(t, p)
			// The queue now holds exactly QueueDepth tasks: one more does not fit.
			if _, err := p.TrySubmit(func() error { return nil }); !errors.Is(err, ErrFull) {
				t.Fatalf("TrySubmit on a full queue: %v", err)
			}
			// A blocked Submit gives up when its ctx is cancelled.
			ctx, cancel := context.WithCancel(context.Background())
			gaveUp := make(chan error, 1)
			go func() {
				_, err := p.Submit(ctx, func() error { t.Error("cancelled task ran"); return nil })
				gaveUp <- err
			}()
			cancel()
			if err := <-gaveUp; !errors.Is(err, context.Canceled) {
				t.Fatalf("blocked Submit after cancel: %v", err)
			}
			// A blocked Submit proceeds once the worker frees up.
			accepted := make(chan struct{})
			go func() {
				task, err := p.Submit(context.Background(), func() error { return nil })
				if err == nil {
					err = task.Wait()
				}
				if err != nil {
					t.Error(err)
				}
				close(accepted)
			}()
			close(release)
			waitOrFail(t, accepted, "blocked Submit after room appeared")
			for _, task := range tasks {
				if err := task.Wait(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestSubmitCancelledCtx(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Submit(ctx, func() error { t.Error("ran"); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit(cancelled) = %v", err)
	}
}

func TestClose(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 1, QueueDepth: 2})
	release, tasks := fillPool(t, p)
	// A Submit blocked on the full queue is woken by Close with ErrClosed.
	blocked := make(chan error, 1)
	go func() {
		_, err := p.Submit(context.Background(), func() error { return nil })
		blocked <- err
	}()
	closed := make(chan error, 2)
	go func() { closed <- p.Close() }()
	// Close cannot finish while the first task runs; the blocked Submit
	// must fail (it could not have been accepted: the queue stayed full).
	if err := <-blocked; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Submit during Close: %v", err)
	}
	go func() { closed <- p.Close() }() // concurrent, idempotent
	close(release)
	for range 2 {
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	// Every accepted task ran before Close returned.
	for _, task := range tasks {
		select {
		case <-task.Done():
		default:
			t.Fatal("Close returned before an accepted task finished")
		}
	}
	if _, err := p.Submit(context.Background(), func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
	if _, err := p.TrySubmit(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("TrySubmit after Close: %v", err)
	}
	g := p.Group(context.Background())
	g.Go(func() error { t.Error("ran after close"); return nil })
	if err := g.Wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Group after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseUnderLoad: Close racing many submitters never loses an accepted
// task and leaves no goroutine behind.
func TestCloseUnderLoad(t *testing.T) {
	leakCheck(t)
	for round := range 20 {
		p, err := New(Options{Workers: 2, QueueDepth: 3})
		if err != nil {
			t.Fatal(err)
		}
		var accepted, ran atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, err := p.Submit(context.Background(), func() error { ran.Add(1); return nil })
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					accepted.Add(1)
				}
			}()
		}
		for ran.Load() < int64(round*10) {
			runtime.Gosched()
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if accepted.Load() != ran.Load() {
			t.Fatalf("accepted %d, ran %d", accepted.Load(), ran.Load())
		}
	}
}

func TestGroupFirstErrorWins(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 2, QueueDepth: 2})
	g := p.Group(context.Background())
	first := errors.New("first")
	gate := make(chan struct{})
	g.Go(func() error { close(gate); return first })
	<-gate
	// Wait until the failure is recorded (the context is cancelled).
	<-g.Context().Done()
	g.Go(func() error { t.Error("task started after the group failed"); return nil })
	if err := g.Wait(); !errors.Is(err, first) {
		t.Fatalf("Wait = %v, want %v", err, first)
	}
}

func TestGroupRunsAll(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 2, QueueDepth: 1})
	g := p.Group(context.Background())
	var n atomic.Int64
	for range 1000 {
		g.Go(func() error { n.Add(1); return nil })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1000 {
		t.Fatalf("ran %d of 1000", n.Load())
	}
	if g.Context().Err() == nil {
		t.Fatal("group context not cancelled after Wait")
	}
}

func TestGroupPanicAndParentCancel(t *testing.T) {
	leakCheck(t)
	p := newPool(t, Options{Workers: 2})
	g := p.Group(context.Background())
	g.Go(func() error { panic("in group") })
	if err := g.Wait(); !errors.Is(err, ErrPanic) {
		t.Fatalf("Wait = %v, want ErrPanic", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g = p.Group(ctx)
	g.Go(func() error { t.Error("ran under cancelled ctx"); return nil })
	if err := g.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want Canceled", err)
	}
	g = p.Group(context.Background())
	g.Go(nil)
	if err := g.Wait(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil fn: %v", err)
	}
}

// TestNestedGroupsNoDeadlock: every worker fans out on the same pool while
// the queue is tiny; without caller-runs this deadlocks (all workers blocked
// queueing into a full queue nobody drains).
func TestNestedGroupsNoDeadlock(t *testing.T) {
	leakCheck(t)
	for _, o := range []Options{{Workers: 1, QueueDepth: 1}, {Workers: 2, QueueDepth: 1}, {Workers: 2, QueueDepth: 8}} {
		t.Run(fmt.Sprintf("w%d-q%d", o.Workers, o.QueueDepth), func(t *testing.T) {
			p := newPool(t, o)
			var leaves atomic.Int64
			var fan func(depth int) error
			fan = func(depth int) error {
				if depth == 0 {
					leaves.Add(1)
					return nil
				}
				g := p.Group(context.Background())
				for range 4 {
					g.Go(func() error { return fan(depth - 1) })
				}
				return g.Wait()
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				// The root itself runs on a worker, as the cache's flush does.
				task, err := p.Submit(context.Background(), func() error { return fan(5) })
				if err == nil {
					err = task.Wait()
				}
				if err != nil {
					t.Error(err)
				}
			}()
			waitOrFail(t, done, "nested groups deadlocked")
			if leaves.Load() != 4*4*4*4*4 {
				t.Fatalf("leaves = %d", leaves.Load())
			}
		})
	}
}

// TestConcurrentAgainstModel: many goroutines submit tasks that record how
// many run at once; the pool never runs more than Workers at a time and
// every task runs once.
func TestConcurrentAgainstModel(t *testing.T) {
	leakCheck(t)
	const workers = 3
	p := newPool(t, Options{Workers: workers, QueueDepth: 4})
	var running, maxRunning, total atomic.Int64
	g := p.Group(context.Background())
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				task, err := p.Submit(context.Background(), func() error {
					n := running.Add(1)
					for {
						m := maxRunning.Load()
						if n <= m || maxRunning.CompareAndSwap(m, n) {
							break
						}
					}
					runtime.Gosched()
					running.Add(-1)
					total.Add(1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				g.Go(task.Wait)
			}
		}()
	}
	wg.Wait()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if total.Load() != 2000 {
		t.Fatalf("total %d", total.Load())
	}
	// Only workers run the counted bodies (Group.Go runs task.Wait, on a
	// worker or inline; it cannot deadlock because each task is taken off
	// the FIFO queue before the Wait that follows it).
	if m := maxRunning.Load(); m > workers {
		t.Fatalf("%d tasks ran at once with %d workers", m, workers)
	}
}

// BenchmarkTinyTask: cost per tiny task on the pool against plain goroutines
// with a WaitGroup and errgroup. Each sub-benchmark reports ns/task; compare
// .../pool and .../pool-group with .../goroutines and .../errgroup.
func BenchmarkTinyTask(b *testing.B) {
	var sink atomic.Int64
	tiny := func() error { sink.Add(1); return nil }
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/task")
	}
	b.Run("pool", func(b *testing.B) {
		p, err := New(Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		tasks := make([]*Task, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			task, err := p.Submit(context.Background(), tiny)
			if err != nil {
				b.Fatal(err)
			}
			tasks = append(tasks, task)
		}
		for _, task := range tasks {
			_ = task.Wait()
		}
		report(b, start)
	})
	b.Run("pool-group", func(b *testing.B) {
		p, err := New(Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ResetTimer()
		start := time.Now()
		g := p.Group(context.Background())
		for range b.N {
			g.Go(tiny)
		}
		_ = g.Wait()
		report(b, start)
	})
	b.Run("goroutines", func(b *testing.B) {
		start := time.Now()
		var wg sync.WaitGroup
		for range b.N {
			wg.Add(1)
			go func() { _ = tiny(); wg.Done() }()
		}
		wg.Wait()
		report(b, start)
	})
	b.Run("errgroup", func(b *testing.B) {
		start := time.Now()
		var g errgroup.Group
		for range b.N {
			g.Go(tiny)
		}
		_ = g.Wait()
		report(b, start)
	})
}
