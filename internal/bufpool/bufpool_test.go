package bufpool

import "testing"

func TestBufClasses(t *testing.T) {
	prev := 0
	for c := bufClass(1 << bufMinShift); c < len(bufPools); c++ {
		size := bufClassSize(c)
		if size <= prev {
			t.Fatalf("class %d size %d not above previous %d", c, size, prev)
		}
		if prev > 0 && size-bufTail > (prev-bufTail)+(prev-bufTail)/8 {
			t.Fatalf("class %d size %d jumps from %d", c, size, prev)
		}
		if bufClass(size) != c || (prev > 0 && bufClass(prev+1) != c) {
			t.Fatalf("class %d (size %d): bufClass(size)=%d bufClass(prev+1)=%d", c, size, bufClass(size), bufClass(prev+1))
		}
		prev = size
	}
	for _, n := range []int{1, 4095, 4096, 4097, 5000, 128 << 10, 128<<10 + 4, 512 << 10, 512<<10 + 4, 1<<20 + 1, 100 << 20} {
		b := Get(n)
		if len(b) != n || cap(b) != Cap(n) {
			t.Fatalf("Get(%d): len %d cap %d, Cap %d", n, len(b), cap(b), Cap(n))
		}
		if n >= 1<<bufMinShift && cap(b) > n+n/8+bufTail {
			t.Fatalf("Get(%d): cap %d is more than 12.5%% over", n, cap(b))
		}
		Put(b)
	}
	// A power-of-two chunk and its checksummed frame share a class, so a
	// frame read for a load can become the chunk.
	for _, n := range []int{4096, 64 << 10, 512 << 10, 4 << 20} {
		if Cap(n) != Cap(n+4) || Cap(n) != n+bufTail {
			t.Fatalf("Cap(%d)=%d Cap(%d)=%d", n, Cap(n), n+4, Cap(n+4))
		}
	}
	Put(make([]byte, 5001)) // not a class size: dropped
	Put(nil)
}

func TestBufPoison(t *testing.T) {
	defer Poison(true)()
	b := Get(8 << 10)
	for i := range b {
		b[i] = 1
	}
	s := b[:10]
	Put(b)
	for _, x := range s {
		if x != poisonByte {
			t.Fatal("returned buffer not poisoned")
		}
	}
}

func TestBufRecycledWithoutAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	Put(Get(256 << 10))
	if n := testing.AllocsPerRun(100, func() { Put(Get(256 << 10)) }); n > 0 {
		t.Fatalf("Get/Put allocated %.1f times per round", n)
	}
}

// TestGetZeroed: a zeroed buffer is all zeros whether it is new or
// recycled (every buffer goes back to the pool full of other bytes), with
// Get's length and capacity.
func TestGetZeroed(t *testing.T) {
	for _, n := range []int{100, 4096, 5000, 1 << 20} {
		for range 50 {
			b := GetZeroed(n)
			if len(b) != n || cap(b) != Cap(n) {
				t.Fatalf("GetZeroed(%d): len %d cap %d, want %d and %d", n, len(b), cap(b), n, Cap(n))
			}
			for i, v := range b {
				if v != 0 {
					t.Fatalf("GetZeroed(%d): byte %d is %#x", n, i, v)
				}
			}
			full := b[:cap(b)]
			for i := range full {
				full[i] = 0xA5
			}
			Put(b)
		}
	}
}
