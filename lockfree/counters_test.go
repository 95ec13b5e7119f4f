package lockfree

import (
	"runtime"
	"sync"
	"testing"
)

// TestCountersConcurrent: concurrent Adds over several counters sharing
// stripes, from more goroutines than Ps (so goroutines share and change
// Ps), sum exactly; counters do not bleed into each other.
func TestCountersConcurrent(t *testing.T) {
	c := NewCounters(3)
	one := NewCounter()
	var wg sync.WaitGroup
	const g, n = 16, 2000
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				c.Add(0, 1)
				st := c.Stripe()
				st.Add(1, 2)
				st.Add(2, -1)
				one.Inc()
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	if a, b, d := c.Load(0), c.Load(1), c.Load(2); a != g*n || b != 2*g*n || d != -g*n {
		t.Fatalf("counters %d %d %d, want %d %d %d", a, b, d, g*n, 2*g*n, -g*n)
	}
	if one.Load() != g*n {
		t.Fatalf("counter %d", one.Load())
	}
}

// TestCountersStripeLayout: each stripe of a Counters is whole cache
// lines, so stripes of different Ps never share one, and there is one
// stripe per P.
func TestCountersStripeLayout(t *testing.T) {
	for _, k := range []int{1, 3, 8, 9} {
		c := NewCounters(k)
		if c.stride*8%cacheLine != 0 || c.stride < k {
			t.Fatalf("k=%d: stride %d words", k, c.stride)
		}
		if n := len(c.w) / c.stride; n < runtime.GOMAXPROCS(0) || n&(n-1) != 0 {
			t.Fatalf("k=%d: %d stripes for GOMAXPROCS %d", k, n, runtime.GOMAXPROCS(0))
		}
	}
	if p := ProcHint(); p < 0 || p >= runtime.GOMAXPROCS(0) {
		t.Fatalf("ProcHint %d", p)
	}
}

// TestCountersAddAt: AddAt with any P index (also one past GOMAXPROCS, as
// after GOMAXPROCS shrank) adds to a stripe, returns that stripe's value,
// and Load sums it.
func TestCountersAddAt(t *testing.T) {
	c := NewCounters(2)
	for _, p := range []int{0, 1, 7, 1000, 1 << 20} {
		before := c.w[(p&c.mask)*c.stride+1].Load()
		if got := c.AddAt(p, 1, 5); got != before+5 {
			t.Fatalf("p=%d: AddAt returned %d, want %d", p, got, before+5)
		}
	}
	if c.Load(1) != 25 || c.Load(0) != 0 {
		t.Fatalf("loads %d %d", c.Load(0), c.Load(1))
	}
}
