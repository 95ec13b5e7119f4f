// Package invariants holds the switch for assertions of impossible states,
// used across the module the way pebble's internal/invariants is: every
// assertion is written as
//
//	if invariants.Enabled && cond {
//		panic(invariants.Violation("what went wrong: %v", x))
//	}
//
// so that a normal build compiles the check away, condition and all, and a
// build with `-tags invariants` (what `make test` runs a second time over the
// whole module) panics at the first broken invariant instead of carrying on
// with corrupt state. An assertion states something no input can make true:
// bad input is an error, never an assertion.
//
// Safe for concurrent use: it holds a constant and a pure function.
package invariants

import "fmt"

// Violation is the panic value of a failed assertion: a message prefixed
// so that a stack trace names it for what it is.
func Violation(format string, args ...any) error {
	return fmt.Errorf("scc: invariant violated: "+format, args...)
}
