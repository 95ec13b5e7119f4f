//go:build invariants

package serialize

import (
	"context"
	"github.com/scc-dev/scc/internal/invariants"
	"testing"
)

// TestInvariantAssertions: with the invariants tag, a release that finds
// its request missing from the lists, and counters of writers, blockers and
// fast readers going below zero, panic where they happen; without the
// assertions each would let a later request run beside a conflicting one
// or wait forever. Each serializer is broken through its internals first.
func TestInvariantAssertions(t *testing.T) {
	ctx := context.Background()
	const ds = 3
	hold := func(s *Serializer, r Request) Hold {
		h, err := s.AcquireHold(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	invariants.Panics(t, "release of a request not held", func() {
		s := New()
		h := hold(s, wr(box2(ds, 0, 1, 0, 1)))
		s.shards[shardOf(ds)].lists[ds].entries = nil
		h.Release()
	})
	invariants.Panics(t, "writers below zero", func() {
		s := New()
		h := hold(s, wr(box2(ds, 0, 1, 0, 1)))
		s.shards[shardOf(ds)].writers.Store(0)
		h.Release()
	})
	invariants.Panics(t, "blockers below zero", func() {
		s := New()
		h := hold(s, wr(box2(ds, 0, 1, 0, 1)))
		e := h.req.entries[0]
		e.dependents = append(e.dependents, &request{ready: make(chan struct{})})
		h.Release()
	})
	invariants.Panics(t, "fast readers below zero", func() {
		s := New()
		h, ok := s.TryFastRead(rd(box2(ds, 0, 1, 0, 1)))
		if !ok {
			t.Fatal("no fast read on an idle serializer")
		}
		h.slot.Add(-1)
		h.Release()
	})

	// Held and released in order, nothing panics.
	s := New()
	hold(s, wr(box2(ds, 0, 1, 0, 1))).Release()
	if h, ok := s.TryFastRead(rd(box2(ds, 0, 1, 0, 1))); ok {
		h.Release()
	}
}
