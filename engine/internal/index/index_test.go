package index

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestChooseKind(t *testing.T) {
	cases := []struct {
		max  []uint64
		want Kind
	}{
		{[]uint64{10, 20}, KindFixedArray},
		{[]uint64{Unlimited, 20}, KindExtensibleArray},
		{[]uint64{20, Unlimited, 3}, KindExtensibleArray},
		{[]uint64{Unlimited, Unlimited}, KindGeneral},
		{[]uint64{1 << 20, 1 << 20}, KindExtensibleArray},    // too many slots for one page table
		{[]uint64{Unlimited, 1 << 40, 1 << 40}, KindGeneral}, // slab overflows
		{[]uint64{1 << 30, 1 << 30}, KindGeneral},            // beyond the array's capacity
		{[]uint64{Unlimited, 1 << 30}, KindGeneral},          // too few slabs fit
	}
	for _, c := range cases {
		if got := ChooseKind(c.max); got != c.want {
			t.Errorf("ChooseKind(%v) = %v, want %v", c.max, got, c.want)
		}
		if _, err := New(c.want, Geometry{Grid: make([]uint64, len(c.max)), MaxGrid: c.max}, newMemStore(t)); err != nil {
			t.Errorf("New(%v, %v): %v", c.want, c.max, err)
		}
	}
	for k, s := range map[Kind]string{KindGeneral: "general", KindFixedArray: "fixed-array", KindExtensibleArray: "extensible-array", 9: "unknown"} {
		if k.String() != s {
			t.Errorf("%d.String() = %q", k, k.String())
		}
	}
}

func TestNewRejects(t *testing.T) {
	s := newMemStore(t)
	bad := []struct {
		kind Kind
		g    Geometry
		cfg  Config
		want error
	}{
		{KindFixedArray, Geometry{Grid: []uint64{1}, MaxGrid: []uint64{Unlimited}}, Config{}, ErrGeometry},
		{KindExtensibleArray, Geometry{Grid: []uint64{1, 1}, MaxGrid: []uint64{Unlimited, Unlimited}}, Config{}, ErrGeometry},
		{KindExtensibleArray, Geometry{Grid: []uint64{1, 9}, MaxGrid: []uint64{Unlimited, 8}}, Config{}, ErrGeometry},
		{KindGeneral, Geometry{Grid: []uint64{1}, MaxGrid: []uint64{Unlimited, 2}}, Config{}, ErrGeometry},
		{KindGeneral, Geometry{}, Config{}, ErrGeometry},
		{KindFixedArray, Geometry{Grid: []uint64{1, 1}, MaxGrid: []uint64{1 << 30, 1 << 30}}, Config{}, ErrGeometry},
		{KindExtensibleArray, Geometry{Grid: []uint64{1 << 62}, MaxGrid: []uint64{Unlimited}}, Config{}, ErrOutOfRange},
		{KindExtensibleArray, Geometry{Grid: []uint64{1}, MaxGrid: []uint64{Unlimited}}, Config{PageBits: 3}, ErrConfig},
		{KindExtensibleArray, Geometry{Grid: []uint64{1}, MaxGrid: []uint64{Unlimited}}, Config{DirectSlots: 5000}, ErrConfig},
		{KindGeneral, Geometry{Grid: []uint64{1}, MaxGrid: []uint64{Unlimited}}, Config{LeafMax: 2}, ErrConfig},
		{Kind(7), Geometry{Grid: []uint64{1}, MaxGrid: []uint64{Unlimited}}, Config{}, ErrGeometry},
	}
	for i, b := range bad {
		if _, err := NewConfig(b.kind, b.g, s, b.cfg); !errors.Is(err, b.want) {
			t.Errorf("case %d: NewConfig(%v, %+v, %+v) = %v, want %v", i, b.kind, b.g, b.cfg, err, b.want)
		}
	}
	x, _ := New(KindExtensibleArray, Geometry{Grid: []uint64{4, 2}, MaxGrid: []uint64{Unlimited, 2}}, s)
	if err := x.Resize(context.Background(), Geometry{Grid: []uint64{4, 2}, MaxGrid: []uint64{Unlimited, 3}}, nil); !errors.Is(err, ErrGeometry) {
		t.Errorf("Resize with a new maximum: %v", err)
	}
	if err := x.Resize(context.Background(), Geometry{Grid: []uint64{4, 3}, MaxGrid: []uint64{Unlimited, 2}}, nil); !errors.Is(err, ErrGeometry) {
		t.Errorf("Resize above the maximum: %v", err)
	}
	if err := x.Resize(context.Background(), Geometry{Grid: []uint64{1 << 62, 2}, MaxGrid: []uint64{Unlimited, 2}}, nil); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("Resize beyond capacity: %v", err)
	}
}

// TestEALayout checks the element → (super block, unit, entry) mapping of
// EA index §XVII–§XIX for several configurations: every element has one
// place, units tile the elements in order, hoisted data blocks are never
// paged, and no super block or unit exceeds its bound.
func TestEALayout(t *testing.T) {
	for _, cfg := range []Config{{}, smallEA, {DirectSlots: 1, DataBlockMinBits: 2, SuperBlockMinPtrsBits: 3, PageBits: 8, SuperBlockMaxPagesBits: 3}} {
		c := cfg.withDefaults()
		l, err := newEALayout(c.DirectSlots, uint8(c.DataBlockMinBits), uint8(c.SuperBlockMinPtrsBits), uint8(c.PageBits), uint8(c.SuperBlockMaxPagesBits))
		if err != nil {
			t.Fatal(err)
		}
		next := uint64(l.d)
		for s, info := range l.sb {
			dblk := uint8(l.m) + uint8((s+1)/2)
			if info.hoisted != (s/2 < int(l.k)) || info.hoisted && info.ulog != dblk {
				t.Fatalf("%+v: super block %d hoisted=%v ulog=%d", c, s, info.hoisted, info.ulog)
			}
			if info.ulog > maxUnitBits || info.nunits > 1<<maxUnitBits {
				t.Fatalf("super block %d too large: %+v", s, info)
			}
			if s < 6 { // walk every element of the small super blocks
				for ui := 0; ui < info.nunits; ui++ {
					if f := l.first(s, ui); f != next {
						t.Fatalf("super block %d unit %d starts at %d, want %d", s, ui, f, next)
					}
					for ei := 0; ei < 1<<info.ulog; ei++ {
						gs, gu, ge := l.locate(next)
						if gs != s || gu != ui || ge != ei {
							t.Fatalf("locate(%d) = %d/%d/%d, want %d/%d/%d", next, gs, gu, ge, s, ui, ei)
						}
						next++
					}
				}
			} else {
				next = l.first(s, 0)
			}
			last := l.first(s, 0) + uint64(info.nunits)<<info.ulog - 1
			if gs, gu, ge := l.locate(last); gs != s || gu != info.nunits-1 || ge != 1<<info.ulog-1 {
				t.Fatalf("locate(last of %d) = %d/%d/%d", s, gs, gu, ge)
			}
		}
		if l.capacity < 1<<36 {
			t.Errorf("%+v: capacity only %d", c, l.capacity)
		}
	}
	l, _ := newEALayout(4, 4, 2, 10, 16)
	if l.nHoist != 6 || l.indexSize != 24+4*entrySize+(6+len(l.sb)-4)*ptrSize+trailerSize {
		t.Errorf("default layout: %d hoisted data blocks, index block %d bytes", l.nHoist, l.indexSize)
	}
}

// TestEALinearization checks §XXI: with one unlimited dimension, a chunk in
// a later slab always has a larger linear index than every chunk of an
// earlier slab, whatever the other coordinates — appends never insert.
func TestEALinearization(t *testing.T) {
	for _, max := range [][]uint64{{Unlimited, 3, 4}, {3, Unlimited, 4}, {3, 4, Unlimited}} {
		grid := slices.Clone(max)
		u := slices.Index(max, Unlimited)
		grid[u] = 5
		gm, err := newGeom(Geometry{Grid: grid, MaxGrid: max}, true)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[uint64]bool{}
		c := make([]uint64, 3)
		for c[0] = 0; c[0] < grid[0]; c[0]++ {
			for c[1] = 0; c[1] < grid[1]; c[1]++ {
				for c[2] = 0; c[2] < grid[2]; c[2]++ {
					i, err := gm.linear(c)
					if err != nil {
						t.Fatal(err)
					}
					if i/gm.slab != c[u] || seen[i] {
						t.Fatalf("%v: coordinate %v → %d (slab %d)", max, c, i, gm.slab)
					}
					seen[i] = true
					back := make([]uint64, 3)
					gm.coordOf(i, back)
					if !slices.Equal(back, c) {
						t.Fatalf("coordOf(%d) = %v, want %v", i, back, c)
					}
				}
			}
		}
	}
}

// TestColdLookup: a lookup of a random chunk among 1,000,000 appended
// entries, on an index opened from its root, needs at most 3 block reads
// (Open's included): index block → super block → data block page
// (EA index §XVIII). The fixed array and the General index need 2.
func TestColdLookup(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		kind  Kind
		n     uint64
		max   []uint64
		reads int64
	}{
		{KindExtensibleArray, 1_000_000, []uint64{Unlimited}, 3},
		{KindFixedArray, 1_000_000, []uint64{1_000_000}, 2},
		{KindGeneral, 200_000, []uint64{Unlimited, Unlimited}, 2},
	}
	if testing.Short() {
		cases[0].n, cases[1].n, cases[1].max[0] = 100_000, 100_000, 100_000
	}
	for _, c := range cases {
		t.Run(c.kind.String(), func(t *testing.T) {
			s := newMemStore(t)
			grid := slices.Clone(c.max)
			grid[0] = c.n
			if len(grid) > 1 {
				grid[1] = 1
			}
			g := Geometry{Grid: grid, MaxGrid: c.max}
			x, err := New(c.kind, g, s)
			if err != nil {
				t.Fatal(err)
			}
			coord := make([]uint64, len(grid))
			for i := uint64(0); i < c.n; i++ {
				coord[0] = i
				if _, err := x.Put(ctx, coord, Entry{Addr: i + 1, Size: 100, Mask: uint32(i)}); err != nil {
					t.Fatal(err)
				}
			}
			root, err := x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.commit()
			r := rand.New(rand.NewPCG(1, 2))
			worst := int64(0)
			for k := 0; k < 50; k++ {
				before := s.reads.Load()
				y, err := Open(ctx, c.kind, g, root, s)
				if err != nil {
					t.Fatal(err)
				}
				i := r.Uint64N(c.n)
				if k == 0 {
					i = c.n - 1
				}
				coord[0] = i
				e, err := y.Get(ctx, coord)
				if err != nil || e.Addr != i+1 {
					t.Fatalf("Get(%d) = %+v, %v", i, e, err)
				}
				worst = max(worst, s.reads.Load()-before)
				// A second lookup in the same block reads nothing.
				before = s.reads.Load()
				if _, err := y.Get(ctx, coord); err != nil || s.reads.Load() != before {
					t.Fatalf("warm lookup read %d blocks", s.reads.Load()-before)
				}
			}
			if worst > c.reads {
				t.Fatalf("cold lookup needed %d block reads, want at most %d", worst, c.reads)
			}
			t.Logf("%v: cold lookup among %d entries: at most %d block reads", c.kind, c.n, worst)
		})
	}
}

// TestEAAppendFlushCost: appending one chunk to a large extensible array
// and flushing writes one data block page, the index block and at most one
// super block — O(1), never a whole data block or the whole array.
func TestEAAppendFlushCost(t *testing.T) {
	ctx := context.Background()
	s := newMemStore(t)
	const n = 200_000
	g := Geometry{Grid: []uint64{n + 100}, MaxGrid: []uint64{Unlimited}}
	x, err := New(KindExtensibleArray, g, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < n; i++ {
		if _, err := x.Put(ctx, []uint64{i}, Entry{Addr: i + 1, Size: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := x.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.commit()
	for i := uint64(n); i < n+100; i++ {
		w := s.writes.Load()
		if _, err := x.Put(ctx, []uint64{i}, Entry{Addr: i + 1, Size: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := x.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		s.commit()
		if d := s.writes.Load() - w; d > 3 {
			t.Fatalf("append+flush at %d wrote %d blocks", i, d)
		}
	}
	live := s.liveSet()
	var bytes int64
	for _, sz := range live {
		bytes += sz
	}
	// Metadata per chunk tends to the entry size (EA index §XVIII).
	if per := float64(bytes) / float64(n+100); per > 1.1*entrySize {
		t.Errorf("index uses %.1f bytes per chunk", per)
	}
}

// TestResizeFreesBlocks: shrinking the unlimited dimension removes the
// entries beyond it and, at the next Flush, frees their blocks.
func TestResizeFreesBlocks(t *testing.T) {
	ctx := context.Background()
	s := newMemStore(t)
	g := Geometry{Grid: []uint64{5000}, MaxGrid: []uint64{Unlimited}}
	x, err := NewConfig(KindExtensibleArray, g, s, smallEA)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 5000; i++ {
		if _, err := x.Put(ctx, []uint64{i}, Entry{Addr: i + 1, Size: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := x.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.commit()
	full := len(s.liveSet())
	n := 0
	if err := x.Resize(ctx, Geometry{Grid: []uint64{10}, MaxGrid: g.MaxGrid}, func(c []uint64, e Entry) {
		if c[0] < 10 || e.Addr != c[0]+1 {
			t.Errorf("removed %v=%+v", c, e)
		}
		n++
	}); err != nil {
		t.Fatal(err)
	}
	if n != 4990 || x.Len() != 10 {
		t.Fatalf("removed %d, Len %d", n, x.Len())
	}
	if _, err := x.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.commit()
	if after := len(s.liveSet()); after >= 8 || after >= full {
		t.Fatalf("%d blocks before, %d after shrinking to 10 entries", full, after)
	}
	checkExtents(t, ctx, x, s)
}

// TestFlushFailureKeepsState: a failed Flush leaves the committed blocks
// alone, hands back its new space, and the next Flush succeeds.
func TestFlushFailureKeepsState(t *testing.T) {
	ctx := context.Background()
	for _, mc := range modelCases {
		t.Run(mc.name, func(t *testing.T) {
			s := newMemStore(t)
			g := Geometry{Grid: mc.bound, MaxGrid: mc.max}
			x, err := NewConfig(mc.kind, g, s, mc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ref := refModel{}
			r := rand.New(rand.NewPCG(3, 3))
			for k := 0; k < 200; k++ {
				c := randCoord(r, mc.bound)
				e := randEntry(r)
				if _, err := x.Put(ctx, c, e); err != nil {
					t.Fatal(err)
				}
				ref[key(c)] = refItem{c, e}
			}
			root0, err := x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.commit()
			committed := s.liveSet()
			for fail := int64(1); ; fail++ {
				c := randCoord(r, mc.bound)
				e := randEntry(r)
				if _, err := x.Put(ctx, c, e); err != nil {
					t.Fatal(err)
				}
				ref[key(c)] = refItem{c, e}
				s.failAfter.Store(fail)
				_, err := x.Flush(ctx)
				s.failAfter.Store(0)
				if err == nil {
					break
				}
				if !errors.Is(err, errInjected) {
					t.Fatal(err)
				}
				// The committed state is intact and still opens.
				for off := range committed {
					if _, ok := s.liveSet()[off]; !ok {
						t.Fatalf("failed Flush freed committed block %d", off)
					}
				}
				if _, err := Open(ctx, mc.kind, g, root0, s); err != nil {
					t.Fatalf("committed root after failed Flush: %v", err)
				}
			}
			root, err := x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.commit()
			checkExtents(t, ctx, x, s)
			y, err := Open(ctx, mc.kind, g, root, s)
			if err != nil {
				t.Fatal(err)
			}
			checkAll(t, ctx, y, ref)
		})
	}
}

func TestContextCancelled(t *testing.T) {
	s := newMemStore(t)
	g := Geometry{Grid: []uint64{100}, MaxGrid: []uint64{Unlimited}}
	x, _ := NewConfig(KindExtensibleArray, g, s, smallEA)
	ctx := context.Background()
	for i := uint64(0); i < 100; i++ {
		x.Put(ctx, []uint64{i}, Entry{Addr: 1, Size: 1})
	}
	root, _ := x.Flush(ctx)
	y, err := Open(ctx, KindExtensibleArray, g, root, s)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := y.Get(cctx, []uint64{99}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context: %v", err)
	}
	if e, err := y.Get(ctx, []uint64{99}); err != nil || !e.Exists() {
		t.Fatalf("Get after: %+v %v", e, err)
	}
}
