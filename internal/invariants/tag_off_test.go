//go:build !invariants

package invariants

const tagged = false
