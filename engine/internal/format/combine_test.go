package format

import (
	"math/rand/v2"
	"testing"
)

// CombineChecksum of the sums of any cut of a run is the run's sum.
func TestCombineChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	buf := make([]byte, 1<<20+77)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	cuts := []int{0, 1, 7, 4096, 1 << 19, 1<<20 - 1, 1 << 20, len(buf)}
	for i := 0; i < 200; i++ {
		cuts = append(cuts, rng.IntN(len(buf)+1))
	}
	for _, n := range []int{0, 1, 3, 4096, 65537, len(buf)} {
		run := buf[:n]
		want := Checksum(run)
		for _, c := range cuts {
			if c > n {
				continue
			}
			if got := CombineChecksum(Checksum(run[:c]), Checksum(run[c:]), int64(n-c)); got != want {
				t.Fatalf("run of %d cut at %d: %08x, want %08x", n, c, got, want)
			}
		}
	}
	// Three pieces, combined left to right.
	a, b := 1000, 500000
	s := CombineChecksum(CombineChecksum(Checksum(buf[:a]), Checksum(buf[a:b]), int64(b-a)), Checksum(buf[b:]), int64(len(buf)-b))
	if s != Checksum(buf) {
		t.Fatal("three pieces: wrong sum")
	}
}

func FuzzCombineChecksum(f *testing.F) {
	f.Add([]byte("hello, world"), uint16(5))
	f.Add([]byte{}, uint16(0))
	f.Add(make([]byte, 5000), uint16(4096))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		c := int(cut) % (len(b) + 1)
		if got, want := CombineChecksum(Checksum(b[:c]), Checksum(b[c:]), int64(len(b)-c)), Checksum(b); got != want {
			t.Fatalf("cut %d of %d: %08x, want %08x", c, len(b), got, want)
		}
	})
}

func BenchmarkCombineChecksum(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_ = CombineChecksum(uint32(i), 0x12345678, 1<<19+int64(i&4095))
	}
}
