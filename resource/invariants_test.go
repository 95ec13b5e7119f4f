//go:build invariants

package resource

import (
	"context"
	"github.com/scc-dev/scc/internal/invariants"
	"testing"
)

// TestInvariantAssertions: with the invariants tag, admitted bytes going
// below zero (a release larger than its charge) or growing past the
// capacity (an admission that does not fit), and a waiter count below
// zero, panic where they happen.
func TestInvariantAssertions(t *testing.T) {
	ctx := context.Background()
	admitter := func() *Admitter {
		a, err := New(Options{Capacity: 100})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Admit(ctx, 60); err != nil {
			t.Fatal(err)
		}
		return a
	}
	invariants.Panics(t, "admitted bytes below zero", func() {
		admitter().releaser(61)()
	})
	invariants.Panics(t, "admitted bytes above capacity", func() {
		a := admitter()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.setInUseLocked(a.mu.inUse + 60)
	})
	invariants.Panics(t, "waiters below zero", func() {
		a := admitter()
		a.mu.Lock()
		defer a.mu.Unlock()
		w := &waiter{bytes: 1, ready: make(chan struct{})}
		a.pushLocked(w)
		a.waiting.Store(0)
		a.removeLocked(w)
	})

	// A capacity lowered under what is in is legal, and releases leave it.
	a := admitter()
	a.SetCapacity(10)
	release, err := a.Admit(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	release()
	a.releaser(60)()
	if a.InUse() != 0 {
		t.Fatalf("in use %d after every release", a.InUse())
	}
}
