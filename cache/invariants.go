package cache

import inv "github.com/scc-dev/scc/internal/invariants"

// invariants turns on the assertions on impossible state transitions
// (`-tags invariants`, internal/invariants). Every assertion is written as
// `if invariants && ...`, so a normal build drops it, condition and all.
const invariants = inv.Enabled

// broken reports a state the cache's design rules out. It panics rather
// than returning an error: the cache can no longer vouch for its own
// accounting, and the stack is what finds the bug. Only called behind
// `if invariants`.
func broken(format string, args ...any) {
	panic(inv.Violation(format, args...))
}
