package cache

import (
	"context"
	"sync"
)

// The cache runs background goroutines: the trimmer and the
// access replayer (always, replay.go), the pre-encoder
// (Config.PreEncodeBytes > 0) and the prefetcher (Config.Prefetch,
// prefetch.go), and the split readers' helpers (Config.SplitReadBytes,
// splitread.go). Each job's state is its own type below; what they share is
// background.

// background is the lifetime of the background goroutines.
type background struct {
	// ctx is cancelled by Close (cancel); every goroutine returns once it
	// sees ctx done, and ctx is the context of their I/O.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts running background goroutines. INVARIANT: Add(1) before
	// each go statement (in startBackground and what it calls, and in
	// startHelpers under split.mu, which Close takes after setting closed); Close waits on it after
	// cancel, so no goroutine outlives Close.
	wg sync.WaitGroup
}

// trimState is the trimmer's: it brings the cache back toward the
// quiescent size once no request is running (Cache.trimmer, which
// evicts).
type trimState struct {
	// kick is a pending wake-up. Capacity 1, sent without blocking (by
	// endOn and File.ChargeMetadata when resident bytes are over the quiescent
	// size), so a burst of kicks while a trim runs collapses into one more
	// round. Never nil, never closed.
	kick chan struct{}
	// One trim round evicts at most sizing.trimRound bytes.
}

// startBackground sets up the background jobs' state from cfg (defaults
// applied) and starts their goroutines. Called once, from New.
func (c *Cache) startBackground(cfg Config) {
	c.background.jobs.ctx, c.background.jobs.cancel = context.WithCancel(context.Background())
	c.background.trim.kick = make(chan struct{}, 1)
	c.background.jobs.wg.Add(1)
	go c.trimmer()
	c.access.replay.kick = make(chan struct{}, 1)
	c.background.jobs.wg.Add(1)
	go c.access.replayer(&c.background.jobs, &c.mu)
	c.sizes.adaptive.wake = make(chan struct{}, 1)
	c.background.jobs.wg.Add(1)
	go c.sizes.adaptor(&c.background.jobs)
	c.background.preEncode.start(cfg, &c.background.jobs, preEncodeDeps{
		closed: &c.closed, sizes: &c.sizes, budget: &c.budget, order: &c.mu, workers: c.workers, stats: &c.stats,
	})
	if cfg.Prefetch {
		c.background.prefetch.max = cfg.PrefetchBytes
		c.background.prefetch.ahead = cfg.PrefetchChunks
		c.background.prefetch.jobs = make(chan prefetchJob, 16)
		c.background.jobs.wg.Add(1)
		go c.prefetcher()
	}
	c.background.split.start(cfg, &c.stats, &c.background.jobs, &c.closed) // the split readers' helpers (splitread.go)
	c.writer.split = &c.background.split                                   // they also sum large write-backs (latesum.go)
}

// trimmer brings the cache back toward the quiescent size once no request
// is running. Errors (a dirty victim that cannot be written) leave the
// chunk dirty and cached; they surface on the next Flush.
func (c *Cache) trimmer() {
	defer c.background.jobs.wg.Done()
	for {
		select {
		case <-c.background.jobs.ctx.Done():
			return
		case <-c.background.trim.kick:
		}
		for c.stats.hot.Load(hotActive) <= 0 {
			sz := c.sizes.current()
			over := c.budget.resident.Load() - sz.quiescent
			if over <= 0 {
				break
			}
			// Bounded rounds: a round's victims stay evicting until their
			// one vector write is done, and a request that starts meanwhile
			// can neither use nor evict them. Small rounds let it find
			// other victims at once, and the loop stops trimming as soon
			// as it starts. A round still spans several chunks, which the
			// pool encodes in parallel.
			freed, err := c.evict(c.background.jobs.ctx, min(over, sz.trimRound), 1)
			if err != nil {
				c.stats.trimErrors.Add(1)
				break
			}
			if freed == 0 {
				// No chunk can go, and metadata alone is over the
				// quiescent size: its re-readable part can (external.go).
				if c.budget.metadata.Load() > sz.quiescent {
					c.budget.shedMetadata(c.registered.files, &c.stats)
				}
				break
			}
		}
	}
}
