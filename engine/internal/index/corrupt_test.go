package index

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// built is a flushed index, its root and the blocks it occupies.
type built struct {
	s      *memStore
	g      Geometry
	kind   Kind
	root   []byte
	blocks map[magic][]ptrBytes
}

type ptrBytes struct {
	off int64
	b   []byte
}

// build makes an index of kind over g with entries at every coordinate
// whose components sum to an even number, flushes it and collects its
// blocks by magic.
func build(t testing.TB, kind Kind, g Geometry, cfg Config) *built {
	ctx := context.Background()
	s := newMemStore(t)
	x, err := NewConfig(kind, g, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := make([]uint64, len(g.Grid))
	var walk func(d int)
	walk = func(d int) {
		if d == len(c) {
			sum := uint64(0)
			for _, v := range c {
				sum += v
			}
			if sum%2 == 0 {
				if _, err := x.Put(ctx, c, Entry{Addr: sum*7 + 1, Size: sum + 1, Mask: uint32(sum)}); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
		for c[d] = 0; c[d] < g.Grid[d]; c[d]++ {
			walk(d + 1)
		}
	}
	walk(0)
	root, err := x.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.commit()
	bl := &built{s: s, g: g, kind: kind, root: root, blocks: map[magic][]ptrBytes{}}
	err = x.Extents(ctx, func(off, size int64) error {
		b := make([]byte, size)
		if err := s.ReadAt(ctx, b, off); err != nil {
			return err
		}
		m := magic(b[:4])
		bl.blocks[m] = append(bl.blocks[m], ptrBytes{off, b})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bl
}

// buildEA is the extensible array the corruption tests and fuzz seeds use:
// every block kind (direct slots, hoisted data blocks, super blocks, pages).
func buildEA(t testing.TB) *built {
	return build(t, KindExtensibleArray, Geometry{Grid: []uint64{40, 3}, MaxGrid: []uint64{Unlimited, 3}}, smallEA)
}

func buildFA(t testing.TB) *built {
	return build(t, KindFixedArray, Geometry{Grid: []uint64{6, 5}, MaxGrid: []uint64{7, 5}}, smallEA)
}

func buildGeneral(t testing.TB) *built {
	return build(t, KindGeneral, Geometry{Grid: []uint64{9, 7}, MaxGrid: []uint64{Unlimited, Unlimited}}, smallEA)
}

// readEverything opens bl and reads every entry through Get and Range.
func readEverything(ctx context.Context, bl *built) error {
	x, err := Open(ctx, bl.kind, bl.g, bl.root, bl.s)
	if err != nil {
		return err
	}
	c := make([]uint64, len(bl.g.Grid))
	var walk func(d int) error
	walk = func(d int) error {
		if d == len(c) {
			_, err := x.Get(ctx, c)
			return err
		}
		for c[d] = 0; c[d] < bl.g.Grid[d]; c[d]++ {
			if err := walk(d + 1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(0); err != nil {
		return err
	}
	if err := x.Range(ctx, func([]uint64, Entry) bool { return true }); err != nil {
		return err
	}
	return x.Extents(ctx, func(int64, int64) error { return nil })
}

func TestCorruptBlocks(t *testing.T) {
	ctx := context.Background()
	for name, mk := range map[string]func(testing.TB) *built{"ea": buildEA, "fa": buildFA, "general": buildGeneral} {
		t.Run(name, func(t *testing.T) {
			bl := mk(t)
			if err := readEverything(ctx, bl); err != nil {
				t.Fatalf("intact index: %v", err)
			}
			if len(bl.blocks) < 2 {
				t.Fatalf("only %d block kinds", len(bl.blocks))
			}
			// Every bit flip of every block is caught.
			for m, list := range bl.blocks {
				for _, pb := range list {
					for i := 0; i < len(pb.b); i += 1 + len(pb.b)/40 {
						bl.s.poke(pb.off, func(b []byte) { b[i] ^= 0x10 })
						err := readEverything(ctx, bl)
						bl.s.poke(pb.off, func(b []byte) { b[i] ^= 0x10 })
						if !errors.Is(err, ErrCorrupt) {
							t.Fatalf("%s block at %d, byte %d flipped: %v", m[:], pb.off, i, err)
						}
					}
				}
			}
			// Every flipped or truncated root record is caught.
			for i := range bl.root {
				r := slices.Clone(bl.root)
				r[i] ^= 1
				if _, err := Open(ctx, bl.kind, bl.g, r, bl.s); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("root byte %d flipped: %v", i, err)
				}
				if _, err := Open(ctx, bl.kind, bl.g, bl.root[:i], bl.s); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("root truncated to %d: %v", i, err)
				}
			}
			// A root opened as the wrong kind or geometry is caught.
			other := KindGeneral
			if bl.kind == KindGeneral {
				other = KindExtensibleArray
			}
			if _, err := Open(ctx, other, bl.g, bl.root, bl.s); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("root opened as %v: %v", other, err)
			}
			if bl.kind != KindGeneral {
				g := Geometry{Grid: slices.Clone(bl.g.Grid), MaxGrid: slices.Clone(bl.g.MaxGrid)}
				g.Grid[0]--
				if _, err := Open(ctx, bl.kind, g, bl.root, bl.s); !errors.Is(err, ErrCorrupt) && bl.kind == KindExtensibleArray {
					t.Fatalf("root opened with another grid: %v", err)
				}
				g.MaxGrid[1]++
				g.Grid[0]++
				if _, err := Open(ctx, bl.kind, g, bl.root, bl.s); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("root opened with another maximum: %v", err)
				}
			}
		})
	}
}

// TestStaleBlock: a block that is internally valid but is not the version
// its parent names (a lost write leaving the old copy) is rejected through
// the checksum the parent records.
func TestStaleBlock(t *testing.T) {
	ctx := context.Background()
	s := newMemStore(t)
	g := Geometry{Grid: []uint64{3}, MaxGrid: []uint64{Unlimited}}
	x, _ := NewConfig(KindExtensibleArray, g, s, Config{DirectSlots: -1})
	x.Put(ctx, []uint64{0}, Entry{Addr: 1, Size: 1})
	if _, err := x.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.commit()
	old := s.liveSet()
	x.Put(ctx, []uint64{0}, Entry{Addr: 2, Size: 1})
	root, err := x.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Find the old and new data blocks (same size), and put the old
	// bytes where the new block is.
	var oldData, newData int64 = -1, -1
	size := int64(unitBlockSize(16))
	for off, sz := range old {
		if sz == size {
			oldData = off
		}
	}
	for off, sz := range s.liveSet() {
		if sz == size {
			newData = off
		}
	}
	if oldData < 0 || newData < 0 || oldData == newData {
		t.Fatalf("data blocks %d %d", oldData, newData)
	}
	stale := make([]byte, size)
	if err := s.ReadAt(ctx, stale, oldData); err != nil {
		t.Fatal(err)
	}
	s.poke(newData, func(b []byte) { copy(b, stale) })
	y, err := Open(ctx, KindExtensibleArray, g, root, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := y.Get(ctx, []uint64{0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("stale data block: %v", err)
	}
}

// TestDecodersRejectTruncation: every prefix of every valid block fails
// with ErrCorrupt.
func TestDecodersRejectTruncation(t *testing.T) {
	for _, bl := range []*built{buildEA(t), buildFA(t), buildGeneral(t)} {
		for m, list := range bl.blocks {
			for _, pb := range list {
				for n := 0; n < len(pb.b); n++ {
					if err := decodeAny(bl, pb.b, pb.b[:n]); !errors.Is(err, ErrCorrupt) {
						t.Fatalf("%s block cut to %d bytes: %v", m[:], n, err)
					}
				}
				if err := decodeAny(bl, pb.b, pb.b); err != nil {
					t.Fatalf("%s block intact: %v", m[:], err)
				}
			}
		}
	}
}

// decodeAny decodes b with the decoder for block full of bl's index (b is
// full or a damaged copy of it).
func decodeAny(bl *built, full, b []byte) error {
	ctx := context.Background()
	r, err := decodeRoot(bl.root)
	if err != nil {
		return err
	}
	switch magic(full[:4]) {
	case magicEAIndex:
		x, err := openEA(ctx, bl.g, r, bl.s)
		if err != nil {
			return err
		}
		return x.decodeIndexBlock(b, r.nelmts, r.count)
	case magicEASuper:
		x, _ := openEA(ctx, bl.g, r, bl.s)
		_, err := x.lay.decodeSuper(b, int(full[5]), r.nelmts)
		return err
	case magicEAData:
		x, _ := openEA(ctx, bl.g, r, bl.s)
		s := int(full[5])
		first := binary.LittleEndian.Uint64(full[8:])
		ui := int((first - x.lay.first(s, 0)) >> x.lay.sb[s].ulog)
		_, err := decodeUnit(b, magicEAData, uint8(s), x.lay.first(s, ui), 1<<x.lay.sb[s].ulog, r.nelmts)
		return err
	case magicFAHeader:
		gm, _ := newGeom(bl.g, false)
		x, _ := newFAShell(gm, r.p, bl.s)
		return x.decodeHeader(b, r.count)
	case magicFAPage:
		gm, _ := newGeom(bl.g, false)
		x, _ := newFAShell(gm, r.p, bl.s)
		first := binary.LittleEndian.Uint64(full[8:])
		_, err := decodeUnit(b, magicFAPage, 0, first, x.pageLen(int(first>>x.p)), x.nslots)
		return err
	case magicGenRoot:
		x := newGenShell(bl.g, bl.s, int(r.wide))
		return x.decodeRootBlock(b, r.count)
	case magicGenLeaf:
		x := newGenShell(bl.g, bl.s, int(r.wide))
		_, err := x.decodeLeaf(b, make([]uint64, len(bl.g.Grid)), nil, bl.g.Grid)
		return err
	}
	return corruptf("unknown magic")
}
