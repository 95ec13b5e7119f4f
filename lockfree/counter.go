package lockfree

import (
	"sync/atomic"
)

const cacheLine = 64

// Counter is a striped int64 counter: Add touches the cache line of the
// calling goroutine's P (see ProcHint), Load sums them. Use it for
// counters bumped on every cache hit; a single atomic would make every
// core fight for one cache line.
//
// The zero Counter is not usable; call NewCounter.
type Counter struct{ s Counters }

// NewCounter returns a counter with one stripe per P.
func NewCounter() *Counter { return &Counter{s: *NewCounters(1)} }

// Add adds d.
func (c *Counter) Add(d int64) { c.s.Add(0, d) }

// Inc adds one.
func (c *Counter) Inc() { c.s.Add(0, 1) }

// Load returns the sum of all stripes. It is not a snapshot: concurrent Adds
// may or may not be included.
func (c *Counter) Load() int64 { return c.s.Load(0) }

// Counters is a small fixed set of striped counters that share their
// stripes: the k counters of one stripe sit on the same cache line(s), so
// a request that bumps several of them (a cache hit: the active-request
// count twice, the hit count once) writes one line, owned by its P.
//
// The zero Counters is not usable; call NewCounters.
type Counters struct {
	w      []atomic.Int64 // stripe s holds counter i at w[s*stride+i]
	stride int            // words per stripe: k rounded up to whole cache lines
	mask   int
}

// NewCounters returns k counters (k ≥ 1), one stripe per P.
func NewCounters(k int) *Counters {
	k = max(k, 1)
	stride := (k*8 + cacheLine - 1) / cacheLine * cacheLine / 8
	n := procStripes()
	// One spare stripe's worth of words in front keeps stripe 0 off the
	// line of whatever the allocator placed before the slice.
	w := make([]atomic.Int64, (n+1)*stride)
	return &Counters{w: w[stride:], stride: stride, mask: n - 1}
}

// Add adds d to counter i.
func (c *Counters) Add(i int, d int64) {
	c.w[(ProcHint()&c.mask)*c.stride+i].Add(d)
}

// AddStripe adds d to counter i and returns the new value of the stripe
// it added to (not the sum): a caller can act on every n-th event of its
// stripe without writing any shared line.
func (c *Counters) AddStripe(i int, d int64) int64 {
	return c.w[(ProcHint()&c.mask)*c.stride+i].Add(d)
}

// AddAt is AddStripe on the stripe of p, a ProcHint the caller read once
// for several Counters (a cache hit bumps the cache's and the dataset's):
// one read of the P instead of one per counter.
func (c *Counters) AddAt(p, i int, d int64) int64 {
	return c.w[(p&c.mask)*c.stride+i].Add(d)
}

// Stripe returns the calling goroutine's stripe, for a caller that bumps
// several counters in a row; the stripe stays valid (any stripe is
// correct), it is only faster while the goroutine stays on its P.
func (c *Counters) Stripe() Stripe {
	return Stripe{w: c.w[(ProcHint()&c.mask)*c.stride:][:c.stride]}
}

// Load returns the sum of counter i over all stripes; concurrent Adds may
// or may not be included.
func (c *Counters) Load(i int) int64 {
	var s int64
	for j := i; j < len(c.w); j += c.stride {
		s += c.w[j].Load()
	}
	return s
}

// Stripe is one stripe of a Counters.
type Stripe struct{ w []atomic.Int64 }

// Add adds d to counter i of the stripe.
func (s Stripe) Add(i int, d int64) { s.w[i].Add(d) }
