package engine

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/resource"
)

// Admission (SCC design §5.2, "resource allocation module"): every request
// states the cache memory it will hold at once — the chunks it touches ×
// their in-memory size — and waits, first come first served, until the
// cache can hold it beside every other admitted request.
//
// Memory is a property of the cache, so files that share a cache share its
// Admitter. The cache carries it (cache.Cache.Admission: cache may not
// import resource, so it holds it as the small cache.Admission interface);
// the first file to open on a cache creates it with the cache's active
// limit as capacity, every later file gets the same one, and the cache
// keeps its capacity equal to the active limit (SetCapacity). It lives and
// dies with the cache: no global map.
//
// A large request is cut into batches by resource's one splitting rule
// (resource.Cut) with budget resource.Admitter.BatchBytes, half the
// capacity; each batch is admitted on its own, so small requests keep
// flowing between the batches of a huge one and no batch thrashes the
// cache. (The serializer still holds the whole request's region, so no
// overlapping request can observe a half-done one.) A single chunk larger
// than the batch budget is a batch alone, and one larger than the whole
// active limit is admitted alone (resource.Admitter's rule); the cache
// serves it as its one indivisible chunk.

// admitterOf returns the Admitter of c, creating it on first use. It fails
// only if something other than the engine installed c's Admission first.
func admitterOf(c *cache.Cache) (*resource.Admitter, error) {
	a, ok := c.Admission(func(limit int64) cache.Admission {
		return resource.NewForCache(limit)
	}).(*resource.Admitter)
	if !ok {
		return nil, fmt.Errorf("%w: the cache's admission control is not a resource.Admitter", ErrInvalid)
	}
	return a, nil
}

// runAdmitted runs the per-chunk requests through the cache in admitted
// batches, each of chunkBytes per request.
func (f *File) runAdmitted(ctx context.Context, reqs []cache.Request, chunkBytes int64, write bool) error {
	budget := f.admit.BatchBytes()
	for len(reqs) > 0 {
		n, bytes := resource.Cut(budget, len(reqs), func(int) int64 { return chunkBytes })
		release, err := f.admit.Admit(ctx, bytes)
		if err != nil {
			return err
		}
		part := reqs[:n]
		if write {
			err = f.cache.Write(ctx, part)
		} else {
			err = f.cache.Read(ctx, part)
		}
		release()
		if err != nil {
			return err
		}
		reqs = reqs[n:]
	}
	return nil
}
