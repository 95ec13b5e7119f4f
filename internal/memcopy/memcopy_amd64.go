package memcopy

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var haveStream = cpu.X86.HasAVX2

// streamCopy copies src into dst (of equal length, at least minStream):
// ordinary stores up to dst's next 32-byte boundary and after its last,
// 32-byte non-temporal stores between.
func streamCopy(dst, src []byte) {
	n := len(dst)
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & 31)
	copy(dst[:head], src[:head])
	body := (n - head) &^ 31
	if body > 0 {
		streamAligned(unsafe.Pointer(&dst[head]), unsafe.Pointer(&src[head]), body)
	}
	copy(dst[head+body:], src[head+body:])
}

// streamAligned copies n bytes (a positive multiple of 32) from src to
// dst (32-byte aligned) with VMOVNTDQ.
//
//go:noescape
func streamAligned(dst, src unsafe.Pointer, n int)

// fence is SFENCE.
func fence()
