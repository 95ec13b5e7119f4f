package cache

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
		b := GetBuf(n)
		if len(b) != n || cap(b) != BufCap(n) {
			t.Fatalf("GetBuf(%d): len %d cap %d, BufCap %d", n, len(b), cap(b), BufCap(n))
		}
		if n >= 1<<bufMinShift && cap(b) > n+n/8+bufTail {
			t.Fatalf("GetBuf(%d): cap %d is more than 12.5%% over", n, cap(b))
		}
		PutBuf(b)
	}
	// A power-of-two chunk and its checksummed frame share a class, so a
	// frame read for a load can become the chunk.
	for _, n := range []int{4096, 64 << 10, 512 << 10, 4 << 20} {
		if BufCap(n) != BufCap(n+4) || BufCap(n) != n+bufTail {
			t.Fatalf("BufCap(%d)=%d BufCap(%d)=%d", n, BufCap(n), n+4, BufCap(n+4))
		}
	}
	PutBuf(make([]byte, 5001)) // not a class size: dropped
	PutBuf(nil)
}

func TestBufPoison(t *testing.T) {
	defer PoisonBuffers(true)()
	b := GetBuf(8 << 10)
	for i := range b {
		b[i] = 1
	}
	s := b[:10]
	PutBuf(b)
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
	PutBuf(GetBuf(256 << 10))
	if n := testing.AllocsPerRun(100, func() { PutBuf(GetBuf(256 << 10)) }); n > 0 {
		t.Fatalf("GetBuf/PutBuf allocated %.1f times per round", n)
	}
}

// A flush of a cache full of dirty chunks encodes and writes them in rounds
// of at most an eighth of the active limit, so the encoded images it holds
// outside the budget stay bounded (without rounds: one WriteV of all 64).
func TestFlushWritesInRounds(t *testing.T) {
	const chunk, n = 32, 64
	e := newEnv(t, Config{QuiescentBytes: n * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1})
	d, l := e.dataset(1, -1, chunk)
	var reqs []Request
	for i := 0; i < n; i++ {
		reqs = append(reqs, fullReq(d, l, pattern(chunk, byte(i)), uint64(i)))
	}
	must(t, e.c.Write(bg, reqs))
	w0 := e.drv.writeVs.Load()
	must(t, e.f.Flush(bg))
	if w := e.drv.writeVs.Load() - w0; w != 8 {
		t.Fatalf("flushing %d chunks of %d bytes took %d WriteV calls, want 8 rounds of 8", n, chunk, w)
	}
	if st := e.c.Stats(); st.DirtyBytes != 0 || st.ChunksFlushed != n {
		t.Fatalf("after flush: %d dirty bytes, %d chunks flushed", st.DirtyBytes, st.ChunksFlushed)
	}
}

// TestGetBufZeroed: a zeroed buffer is all zeros whether it is new or
// recycled (every buffer goes back to the pool full of other bytes), with
// GetBuf's length and capacity.
func TestGetBufZeroed(t *testing.T) {
	for _, n := range []int{100, 4096, 5000, 1 << 20} {
		for range 50 {
			b := GetBufZeroed(n)
			if len(b) != n || cap(b) != BufCap(n) {
				t.Fatalf("GetBufZeroed(%d): len %d cap %d, want %d and %d", n, len(b), cap(b), n, BufCap(n))
			}
			for i, v := range b {
				if v != 0 {
					t.Fatalf("GetBufZeroed(%d): byte %d is %#x", n, i, v)
				}
			}
			full := b[:cap(b)]
			for i := range full {
				full[i] = 0xA5
			}
			PutBuf(b)
		}
	}
}
