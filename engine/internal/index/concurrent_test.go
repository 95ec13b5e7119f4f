package index

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestConcurrent runs many goroutines against one index: each owns the
// coordinates whose first component is ≡ its number (mod G) and checks
// every result against its own model, while others flush (serialized with
// the store's commit, as the container does), range and reopen.
func TestConcurrent(t *testing.T) {
	const G = 16
	ops := 600
	if os.Getenv("SCC_STRESS") == "long" {
		ops = 20000
	}
	cases := []modelCase{
		{"ea", KindExtensibleArray, smallEA, []uint64{Unlimited, 3}, []uint64{G * 8, 3}},
		{"fa", KindFixedArray, smallEA, []uint64{G * 4, 5}, []uint64{G * 4, 5}},
		{"general", KindGeneral, smallEA, []uint64{Unlimited, Unlimited}, []uint64{G * 4, 8}},
	}
	for _, mc := range cases {
		t.Run(mc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newMemStore(t)
			g := Geometry{Grid: mc.bound, MaxGrid: mc.max}
			x, err := NewConfig(mc.kind, g, s, mc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Start from a flushed, reopened index so that the first
			// touches load blocks concurrently.
			for i := uint64(0); i < mc.bound[0]; i++ {
				if _, err := x.Put(ctx, []uint64{i, 1}, Entry{Addr: i + 1, Size: 1}); err != nil {
					t.Fatal(err)
				}
			}
			root, err := x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.commit()
			if x, err = Open(ctx, mc.kind, g, root, s); err != nil {
				t.Fatal(err)
			}
			var commitMu sync.Mutex // the container's commit lock
			var wg sync.WaitGroup
			models := make([]refModel, G)
			for w := 0; w < G; w++ {
				models[w] = refModel{}
				for i := uint64(w); i < mc.bound[0]; i += G {
					c := []uint64{i, 1}
					models[w][key(c)] = refItem{c, Entry{Addr: i + 1, Size: 1}}
				}
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 7))
					ref := models[w]
					coord := func() []uint64 {
						c := randCoord(r, mc.bound)
						c[0] = c[0]/G*G + uint64(w)
						return c
					}
					for n := 0; n < ops; n++ {
						switch op := r.IntN(100); {
						case op < 40:
							c, e := coord(), randEntry(r)
							old, err := x.Put(ctx, c, e)
							if err != nil || old != ref[key(c)].e {
								t.Errorf("Put(%v) = %+v, %v; model %+v", c, old, err, ref[key(c)].e)
								return
							}
							ref[key(c)] = refItem{c, e}
						case op < 55:
							c := coord()
							old, err := x.Delete(ctx, c)
							if err != nil || old != ref[key(c)].e {
								t.Errorf("Delete(%v) = %+v, %v; model %+v", c, old, err, ref[key(c)].e)
								return
							}
							delete(ref, key(c))
						case op < 93:
							c := coord()
							e, err := x.Get(ctx, c)
							if err != nil || e != ref[key(c)].e {
								t.Errorf("Get(%v) = %+v, %v; model %+v", c, e, err, ref[key(c)].e)
								return
							}
						case op < 95:
							// Memory pressure: clean leaves go, and
							// the next touch reads them again.
							x.DropClean()
						case op < 98:
							commitMu.Lock()
							_, err := x.Flush(ctx)
							if err == nil {
								s.commit()
							}
							commitMu.Unlock()
							if err != nil {
								t.Error(err)
								return
							}
						default:
							err := x.Range(ctx, func(c []uint64, e Entry) bool {
								if !e.Exists() || !insideGrid(c, mc.bound) {
									t.Errorf("Range gave %v=%+v", c, e)
								}
								return true
							})
							if err != nil {
								t.Error(err)
								return
							}
						}
					}
				}(w)
			}
			wg.Wait()
			all := refModel{}
			for _, m := range models {
				for k, v := range m {
					all[k] = v
				}
			}
			checkAll(t, ctx, x, all)
			root, err = x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.commit()
			checkExtents(t, ctx, x, s)

			// Cold concurrent lookups of everything: loads coalesce and
			// every goroutine sees the same entries.
			y, err := Open(ctx, mc.kind, g, root, s)
			if err != nil {
				t.Fatal(err)
			}
			items := make([]refItem, 0, len(all))
			for _, it := range all {
				items = append(items, it)
			}
			slices.SortFunc(items, func(a, b refItem) int { return cmpKey(a.c, b.c) })
			for w := 0; w < G; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := range items {
						it := items[(i+w*len(items)/G)%len(items)]
						if e, err := y.Get(ctx, it.c); err != nil || e != it.e {
							t.Errorf("cold Get(%v) = %+v, %v; want %+v", it.c, e, err, it.e)
							return
						}
					}
				}(w)
			}
			wg.Wait()
		})
	}
}

// TestConcurrentGrow resizes (grows) an extensible array while others append
// and read; every appended entry must survive.
func TestConcurrentGrow(t *testing.T) {
	ctx := context.Background()
	s := newMemStore(t)
	max := []uint64{Unlimited, 2}
	x, err := NewConfig(KindExtensibleArray, Geometry{Grid: []uint64{0, 2}, MaxGrid: max}, s, smallEA)
	if err != nil {
		t.Fatal(err)
	}
	const slabs = 400
	var mu sync.Mutex
	n := uint64(0) // slabs in the grid
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				mu.Lock()
				if n == slabs {
					mu.Unlock()
					return
				}
				n++
				i := n - 1
				if err := x.Resize(ctx, Geometry{Grid: []uint64{n, 2}, MaxGrid: max}, nil); err != nil {
					t.Error(err)
				}
				mu.Unlock()
				for j := uint64(0); j < 2; j++ {
					if _, err := x.Put(ctx, []uint64{i, j}, Entry{Addr: i*2 + j, Size: 9}); err != nil {
						t.Error(err)
						return
					}
				}
				if e, err := x.Get(ctx, []uint64{i / 2, 0}); err != nil || (e.Exists() && e.Addr != i/2*2) {
					t.Errorf("Get: %+v %v", e, err)
				}
			}
		}(w)
	}
	wg.Wait()
	if x.Len() != 2*slabs {
		t.Fatalf("Len %d", x.Len())
	}
	for i := uint64(0); i < slabs; i++ {
		if e, _ := x.Get(ctx, []uint64{i, 1}); e.Addr != i*2+1 {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
}

// gateStore holds every ReadAt until released and counts reads by offset.
type gateStore struct {
	*memStore
	gate  chan struct{}
	mu    sync.Mutex
	count map[int64]int
}

func (g *gateStore) ReadAt(ctx context.Context, p []byte, off int64) error {
	<-g.gate
	g.mu.Lock()
	g.count[off]++
	g.mu.Unlock()
	return g.memStore.ReadAt(ctx, p, off)
}

// TestLoadCoalesced: many goroutines touching the same cold block cause
// one read; the others wait for it.
func TestLoadCoalesced(t *testing.T) {
	ctx := context.Background()
	s := newMemStore(t)
	g := Geometry{Grid: []uint64{5000}, MaxGrid: []uint64{Unlimited}}
	x, _ := New(KindExtensibleArray, g, s)
	for i := uint64(0); i < 5000; i++ {
		x.Put(ctx, []uint64{i}, Entry{Addr: i + 1, Size: 1})
	}
	root, err := x.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.commit()
	y, err := Open(ctx, KindExtensibleArray, g, root, s)
	if err != nil {
		t.Fatal(err)
	}
	gs := &gateStore{memStore: s, gate: make(chan struct{}), count: map[int64]int{}}
	ea := y.(*eaIndex)
	ea.ld.store = gs
	const G = 8
	var wg sync.WaitGroup
	for w := 0; w < G; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e, err := y.Get(ctx, []uint64{4000}); err != nil || e.Addr != 4001 {
				t.Errorf("Get = %+v, %v", e, err)
			}
		}()
	}
	// Wait until one leader reads the super block and G-1 goroutines wait
	// for it.
	var first ptr
	deadline := time.Now().Add(10 * time.Second) // a hang guard, not a speed check
	for {
		if time.Now().After(deadline) {
			close(gs.gate)
			t.Fatal("the goroutines never shared one read")
		}
		ea.ld.flight.Lock()
		waiting := 0
		for p, c := range ea.ld.flight.calls {
			waiting, first = c.waiters, p
		}
		ea.ld.flight.Unlock()
		if waiting == G-1 {
			break
		}
		runtime.Gosched()
	}
	close(gs.gate)
	wg.Wait()
	if n := gs.count[int64(first.addr)]; n != 1 {
		t.Fatalf("%d goroutines read the super block %d times, want once", G, n)
	}
	if len(gs.count) != 2 {
		t.Fatalf("reads by offset: %v, want the super block and one data block", gs.count)
	}
}
