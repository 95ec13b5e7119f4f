package lockfree

import (
	"sync"
	"testing"
)

// TestAddStripe: AddStripe returns its own stripe's running value (so a
// goroutine sees every value of its stripe once) and adds like Add.
func TestAddStripe(t *testing.T) {
	c := NewCounters(2)
	var wg sync.WaitGroup
	const per = 10000
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if v := c.AddStripe(1, 1); v < 1 || v > 8*per {
					t.Errorf("stripe value %d", v)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := c.Load(1); got != 8*per {
		t.Fatalf("sum %d, want %d", got, 8*per)
	}
	if c.Load(0) != 0 {
		t.Fatal("AddStripe touched another counter")
	}
	// One goroutine alone on a fresh counter sees 1, 2, 3... as long as
	// it stays on its P; at least the first value is 1.
	d := NewCounters(1)
	if v := d.AddStripe(0, 1); v != 1 {
		t.Fatalf("first AddStripe %d", v)
	}
}
