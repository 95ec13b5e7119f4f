package cache

import (
	"context"

	"github.com/scc-dev/scc/pool"
)

// Runner runs independent encode/decode tasks with bounded concurrency.
// The cache runs them on its own worker pool (package pool) unless
// Config.Runner supplies another, for example one pool shared by several
// caches.
type Runner interface {
	// Run calls fn(i) for every i in [0,n), concurrently, and returns the
	// first error. Every started task has finished when Run returns; after
	// an error or ctx cancellation remaining tasks may be skipped. fn never
	// blocks on the cache, so Run may queue tasks.
	Run(ctx context.Context, n int, fn func(i int) error) error
}

type runner interface {
	run(ctx context.Context, n int, fn func(i int) error) error
}

// userRunner adapts a Config.Runner.
type userRunner struct{ r Runner }

func (u userRunner) run(ctx context.Context, n int, fn func(i int) error) error {
	return u.r.Run(ctx, n, fn)
}

// poolRunner runs tasks on the cache's worker pool (package pool, on
// ants): bounded for the whole Cache, not per request, with backpressure,
// and a panic in a layout callback comes back as an error instead of
// killing the process. Group.Go runs a task on the calling goroutine when
// the queue is full, so nested use cannot deadlock.
type poolRunner struct{ p *pool.Pool }

func (r poolRunner) run(ctx context.Context, n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	g := r.p.Group(ctx)
	for i := 0; i < n; i++ {
		g.Go(func() error { return fn(i) })
	}
	return g.Wait()
}

// Pool returns the cache's worker pool, on which a layout may run the
// parts of one encode or decode (through a pool.Group, which nested work
// needs), or nil when Config.Runner replaced it.
func (c *Cache) Pool() *pool.Pool { return c.workers.pool }
