package shard

import "unsafe"

// haveStreamStores: amd64 has SSE2's non-temporal stores in every CPU.
const haveStreamStores = true

// scatterRowsNT copies len(off) rows of rb bytes (a multiple of 64) from
// src, one after the other, to dst+off[k], each 16-byte aligned, with
// non-temporal stores, and fences them.
//
//go:noescape
func scatterRowsNT(dst, src unsafe.Pointer, off []int, rb int)

// gatherRows copies len(off) rows of rb bytes (a multiple of 64) from
// src+off[k] to dst, one after the other.
//
//go:noescape
func gatherRows(dst, src unsafe.Pointer, off []int, rb int)
