package filter

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Scratch buffers for the intermediate stages of a pipeline. They are pooled
// by size class so that a 1 MiB chunk does not take a 4 KiB buffer out of
// the pool and throw it away. Classes are quarter steps between powers of
// two (4 KiB, 5 KiB, 6 KiB, 7 KiB, 8 KiB, 10 KiB, ...), so a buffer is at
// most 25% larger than asked for. Buffers handed to the caller are never
// pooled ones: Encode and Decode return freshly allocated, exactly sized
// slices, because the cache accounts chunk memory by length and a pooled
// buffer's spare capacity would be memory it cannot see.

const (
	minScratch   = 4 << 10
	maxScratchE  = 26 // classes up to 2^27 (128 MiB); larger is not pooled
	scratchSteps = 4  // classes per power of two
)

// scratch is a pooled buffer. Pools hold *scratch so Put does not allocate.
type scratch struct{ b []byte }

var scratchPools [(maxScratchE + 1) * scratchSteps]sync.Pool

// scratchClass returns the smallest class whose size holds n bytes: with
// 2^e < n <= 2^(e+1), class e*4+k-1 has size 2^e + k*2^(e-2), k in 1..4.
func scratchClass(n int) int {
	n = max(n, minScratch)
	e := bits.Len(uint(n-1)) - 1
	step := 1 << (e - 2)
	k := (n - 1<<e + step - 1) / step
	return e*scratchSteps + k - 1
}

func classSize(c int) int {
	e, k := c/scratchSteps, c%scratchSteps+1
	return 1<<e + k<<(e-2)
}

// scratchGets counts getScratch calls: a scratch buffer at the final stage
// of a decode means a copy after it, and tests hold the pipeline to the
// paths that need none.
var scratchGets atomic.Int64

// getScratch returns a buffer with cap(s.b) >= n and len(s.b) == 0.
func getScratch(n int) *scratch {
	scratchGets.Add(1)
	c := scratchClass(n)
	if c >= len(scratchPools) {
		return &scratch{b: make([]byte, 0, n)}
	}
	if v := scratchPools[c].Get(); v != nil {
		s := v.(*scratch)
		s.b = s.b[:0]
		return s
	}
	return &scratch{b: make([]byte, 0, classSize(c))}
}

// putScratch returns s to its pool. The caller must not use s or any slice
// of it afterwards. nil is ignored.
func putScratch(s *scratch) {
	if s == nil {
		return
	}
	c := scratchClass(cap(s.b))
	// INVARIANT: a pooled buffer's capacity is exactly its class size, so
	// getScratch never has to check it.
	if c >= len(scratchPools) || classSize(c) != cap(s.b) {
		return
	}
	s.b = s.b[:0]
	scratchPools[c].Put(s)
}
