//go:build !invariants

package cache

// invariants is off in normal builds: every assertion is written as
// `if invariants && ...`, so the compiler drops it, condition and all.
const invariants = false
