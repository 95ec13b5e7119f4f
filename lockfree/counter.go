package lockfree

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
)

const cacheLine = 64

type stripe struct {
	n atomic.Int64
	_ [cacheLine - 8]byte // keeps stripes on separate cache lines
}

// pickStripe chooses a stripe at random. math/rand/v2's top-level functions
// use the runtime's per-thread generator (no shared state, a few ns), so
// concurrent adders spread over the stripes without any coordination. A
// sync.Pool-held "home stripe" token was measured slower on the hit path.
func pickStripe(mask uint32) uint32 { return rand.Uint32() & mask }

// Counter is a striped int64 counter: Add touches one of several cache
// lines, Load sums them. Use it for counters bumped on every cache hit; a
// single atomic would make every core fight for one cache line.
//
// The zero Counter is not usable; call NewCounter.
type Counter struct {
	stripes []stripe
	mask    uint32
}

// NewCounter returns a counter with four stripes per P (at least 8, a power
// of two): stripes are picked at random, so they must outnumber the
// goroutines adding at once for collisions to stay rare.
func NewCounter() *Counter {
	n := 8
	for n < 4*runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	return &Counter{stripes: make([]stripe, n), mask: uint32(n - 1)}
}

// Add adds d.
func (c *Counter) Add(d int64) {
	c.stripes[pickStripe(c.mask)].n.Add(d)
}

// Inc adds one.
func (c *Counter) Inc() { c.Add(1) }

// Load returns the sum of all stripes. It is not a snapshot: concurrent Adds
// may or may not be included.
func (c *Counter) Load() int64 {
	var s int64
	for i := range c.stripes {
		s += c.stripes[i].n.Load()
	}
	return s
}
