package filter

import "testing"

func TestScratchClasses(t *testing.T) {
	prev := 0
	for c := scratchClass(1); c < len(scratchPools); c++ {
		size := classSize(c)
		if size <= prev {
			t.Fatalf("class %d size %d not above previous %d", c, size, prev)
		}
		if prev > 0 && size > prev+prev/4+1 && size > minScratch {
			// Quarter steps: a class is at most 25% above the previous.
			t.Fatalf("class %d size %d jumps from %d", c, size, prev)
		}
		if scratchClass(size) != c || scratchClass(prev+1) != c {
			t.Fatalf("class %d (size %d): scratchClass(size)=%d scratchClass(prev+1)=%d", c, size, scratchClass(size), scratchClass(prev+1))
		}
		prev = size
	}
	for _, n := range []int{0, 1, 4095, 4096, 4097, 5000, 1 << 20, 1<<20 + 1, 1<<20 + zstdOverrun, 100 << 20, 200 << 20} {
		s := getScratch(n)
		if len(s.b) != 0 || cap(s.b) < n {
			t.Fatalf("getScratch(%d): len %d cap %d", n, len(s.b), cap(s.b))
		}
		if n > minScratch && cap(s.b) > n+n/4 {
			t.Fatalf("getScratch(%d): cap %d is more than 25%% over", n, cap(s.b))
		}
		putScratch(s)
	}
	putScratch(&scratch{b: make([]byte, 5001)}) // not a class size: dropped
	putScratch(nil)
}
