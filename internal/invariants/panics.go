package invariants

import (
	"strings"
	"testing"
)

// Panics runs f and fails t unless f panics with a Violation: the check
// every package's invariants test makes of its assertions (run with
// `-tags invariants`). Only tests call it.
func Panics(t testing.TB, what string, f func()) {
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
