//go:build invariants

package cache

// invariants turns on the assertions on impossible state transitions
// (go test -tags invariants; make test runs the cache that way).
const invariants = true
