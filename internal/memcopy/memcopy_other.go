//go:build !amd64

package memcopy

import "unsafe"

// HaveStream reports whether Stream and StreamRows use non-temporal
// stores: not on this architecture, where they copy.
const HaveStream = false

func streamCopy(dst, src []byte) { copy(dst, src) }

func scatterRows(dst, src unsafe.Pointer, off []int, rb int) {
	panic("memcopy: no row scatter on this architecture")
}

func gatherRows(dst, src unsafe.Pointer, off []int, rb int) {
	panic("memcopy: no row gather on this architecture")
}

func fence() {}
