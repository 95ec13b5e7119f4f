package cache

import (
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

func TestInterleaveSeedExample(t *testing.T) {
	// SCC design §2.1: address 6 (110b) and coordinate 5 (101b) interleave
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
	add := func(serial uint64, c layout.Coord) {
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
		c := make(layout.Coord, rank)
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
	add(1, layout.Coord{2})
	add(1, layout.Coord{2, 0})
	add(1, layout.Coord{0, 2})
	// Huge rank always falls back.
	big := make(layout.Coord, 200)
	big[199] = 1
	add(3, big)
	big2 := make(layout.Coord, 200)
	add(3, big2)
	if k := makeKey(1, layout.Coord{1 << 63, 0}); k.rank&longKey == 0 {
		t.Fatal("a 64-bit coordinate cannot be exact in 40 bits: expected fallback")
	}
	if k := makeKey(1, layout.Coord{3, 4}); k.rank&longKey != 0 || k.long != "" {
		t.Fatal("small key used the fallback")
	}
}

func FuzzKeyExact(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint64(3), uint64(1), uint64(2), uint64(4))
	f.Add(uint64(1), uint64(1<<50), uint64(0), uint64(1), uint64(0), uint64(1<<50))
	f.Fuzz(func(t *testing.T, s1, a1, b1, s2, a2, b2 uint64) {
		k1, k2 := makeKey(s1, layout.Coord{a1, b1}), makeKey(s2, layout.Coord{a2, b2})
		same := s1 == s2 && a1 == a2 && b1 == b2
		if (k1 == k2) != same {
			t.Fatalf("(%d,%d,%d) vs (%d,%d,%d): keys equal=%v", s1, a1, b1, s2, a2, b2, k1 == k2)
		}
		sk := newSerialKeys(s1)
		for _, c := range []layout.Coord{{a1}, {a1, b1}} {
			k, ok := sk.shortKeyIn(s1, c)
			if wk, wok := shortKey(s1, c); ok != wok || k != wk {
				t.Fatalf("serial %d coord %v: shortKeyIn %x %v, shortKey %x %v", s1, c, k, ok, wk, wok)
			}
		}
	})
}

// TestSpreadMatchesInterleave: the branch-free forms of ranks 1 and 2 are
// the generic interleave with the same widths, at every bit position
// (each single bit, then random values up to the width).
func TestSpreadMatchesInterleave(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check2 := func(a, b uint64) {
		t.Helper()
		want, ok := interleave([]uint64{a, b}, keyBits/2)
		if got := interleave2(a, b); !ok || got != want {
			t.Fatalf("interleave2(%#x, %#x) = %x, want %x (ok %v)", a, b, got, want, ok)
		}
	}
	check3 := func(a, b, c uint64) {
		t.Helper()
		want, ok := interleave([]uint64{a, b, c}, keyBits/3)
		if got := interleave3(a, b, c); !ok || got != want {
			t.Fatalf("interleave3(%#x, %#x, %#x) = %x, want %x (ok %v)", a, b, c, got, want, ok)
		}
	}
	for i := 0; i < keyBits/2; i++ {
		check2(1<<i, 0)
		check2(0, 1<<i)
	}
	for i := 0; i < keyBits/3; i++ {
		check3(1<<i, 0, 0)
		check3(0, 1<<i, 0)
		check3(0, 0, 1<<i)
	}
	for i := 0; i < 100000; i++ {
		check2(r.Uint64N(1<<(keyBits/2)), r.Uint64N(1<<(keyBits/2)))
		check3(r.Uint64N(1<<(keyBits/3)), r.Uint64N(1<<(keyBits/3)), r.Uint64N(1<<(keyBits/3)))
	}
}

// TestKeyRankByte: a short key carries its rank in the top byte, so the
// same interleaved bits of two ranks differ; a long key is in the long
// table's form.
func TestKeyRankByte(t *testing.T) {
	for rank := 0; rank < 10; rank++ {
		k := makeKey(5, make(layout.Coord, rank))
		if k.long != "" || k.k.Hi>>56 != uint64(rank) || k.rank != uint8(rank) {
			t.Fatalf("rank %d: key %+v", rank, k)
		}
	}
	if k := makeKey(1<<60, layout.Coord{0}); k.long == "" {
		t.Fatal("a serial of 61 bits cannot be exact in 60: expected fallback")
	}
	if k := makeKey(1<<60-1, layout.Coord{1<<60 - 1}); k.long != "" {
		t.Fatal("rank 1 keys of 60 bits are exact")
	}
}

// TestChunkTableSplit: short and long keys go to their own tables; Load,
// LoadOrStore, CompareAndDelete, Range and Len see both.
func TestChunkTableSplit(t *testing.T) {
	tab := newChunkTable()
	short := &entry{key: makeKey(1, layout.Coord{2, 3})}
	long := &entry{key: makeKey(1, layout.Coord{1 << 63, 3})}
	if short.key.long != "" || long.key.long == "" {
		t.Fatal("test keys are not one of each form")
	}
	for _, e := range []*entry{short, long} {
		if got, loaded := tab.LoadOrStore(e); loaded || got != e {
			t.Fatal("store")
		}
		if got, loaded := tab.LoadOrStore(&entry{key: e.key}); !loaded || got != e {
			t.Fatal("second store replaced the entry")
		}
	}
	if tab.short.Len() != 1 || tab.long.Len() != 1 || tab.Len() != 2 {
		t.Fatalf("lens %d %d", tab.short.Len(), tab.long.Len())
	}
	seen := map[*entry]bool{}
	tab.Range(func(k chunkKey, e *entry) bool { seen[e] = k == e.key; return true })
	if !seen[short] || !seen[long] {
		t.Fatalf("range saw %v", seen)
	}
	for _, e := range []*entry{short, long} {
		if got, ok := tab.Load(e.key); !ok || got != e {
			t.Fatal("load")
		}
		if tab.CompareAndDelete(e.key, func(*entry) bool { return false }) {
			t.Fatal("deleted a different entry")
		}
		if !tab.CompareAndDelete(e.key, func(v *entry) bool { return v == e }) {
			t.Fatal("delete")
		}
		if _, ok := tab.Load(e.key); ok {
			t.Fatal("still there")
		}
	}
}

// TestShortKeyMatchesMakeKey: the hit path's shortKey gives exactly
// makeKey's short form, and refuses exactly the chunks makeKey spells out
// in the long form; chunkTable.lookupIn finds entries stored under either.
func TestShortKeyMatchesMakeKey(t *testing.T) {
	big := uint64(1) << 62
	coords := []layout.Coord{{}, {0}, {7}, {1<<60 - 1}, {1 << 60}, {3, 4}, {1<<40 - 1, 2}, {1 << 40, 0},
		{1, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {big, 1, 2}, make(layout.Coord, 130)}
	tab := newChunkTable()
	for i, c := range coords {
		for _, serial := range []uint64{1, 1<<20 + 3} {
			ck := makeKey(serial, c)
			k, ok := shortKey(serial, c)
			if ok != (ck.long == "") || ok && k != ck.k {
				t.Fatalf("serial %d coord %v: shortKey %v %v, makeKey %+v", serial, c, k, ok, ck)
			}
			e := &entry{key: ck}
			tab.LoadOrStore(e)
			if got, found := tab.lookupIn(&Dataset{serial: serial, keys: newSerialKeys(serial)}, c); !found || got != e {
				t.Fatalf("coord %d %v: lookup missed", i, c)
			}
		}
	}
}

// TestShortKeyIn: the hit path's key from a dataset's precomputed serial
// part equals shortKey for every rank, at the widths' edges (serials and
// coordinates just under and at 2^32, 2^40 and 2^60) and at random.
func TestShortKeyIn(t *testing.T) {
	edges := []uint64{0, 1, 5, 1<<32 - 1, 1 << 32, 1<<40 - 1, 1 << 40, 1<<60 - 1, 1 << 60, 1<<64 - 1}
	check := func(serial uint64, c layout.Coord) {
		t.Helper()
		sk := newSerialKeys(serial)
		wk, wok := shortKey(serial, c)
		if k, ok := sk.shortKeyIn(serial, c); ok != wok || ok && k != wk {
			t.Fatalf("serial %#x coord %#x: shortKeyIn %x %v, shortKey %x %v", serial, c, k, ok, wk, wok)
		}
	}
	for _, s := range edges {
		for _, a := range edges {
			check(s, layout.Coord{a})
			for _, b := range edges {
				check(s, layout.Coord{a, b})
			}
			check(s, layout.Coord{a, 3, 4})
		}
		check(s, layout.Coord{})
	}
	r := rand.New(rand.NewPCG(8, 9))
	for i := 0; i < 100000; i++ {
		w := func() uint64 { return r.Uint64() >> r.IntN(64) }
		check(w(), layout.Coord{w()})
		check(w(), layout.Coord{w(), w()})
	}
}
