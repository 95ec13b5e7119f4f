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

// admitGroup is requests admitted at chunkBytes each (submit's route).
type admitGroup struct {
	reqs       []cache.Request
	chunkBytes int64
}

// submit is the one way a request reaches the cache once the caller
// holds its region (serializer) and has built its per-chunk requests:
//
//  1. chunks resident whole are served without admission
//     (cache.ServeResident): a hit holds no memory once it returns;
//  2. the others are admitted in batches and sent to the cache
//     (runAdmitted);
//  3. a write marks the dataset dirty when any chunk may have taken it,
//     even if a later one failed, so the next commit stores what landed.
//
// With route nil, step 1 stops at the first chunk that is not resident,
// and it and every chunk after it go to step 2 in order, at s.admitBytes
// each. A read may pass route instead: step 1 then serves every resident
// chunk, and route turns the ones left, in order, into the groups step 2
// admits one after the other, each at its own size (a defined-elements
// query sends selections to the selection view). route's errors are
// returned as they are.
func (s *dsState) submit(ctx context.Context, reqs []cache.Request, write bool, route func(missed []cache.Request) ([]admitGroup, error)) error {
	var served int
	var err error
	if route == nil {
		served, err = s.f.cache.ServeResident(ctx, write, reqs)
		if err == nil && served < len(reqs) {
			err = s.f.runAdmitted(ctx, reqs[served:], s.admitBytes, write)
		}
		err = classify(err)
	} else {
		served, err = s.submitRouted(ctx, reqs, write, route)
	}
	if write && (err == nil || served > 0) {
		s.dirty.Store(true)
	}
	return err
}

// submitRouted is steps 1 and 2 of submit with a route; served counts the
// chunks step 1 served.
func (s *dsState) submitRouted(ctx context.Context, reqs []cache.Request, write bool, route func([]cache.Request) ([]admitGroup, error)) (served int, err error) {
	var missed []cache.Request
	for i := 0; i < len(reqs); {
		n, err := s.f.cache.ServeResident(ctx, write, reqs[i:])
		served += n
		if err != nil {
			return served, classify(err)
		}
		i += n
		if i < len(reqs) {
			missed = append(missed, reqs[i])
			i++
		}
	}
	groups, err := route(missed)
	if err != nil {
		return served, err
	}
	for _, g := range groups {
		if err := s.f.runAdmitted(ctx, g.reqs, g.chunkBytes, write); err != nil {
			return served, classify(err)
		}
	}
	return served, nil
}
