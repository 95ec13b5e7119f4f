package cache

import (
	"math/rand/v2"
	"testing"
)

func TestInterleaveSeedExample(t *testing.T) {
	// Seed 000 §2.1: address 6 (110b) and coordinate 5 (101b) interleave
	// LSB first to 0,1,1,0,1,1 (bit 0 first).
	k, ok := interleave([]uint64{6, 5}, 64)
	if !ok {
		t.Fatal("not exact")
	}
	want := uint64(0b110110) // bits from LSB: 0,1,1,0,1,1
	if k.Lo != want || k.Hi != 0 {
		t.Fatalf("got %b/%b want %b", k.Hi, k.Lo, want)
	}
	// The high half is used once more than 64 bits are interleaved.
	k, _ = interleave([]uint64{1 << 40, 0}, 64)
	if k.Hi != 1<<16 || k.Lo != 0 {
		t.Fatalf("bit 40 of stream 0 should land at bit 80: %x %x", k.Hi, k.Lo)
	}
}

func TestKeysAreExact(t *testing.T) {
	seen := map[chunkKey][2]any{}
	add := func(serial uint64, c Coord) {
		k := makeKey(serial, c)
		id := [2]any{serial, ckey(c)}
		if prev, ok := seen[k]; ok && prev != id {
			t.Fatalf("collision: %v and %v", prev, id)
		}
		seen[k] = id
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		rank := 1 + r.IntN(8)
		c := make(Coord, rank)
		for j := range c {
			switch r.IntN(3) {
			case 0:
				c[j] = uint64(r.IntN(4))
			case 1:
				c[j] = r.Uint64N(1 << 20)
			default:
				c[j] = r.Uint64() // forces the fallback form
			}
		}
		add(uint64(1+r.IntN(5)), c)
	}
	// Same bits, different rank: must differ.
	add(1, Coord{2})
	add(1, Coord{2, 0})
	add(1, Coord{0, 2})
	// Huge rank always falls back.
	big := make(Coord, 200)
	big[199] = 1
	add(3, big)
	big2 := make(Coord, 200)
	add(3, big2)
	if k := makeKey(1, Coord{1 << 63, 0}); k.rank&longKey == 0 {
		t.Fatal("a 64-bit coordinate cannot be exact in 42 bits: expected fallback")
	}
	if k := makeKey(1, Coord{3, 4}); k.rank&longKey != 0 || k.long != "" {
		t.Fatal("small key used the fallback")
	}
}

func FuzzKeyExact(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint64(3), uint64(1), uint64(2), uint64(4))
	f.Add(uint64(1), uint64(1<<50), uint64(0), uint64(1), uint64(0), uint64(1<<50))
	f.Fuzz(func(t *testing.T, s1, a1, b1, s2, a2, b2 uint64) {
		k1, k2 := makeKey(s1, Coord{a1, b1}), makeKey(s2, Coord{a2, b2})
		same := s1 == s2 && a1 == a2 && b1 == b2
		if (k1 == k2) != same {
			t.Fatalf("(%d,%d,%d) vs (%d,%d,%d): keys equal=%v", s1, a1, b1, s2, a2, b2, k1 == k2)
		}
	})
}
