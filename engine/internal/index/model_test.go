package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"testing"
)

// smallEA makes an extensible array with tiny blocks, so that a few
// hundred entries exercise direct slots, hoisted data blocks, super
// blocks, paged data blocks and growing pages.
var smallEA = Config{DirectSlots: 3, DataBlockMinBits: 1, SuperBlockMinPtrsBits: 1, PageBits: 2, SuperBlockMaxPagesBits: 2, LeafMax: 4}

// modelCase is one index configuration the model test drives.
type modelCase struct {
	name  string
	kind  Kind
	cfg   Config
	max   []uint64
	bound []uint64 // largest grid the test resizes to
}

var modelCases = []modelCase{
	{"ea-1d-default", KindExtensibleArray, Config{}, []uint64{Unlimited}, []uint64{300}},
	{"ea-2d-small", KindExtensibleArray, smallEA, []uint64{Unlimited, 3}, []uint64{80, 3}},
	{"ea-unlimited-last", KindExtensibleArray, smallEA, []uint64{4, 2, Unlimited}, []uint64{4, 2, 40}},
	{"ea-no-direct", KindExtensibleArray, Config{DirectSlots: -1, DataBlockMinBits: 1, SuperBlockMinPtrsBits: 2, PageBits: 3, SuperBlockMaxPagesBits: 1}, []uint64{Unlimited}, []uint64{400}},
	{"fa-2d", KindFixedArray, smallEA, []uint64{5, 7}, []uint64{5, 7}},
	{"fa-3d-default", KindFixedArray, Config{}, []uint64{3, 40, 20}, []uint64{3, 40, 20}},
	{"general-2d", KindGeneral, smallEA, []uint64{Unlimited, Unlimited}, []uint64{20, 20}},
	{"general-3d", KindGeneral, Config{LeafMax: 7}, []uint64{Unlimited, 4, Unlimited}, []uint64{8, 4, 8}},
}

type refModel map[string]refItem

type refItem struct {
	c []uint64
	e Entry
}

func key(c []uint64) string { return fmt.Sprint(c) }

func randCoord(r *rand.Rand, grid []uint64) []uint64 {
	c := make([]uint64, len(grid))
	for d, n := range grid {
		if n == 0 {
			return nil
		}
		c[d] = r.Uint64N(n)
	}
	return c
}

func randEntry(r *rand.Rand) Entry {
	return Entry{Addr: r.Uint64N(1<<40) + 1, Size: r.Uint64N(1<<20) + 1, Mask: r.Uint32(), Sum: r.Uint32()}
}

func insideGrid(c, grid []uint64) bool {
	for d := range c {
		if c[d] >= grid[d] {
			return false
		}
	}
	return true
}

// checkAll compares x with ref through Get, Range and Len.
func checkAll(t *testing.T, ctx context.Context, x Index, ref refModel) {
	t.Helper()
	if x.Len() != len(ref) {
		t.Fatalf("Len %d, model %d", x.Len(), len(ref))
	}
	seen := 0
	var prev []uint64
	err := x.Range(ctx, func(c []uint64, e Entry) bool {
		it, ok := ref[key(c)]
		if !ok || it.e != e {
			t.Fatalf("Range gave %v=%+v, model %+v (present %v)", c, e, it.e, ok)
		}
		if prev != nil && x.Kind() == KindGeneral && cmpKey(prev, c) >= 0 {
			t.Fatalf("Range out of order: %v after %v", c, prev)
		}
		prev = slices.Clone(c)
		seen++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(ref) {
		t.Fatalf("Range saw %d entries, model has %d", seen, len(ref))
	}
	for _, it := range ref {
		e, err := x.Get(ctx, it.c)
		if err != nil || e != it.e {
			t.Fatalf("Get(%v) = %+v, %v; model %+v", it.c, e, err, it.e)
		}
	}
}

// checkExtents checks that Extents reports exactly the store's live blocks
// (the test store holds nothing else), without overlaps.
func checkExtents(t *testing.T, ctx context.Context, x Index, s *memStore) {
	t.Helper()
	got := map[int64]int64{}
	var list [][2]int64
	err := x.Extents(ctx, func(off, size int64) error {
		if _, dup := got[off]; dup {
			t.Fatalf("Extents reports %d twice", off)
		}
		got[off] = size
		list = append(list, [2]int64{off, size})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i][0] < list[j][0] })
	for i := 1; i < len(list); i++ {
		if list[i-1][0]+list[i-1][1] > list[i][0] {
			t.Fatalf("extents overlap: %v %v", list[i-1], list[i])
		}
	}
	live := s.liveSet()
	if len(live) != len(got) {
		t.Fatalf("Extents reports %d blocks, store has %d live", len(got), len(live))
	}
	for off, size := range live {
		if got[off] != size {
			t.Fatalf("live block %d+%d reported as %d", off, size, got[off])
		}
	}
}

func TestModel(t *testing.T) {
	steps := 2500
	if os.Getenv("SCC_STRESS") == "long" {
		steps = 100000
	}
	for _, mc := range modelCases {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", mc.name, seed), func(t *testing.T) {
				t.Parallel()
				runModel(t, mc, seed, steps)
			})
		}
	}
}

func runModel(t *testing.T, mc modelCase, seed uint64, steps int) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 99))
	s := newMemStore(t)
	grid := make([]uint64, len(mc.max))
	for d := range grid {
		grid[d] = 1 + r.Uint64N(mc.bound[d])
	}
	geo := func() Geometry { return Geometry{Grid: slices.Clone(grid), MaxGrid: mc.max} }
	x, err := NewConfig(mc.kind, geo(), s, mc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if x.Kind() != mc.kind {
		t.Fatalf("Kind %v", x.Kind())
	}
	ref := refModel{}
	var root []byte
	flush := func() {
		t.Helper()
		if r.IntN(4) == 0 {
			s.failAfter.Store(int64(1 + r.IntN(6)))
			if _, err := x.Flush(ctx); err != nil && !errors.Is(err, errInjected) {
				t.Fatalf("Flush with failure: %v", err)
			}
			s.failAfter.Store(0)
		}
		root, err = x.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.commit()
		checkExtents(t, ctx, x, s)
	}
	for step := 0; step < steps; step++ {
		switch op := r.IntN(100); {
		case op < 40: // Put
			c := randCoord(r, grid)
			if c == nil {
				continue
			}
			e := randEntry(r)
			old, err := x.Put(ctx, c, e)
			if err != nil || old != ref[key(c)].e {
				t.Fatalf("Put(%v) = %+v, %v; model %+v", c, old, err, ref[key(c)].e)
			}
			ref[key(c)] = refItem{c, e}
		case op < 55: // Delete
			c := randCoord(r, grid)
			if c == nil {
				continue
			}
			old, err := x.Delete(ctx, c)
			if err != nil || old != ref[key(c)].e {
				t.Fatalf("Delete(%v) = %+v, %v; model %+v", c, old, err, ref[key(c)].e)
			}
			delete(ref, key(c))
		case op < 75: // Get
			c := randCoord(r, grid)
			if c == nil {
				continue
			}
			e, err := x.Get(ctx, c)
			if err != nil || e != ref[key(c)].e {
				t.Fatalf("Get(%v) = %+v, %v; model %+v", c, e, err, ref[key(c)].e)
			}
		case op < 78: // out of range
			c := slices.Clone(grid)
			if _, err := x.Get(ctx, c); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("Get(%v) outside grid: %v", c, err)
			}
			if _, err := x.Put(ctx, c, randEntry(r)); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("Put(%v) outside grid: %v", c, err)
			}
		case op < 85: // Resize
			ng := make([]uint64, len(grid))
			for d := range ng {
				ng[d] = r.Uint64N(mc.bound[d] + 1)
				if r.IntN(3) > 0 { // mostly move one dimension only
					ng[d] = grid[d]
				}
			}
			want := map[string]Entry{}
			for k, it := range ref {
				if !insideGrid(it.c, ng) {
					want[k] = it.e
					delete(ref, k)
				}
			}
			got := map[string]Entry{}
			err := x.Resize(ctx, Geometry{Grid: ng, MaxGrid: mc.max}, func(c []uint64, e Entry) {
				if _, dup := got[key(c)]; dup {
					t.Errorf("Resize removed %v twice", c)
				}
				got[key(c)] = e
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("Resize %v→%v removed %d entries, model %d", grid, ng, len(got), len(want))
			}
			for k, e := range want {
				if got[k] != e {
					t.Fatalf("Resize removed %s=%+v, model %+v", k, got[k], e)
				}
			}
			grid = ng
		case op < 93:
			flush()
		case op < 97: // reopen from the root
			flush()
			y, err := Open(ctx, mc.kind, geo(), root, s)
			if err != nil {
				t.Fatal(err)
			}
			x = y
			checkExtents(t, ctx, x, s)
		default:
			checkAll(t, ctx, x, ref)
		}
	}
	checkAll(t, ctx, x, ref)
	flush()
	y, err := Open(ctx, mc.kind, geo(), root, s)
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, ctx, y, ref)
	// Deleting everything frees every block but the top one.
	for _, it := range ref {
		if _, err := y.Delete(ctx, it.c); err != nil {
			t.Fatal(err)
		}
	}
	x = y
	flush()
	if n := len(s.liveSet()); n != 1 {
		t.Fatalf("empty index occupies %d blocks", n)
	}
}
