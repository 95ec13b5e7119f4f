package engine

import (
	"context"
	"runtime"
	"sync"
	"weak"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/resource"
)

// Admission (seed 000 §5.2, "resource allocation module"): every request
// states the cache memory it will hold at once — the chunks it touches ×
// their in-memory size — and waits, first come first served, until the
// cache can hold it beside every other admitted request. Memory is a
// property of the cache, so files that share a cache share its Admitter.
//
// A request larger than half the cache's active limit is cut into batches
// that each fit; each batch is admitted on its own, so small requests keep
// flowing between the batches of a huge one and no batch thrashes the
// cache. (The serializer still holds the whole request's region, so no
// overlapping request can observe a half-done one.) A single chunk larger
// than the whole active limit is admitted alone (resource.Admitter's
// exclusive rule), and the cache serves it as its one indivisible chunk.

// admitters maps a cache to its Admitter without keeping the cache alive.
var admitters struct {
	sync.Mutex
	m map[weak.Pointer[cache.Cache]]*resource.Admitter
}

func admitterFor(c *cache.Cache) *resource.Admitter {
	key := weak.Make(c)
	admitters.Lock()
	defer admitters.Unlock()
	if a, ok := admitters.m[key]; ok {
		return a
	}
	capacity := c.Stats().ActiveLimit
	if capacity <= 0 {
		capacity = 1
	}
	a, err := resource.New(resource.Options{Capacity: capacity})
	if err != nil {
		// Capacity is positive, so New cannot fail.
		panic(err)
	}
	if admitters.m == nil {
		admitters.m = make(map[weak.Pointer[cache.Cache]]*resource.Admitter)
	}
	admitters.m[key] = a
	runtime.AddCleanup(c, func(k weak.Pointer[cache.Cache]) {
		admitters.Lock()
		delete(admitters.m, k)
		admitters.Unlock()
	}, key)
	return a
}

// runAdmitted runs the per-chunk requests through the cache in admitted
// batches.
func (f *File) runAdmitted(ctx context.Context, reqs []cache.Request, chunkBytes int64, write bool) error {
	batch := len(reqs)
	if half := f.admit.Capacity() / 2; chunkBytes > 0 && int64(batch)*chunkBytes > half {
		batch = max(1, int(half/chunkBytes))
	}
	for i := 0; i < len(reqs); i += batch {
		part := reqs[i:min(len(reqs), i+batch)]
		release, err := f.admit.Admit(ctx, int64(len(part))*chunkBytes)
		if err != nil {
			return err
		}
		if write {
			err = f.cache.Write(ctx, part)
		} else {
			err = f.cache.Read(ctx, part)
		}
		release()
		if err != nil {
			return err
		}
	}
	return nil
}
