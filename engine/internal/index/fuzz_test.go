package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
)

// Fuzz targets for every decoder of on-disk bytes. Each is seeded with the
// valid blocks of a small index (f.Add). A fuzz input may ask for its CRC
// to be recomputed (reseal), so that mutations reach the structural checks
// behind the checksum. Every decoder must return nil or an error wrapping
// ErrCorrupt, never panic; a block it accepts must re-encode to the same
// bytes (one encoding per state).

func addSeeds(f *testing.F, bl *built, m magic) {
	if len(bl.blocks[m]) == 0 {
		f.Fatalf("no %s blocks to seed with", m[:])
	}
	for _, pb := range bl.blocks[m] {
		f.Add(pb.b, false)
		f.Add(pb.b, true)
	}
}

func maybeReseal(b []byte, reseal bool) []byte {
	b = bytes.Clone(b)
	if reseal && len(b) >= headerSize+trailerSize {
		seal(b)
	}
	return b
}

func wantCorrupt(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, errStoreRange) {
		t.Fatalf("error does not wrap ErrCorrupt: %v", err)
	}
}

// fuzzOpen opens a fuzzed root record against a built index's store and
// reads everything it can reach.
func fuzzOpen(t *testing.T, bl *built, b []byte) {
	ctx := context.Background()
	x, err := Open(ctx, bl.kind, bl.g, b, bl.s)
	wantCorrupt(t, err)
	if err != nil {
		return
	}
	wantCorrupt(t, x.Range(ctx, func([]uint64, Entry) bool { return true }))
	wantCorrupt(t, x.Extents(ctx, func(int64, int64) error { return nil }))
}

func FuzzEARoot(f *testing.F) {
	fuzzEA := buildEA(f)
	f.Add(fuzzEA.root, false)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		fuzzOpen(t, fuzzEA, maybeReseal(b, reseal))
	})
}

func FuzzFixedArrayRoot(f *testing.F) {
	fuzzFA := buildFA(f)
	f.Add(fuzzFA.root, false)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		fuzzOpen(t, fuzzFA, maybeReseal(b, reseal))
	})
}

func FuzzGeneralRoot(f *testing.F) {
	fuzzG := buildGeneral(f)
	f.Add(fuzzG.root, false)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		fuzzOpen(t, fuzzG, maybeReseal(b, reseal))
	})
}

func fuzzEAShell(t testing.TB, fuzzEA *built) (*eaIndex, *rootRecord) {
	r, err := decodeRoot(fuzzEA.root)
	if err != nil {
		t.Fatal(err)
	}
	x, err := openEA(context.Background(), fuzzEA.g, r, fuzzEA.s)
	if err != nil {
		t.Fatal(err)
	}
	return x, r
}

func FuzzEAIndexBlock(f *testing.F) {
	fuzzEA := buildEA(f)
	addSeeds(f, fuzzEA, magicEAIndex)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		b = maybeReseal(b, reseal)
		x, _ := fuzzEAShell(t, fuzzEA)
		var n, c uint64
		if len(b) >= 24 {
			n, c = binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
		}
		err := x.decodeIndexBlock(b, n, c)
		wantCorrupt(t, err)
		if err != nil {
			return
		}
		x.mu.nelmts, x.mu.count = n, c
		for i := range x.mu.hoist {
			x.mu.hoist[i].next = x.mu.hoist[i].disk
		}
		for i := range x.mu.supers {
			x.mu.supers[i].next = x.mu.supers[i].disk
		}
		out := x.encodeIndexBlockLocked()
		seal(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("index block does not round-trip")
		}
	})
}

func FuzzEASuperBlock(f *testing.F) {
	fuzzEA := buildEA(f)
	addSeeds(f, fuzzEA, magicEASuper)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		b = maybeReseal(b, reseal)
		x, r := fuzzEAShell(t, fuzzEA)
		s := 0
		if len(b) > 5 {
			s = int(b[5]) % len(x.lay.sb)
		}
		sp, err := x.lay.decodeSuper(b, s, r.nelmts)
		wantCorrupt(t, err)
		if err != nil {
			return
		}
		for i := range sp.units {
			sp.units[i].next = sp.units[i].disk
		}
		out := encodeSuper(s, sp)
		seal(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("super block does not round-trip")
		}
	})
}

func fuzzUnit(t *testing.T, b []byte, m magic, s uint8, first uint64, n int, limit uint64) {
	u, err := decodeUnit(b, m, s, first, n, limit)
	wantCorrupt(t, err)
	if err != nil {
		return
	}
	out := encodeUnit(m, s, first, u)
	seal(out)
	if !bytes.Equal(out, b) {
		t.Fatalf("%s block does not round-trip", m[:])
	}
}

func FuzzEADataBlock(f *testing.F) {
	fuzzEA := buildEA(f)
	addSeeds(f, fuzzEA, magicEAData)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		b = maybeReseal(b, reseal)
		x, r := fuzzEAShell(t, fuzzEA)
		s, ui := 0, 0
		if len(b) >= 16 {
			s = int(b[5]) % len(x.lay.sb)
			ui = int(binary.LittleEndian.Uint32(b[8:]) % uint32(x.lay.sb[s].nunits))
			if f := binary.LittleEndian.Uint64(b[8:]); f >= x.lay.first(s, 0) {
				ui = int((f-x.lay.first(s, 0))>>x.lay.sb[s].ulog) % x.lay.sb[s].nunits
			}
		}
		fuzzUnit(t, b, magicEAData, uint8(s), x.lay.first(s, ui), 1<<x.lay.sb[s].ulog, r.nelmts)
	})
}

func fuzzFAShell(t testing.TB, fuzzFA *built) (*faIndex, *rootRecord) {
	r, err := decodeRoot(fuzzFA.root)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := newGeom(fuzzFA.g, false)
	if err != nil {
		t.Fatal(err)
	}
	x, err := newFAShell(gm, r.p, fuzzFA.s)
	if err != nil {
		t.Fatal(err)
	}
	return x, r
}

func FuzzFixedArrayHeader(f *testing.F) {
	fuzzFA := buildFA(f)
	addSeeds(f, fuzzFA, magicFAHeader)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		b = maybeReseal(b, reseal)
		x, _ := fuzzFAShell(t, fuzzFA)
		var c uint64
		if len(b) >= 24 {
			c = binary.LittleEndian.Uint64(b[16:])
		}
		err := x.decodeHeader(b, c)
		wantCorrupt(t, err)
		if err != nil {
			return
		}
		x.mu.count = c
		for i := range x.mu.pages {
			x.mu.pages[i].next = x.mu.pages[i].disk
		}
		out := x.encodeHeaderLocked()
		seal(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("fixed array header does not round-trip")
		}
	})
}

func FuzzFixedArrayPage(f *testing.F) {
	fuzzFA := buildFA(f)
	addSeeds(f, fuzzFA, magicFAPage)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		b = maybeReseal(b, reseal)
		x, _ := fuzzFAShell(t, fuzzFA)
		pi := 0
		if len(b) >= 16 {
			pi = int(binary.LittleEndian.Uint64(b[8:])>>x.p) % len(x.mu.pages)
		}
		fuzzUnit(t, b, magicFAPage, 0, uint64(pi)<<x.p, x.pageLen(pi), x.nslots)
	})
}

func fuzzGenShell(t testing.TB, fuzzG *built) (*genIndex, *rootRecord) {
	r, err := decodeRoot(fuzzG.root)
	if err != nil {
		t.Fatal(err)
	}
	return newGenShell(fuzzG.g, fuzzG.s, int(r.wide)), r
}

func FuzzGeneralRootBlock(f *testing.F) {
	fuzzG := buildGeneral(f)
	addSeeds(f, fuzzG, magicGenRoot)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		b = maybeReseal(b, reseal)
		x, _ := fuzzGenShell(t, fuzzG)
		var c uint64
		if len(b) >= 16 {
			c = binary.LittleEndian.Uint64(b[8:])
		}
		err := x.decodeRootBlock(b, c)
		wantCorrupt(t, err)
		if err != nil {
			return
		}
		x.mu.count = c
		for _, sl := range x.mu.slots {
			sl.next = sl.disk
		}
		out := x.encodeRootBlockLocked()
		seal(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("general root block does not round-trip")
		}
	})
}

func FuzzGeneralLeaf(f *testing.F) {
	fuzzG := buildGeneral(f)
	addSeeds(f, fuzzG, magicGenLeaf)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		b = maybeReseal(b, reseal)
		x, _ := fuzzGenShell(t, fuzzG)
		lf, err := x.decodeLeaf(b, make([]uint64, x.rank), nil, fuzzG.g.Grid)
		wantCorrupt(t, err)
		if err != nil {
			return
		}
		out := x.encodeLeaf(lf)
		seal(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("general leaf does not round-trip")
		}
	})
}
