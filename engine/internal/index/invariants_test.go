//go:build invariants

package index

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/scc-dev/scc/internal/invariants"
)

// TestInvariantAssertions: with the invariants tag, an entry count that
// would wrap or pass the index's slots, and a leaf split that leaves a leaf
// over its maximum, panic where they happen instead of being written into a
// top block every later open rejects.
func TestInvariantAssertions(t *testing.T) {
	ctx := context.Background()
	ent := Entry{Addr: 4096, Size: 100}
	mk := func(kind Kind, g Geometry) Index {
		x, err := New(kind, g, newMemStore(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x.Put(ctx, []uint64{0, 0}[:len(g.Grid)], ent); err != nil {
			t.Fatal(err)
		}
		return x
	}
	ea := func() *eaIndex {
		return mk(KindExtensibleArray, Geometry{Grid: []uint64{4}, MaxGrid: []uint64{Unlimited}}).(*eaIndex)
	}
	fa := func() *faIndex {
		return mk(KindFixedArray, Geometry{Grid: []uint64{4}, MaxGrid: []uint64{4}}).(*faIndex)
	}
	gen := func() *genIndex {
		return mk(KindGeneral, Geometry{Grid: []uint64{8, 4}, MaxGrid: []uint64{Unlimited, Unlimited}}).(*genIndex)
	}
	invariants.Panics(t, "extensible array: delete with count 0", func() {
		x := ea()
		x.mu.count = 0
		_, _ = x.Delete(ctx, []uint64{0})
	})
	invariants.Panics(t, "extensible array: count past its extent", func() {
		x := ea()
		x.mu.count = 4
		_, _ = x.Put(ctx, []uint64{1}, ent)
	})
	invariants.Panics(t, "fixed array: delete with count 0", func() {
		x := fa()
		x.mu.count = 0
		_, _ = x.Delete(ctx, []uint64{0})
	})
	invariants.Panics(t, "fixed array: count past its slots", func() {
		x := fa()
		x.mu.count = 4
		_, _ = x.Put(ctx, []uint64{2}, ent)
	})
	invariants.Panics(t, "general: delete with count 0", func() {
		x := gen()
		x.mu.count = 0
		_, _ = x.Delete(ctx, []uint64{0, 0})
	})
	invariants.Panics(t, "general: split leaves a leaf over its maximum", func() {
		x := gen()
		for i := uint64(1); i < 5; i++ {
			if _, err := x.Put(ctx, []uint64{i, 0}, ent); err != nil {
				t.Fatal(err)
			}
		}
		x.leafMax = 1 // a leaf of 5 already holds more than two leaves of 1
		_, _ = x.Put(ctx, []uint64{2, 1}, ent)
	})

	// The same calls on consistent indexes do not panic.
	for _, x := range []Index{ea(), fa()} {
		if _, err := x.Put(ctx, []uint64{1}, ent); err != nil {
			t.Fatal(err)
		}
		if _, err := x.Delete(ctx, []uint64{0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gen().Delete(ctx, []uint64{0, 0}); err != nil {
		t.Fatal(err)
	}
}

// lossyResizer reports one removed entry fewer than its kind removed, as a
// kind whose resize hook loses track of what it cut would.
type lossyResizer struct{ resizer }

func (r lossyResizer) resizeLocked(g Geometry) []coordEntry { return r.resizer.resizeLocked(g)[1:] }

// hooks is everything an index kind gives the drivers.
type hooks interface {
	resizer
	flusher
}

// driverOf returns the loader and the hooks of an index.
func driverOf(x Index) (*loader, hooks) {
	switch x := x.(type) {
	case *eaIndex:
		return &x.ld, x
	case *faIndex:
		return &x.ld, x
	case *genIndex:
		return &x.ld, x
	}
	panic("unknown index type")
}

// TestResizeDriverAssertions: with the invariants tag, the Resize driver
// panics when a kind's hooks disagree with its state: a resize that
// reports fewer entries removed than its count lost (whose caller would
// leak their chunks), or a removal from a block the load step did not
// bring in. The same resize through the kinds' own hooks does not panic.
func TestResizeDriverAssertions(t *testing.T) {
	ctx := context.Background()
	for name, bl := range map[string]*built{"ea": buildEA(t), "fa": buildFA(t), "general": buildGeneral(t)} {
		open := func() Index {
			x, err := Open(ctx, bl.kind, bl.g, bl.root, bl.s)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		half := slices.Clone(bl.g.Grid)
		half[0] /= 2
		g := Geometry{Grid: half, MaxGrid: bl.g.MaxGrid}
		invariants.Panics(t, name+": resize reporting one removal fewer", func() {
			ld, k := driverOf(open())
			_ = ld.resize(ctx, lossyResizer{k}, g, nil)
		})
		x := open()
		before, n := x.Len(), 0
		ld, k := driverOf(x)
		if err := ld.resize(ctx, k, g, func([]uint64, Entry) { n++ }); err != nil {
			t.Fatal(err)
		}
		if n == 0 || x.Len() != before-n {
			t.Fatalf("%s: resize removed %d entries, Len %d → %d", name, n, before, x.Len())
		}
	}
	invariants.Panics(t, "removal from a block not in memory", func() {
		gm, err := newGeom(Geometry{Grid: []uint64{4}, MaxGrid: []uint64{4}}, false)
		if err != nil {
			t.Fatal(err)
		}
		unloaded := func(uint64, Entry) (Entry, *loadReq) { return Entry{}, &loadReq{} }
		removeLinear(gm, []linEntry{{i: 1, e: Entry{Size: 1}}}, unloaded)
	})
}

// forgetfulFlusher skips its kind's end step, leaving the next pointers
// its prepare step set.
type forgetfulFlusher struct{ flusher }

func (forgetfulFlusher) flushEndLocked(bool) {}

// TestFlushDriverAssertions: with the invariants tag, the Flush driver
// panics when a kind's end step leaves a next pointer set, whether the
// Flush committed or failed: dropClean keeps any unit whose next is set,
// so such a block would stay in memory for good.
func TestFlushDriverAssertions(t *testing.T) {
	ctx := context.Background()
	builds := map[string]func(testing.TB) *built{"ea": buildEA, "fa": buildFA, "general": buildGeneral}
	for name, build := range builds {
		for _, forget := range []bool{true, false} {
			for _, fail := range []bool{false, true} {
				bl := build(t)
				x, err := Open(ctx, bl.kind, bl.g, bl.root, bl.s)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := x.Put(ctx, make([]uint64, len(bl.g.Grid)), Entry{Addr: 1 << 40, Size: 3}); err != nil {
					t.Fatal(err)
				}
				if fail {
					bl.s.failAfter.Store(2) // after one block is prepared
				}
				ld, k := driverOf(x)
				if !forget {
					if _, err := ld.flush(ctx, k); (err != nil) != fail {
						t.Fatalf("%s: Flush failing %v: %v", name, fail, err)
					}
					continue
				}
				invariants.Panics(t, fmt.Sprintf("%s: flush (failing %v) leaving next pointers", name, fail), func() {
					_, _ = ld.flush(ctx, forgetfulFlusher{k})
				})
			}
		}
	}
}
