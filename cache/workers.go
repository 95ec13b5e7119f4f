package cache

import (
	"context"
	"sync"
)

// Runner runs independent encode/decode tasks with bounded concurrency.
// The cache uses its own bounded worker set unless Config.Runner supplies
// another (the engine's shared pool, package pool), so the cache does not
// depend on the pool package.
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

// semRunner bounds concurrency across all callers with one semaphore, so
// the Config.Workers limit holds for the whole Cache, not per request.
type semRunner struct {
	sem chan struct{}
}

func newSemRunner(workers int) *semRunner {
	if workers < 1 {
		workers = 1
	}
	return &semRunner{sem: make(chan struct{}, workers)}
}

func (r *semRunner) run(ctx context.Context, n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) { once.Do(func() { first = err }) }
	for i := 0; i < n; i++ {
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			fail(ctx.Err())
			wg.Wait()
			return first
		}
		wg.Add(1)
		go func(i int) {
			defer func() { <-r.sem; wg.Done() }()
			if err := fn(i); err != nil {
				fail(err)
			}
		}(i)
	}
	wg.Wait()
	return first
}
