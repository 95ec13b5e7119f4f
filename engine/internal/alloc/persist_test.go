package alloc

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestFreeReplacedJoinsTheCommit: a block the commit in flight replaces is
// free in the state it commits (FreeAfter(e) lists it, CommitPrepared(e)
// reuses it); a block freed by anything else during the window waits for
// the next commit and is left out of FreeAfter(e).
func TestFreeReplacedJoinsTheCommit(t *testing.T) {
	a := New(ds, ds)
	oldIdx := mustAlloc(t, a, 100)
	chunk := mustAlloc(t, a, 200)
	a.Commit()
	e := a.PrepareCommit()
	newIdx := mustAlloc(t, a, 100)
	if err := a.FreeReplaced(e, oldIdx, 100); err != nil {
		t.Fatal(err)
	}
	a.Free(chunk, 200) // a racing write-back: the captured state may still name it
	got := a.FreeAfter(e)
	if want := []Extent{{oldIdx, 100}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("FreeAfter = %v, want %v", got, want)
	}
	if err := a.CommitPrepared(e); err != nil {
		t.Fatal(err)
	}
	if got, want := a.FreeExtents(), []Extent{{oldIdx, 100}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("free after commit = %v, want %v", got, want)
	}
	if p := a.PendingExtents(); !reflect.DeepEqual(p, []Extent{{chunk, 200}}) {
		t.Fatalf("pending = %v", p)
	}
	_ = newIdx
	mustCheck(t, a)

	// A stale epoch (or none in flight) is a plain Free.
	x := mustAlloc(t, a, 10)
	a.Commit()
	if err := a.FreeReplaced(e, x, 10); err != nil {
		t.Fatal(err)
	}
	for _, f := range a.FreeAfter(e + 1) {
		if x < f.End() && f.Off < x+10 {
			t.Fatalf("FreeAfter(%d) = %v holds %d: a free outside a commit must wait", e+1, a.FreeAfter(e+1), x)
		}
	}
	if err := a.FreeReplaced(e, x, 10); !errors.Is(err, ErrBadFree) {
		t.Fatalf("double FreeReplaced: %v", err)
	}
}

// TestRebuildFreeMatchesRebuild: random histories of allocations, frees,
// replacements and commits; after each quiescent commit the map FreeAfter
// gave rebuilds an allocator equal to a rebuild from the live extents.
func TestRebuildFreeMatchesRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 200; run++ {
		a := New(ds, ds)
		live := map[int64]int64{} // what the committed state references
		for step := 0; step < 60; step++ {
			e := a.PrepareCommit()
			next := map[int64]int64{}
			for off, size := range live {
				switch rng.IntN(4) {
				case 0: // dropped by the commit
					if err := a.FreeReplaced(e, off, size); err != nil {
						t.Fatal(err)
					}
				case 1: // replaced by a new block
					ns := 1 + rng.Int64N(300)
					next[mustAlloc(t, a, ns)] = ns
					if err := a.FreeReplaced(e, off, size); err != nil {
						t.Fatal(err)
					}
				default:
					next[off] = size
				}
			}
			for range rng.IntN(4) {
				size := 1 + rng.Int64N(500)
				next[mustAlloc(t, a, size)] = size
			}
			free := a.FreeAfter(e)
			if err := a.CommitPrepared(e); err != nil {
				t.Fatal(err)
			}
			live = next
			var exts []Extent
			for off, size := range live {
				exts = append(exts, Extent{off, size})
			}
			want, err := Rebuild(ds, a.EOF(), exts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := RebuildFree(ds, a.EOF(), free)
			if err != nil {
				t.Fatal(err)
			}
			mustCheck(t, got)
			if !reflect.DeepEqual(got.FreeExtents(), want.FreeExtents()) || got.Stats() != want.Stats() {
				t.Fatalf("run %d step %d: RebuildFree free %v stats %+v; Rebuild free %v stats %+v",
					run, step, got.FreeExtents(), got.Stats(), want.FreeExtents(), want.Stats())
			}
			if rng.IntN(8) == 0 {
				a = got // continue from the reopened allocator
			}
		}
	}
}

func TestRebuildFreeErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		free []Extent
		want error
	}{
		{"overlap", []Extent{{ds, 10}, {ds + 5, 10}}, ErrOverlap},
		{"past eof", []Extent{{ds + 90, 20}}, ErrOutOfRange},
		{"below start", []Extent{{ds - 1, 2}}, ErrOutOfRange},
		{"empty", []Extent{{ds, 0}}, ErrInvalid},
	} {
		if _, err := RebuildFree(ds, ds+100, c.free); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	a, err := RebuildFree(ds, ds+100, []Extent{{ds + 10, 10}, {ds + 20, 5}, {ds + 90, 10}})
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, a)
	if got, want := a.FreeExtents(), []Extent{{ds + 10, 15}, {ds + 90, 10}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("free %v, want %v", got, want)
	}
	if st := a.Stats(); st.HeldBytes != 75 || st.FreeBytes != 25 {
		t.Fatalf("stats %+v", st)
	}
}

// FuzzRebuildFree: the free map comes from a cache image on disk. Never a
// panic; on success Check passes, the free bytes are the map's, and a new
// allocation never lands outside the map or below EOF's held space.
func FuzzRebuildFree(f *testing.F) {
	addExtentSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		eof, free, freeBytes, ok := decodeExtents(b)
		if !ok {
			return
		}
		a, err := RebuildFree(ds, eof, free)
		if err != nil {
			if !errors.Is(err, ErrOverlap) && !errors.Is(err, ErrOutOfRange) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		if err := a.Check(); err != nil {
			t.Fatal(err)
		}
		if st := a.Stats(); st.FreeBytes != freeBytes || st.HeldBytes != eof-ds-freeBytes {
			t.Fatalf("stats %+v for %d free bytes", st, freeBytes)
		}
		off, err := a.Alloc(1)
		if err != nil {
			return
		}
		if off < eof {
			in := false
			for _, e := range free {
				in = in || off >= e.Off && off < e.End()
			}
			if !in {
				t.Fatalf("allocated %d outside the free map %v", off, free)
			}
		}
	})
}
