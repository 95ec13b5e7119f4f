//go:build invariants

package cache

import (
	"strings"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

// TestInvariantAssertions: with the invariants tag, impossible transitions
// panic at the point they happen instead of corrupting the accounting.
func TestInvariantAssertions(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
	ent, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
	if !ok {
		t.Fatal("chunk not cached")
	}
	panics := func(what string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if err, _ := r.(error); err == nil || !strings.Contains(err.Error(), "invariant violated") {
				t.Errorf("%s: recovered %v, want an invariant panic", what, r)
			}
		}()
		f()
	}
	panics("unpin below zero", func() { ent.unpin() })
	ent.word.Store(packWord(stateResident, 0)) // undo the borrow
	panics("settle from resident", func() { ent.settle(stateResident, false) })
	panics("remove of a resident entry", func() { e.c.remove([]*entry{ent}) })
	panics("negative chunk bytes", func() { e.c.budget.charge(-e.c.budget.chunks.Load() - 1) })
	e.c.budget.chunks.Store(16) // back to the one chunk
	panics("negative resident", func() { e.c.budget.chargeMetadata(-e.c.budget.resident.Load() - 1) })
	e.c.budget.resident.Store(16)
	e.c.budget.metadata.Store(0)
}
