//go:build !amd64

package shard

import "unsafe"

const haveStreamStores = false

func scatterRowsNT(dst, src unsafe.Pointer, off []int, rb int) {
	panic("shard: no non-temporal stores on this architecture")
}

func gatherRows(dst, src unsafe.Pointer, off []int, rb int) {
	panic("shard: no row gather on this architecture")
}
