package lockfree

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestMap(t *testing.T) {
	m := NewMap[string, int](0)
	if _, ok := m.Load("a"); ok {
		t.Fatal("empty map has a")
	}
	m.Store("a", 1)
	if v, loaded := m.LoadOrStore("a", 2); !loaded || v != 1 {
		t.Fatal("LoadOrStore replaced")
	}
	if m.CompareAndDelete("a", func(v int) bool { return v == 2 }) {
		t.Fatal("deleted a non-matching value")
	}
	if m.CompareAndDelete("missing", func(int) bool { return true }) || m.Len() != 1 {
		t.Fatal("CompareAndDelete of a missing key")
	}
	if !m.CompareAndDelete("a", func(v int) bool { return v == 1 }) || m.Len() != 0 {
		t.Fatal("CompareAndDelete failed")
	}
	for i := 0; i < 10; i++ {
		m.Store(fmt.Sprint(i), i)
	}
	n := 0
	m.Range(func(string, int) bool { n++; return true })
	m.Delete("3")
	if n != 10 || m.Len() != 9 {
		t.Fatal("Range/Delete")
	}
}

// TestMapChurn: concurrent insert/delete churn keeps every live key findable
// (the pattern the chunk table sees).
func TestMapChurn(t *testing.T) {
	m := NewMap[uint64, uint64](0)
	var wg sync.WaitGroup
	for g := uint64(0); g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); i < 20000; i++ {
				k := g<<32 | i%64
				m.Store(k, i)
				if v, ok := m.Load(k); !ok || v != i {
					t.Errorf("lost key %x", k)
					return
				}
				m.Delete(k)
			}
		}()
	}
	wg.Wait()
	if m.Len() != 0 {
		t.Fatalf("len %d", m.Len())
	}
}

// TestRegistryStress proves the usage we make of haxmap (see package doc):
// many goroutines register long-lived keys and look them up constantly,
// with rare removals; every key present must always be found.
func TestRegistryStress(t *testing.T) {
	r := NewRegistry[uint64, *int]()
	rounds := 2000
	if os.Getenv("SCC_STRESS") == "long" {
		rounds = 50000
	}
	const goroutines = 8
	var wg sync.WaitGroup
	var lost atomic.Int64
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var mine []uint64
			for i := 0; i < rounds; i++ {
				k := uint64(g)<<40 | uint64(i)
				v := i
				if _, loaded := r.GetOrSet(k, &v); loaded {
					t.Errorf("fresh key %x already set", k)
					return
				}
				mine = append(mine, k)
				// Look up a random live key of ours and one of anyone's.
				probe := mine[rng.IntN(len(mine))]
				if _, ok := r.Get(probe); !ok {
					lost.Add(1)
				}
				// Rare removal (1 in 50), like a file unregistering datasets.
				if rng.IntN(50) == 0 {
					j := rng.IntN(len(mine))
					r.Del(mine[j])
					if _, ok := r.Get(mine[j]); ok {
						t.Errorf("deleted key %x still present", mine[j])
						return
					}
					mine[j] = mine[len(mine)-1]
					mine = mine[:len(mine)-1]
				}
			}
			for _, k := range mine {
				if _, ok := r.Get(k); !ok {
					lost.Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	if n := lost.Load(); n != 0 {
		t.Fatalf("%d lookups of live keys failed", n)
	}
	n := 0
	r.ForEach(func(uint64, *int) bool { n++; return true })
	if n != r.Len() {
		t.Fatalf("ForEach saw %d, Len %d", n, r.Len())
	}
}

func TestCounter(t *testing.T) {
	c := NewCounter()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10000; i++ {
				c.Inc()
			}
			c.Add(-5)
		}()
	}
	wg.Wait()
	if got := c.Load(); got != 8*10000-40 {
		t.Fatalf("got %d", got)
	}
}

// TestBufferRecord: one stripe (a single goroutine pinned by
// GOMAXPROCS(1)) reports ready exactly once, at the event that brings it to
// half its capacity; events past the capacity are dropped and counted;
// Drain hands every kept event over once, in order, and empties the stripe.
func TestBufferRecord(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b := NewBuffer[int](8)
	var ready []int
	for i := 0; i < 10; i++ {
		kept, r := b.Record(i)
		if kept != (i < 8) {
			t.Fatalf("event %d: kept %v", i, kept)
		}
		if r {
			ready = append(ready, i)
		}
	}
	if len(ready) != 1 || ready[0] != 3 {
		t.Fatalf("ready at %v, want [3] (the 4th of 8)", ready)
	}
	if d := b.Drops(); d != 2 {
		t.Fatalf("drops %d, want 2", d)
	}
	var got []int
	b.Drain(func(batch []int) { got = append(got, batch...) })
	if fmt.Sprint(got) != "[0 1 2 3 4 5 6 7]" {
		t.Fatalf("drained %v", got)
	}
	drained := 0
	b.Drain(func(batch []int) { drained += len(batch) })
	if drained != 0 {
		t.Fatal("drain did not empty")
	}
	// After a drain the stripe (now the spare array) reports ready again.
	ready = ready[:0]
	for i := 0; i < 4; i++ {
		if _, r := b.Record(i); r {
			ready = append(ready, i)
		}
	}
	if len(ready) != 1 || ready[0] != 3 {
		t.Fatalf("after drain: ready at %v, want [3]", ready)
	}
}

// TestBufferRecordDuringDrain: Record goes on while a Drain's callback runs
// (the stripe's lock is held only for the swap), into the spare array, and
// those events reach the next Drain.
func TestBufferRecordDuringDrain(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b := NewBuffer[int](8)
	for i := 0; i < 3; i++ {
		b.Record(i)
	}
	var first, second []int
	b.Drain(func(batch []int) {
		first = append(first, batch...)
		for i := 10; i < 13; i++ {
			if kept, _ := b.Record(i); !kept {
				t.Errorf("record %d during drain dropped", i)
			}
		}
	})
	b.Drain(func(batch []int) { second = append(second, batch...) })
	if fmt.Sprint(first) != "[0 1 2]" || fmt.Sprint(second) != "[10 11 12]" {
		t.Fatalf("drains %v then %v", first, second)
	}
}

// TestBufferConcurrent: under concurrent Records and Drains every event is
// drained exactly once or counted as dropped; after warm-up Record and
// Drain allocate nothing.
func TestBufferConcurrent(t *testing.T) {
	const size = 16
	b := NewBuffer[int](size)
	var drained atomic.Int64
	drain := func(batch []int) {
		if len(batch) > size {
			t.Errorf("batch of %d events, capacity %d", len(batch), size)
		}
		drained.Add(int64(len(batch)))
	}
	var wg sync.WaitGroup
	var kept atomic.Int64
	const per = 5000
	stop := make(chan struct{})
	var dwg sync.WaitGroup
	dwg.Add(1)
	go func() {
		defer dwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				b.Drain(drain)
			}
		}
	}()
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if k, _ := b.Record(i); k {
					kept.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	dwg.Wait()
	b.Drain(drain)
	if got := drained.Load(); got != kept.Load() || got+b.Drops() != 8*per {
		t.Fatalf("drained %d, kept %d, dropped %d of %d", got, kept.Load(), b.Drops(), 8*per)
	}
	if n := testing.AllocsPerRun(1000, func() {
		b.Record(1)
		b.Drain(drain)
	}); n != 0 {
		t.Fatalf("Record+Drain: %v allocations", n)
	}
}
