// Package pool is the worker pool that runs the shared chunk cache's encode,
// decode and filter work (SCC design §5.1 item 4: "implement a thread pool to
// support [concurrent decoding and encoding of chunks]").
//
// A Pool runs tasks on a fixed number of reusable worker goroutines (an
// ants/v2 Pool of closures) behind a bounded queue. Submit blocks while the
// queue is full, which is how a producer faster than the workers is slowed
// down instead of growing memory (DESIGN.md "Memory is a promise"). A panic
// inside a task is turned into an error for that task's waiter; it never
// crashes the process and never kills a worker.
//
// Nested work: a task may itself start work on the same pool. Submit (and
// Task.Wait) from inside a task can deadlock when every worker does so while
// the queue is full, so nested work should use a Group, which is
// deadlock-free: Group.Go never blocks on the queue (when it is full the
// function runs inline on the calling goroutine, "caller runs", which also
// applies backpressure), and Group.Wait runs its group's not-yet-started
// tasks itself instead of waiting for a worker to pick them up.
//
// Everything in this package is safe for concurrent use.
package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/ants/v2"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrClosed: the pool was closed before the task was accepted.
	ErrClosed = errors.New("pool: closed")
	// ErrFull: TrySubmit found the queue full.
	ErrFull = errors.New("pool: queue full")
	// ErrPanic: the task panicked. The error is a *PanicError carrying the
	// panic value and the stack of the panicking goroutine.
	ErrPanic = errors.New("pool: task panicked")
	// ErrGoexit: the task called runtime.Goexit (for example t.FailNow from
	// a test helper) instead of returning.
	ErrGoexit = errors.New("pool: task called runtime.Goexit")
	// ErrInvalid: bad Options or a nil task function.
	ErrInvalid = errors.New("pool: invalid argument")
)

// PanicError is the error a panicking task returns to its waiter.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // stack of the task's goroutine at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("pool: task panicked: %v\n%s", e.Value, e.Stack)
}

// Is makes errors.Is(err, ErrPanic) hold.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap exposes the panic value when it is itself an error (panic(err)).
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// Options configures a Pool. The zero value is valid and selects every
// default.
type Options struct {
	// Workers is the number of worker goroutines, i.e. how many tasks run at
	// once. Default (0): runtime.GOMAXPROCS(0), since the work is CPU-bound
	// (compression, checksums, shuffles).
	Workers int
	// QueueDepth is how many accepted tasks may wait for a worker. Submit
	// blocks while that many are waiting. Default (0): 4*Workers, enough to
	// keep workers busy between bursts without holding much memory.
	QueueDepth int
}

// Validate reports whether o is usable. Zero fields mean "default".
func (o Options) Validate() error {
	if o.Workers < 0 {
		return fmt.Errorf("%w: Workers %d < 0", ErrInvalid, o.Workers)
	}
	if o.QueueDepth < 0 {
		return fmt.Errorf("%w: QueueDepth %d < 0", ErrInvalid, o.QueueDepth)
	}
	const maxInt32 = 1<<31 - 1 // ants counts workers in an int32
	if o.Workers > maxInt32 || o.QueueDepth > maxInt32 {
		return fmt.Errorf("%w: Workers/QueueDepth too large", ErrInvalid)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.QueueDepth == 0 {
		o.QueueDepth = 4 * o.Workers
	}
	return o
}

// Pool runs tasks on a bounded set of workers behind a bounded queue.
//
// Data path: Submit sends a closure on queue (a channel with QueueDepth
// buffer slots); Workers long-lived worker loops, hosted on an ants/v2 Pool
// of capacity Workers, receive from it and run the closures. ants does not
// offer a bounded queue whose Submit honours a context (its Submit parks the
// caller until a worker is free), so the queue is ours and ants owns the
// worker goroutines. An earlier version passed each task to ants through a
// dispatcher goroutine; the extra hand-off cost ~3 µs per task at GOMAXPROCS 2
// against ~0.6 µs for this layout (BenchmarkTinyTask).
//
// No task is ever handed to ants as a nil function or argument (a nil is an
// ants worker's stop signal, and PoolWithFunc.Invoke(nil) drops the task);
// only the non-nil workerLoop method value is submitted.
type Pool struct {
	opts    Options
	workers *ants.Pool
	queue   chan func()    // closed by Close once no Submit can send
	closing chan struct{}  // closed first by Close: wakes blocked Submits
	loops   sync.WaitGroup // running worker loops (and pending respawns)

	closeOnce sync.Once
	closeErr  error

	mu struct {
		// RWMutex: Submits hold the read side while they may send on
		// queue, so Close (write side) knows when closing queue is safe.
		sync.RWMutex
		closed bool // set under the write lock, then queue is closed
	}
}

// New starts a pool. Call Close to stop its goroutines.
func New(o Options) (*Pool, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	// DisablePurge: the loops never go idle in ants' sense (they block in
	// the queue receive), so ants' idle-worker scavenger has nothing to do.
	w, err := ants.NewPool(o.Workers, ants.WithDisablePurge(true))
	if err != nil {
		return nil, fmt.Errorf("pool: starting workers: %w", err)
	}
	p := &Pool{
		opts:    o,
		workers: w,
		queue:   make(chan func(), o.QueueDepth),
		closing: make(chan struct{}),
	}
	for range o.Workers {
		p.loops.Add(1)
		if err := w.Submit(p.workerLoop); err != nil {
			// Cannot happen on a fresh pool below capacity; unwind.
			p.loops.Done()
			_ = p.Close()
			return nil, fmt.Errorf("pool: starting workers: %w", err)
		}
	}
	return p, nil
}

// Options returns the options in effect (defaults filled in).
func (p *Pool) Options() Options { return p.opts }

// workerLoop runs queued closures until Close closes the queue.
func (p *Pool) workerLoop() {
	normal := false
	defer func() {
		if !normal {
			// A task called runtime.Goexit, which unwinds this whole
			// goroutine (its own closure already reported ErrGoexit to
			// its waiter). Replace the loop. Not from here: ants still
			// counts this goroutine as running, so a Submit now would
			// wait for a slot this very goroutine holds.
			go p.respawn()
			return
		}
		p.loops.Done()
	}()
	for fn := range p.queue {
		fn() // never panics: every queued closure recovers (see call)
	}
	normal = true
}

// respawn starts a replacement worker loop; the loops count carries over
// from the loop that died.
func (p *Pool) respawn() {
	if err := p.workers.Submit(p.workerLoop); err != nil {
		// ants is released only after every loop ended, so this is
		// unreachable; still, never leave Close waiting for a loop that
		// does not exist.
		p.loops.Done()
	}
}

// Task is the handle of a submitted task.
type Task struct {
	done chan struct{}
	err  error // written before done is closed
}

// Wait blocks until the task has finished and returns its error.
func (t *Task) Wait() error {
	<-t.done
	return t.err
}

// Done is closed when the task has finished.
func (t *Task) Done() <-chan struct{} { return t.done }

// Err returns the task's error once Done is closed, nil before.
func (t *Task) Err() error {
	select {
	case <-t.done:
		return t.err
	default:
		return nil
	}
}

// Submit queues fn to run on a worker and returns its handle. It blocks
// while the queue is full, until there is room, ctx is done (ctx.Err() is
// returned and fn never runs) or the pool is closed (ErrClosed).
//
// Every task Submit accepted runs to completion, even if Close is called
// meanwhile. Do not call Submit from inside a task with a ctx that never
// ends: if every worker does so while the queue is full, nothing can make
// room. Use a Group for nested work.
func (p *Pool) Submit(ctx context.Context, fn func() error) (*Task, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil task", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := &Task{done: make(chan struct{})}
	if err := p.send(ctx, t.closure(fn), true); err != nil {
		return nil, err
	}
	return t, nil
}

// TrySubmit is Submit without blocking: it returns ErrFull when the queue
// has no room.
func (p *Pool) TrySubmit(fn func() error) (*Task, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil task", ErrInvalid)
	}
	t := &Task{done: make(chan struct{})}
	if err := p.send(context.Background(), t.closure(fn), false); err != nil {
		return nil, err
	}
	return t, nil
}

// closure wraps fn so that whatever fn does (return, panic, Goexit) the
// task's error is set and done is closed exactly once.
func (t *Task) closure(fn func() error) func() {
	return func() {
		finished := false
		defer func() {
			if !finished { // runtime.Goexit unwound through here
				t.err = ErrGoexit
				close(t.done)
			}
		}()
		t.err = call(fn)
		finished = true
		close(t.done)
	}
}

// call runs fn, converting a panic into a *PanicError.
func call(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// send puts fn on the queue. block selects Submit (wait for room) or
// TrySubmit (ErrFull) behaviour.
func (p *Pool) send(ctx context.Context, fn func(), block bool) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.mu.closed {
		return ErrClosed
	}
	// Fast path, and the only path for TrySubmit.
	select {
	case p.queue <- fn:
		return nil
	default:
	}
	if !block {
		return ErrFull
	}
	select {
	case p.queue <- fn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closing:
		// Close is waiting for the read lock we hold; give up so it can
		// proceed. (If the send won the race instead, the task was
		// accepted and a worker loop will still run it.)
		return ErrClosed
	}
}

// Close stops accepting tasks (Submit returns ErrClosed), wakes Submits
// blocked on a full queue with ErrClosed, waits until every accepted task
// has finished and every worker goroutine has exited. It is idempotent and
// safe to call concurrently; later calls wait for the first to finish and
// return the same result. Calling Close from inside a task deadlocks.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		close(p.closing)
		p.mu.Lock()
		p.mu.closed = true
		// INVARIANT: no goroutine is inside send (we hold the write lock)
		// and none can get past its closed check, so closing queue cannot
		// race a send.
		close(p.queue)
		p.mu.Unlock()
		// The loops drain every accepted task, then end.
		p.loops.Wait()
		// Returns once ants' goroutines (the hosts of the loops, and its
		// ticker) have exited: no goroutine outlives Close.
		if err := p.workers.ReleaseContext(context.Background()); err != nil {
			p.closeErr = fmt.Errorf("pool: stopping workers: %w", err)
		}
	})
	return p.closeErr
}

// Group runs many tasks on the pool and waits for all of them; the first
// error wins, like errgroup.Group. Its context (Context) is cancelled when a
// task fails, when the parent ctx is done, or when Wait returns; tasks not
// yet started at that point are skipped.
//
// Nested fan-out on the same pool (a task that runs a Group and waits for
// it) never deadlocks, by two rules:
//
//   - Go never blocks on the pool's queue: when the queue is full it runs
//     the function inline on the calling goroutine ("caller runs").
//   - Wait never blocks on a task of its group that has not started: it
//     claims such tasks and runs them itself ("waiter helps"); each queued
//     closure runs its task only if it wins the claim.
//
// So a waiting goroutine blocks only on tasks already running on some
// worker, which by induction on nesting depth finish. (Tasks that block on
// anything else, e.g. a Task.Wait of a plain Submit, are outside this
// guarantee.)
type Group struct {
	p      *Pool
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // counts tasks added by Go and not yet finished or skipped

	errOnce sync.Once
	err     error // first error; written once under errOnce, read after wg.Wait

	mu struct {
		sync.Mutex
		// pending holds tasks that may not have been claimed yet, for
		// Wait to help with. Claimed ones are pruned when it grows.
		pending []*groupTask
	}
}

// groupTask is one function given to Group.Go.
type groupTask struct {
	fn func() error
	// claimed: whoever swaps it false->true (a worker, the inline caller,
	// or Wait) runs fn; everyone else does nothing.
	claimed atomic.Bool
}

// Group returns a new Group on p whose context derives from ctx.
func (p *Pool) Group(ctx context.Context) *Group {
	gctx, cancel := context.WithCancelCause(ctx)
	return &Group{p: p, ctx: gctx, cancel: cancel}
}

// Context is cancelled on the group's first error or when Wait returns. Long
// tasks should watch it.
func (g *Group) Context() context.Context { return g.ctx }

func (g *Group) fail(err error) {
	g.errOnce.Do(func() {
		g.err = err
		g.cancel(err)
	})
}

// Go runs fn on the pool (or inline, see Group). A nil fn fails the group
// with ErrInvalid. Go may be called from the group's own tasks, but not
// after Wait has returned.
func (g *Group) Go(fn func() error) {
	if fn == nil {
		g.fail(fmt.Errorf("%w: nil task", ErrInvalid))
		return
	}
	if err := g.ctx.Err(); err != nil {
		g.fail(err) // no-op if a task's error already won
		return
	}
	gt := &groupTask{fn: fn}
	g.wg.Add(1)
	g.mu.Lock()
	if n := len(g.mu.pending); n >= 64 && n == cap(g.mu.pending) {
		// Amortised pruning keeps a long-lived group's memory
		// proportional to its unstarted tasks, not to all it ever ran.
		kept := g.mu.pending[:0]
		for _, t := range g.mu.pending {
			if !t.claimed.Load() {
				kept = append(kept, t)
			}
		}
		clear(g.mu.pending[len(kept):])
		g.mu.pending = kept
	}
	g.mu.pending = append(g.mu.pending, gt)
	g.mu.Unlock()

	run := func() {
		if gt.claimed.CompareAndSwap(false, true) {
			g.exec(gt.fn)
		}
	}
	switch err := g.p.send(g.ctx, run, false); {
	case err == nil:
	case errors.Is(err, ErrFull):
		run() // caller runs
	default: // ErrClosed
		if gt.claimed.CompareAndSwap(false, true) {
			g.fail(err)
			g.wg.Done()
		}
	}
}

// exec runs a claimed task's fn and accounts for it in wg, whatever fn does.
func (g *Group) exec(fn func() error) {
	finished := false
	defer func() {
		if !finished { // runtime.Goexit
			g.fail(ErrGoexit)
		}
		g.wg.Done()
	}()
	if err := g.ctx.Err(); err != nil {
		g.fail(err)
	} else if err := call(fn); err != nil {
		g.fail(err)
	}
	finished = true
}

// Wait runs every not-yet-started task of the group itself, then blocks
// until every function started with Go has finished, and returns the first
// error any of them returned (a *PanicError for a panic).
func (g *Group) Wait() error {
	for {
		g.mu.Lock()
		pending := g.mu.pending
		g.mu.pending = nil
		g.mu.Unlock()
		if len(pending) == 0 {
			break
		}
		for _, gt := range pending {
			if gt.claimed.CompareAndSwap(false, true) {
				g.exec(gt.fn)
			}
		}
	}
	g.wg.Wait()
	g.cancel(nil)
	return g.err
}
