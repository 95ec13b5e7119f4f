package lockfree

import (
	"runtime"
	_ "unsafe" // go:linkname
)

// Per-P striping.
//
// Why the P and not a random stripe: a hit costs a few dozen nanoseconds,
// and picking a random stripe (math/rand/v2's per-thread ChaCha8, ~5-10
// ns) was the largest single item of it; worse, two goroutines that pick
// at random still collide on a stripe now and then and bounce its cache
// line. The index of the P the goroutine runs on is free to read and is
// held by one running goroutine at a time, so a stripe indexed by it is
// written by one core at a time: the line stays in that core's cache.
//
// The index is only a hint. The goroutine may be moved to another P right
// after reading it (we unpin at once; holding the pin across user code
// would stall the scheduler), so two goroutines can still share a stripe
// for a moment; every stripe update is therefore still an atomic RMW, and
// correctness never depends on the index.
//
// runtime.procPin/procUnpin are the functions sync.Pool uses for the same
// purpose; the runtime keeps them linkable on purpose (go.dev/issue/67401
// lists them among the symbols widely used through linkname).

//go:linkname runtime_procPin runtime.procPin
func runtime_procPin() int

//go:linkname runtime_procUnpin runtime.procUnpin
func runtime_procUnpin()

// ProcHint returns the index of the P the calling goroutine runs on (0 ≤
// ProcHint() < GOMAXPROCS at the time of the call). It is a hint for
// striping: the goroutine may run on another P by the time it is used.
func ProcHint() int {
	p := runtime_procPin()
	runtime_procUnpin()
	return p
}

// procStripes is the stripe count for per-P striping: a power of two at
// least GOMAXPROCS, so that distinct Ps map to distinct stripes. If
// GOMAXPROCS grows later, Ps share stripes (still correct, only slower).
func procStripes() int {
	n := 1
	for n < runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	return n
}

// Stripes is the stripe count per-P structures use (procStripes): a power of
// two at least GOMAXPROCS at the time of the call.
func Stripes() int { return procStripes() }
