package cache

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

func tableEntry(serial, c uint64) *entry {
	return &entry{key: makeKey(serial, layout.Coord{c})}
}

// TestEntryTableModel: single goroutine, against a map: inserts, repeated
// inserts, deletes (matching and not), through growth to thousands of
// entries and shrinking back, with Len, Range and every Load checked.
func TestEntryTableModel(t *testing.T) {
	tab := newEntryTable()
	model := map[Key]*entry{}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(phase string) {
		t.Helper()
		if tab.Len() != len(model) {
			t.Fatalf("%s: Len %d, model %d", phase, tab.Len(), len(model))
		}
		seen := map[*entry]bool{}
		tab.Range(func(e *entry) bool {
			if seen[e] {
				t.Fatalf("%s: Range visited %v twice", phase, e.key)
			}
			seen[e] = true
			if model[e.key.k] != e {
				t.Fatalf("%s: Range visited %v, not in the model", phase, e.key)
			}
			return true
		})
		if len(seen) != len(model) {
			t.Fatalf("%s: Range saw %d, model %d", phase, len(seen), len(model))
		}
		for k, e := range model {
			if got, ok := tab.Load(k); !ok || got != e {
				t.Fatalf("%s: Load(%v) = %p %v, want %p", phase, k, got, ok, e)
			}
		}
	}
	const keys = 5000
	for round := 0; round < 3; round++ {
		for i := 0; i < 20000; i++ {
			c := uint64(rng.IntN(keys))
			e := tableEntry(1, c)
			k := e.key.k
			if rng.IntN(3) > 0 {
				got, loaded := tab.LoadOrStore(e)
				if old, ok := model[k]; ok {
					if !loaded || got != old {
						t.Fatalf("LoadOrStore(%d) over %p: %p %v", c, old, got, loaded)
					}
				} else {
					if loaded || got != e {
						t.Fatalf("LoadOrStore(%d) into empty: %p %v", c, got, loaded)
					}
					model[k] = e
				}
				continue
			}
			old, ok := model[k]
			// A delete that does not match keeps the entry.
			if tab.CompareAndDelete(k, func(x *entry) bool { return false }) {
				t.Fatalf("CompareAndDelete(%d) deleted with same false", c)
			}
			if got := tab.CompareAndDelete(k, func(x *entry) bool { return x == old }); got != ok {
				t.Fatalf("CompareAndDelete(%d) = %v, present %v", c, got, ok)
			}
			delete(model, k)
			if _, found := tab.Load(k); found {
				t.Fatalf("Load(%d) after delete found it", c)
			}
		}
		check(fmt.Sprintf("round %d grown", round))
		grown := len(tab.cur.Load().buckets)
		for k, e := range model {
			if !tab.CompareAndDelete(k, func(x *entry) bool { return x == e }) {
				t.Fatalf("delete of %v failed", k)
			}
			delete(model, k)
		}
		check(fmt.Sprintf("round %d emptied", round))
		if n := len(tab.cur.Load().buckets); n != minBuckets || grown <= minBuckets {
			t.Fatalf("round %d: %d buckets after growing to %d and emptying, want %d", round, n, grown, minBuckets)
		}
	}
}

// TestEntryTableCollisions: keys forced into one chain (a one-bucket
// array that never resizes stands in for colliding hashes) spill into
// overflow buckets, reuse freed slots, and stay findable.
func TestEntryTableCollisions(t *testing.T) {
	tab := &entryTable{}
	a := newEntryArray(1)
	tab.cur.Store(a)
	es := make([]*entry, 4*bucketSlots+1)
	for i := range es {
		es[i] = tableEntry(3, uint64(i))
		// Insert directly: LoadOrStore would resize a one-bucket array.
		a.locks[0].Lock()
		a.insertUnpublished(es[i])
		a.locks[0].Unlock()
	}
	chain := 0
	for b := &a.buckets[0]; b != nil; b = b.next.Load() {
		chain++
	}
	if chain != 5 {
		t.Fatalf("chain of %d buckets for %d entries", chain, len(es))
	}
	for _, e := range es {
		if got, ok := tab.Load(e.key.k); !ok || got != e {
			t.Fatalf("Load(%v) in a chain missed", e.key.k)
		}
	}
}

// TestEntryTableConcurrent: goroutines insert, delete and look up
// overlapping keys while the table grows and shrinks under them, and
// readers look up keys that one owner keeps present throughout: a key
// that is in the table the whole time is never missed, a found entry
// always carries the key asked for, and at the end the table holds
// exactly the entries the writers' own logs say. Run under -race.
func TestEntryTableConcurrent(t *testing.T) {
	tab := newEntryTable()
	const (
		writers = 6
		keys    = 3000 // per writer: enough to resize many times
		stable  = 64   // keys present from start to end
	)
	stableEs := make([]*entry, stable)
	for i := range stableEs {
		stableEs[i] = tableEntry(99, uint64(i))
		if _, loaded := tab.LoadOrStore(stableEs[i]); loaded {
			t.Fatal("stable key loaded")
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for !stop.Load() {
				e := stableEs[rng.IntN(stable)]
				if got, ok := tab.Load(e.key.k); !ok || got != e {
					errs <- fmt.Errorf("reader: stable key %v missed (%p %v)", e.key.k, got, ok)
					return
				}
				k := makeKey(uint64(1+rng.IntN(writers)), layout.Coord{uint64(rng.IntN(keys))}).k
				if got, ok := tab.Load(k); ok && got.key.k != k {
					errs <- fmt.Errorf("reader: Load(%v) returned the entry of %v", k, got.key.k)
					return
				}
			}
		}(r)
	}
	finals := make([]map[Key]*entry, writers)
	var ww sync.WaitGroup
	for w := 0; w < writers; w++ {
		ww.Add(1)
		go func(w int) {
			defer ww.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			mine := map[Key]*entry{}
			serial := uint64(1 + w)
			for i := 0; i < 40000; i++ {
				// Phases of mostly inserts and mostly deletes make the
				// table grow and shrink.
				insert := rng.IntN(10) < 7
				if (i/10000)%2 == 1 {
					insert = rng.IntN(10) < 2
				}
				e := tableEntry(serial, uint64(rng.IntN(keys)))
				k := e.key.k
				if insert {
					got, loaded := tab.LoadOrStore(e)
					old, ok := mine[k]
					if loaded != ok || ok && got != old || !ok && got != e {
						errs <- fmt.Errorf("writer %d: LoadOrStore(%v) = %p %v, own log %p %v", w, k, got, loaded, old, ok)
						return
					}
					mine[k] = got
					continue
				}
				old, ok := mine[k]
				if got := tab.CompareAndDelete(k, func(x *entry) bool { return x == old }); got != ok {
					errs <- fmt.Errorf("writer %d: CompareAndDelete(%v) = %v, own log %v", w, k, got, ok)
					return
				}
				delete(mine, k)
			}
			finals[w] = mine
		}(w)
	}
	ww.Wait()
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := stable
	for _, m := range finals {
		want += len(m)
		for k, e := range m {
			if got, ok := tab.Load(k); !ok || got != e {
				t.Fatalf("final: Load(%v) = %p %v, want %p", k, got, ok, e)
			}
		}
	}
	n := 0
	tab.Range(func(*entry) bool { n++; return true })
	if n != want || tab.Len() != want {
		t.Fatalf("final: Range %d, Len %d, want %d", n, tab.Len(), want)
	}
}

// TestMatchTag: matchTag flags exactly the slots holding the tag, never a
// free slot or one past bucketSlots.
func TestMatchTag(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 100000; i++ {
		var meta uint64
		for s := 0; s < bucketSlots; s++ {
			if rng.IntN(3) > 0 {
				meta |= tagOf(rng.Uint64()) << (8 * s)
			}
		}
		tag := tagOf(rng.Uint64())
		if rng.IntN(2) == 0 {
			s := 8 * rng.IntN(bucketSlots) // make sure some match
			meta = meta&^(0xff<<s) | tag<<s
		}
		m := matchTag(meta, tag)
		for s := 0; s < 8; s++ {
			flagged := m>>(8*s+7)&1 == 1
			holds := meta>>(8*s)&0xff == tag
			if holds && !flagged {
				t.Fatalf("meta %#x tag %#x: slot %d holds the tag, not flagged", meta, tag, s)
			}
			if flagged && (s >= bucketSlots || meta>>(8*s)&0xff == 0) {
				t.Fatalf("meta %#x tag %#x: slot %d flagged but free or past the bucket", meta, tag, s)
			}
		}
	}
}
