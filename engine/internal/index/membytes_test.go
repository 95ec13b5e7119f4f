package index

import (
	"context"
	"reflect"
	"testing"
)

// extentBytes sums the blocks of x's last flushed state.
func extentBytes(t *testing.T, x Index) int64 {
	t.Helper()
	var n int64
	if err := x.Extents(context.Background(), func(_, size int64) error { n += size; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMemBytesCold checks MemBytes on an opened index: only the top block
// before any lookup, and exactly the stored blocks' bytes once every entry
// was read (every block is then in memory, and nothing else is).
func TestMemBytesCold(t *testing.T) {
	ctx := context.Background()
	for name, bl := range map[string]*built{"ea": buildEA(t), "fa": buildFA(t), "general": buildGeneral(t)} {
		t.Run(name, func(t *testing.T) {
			x, err := Open(ctx, bl.kind, bl.g, bl.root, bl.s)
			if err != nil {
				t.Fatal(err)
			}
			total := extentBytes(t, x) // reads blocks but installs none
			cold := x.MemBytes()
			if cold <= 0 || cold >= total {
				t.Fatalf("cold MemBytes %d, want the top block only (0 < n < %d)", cold, total)
			}
			prev := cold
			c := make([]uint64, len(bl.g.Grid))
			var walk func(d int)
			walk = func(d int) {
				if d == len(c) {
					if _, err := x.Get(ctx, c); err != nil {
						t.Fatal(err)
					}
					m := x.MemBytes()
					if m < prev {
						t.Fatalf("MemBytes fell from %d to %d on a lookup", prev, m)
					}
					prev = m
					return
				}
				for c[d] = 0; c[d] < bl.g.Grid[d]; c[d]++ {
					walk(d + 1)
				}
			}
			walk(0)
			if got := x.MemBytes(); got != total {
				t.Fatalf("MemBytes after reading everything = %d, want the stored blocks' %d", got, total)
			}
		})
	}
}

// TestMemBytesGrowShrink checks that MemBytes grows as entries are
// appended and falls once a shrinking Resize drops blocks, and that a
// created (all in memory) index's figure matches its flushed blocks.
func TestMemBytesGrowShrink(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		kind       Kind
		big, small Geometry
	}{
		"ea":      {KindExtensibleArray, Geometry{Grid: []uint64{200, 3}, MaxGrid: []uint64{Unlimited, 3}}, Geometry{Grid: []uint64{2, 3}, MaxGrid: []uint64{Unlimited, 3}}},
		"fa":      {KindFixedArray, Geometry{Grid: []uint64{60, 5}, MaxGrid: []uint64{60, 5}}, Geometry{Grid: []uint64{2, 5}, MaxGrid: []uint64{60, 5}}},
		"general": {KindGeneral, Geometry{Grid: []uint64{40, 7}, MaxGrid: []uint64{Unlimited, Unlimited}}, Geometry{Grid: []uint64{2, 7}, MaxGrid: []uint64{Unlimited, Unlimited}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newMemStore(t)
			x, err := NewConfig(tc.kind, tc.big, s, smallEA)
			if err != nil {
				t.Fatal(err)
			}
			empty := x.MemBytes()
			prev := empty
			for i := uint64(0); i < tc.big.Grid[0]; i++ {
				for j := uint64(0); j < tc.big.Grid[1]; j++ {
					if _, err := x.Put(ctx, []uint64{i, j}, Entry{Addr: 512 + i*100 + j, Size: 1}); err != nil {
						t.Fatal(err)
					}
				}
				m := x.MemBytes()
				if m < prev {
					t.Fatalf("MemBytes fell from %d to %d on an append", prev, m)
				}
				prev = m
			}
			if prev <= empty {
				t.Fatalf("MemBytes %d after appending, %d empty: did not grow", prev, empty)
			}
			if _, err := x.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			s.commit()
			full := x.MemBytes()
			if ext := extentBytes(t, x); full != ext {
				t.Fatalf("MemBytes %d after Flush, stored blocks %d", full, ext)
			}
			if err := x.Resize(ctx, tc.small, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := x.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			s.commit()
			shrunk := x.MemBytes()
			if shrunk >= full/2 {
				t.Fatalf("MemBytes %d after shrinking to %v, %d before", shrunk, tc.small.Grid, full)
			}
			if ext := extentBytes(t, x); shrunk != ext {
				t.Fatalf("MemBytes %d after shrinking, stored blocks %d", shrunk, ext)
			}
		})
	}
}

// BenchmarkMemBytes: the engine calls MemBytes after every cache lookup
// batch, so it must cost about as little as a lookup. scc is MemBytes on a
// fully loaded 200,000-entry index of each kind; baseline is one Get on
// the same index.
// TestDropClean: DropClean gives back the memory of every leaf equal to
// its block on disk and keeps the changed ones; every entry reads the same
// afterwards (the dropped leaves are read again); after a Flush what stays
// is what a freshly opened index of the new root keeps (the top block and,
// for an extensible array, its super blocks).
func TestDropClean(t *testing.T) {
	ctx := context.Background()
	for name, bl := range map[string]*built{"ea": buildEA(t), "fa": buildFA(t), "general": buildGeneral(t)} {
		t.Run(name, func(t *testing.T) {
			x, err := Open(ctx, bl.kind, bl.g, bl.root, bl.s)
			if err != nil {
				t.Fatal(err)
			}
			all := func(x Index) map[string]Entry {
				m := map[string]Entry{}
				c := make([]uint64, len(bl.g.Grid))
				var walk func(d int)
				walk = func(d int) {
					if d == len(c) {
						e, err := x.Get(ctx, c)
						if err != nil {
							t.Fatal(err)
						}
						m[key(c)] = e
						return
					}
					for c[d] = 0; c[d] < bl.g.Grid[d]; c[d]++ {
						walk(d + 1)
					}
				}
				walk(0)
				return m
			}
			before := all(x)
			total := x.MemBytes()
			x.DropClean()
			floor := x.MemBytes()
			if floor >= total {
				t.Fatalf("DropClean of a clean index kept %d of %d bytes", floor, total)
			}
			if after := all(x); !reflect.DeepEqual(after, before) || x.MemBytes() != total {
				t.Fatalf("entries changed or memory %d != %d after reloading", x.MemBytes(), total)
			}
			// A changed leaf stays (one in the middle: an extensible
			// array keeps its first entries in its index block).
			c := make([]uint64, len(bl.g.Grid))
			for d := range c {
				c[d] = bl.g.Grid[d] / 2
			}
			e := Entry{Addr: 1 << 40, Size: 7, Sum: 9}
			if _, err := x.Put(ctx, c, e); err != nil {
				t.Fatal(err)
			}
			before[key(c)] = e
			x.DropClean()
			if got := x.MemBytes(); got <= floor {
				t.Fatalf("DropClean with one changed leaf kept %d bytes, no more than the clean floor %d", got, floor)
			}
			if got, err := x.Get(ctx, c); err != nil || got != e {
				t.Fatalf("changed entry after DropClean: %+v, %v", got, err)
			}
			root, err := x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			bl.s.commit()
			x.DropClean()
			y, err := Open(ctx, bl.kind, bl.g, root, bl.s)
			if err != nil {
				t.Fatal(err)
			}
			if fresh := all(y); !reflect.DeepEqual(fresh, before) {
				t.Fatal("the flushed root does not hold the entries")
			}
			y.DropClean()
			if got, want := x.MemBytes(), y.MemBytes(); got != want {
				t.Fatalf("after Flush and DropClean: %d bytes, a fresh index of the root keeps %d", got, want)
			}
			if after := all(x); !reflect.DeepEqual(after, before) {
				t.Fatal("entries changed across Flush and DropClean")
			}
		})
	}
}

// TestDropCleanAfterFlush: a Flush leaves no block pinned in memory. Every
// block it did not rewrite, including the unchanged units of a rewritten
// super block, is dropped by the next DropClean like on a fresh open.
func TestDropCleanAfterFlush(t *testing.T) {
	ctx := context.Background()
	for name, bl := range map[string]*built{"ea": buildEA(t), "fa": buildFA(t), "general": buildGeneral(t)} {
		t.Run(name, func(t *testing.T) {
			x, err := Open(ctx, bl.kind, bl.g, bl.root, bl.s)
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Range(ctx, func([]uint64, Entry) bool { return true }); err != nil {
				t.Fatal(err)
			}
			c := make([]uint64, len(bl.g.Grid))
			for d := range c {
				c[d] = bl.g.Grid[d] / 2
			}
			if _, err := x.Put(ctx, c, Entry{Addr: 1 << 40, Size: 7, Sum: 9}); err != nil {
				t.Fatal(err)
			}
			root, err := x.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			bl.s.commit()
			y, err := Open(ctx, bl.kind, bl.g, root, bl.s)
			if err != nil {
				t.Fatal(err)
			}
			if err := y.Range(ctx, func([]uint64, Entry) bool { return true }); err != nil {
				t.Fatal(err)
			}
			x.DropClean()
			y.DropClean()
			if got, want := x.MemBytes(), y.MemBytes(); got != want {
				t.Fatalf("after Flush and DropClean: %d bytes, a fresh index of the root keeps %d", got, want)
			}
		})
	}
}

func BenchmarkMemBytes(b *testing.B) {
	ctx := context.Background()
	for _, k := range []Kind{KindExtensibleArray, KindGeneral} {
		x := benchIndex(b, k, 200_000, 0)
		b.Run(k.String()+"/scc", func(b *testing.B) {
			for b.Loop() {
				_ = x.MemBytes()
			}
		})
		b.Run(k.String()+"/baseline", func(b *testing.B) {
			c := []uint64{0}
			i := uint64(0)
			for b.Loop() {
				c[0] = i % 200_000
				i += 7919
				if _, err := x.Get(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
