package cache

import "fmt"

// broken reports a state the cache's design rules out. It panics rather
// than returning an error: the cache can no longer vouch for its own
// accounting, and the stack is what finds the bug. Only called behind
// `if invariants`.
func broken(format string, args ...any) {
	panic("cache: invariant violated: " + fmt.Sprintf(format, args...))
}
