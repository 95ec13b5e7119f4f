package memcopy

import "unsafe"

// HaveStream reports whether Stream and StreamRows use non-temporal
// stores: every amd64 CPU has SSE2's.
const HaveStream = true

// streamCopy copies src into dst (of equal length, at least minStream):
// ordinary stores up to dst's next 16-byte boundary and after its last,
// 16-byte non-temporal stores between.
func streamCopy(dst, src []byte) {
	n := len(dst)
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & 15)
	copy(dst[:head], src[:head])
	body := (n - head) &^ 15
	if body > 0 {
		streamAligned(unsafe.Pointer(&dst[head]), unsafe.Pointer(&src[head]), body)
	}
	copy(dst[head+body:], src[head+body:])
}

// streamAligned copies n bytes (a positive multiple of 16) from src to
// dst (16-byte aligned) with MOVNTDQ.
//
//go:noescape
func streamAligned(dst, src unsafe.Pointer, n int)

// scatterRows copies len(off) rows of rb bytes (a positive multiple of
// 64), one after the other at src, to dst+off[k] (16-byte aligned) with
// non-temporal stores, then fences them.
//
//go:noescape
func scatterRows(dst, src unsafe.Pointer, off []int, rb int)

// gatherRows copies len(off) rows of rb bytes (a positive multiple of
// 64) from src+off[k] to dst, one after the other, with ordinary stores.
//
//go:noescape
func gatherRows(dst, src unsafe.Pointer, off []int, rb int)

// fence is SFENCE.
func fence()
