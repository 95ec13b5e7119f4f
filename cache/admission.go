package cache

import "sync"

// Admission is the admission control in front of this cache (SCC design
// §5.2): it lets requests in only while the cache can hold all of them at
// once. It is owned by package resource (resource.Admitter), which cache
// may not import (DESIGN: engine → resource and cache; cache →
// lockfree/pool/vfd). The cache only carries it, so that every file
// sharing the cache shares one without any registry keyed by caches, and
// tells it when the active limit changes.
type Admission interface {
	// SetCapacity sets the bytes admitted requests may hold at once and
	// wakes the waiters that fit now. The cache calls it with its active
	// limit.
	SetCapacity(bytes int64)
}

// admission holds the cache's Admission, created on first use. The mutex
// is taken once per file opened and once per limit change, never on the
// data path (the engine keeps the Admission it got).
type admission struct {
	mu sync.Mutex
	a  Admission // guarded by mu; nil until the first Cache.Admission call
}

// Admission returns the cache's admission control, calling create with
// the active limit to make it on the first call; every later call (from
// any file of the cache) returns that same value, whatever create it
// passes. create must return a non-nil Admission. The engine installs a
// resource.Admitter here when it opens the first file on the cache, and
// refuses a cache that carries anything else.
//
// SetConfig and adaptive sizing (resize.go) change the active limit; every
// change calls limitChanged, so admission follows.
func (c *Cache) Admission(create func(activeLimit int64) Admission) Admission {
	return c.admission.get(&c.sizes, create)
}

// get returns the Admission, made by create with the active limit in
// force on the first call. The limit is read under mu, like
// limitChanged's, so a change published meanwhile reaches the new
// Admission either here or through limitChanged.
func (a *admission) get(s *sizer, create func(activeLimit int64) Admission) Admission {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.a == nil {
		a.a = create(s.limits.Load().active)
	}
	return a.a
}

// limitChanged tells the admission control, if any, the active limit in
// force in s.
func (a *admission) limitChanged(s *sizer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.a != nil {
		a.a.SetCapacity(s.limits.Load().active)
	}
}
