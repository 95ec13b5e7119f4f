//go:build invariants

package alloc

import (
	"github.com/scc-dev/scc/internal/invariants"
	"testing"
)

// TestInvariantAssertions: with the invariants tag, states no sequence of
// calls can reach panic where they would otherwise hand out referenced
// space or skew the accounting. Each is provoked by breaking the internal
// state directly, on a fresh allocator.
func TestInvariantAssertions(t *testing.T) {
	fresh := func() *Allocator {
		a := New(100, 1000)
		if _, err := a.Alloc(100); err != nil { // [100, 200) fresh
			t.Fatal(err)
		}
		return a
	}
	invariants.Panics(t, "run overlapping an allocated run", func() {
		a := fresh()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.insertRun(150, run{size: 10, st: stFree})
	})
	invariants.Panics(t, "run overlapping the next run", func() {
		a := New(0, 1000)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.delRun(0)
		a.insertRun(500, run{size: 500, st: stFree})
		a.insertRun(400, run{size: 200, st: stHeld})
	})
	invariants.Panics(t, "run beyond the end of file", func() {
		a := fresh()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.delRun(200)
		a.insertRun(200, run{size: 900, st: stFree})
	})
	invariants.Panics(t, "free index naming an allocated extent", func() {
		a := fresh()
		a.mu.Lock()
		a.mu.free.insertNew(sizeKey{100, 100}, struct{}{})
		a.mu.free.delete(sizeKey{800, 200})
		a.mu.Unlock()
		_, _ = a.Alloc(50)
	})
	invariants.Panics(t, "fresh total below zero", func() {
		a := fresh()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.mu.bytes[stFresh] = 10
		a.delRun(100)
	})

	// The same calls on a consistent allocator do not panic.
	a := fresh()
	a.Free(100, 100)
	if _, err := a.Alloc(50); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
}
