// Package bufpool recycles the module's large buffers. Chunk buffers,
// stored images read for a load and images encoded for a write come from
// size-classed pools and go back when their last user is done, so that a
// steady stream of loads,
// creates and evictions allocates nothing per chunk: evicting a chunk gives
// its buffer to the next load or create instead of to the garbage collector,
// whose heap would otherwise grow to twice the cache before it runs
// (GOGC=100), whatever the cache's budget says.
//
// Classes are eighth steps between powers of two (at most 12.5% over the
// request), plus a 64-byte tail so that a power-of-two chunk and its
// checksummed frame (a few bytes more) share one class: a stored image read
// for a load can then become the chunk without a copy. Go rounds large
// allocations to whole pages anyway, so the tail costs no real memory.
//
// Ownership rule: a buffer has exactly one owner at a time, and only the
// owner may Put it, once, after the last read or write of any slice of
// it. In the cache (package cache):
//
//   - a chunk buffer belongs to its entry; the layout's Evicter returns it
//     when the cache drops the entry, which happens only to an entry that is
//     evicting or never published (no pins, so no reader is copying out of
//     it and no writer is gathering into it);
//   - an encoded image with layout.Encoded.Pooled belongs to whoever called
//     Encode until it is written; a kept pre-encoded image (preImage) is
//     shared by the entry and every writeBack using it, and goes back when
//     the last of them releases it (preImage.refs), never while a vector
//     write still reads it;
//   - a stored image read for a load belongs to the cache until it calls
//     layout.Layout.Decode, then to the layout (which keeps it as the chunk or
//     returns it).
//
// TestBufPoisonConcurrent (engine) poisons every returned buffer and checks,
// under -race with many goroutines, that no read ever sees the poison.
package bufpool

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

const (
	bufMinShift = 12 // 4 KiB: smaller buffers are not pooled
	bufMaxShift = 31 // classes up to 2 GiB (+tail); larger are not pooled
	bufSteps    = 8  // classes per power of two
	bufTail     = 64
)

var bufPools [(bufMaxShift + 1) * bufSteps]sync.Pool

// bufPoison, when set (tests), fills every returned buffer with poisonByte.
var bufPoison atomic.Bool

const poisonByte = 0xDB

// bufClass returns the smallest class whose size holds n bytes, or -1 when
// n is too small to pool.
func bufClass(n int) int {
	if n < 1<<bufMinShift {
		return -1 // small chunks are cheap to allocate and charged exactly
	}
	m := max(n-bufTail, 1<<bufMinShift)
	e := bits.Len(uint(m-1)) - 1
	step := 1 << (e - 3)
	k := (m - 1<<e + step - 1) / step
	return e*bufSteps + k - 1
}

func bufClassSize(c int) int {
	e, k := c/bufSteps, c%bufSteps+1
	return 1<<e + k<<(e-3) + bufTail
}

// Cap returns the capacity of a buffer Get(n) returns: the memory a
// layout should report (Chunk.MemSize, Location.SizeHint) for a chunk kept
// in one.
func Cap(n int) int {
	c := bufClass(n)
	if c < 0 || c >= len(bufPools) {
		return n
	}
	return bufClassSize(c)
}

// Get returns a buffer of length n and capacity Cap(n), recycled when
// one is free. Its contents are unspecified. The caller owns it; see the
// ownership rule above before handing it to Put.
func Get(n int) []byte {
	b, _ := getBuf(n)
	return b
}

// GetFull is Get for a buffer whose n bytes the caller writes in full
// before it reads any of them: the destination of a read or of a decode, a
// chunk a write covers whole. A new buffer (none was free) has its pages
// mapped in one call rather than faulted one by one on the first write
// (prefault_linux.go); a buffer written only in part, such as an encoder's
// worst-case output, should come from Get, or its untouched pages would
// be mapped for nothing.
func GetFull(n int) []byte {
	b, recycled := getBuf(n)
	if !recycled {
		prefault(b)
	}
	return b
}

// getBuf is Get that also reports whether the buffer is a recycled one
// (else it is new from make, hence zero).
func getBuf(n int) (b []byte, recycled bool) {
	c := bufClass(n)
	if c < 0 || c >= len(bufPools) {
		return make([]byte, n), false
	}
	size := bufClassSize(c)
	if v := bufPools[c].Get(); v != nil {
		return unsafe.Slice((*byte)(v.(unsafe.Pointer)), size)[:n], true
	}
	return make([]byte, n, size), false
}

// prefaultMin is the smallest new buffer GetFull prefaults (prefault_linux.go):
// 16 pages, where one system call costs less than the faults it saves.
const prefaultMin = 64 << 10

// GetZeroed is Get for a buffer that must start as zeros. A recycled
// buffer is cleared; a new one is not cleared again, since Go hands out
// zeroed memory already (for a large buffer, often pages the kernel has
// just zeroed, so a clear here would be a second pass over fresh memory:
// 15 % of a CPU profile of h5perf's partial-chunk write and read, whose
// chunks are new and start as fill).
func GetZeroed(n int) []byte {
	b, recycled := getBuf(n)
	if recycled {
		clear(b)
	}
	return b
}

// Put gives b back for reuse. b must be a slice of a buffer Get
// returned, starting at its first byte; the caller must not touch it (or
// any slice of it) afterwards. Buffers of other capacities are left to the
// garbage collector, so Put is safe on any slice that starts its
// allocation and that nothing else references. nil is ignored.
func Put(b []byte) {
	n := cap(b)
	c := bufClass(n)
	if c < 0 || c >= len(bufPools) || bufClassSize(c) != n {
		return
	}
	b = b[:n]
	if bufPoison.Load() {
		for i := range b {
			b[i] = poisonByte
		}
	}
	// An unsafe.Pointer fits an interface without allocating, unlike a
	// slice header; the pointer to the first byte keeps the whole buffer
	// alive.
	bufPools[c].Put(unsafe.Pointer(unsafe.SliceData(b)))
}

// Poison makes Put fill every buffer it takes back with 0xDB
// (tests: a read that sees those bytes used a buffer after its release). It
// returns a function restoring the previous setting.
func Poison(on bool) (restore func()) {
	old := bufPoison.Swap(on)
	return func() { bufPoison.Store(old) }
}

// PopulateCold's limits (prefault_linux.go): buffers under populateMin are
// left to fault (a few thousand faults cost less than deciding); the
// decision samples populateSamples pages; a part populated by one
// goroutine is at least populatePart bytes.
const (
	populateMin     = 8 << 20
	populateSamples = 8
	populatePart    = 8 << 20
)
