//go:build invariants

package serialize

import (
	"context"
	"strings"
	"testing"
)

func panics(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if err, _ := r.(error); err == nil || !strings.Contains(err.Error(), "invariant violated") {
			t.Errorf("%s: recovered %v, want an invariant panic", what, r)
		}
	}()
	f()
}

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
	panics(t, "release of a request not held", func() {
		s := New()
		h := hold(s, wr(box2(ds, 0, 1, 0, 1)))
		s.shards[shardOf(ds)].lists[ds].entries = nil
		h.Release()
	})
	panics(t, "writers below zero", func() {
		s := New()
		h := hold(s, wr(box2(ds, 0, 1, 0, 1)))
		s.shards[shardOf(ds)].writers.Store(0)
		h.Release()
	})
	panics(t, "blockers below zero", func() {
		s := New()
		h := hold(s, wr(box2(ds, 0, 1, 0, 1)))
		e := h.req.entries[0]
		e.dependents = append(e.dependents, &request{ready: make(chan struct{})})
		h.Release()
	})
	panics(t, "fast readers below zero", func() {
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
