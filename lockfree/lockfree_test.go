package lockfree

import (
	"fmt"
	"math/rand/v2"
	"os"
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

func TestBuffer(t *testing.T) {
	b := NewBuffer[int](4)
	var got []int
	for i := 0; i < 3; i++ {
		full, kept := b.Add(i)
		if !kept {
			t.Fatal("uncontended add dropped")
		}
		if full != nil {
			got = append(got, full...)
		}
	}
	b.Drain(func(batch []int) { got = append(got, batch...) })
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	drained := 0
	b.Drain(func(batch []int) { drained += len(batch) })
	if drained != 0 {
		t.Fatal("drain did not empty")
	}
	// Concurrent adds: everything is either returned full, drained, or
	// counted as dropped.
	var wg sync.WaitGroup
	var returned atomic.Int64
	const per = 5000
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if full, _ := b.Add(i); full != nil {
					returned.Add(int64(len(full)))
				}
			}
		}()
	}
	wg.Wait()
	var rest int64
	b.Drain(func(batch []int) { rest += int64(len(batch)) })
	if total := returned.Load() + rest + b.Drops(); total != 8*per {
		t.Fatalf("accounted %d of %d", total, 8*per)
	}
}

// TestBufferAddFlush: every event is flushed in a full batch, drained, or
// counted as dropped, under concurrency; a flush sees exactly size events;
// and in steady state AddFlush allocates nothing.
func TestBufferAddFlush(t *testing.T) {
	const size = 4
	b := NewBuffer[int](size)
	var flushed atomic.Int64
	flush := func(batch []int) {
		if len(batch) != size {
			t.Errorf("flushed %d events, want %d", len(batch), size)
		}
		flushed.Add(int64(len(batch)))
	}
	var wg sync.WaitGroup
	const per = 5000
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				b.AddFlush(i, flush)
			}
		}()
	}
	wg.Wait()
	var rest int64
	b.Drain(func(batch []int) { rest += int64(len(batch)) })
	if total := flushed.Load() + rest + b.Drops(); total != 8*per {
		t.Fatalf("accounted %d of %d", total, 8*per)
	}
	if n := testing.AllocsPerRun(1000, func() { b.AddFlush(1, flush) }); n != 0 {
		t.Fatalf("AddFlush: %v allocations per call", n)
	}
}
