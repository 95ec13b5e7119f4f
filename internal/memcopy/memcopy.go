// Package memcopy copies bytes into memory that will not be read again
// soon, bypassing the core's caches.
//
// A scatter of decoded chunks into a caller's buffer larger than the
// last-level cache (a one-call read of a whole array) writes every line of
// the buffer once, in rows of a few hundred bytes. With ordinary stores
// each written line is first read from memory (the write allocates it in
// the cache) and later written back, twice the traffic of the copy, and it
// evicts the decoder's working set on the way. Non-temporal stores write
// whole lines straight to memory: on the project's 2-core AMD EPYC a
// scatter of 512-byte rows from a cache-hot source into a 256 MiB buffer
// ran at 26 GB/s with them against 7 GB/s with copy
// (BenchmarkScatterRows).
//
// Non-temporal stores are weakly ordered: a goroutine that streamed bytes
// calls Fence before anything that publishes them to another goroutine (a
// channel send, an unlock, a return to a caller who hands the buffer on).
// On other architectures Stream is copy, StreamRows and GatherRows decline
// (the caller copies row by row) and Fence does nothing.
//
// The functions are safe for concurrent use on disjoint destinations.
package memcopy

import "unsafe"

// StreamFrom is the destination size from which a scatter streams: half
// the last-level cache of a typical server core complex (32 MiB here), so
// that what is written is evicted before it is read whatever else runs.
// Below it the destination may stay in cache for the caller's next read,
// which ordinary stores keep and streaming stores would not.
const StreamFrom = 16 << 20

// minStream is the shortest copy Stream streams: below it the alignment
// head and tail are most of the copy.
const minStream = 128

// Stream copies src into dst as copy does (min(len(dst), len(src))
// bytes, the count returned), with non-temporal stores where the CPU has
// them. The caller calls Fence before the bytes are read by another
// goroutine.
func Stream(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !HaveStream || n < minStream {
		return copy(dst, src[:n])
	}
	streamCopy(dst[:n], src[:n])
	return n
}

// Fence orders the non-temporal stores made so far before any later
// store of the calling goroutine.
func Fence() {
	if HaveStream {
		fence()
	}
}

// StreamRows copies len(off) rows of rb bytes, one after the other in
// src, to dst[off[k]:] with non-temporal stores, and fences them: the
// rows of a small block (an inner chunk) into their strided places in a
// large buffer, in one call rather than a copy per row. It reports false,
// copying nothing, unless the architecture has the stores and the rows
// take them: rb a positive multiple of 64, every row inside dst at a
// 16-byte aligned address, src holding every row.
func StreamRows(dst, src []byte, off []int, rb int) bool {
	if !HaveStream || !rowsFit(dst, src, off, rb) {
		return false
	}
	scatterRows(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), off, rb)
	return true
}

// GatherRows copies len(off) rows of rb bytes from src[off[k]:] into dst,
// one after the other (ordinary stores: the gathered block is read next),
// in one call. It reports false, copying nothing, where StreamRows would
// (with src the strided side).
func GatherRows(dst, src []byte, off []int, rb int) bool {
	if !HaveStream || !rowsFit(src, dst, off, rb) {
		return false
	}
	gatherRows(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), off, rb)
	return true
}

// rowsFit checks the row calls' preconditions: strided holds every row
// [o, o+rb) at a 16-byte aligned address, packed holds them all one after
// the other. The assembly trusts them, so nothing else may skip this.
func rowsFit(strided, packed []byte, off []int, rb int) bool {
	if rb <= 0 || rb%64 != 0 || len(off) == 0 || len(packed)/rb < len(off) {
		return false
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(strided)))%16 != 0 {
		return false
	}
	last := len(strided) - rb
	for _, o := range off {
		if o < 0 || o > last || o%16 != 0 {
			return false
		}
	}
	return true
}
