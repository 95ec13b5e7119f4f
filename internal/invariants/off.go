//go:build !invariants

package invariants

// Enabled is false in normal builds, so `if invariants.Enabled && ...` is
// dropped by the compiler.
const Enabled = false
