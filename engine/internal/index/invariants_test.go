//go:build invariants

package index

import (
	"context"
	"github.com/scc-dev/scc/internal/invariants"
	"testing"
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
