package alloc

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
)

const ds = 8192

func mustCheck(t testing.TB, a *Allocator) {
	t.Helper()
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
}

func mustAlloc(t testing.TB, a *Allocator, size int64) int64 {
	t.Helper()
	off, err := a.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func TestFreshFileGrowsEOF(t *testing.T) {
	a := New(ds, ds)
	if a.EOF() != ds || a.DataStart() != ds {
		t.Fatalf("EOF %d", a.EOF())
	}
	x := mustAlloc(t, a, 100)
	y := mustAlloc(t, a, 50)
	if x != ds || y != ds+100 || a.EOF() != ds+150 {
		t.Fatalf("x=%d y=%d eof=%d", x, y, a.EOF())
	}
	mustCheck(t, a)
	// New with eof beyond dataStart: that space is free.
	b := New(ds, ds+1000)
	if got := b.FreeExtents(); !reflect.DeepEqual(got, []Extent{{ds, 1000}}) {
		t.Fatalf("free %v", got)
	}
	if off := mustAlloc(t, b, 10); off != ds {
		t.Fatalf("off %d", off)
	}
}

func TestFreshSpaceReusableAtOnce(t *testing.T) {
	a := New(ds, ds)
	x := mustAlloc(t, a, 100)
	a.Free(x, 100)
	if y := mustAlloc(t, a, 100); y != x {
		t.Fatalf("fresh space not reused: %d vs %d", y, x)
	}
	mustCheck(t, a)
}

func TestCommittedSpaceWaitsForCommit(t *testing.T) {
	a := New(ds, ds)
	x := mustAlloc(t, a, 100)
	a.Commit() // x is now referenced by the committed state
	a.Free(x, 100)
	if got := a.PendingExtents(); !reflect.DeepEqual(got, []Extent{{x, 100}}) {
		t.Fatalf("pending %v", got)
	}
	if y := mustAlloc(t, a, 100); y == x {
		t.Fatal("space referenced by the last commit reused before the next commit")
	}
	a.Commit()
	if got := a.PendingExtents(); got != nil {
		t.Fatalf("pending after commit %v", got)
	}
	if y := mustAlloc(t, a, 100); y != x {
		t.Fatalf("freed space not reused after commit: %d vs %d", y, x)
	}
	mustCheck(t, a)
}

func TestTwoPhaseCommit(t *testing.T) {
	a := New(ds, ds)
	before := mustAlloc(t, a, 10) // freed before prepare
	during := mustAlloc(t, a, 10) // freed during the window
	a.Commit()
	a.Free(before, 10)
	e := a.PrepareCommit()
	a.Free(during, 10)
	inWindow := mustAlloc(t, a, 7) // allocated during the window: held
	a.Free(inWindow, 7)
	if st := a.Stats(); st.PendingBytes != 27 {
		t.Fatalf("pending %v", a.PendingExtents())
	}
	if a.Stats().FreeBytes != 0 {
		t.Fatalf("space freed during a commit became free: %+v", a.Stats())
	}
	if err := a.CommitPrepared(e); err != nil {
		t.Fatal(err)
	}
	if got := a.FreeExtents(); !reflect.DeepEqual(got, []Extent{{before, 10}}) {
		t.Fatalf("after CommitPrepared: free %v", got)
	}
	st := a.Stats()
	if st.PendingBytes != 17 {
		t.Fatalf("pending bytes %d, want 17", st.PendingBytes)
	}
	// After the commit completes, allocations are fresh again.
	z := mustAlloc(t, a, 3)
	a.Free(z, 3)
	if a.Stats().PendingBytes != 17 {
		t.Fatal("fresh allocation after the commit went pending")
	}
	a.Commit()
	if st := a.Stats(); st.PendingBytes != 0 || st.FreeBytes != st.EOF-ds {
		t.Fatalf("after second commit %+v", st)
	}
	mustCheck(t, a)
	if err := a.CommitPrepared(99); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unprepared epoch: %v", err)
	}
	if err := a.CommitPrepared(0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("epoch 0: %v", err)
	}
}

// TestFailedCommitKeepsSpace: a prepared commit that never completes leaves
// everything reserved; a later commit releases it.
func TestFailedCommitKeepsSpace(t *testing.T) {
	a := New(ds, ds)
	x := mustAlloc(t, a, 10)
	a.Commit()
	a.Free(x, 10)
	_ = a.PrepareCommit() // the superblock write fails; no CommitPrepared
	y := mustAlloc(t, a, 10)
	if y == x {
		t.Fatal("reused space after a failed commit")
	}
	a.Free(y, 10) // allocated while the failed commit was in flight: held
	if a.Stats().FreeBytes != 0 {
		t.Fatal("space became free without a successful commit")
	}
	e := a.PrepareCommit()
	if err := a.CommitPrepared(e); err != nil {
		t.Fatal(err)
	}
	// Both were freed before the successful commit was prepared, so it
	// references neither.
	if st := a.Stats(); st.PendingBytes != 0 || st.FreeBytes != 20 {
		t.Fatalf("%+v", st)
	}
	mustCheck(t, a)
}

func TestCoalescing(t *testing.T) {
	a := New(ds, ds)
	var offs []int64
	for i := 0; i < 5; i++ {
		offs = append(offs, mustAlloc(t, a, 10))
	}
	end := mustAlloc(t, a, 10) // keep the tail allocated
	a.Free(offs[1], 10)
	a.Free(offs[3], 10)
	if got := a.FreeExtents(); len(got) != 2 {
		t.Fatalf("free %v", got)
	}
	a.Free(offs[2], 10)
	if got := a.FreeExtents(); !reflect.DeepEqual(got, []Extent{{offs[1], 30}}) {
		t.Fatalf("not coalesced: %v", got)
	}
	a.Free(offs[0], 10)
	a.Free(offs[4], 10)
	if got := a.FreeExtents(); !reflect.DeepEqual(got, []Extent{{ds, 50}}) {
		t.Fatalf("not coalesced: %v", got)
	}
	if st := a.Stats(); st.FreeExtents != 1 {
		t.Fatalf("stats %+v", st)
	}
	_ = end
	mustCheck(t, a)
}

func TestBestFit(t *testing.T) {
	a := New(ds, ds)
	sizes := []int64{50, 1, 20, 1, 30, 1, 20, 1}
	offs := make([]int64, len(sizes))
	for i, s := range sizes {
		offs[i] = mustAlloc(t, a, s)
	}
	a.Free(offs[0], 50)
	a.Free(offs[2], 20)
	a.Free(offs[4], 30)
	a.Free(offs[6], 20)
	if got := mustAlloc(t, a, 18); got != offs[2] {
		t.Fatalf("best fit for 18 took %d, want %d (the lower 20-byte hole)", got, offs[2])
	}
	if got := mustAlloc(t, a, 25); got != offs[4] {
		t.Fatalf("best fit for 25 took %d, want %d", got, offs[4])
	}
	if got := mustAlloc(t, a, 2); got != offs[2]+18 {
		t.Fatalf("best fit for 2 took %d, want the 2-byte remainder at %d", got, offs[2]+18)
	}
	eof := a.EOF()
	if got := mustAlloc(t, a, 51); got != eof {
		t.Fatalf("no hole fits 51: got %d, want EOF %d", got, eof)
	}
	mustCheck(t, a)
}

func TestAllocExtendsFreeTail(t *testing.T) {
	a := New(ds, ds)
	x := mustAlloc(t, a, 10)
	y := mustAlloc(t, a, 30)
	a.Free(y, 30)
	if got := mustAlloc(t, a, 50); got != y || a.EOF() != y+50 {
		t.Fatalf("got %d eof %d, want start in the free tail at %d", got, a.EOF(), y)
	}
	_ = x
	mustCheck(t, a)
}

func TestBadFree(t *testing.T) {
	a := New(ds, ds)
	x := mustAlloc(t, a, 100)
	mustAlloc(t, a, 100)
	a.Commit()
	cases := []Extent{
		{ds - 1, 10},       // below data start
		{x + 150, 100},     // beyond EOF
		{x, 0},             // empty
		{x, -5},            // negative
		{math.MaxInt64, 1}, // overflow
	}
	for _, c := range cases {
		if err := a.FreeChecked(c.Off, c.Size); !errors.Is(err, ErrBadFree) {
			t.Errorf("free %v: %v", c, err)
		}
	}
	if err := a.FreeChecked(x, 50); err != nil {
		t.Fatal(err)
	}
	before := a.Stats()
	// Double free (pending part), and overlap with free space after commit.
	if err := a.FreeChecked(x+40, 20); !errors.Is(err, ErrBadFree) {
		t.Fatalf("double free of pending space: %v", err)
	}
	if a.Stats() != before {
		t.Fatal("a bad free changed the state")
	}
	a.Commit()
	if err := a.FreeChecked(x, 10); !errors.Is(err, ErrBadFree) {
		t.Fatalf("free of free space: %v", err)
	}
	// Free (no error return) of bad space is remembered for Check.
	b := New(ds, ds)
	mustAlloc(t, b, 10)
	mustCheck(t, b)
	b.Free(ds, 10)
	b.Free(ds, 10)
	if err := b.Check(); !errors.Is(err, ErrBadFree) {
		t.Fatalf("Check after double free: %v", err)
	}
	// Check on a's invariants themselves still holds.
	if err := a.Check(); !errors.Is(err, ErrBadFree) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check: %v", err)
	}
}

func TestAllocInvalid(t *testing.T) {
	a := New(ds, ds)
	for _, s := range []int64{0, -1} {
		if _, err := a.Alloc(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Alloc(%d): %v", s, err)
		}
	}
	big := New(ds, math.MaxInt64-10)
	big.Commit()
	if _, err := big.Alloc(math.MaxInt64 - 10 - ds - 5); err != nil { // fits in the free space
		t.Fatal(err)
	}
	if _, err := big.Alloc(100); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("beyond 2^63: %v", err)
	}
	mustCheck(t, big)
}

func TestRebuild(t *testing.T) {
	live := []Extent{{ds + 100, 50}, {ds, 10}, {ds + 10, 20}, {ds + 400, 100}}
	a, err := Rebuild(ds, ds+1000, live)
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, a)
	want := []Extent{{ds + 30, 70}, {ds + 150, 250}, {ds + 500, 500}}
	if got := a.FreeExtents(); !reflect.DeepEqual(got, want) {
		t.Fatalf("free %v, want %v", got, want)
	}
	if st := a.Stats(); st.HeldBytes != 180 || st.EOF != ds+1000 {
		t.Fatalf("%+v", st)
	}
	// Live space is referenced by the committed state: freeing waits.
	a.Free(ds, 30)
	if off := mustAlloc(t, a, 30); off == ds {
		t.Fatal("reused live space before a commit")
	}

	// Overlap.
	_, err = Rebuild(ds, ds+1000, []Extent{{ds, 100}, {ds + 200, 10}, {ds + 50, 10}})
	var oe *OverlapError
	if !errors.Is(err, ErrOverlap) || !errors.As(err, &oe) || oe.A != (Extent{ds, 100}) || oe.B != (Extent{ds + 50, 10}) {
		t.Fatalf("overlap: %v %+v", err, oe)
	}
	if _, err := Rebuild(ds, ds+100, []Extent{{ds, 10}, {ds, 10}}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("duplicate: %v", err)
	}
	for _, bad := range []Extent{{ds - 1, 2}, {ds + 90, 20}, {ds + 100, 1}, {math.MaxInt64 - 1, 10}} {
		if _, err := Rebuild(ds, ds+100, []Extent{bad}); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("out of range %v: %v", bad, err)
		}
	}
	if _, err := Rebuild(ds, ds+100, []Extent{{ds, 0}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero size: %v", err)
	}
	if _, err := Rebuild(ds, ds-1, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("eof below data start: %v", err)
	}
	// Empty file, and a file entirely live.
	e, err := Rebuild(ds, ds, nil)
	if err != nil || e.EOF() != ds {
		t.Fatal(err)
	}
	f, err := Rebuild(ds, ds+20, []Extent{{ds + 10, 10}, {ds, 10}})
	if err != nil || f.FreeExtents() != nil {
		t.Fatalf("%v %v", err, f.FreeExtents())
	}
	mustCheck(t, f)
}

// TestCheckDetectsBrokenInvariants corrupts the internals directly: Check
// must notice (the consistency checker relies on it).
func TestCheckDetectsBrokenInvariants(t *testing.T) {
	build := func() *Allocator {
		a := New(ds, ds)
		x := mustAlloc(t, a, 10)
		mustAlloc(t, a, 10)
		mustAlloc(t, a, 10)
		a.Free(x, 10)
		return a
	}
	breakers := map[string]func(a *Allocator){
		"gap":             func(a *Allocator) { a.mu.runs.delete(ds + 10) },
		"eof":             func(a *Allocator) { a.mu.eof += 5 },
		"uncoalesced":     func(a *Allocator) { r := a.mu.runs.find(ds).val; a.mu.runs.set(ds+10, run{size: 20, st: r.st}) },
		"size index":      func(a *Allocator) { a.mu.free.delete(sizeKey{10, ds}) },
		"byte count":      func(a *Allocator) { a.mu.bytes[stFree]++ },
		"fresh index":     func(a *Allocator) { delete(a.mu.fresh, ds+10) },
		"fresh in commit": func(a *Allocator) { a.mu.inFlight = true },
	}
	for name, brk := range breakers {
		a := build()
		mustCheck(t, a)
		brk(a)
		if err := a.Check(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Check = %v", name, err)
		}
	}
}

// model is the reference: one state per byte, plus the set of bytes each
// committed or in-flight superblock may reference.
type model struct {
	eof      int64
	st       []state // index: offset - ds
	tag      []Epoch
	epoch    Epoch
	inFlight bool
	live     map[int64]int64 // what the client holds: off -> size
	// committed: bytes the last successful commit may reference;
	// snaps: per prepared epoch, bytes its superblock may reference.
	// Indexed by offset - ds; a shorter slice means false beyond its end.
	committed []bool
	snaps     map[Epoch][]bool
}

func newModel() *model {
	return &model{eof: ds, epoch: 1, live: map[int64]int64{}, snaps: map[Epoch][]bool{}}
}

func (m *model) at(off int64) state {
	if off >= m.eof {
		return stFree
	}
	return m.st[off-ds]
}

func (m *model) set(off int64, s state, tag Epoch) {
	for off >= m.eof {
		m.st = append(m.st, stFree)
		m.tag = append(m.tag, 0)
		m.eof++
	}
	m.st[off-ds], m.tag[off-ds] = s, tag
}

// expectAlloc predicts the offset: best fit among free runs below EOF,
// else the free tail's start, else EOF.
func (m *model) expectAlloc(size int64) int64 {
	bestOff, bestSize := int64(-1), int64(math.MaxInt64)
	var tailStart int64 = -1
	for off := int64(ds); off < m.eof; {
		if m.at(off) != stFree {
			off++
			continue
		}
		start := off
		for off < m.eof && m.at(off) == stFree {
			off++
		}
		if n := off - start; n >= size && n < bestSize {
			bestOff, bestSize = start, n
		}
		if off == m.eof {
			tailStart = start
		}
	}
	switch {
	case bestOff >= 0:
		return bestOff
	case tailStart >= 0:
		return tailStart
	}
	return m.eof
}

func (m *model) referenced(off int64) bool {
	i := off - ds
	if i < int64(len(m.committed)) && m.committed[i] {
		return true
	}
	for _, s := range m.snaps {
		if i < int64(len(s)) && s[i] {
			return true
		}
	}
	return false
}

func TestAgainstModel(t *testing.T) {
	seeds, steps := uint64(6), 1500
	if testing.Short() {
		seeds, steps = 2, 500
	}
	if os.Getenv("SCC_STRESS") == "long" {
		seeds, steps = 30, 5000
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		a := New(ds, ds)
		m := newModel()
		var prepared []Epoch
		for step := 0; step < steps; step++ {
			switch op := rng.IntN(100); {
			case op < 45: // alloc
				size := 1 + rng.Int64N(40)
				want := m.expectAlloc(size)
				off, err := a.Alloc(size)
				if err != nil {
					t.Fatal(err)
				}
				if off != want {
					t.Fatalf("seed %d step %d: Alloc(%d) = %d, model says %d", seed, step, size, off, want)
				}
				s := stFresh
				if m.inFlight {
					s = stHeld
				}
				for b := off; b < off+size; b++ {
					if m.at(b) != stFree {
						t.Fatalf("seed %d step %d: allocated byte %d is %s", seed, step, b, m.at(b))
					}
					if m.referenced(b) {
						t.Fatalf("seed %d step %d: allocated byte %d that a committed or in-flight superblock references", seed, step, b)
					}
					m.set(b, s, 0)
					// Anything allocated during a commit window may be
					// captured by that commit.
					for e, snap := range m.snaps {
						for int64(len(snap)) <= b-ds {
							snap = append(snap, false)
						}
						snap[b-ds] = true
						m.snaps[e] = snap
					}
				}
				m.live[off] = size
			case op < 80 && len(m.live) > 0: // free a live allocation, possibly only part of it
				off, size := pickLive(rng, m.live)
				delete(m.live, off)
				lo, hi := off, off+size
				if rng.IntN(4) == 0 && size > 2 {
					cut := 1 + rng.Int64N(size-1)
					if rng.IntN(2) == 0 {
						m.live[off] = cut
						lo = off + cut
					} else {
						m.live[off+cut] = size - cut
						hi = off + cut
					}
				}
				if err := a.FreeChecked(lo, hi-lo); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				for b := lo; b < hi; b++ {
					switch m.at(b) {
					case stFresh:
						m.set(b, stFree, 0)
					case stHeld:
						m.set(b, stPending, m.epoch)
					default:
						t.Fatalf("model: live byte %d is %s", b, m.at(b))
					}
				}
			case op < 85: // bad free: must be refused and change nothing
				b := int64(ds) + rng.Int64N(m.eof-ds+10)
				if m.at(b) == stFree || m.at(b) == stPending {
					before := a.Stats()
					if err := a.FreeChecked(b, 1+rng.Int64N(5)); !errors.Is(err, ErrBadFree) {
						t.Fatalf("seed %d step %d: bad free at %d (%s): %v", seed, step, b, m.at(b), err)
					}
					if a.Stats() != before {
						t.Fatal("bad free changed the state")
					}
					a.mu.misuse = nil // deliberate; keep Check meaningful
				}
			case op < 90: // simple commit
				a.Commit()
				m.prepare()
				m.commit(m.epoch - 1)
				prepared = nil
			case op < 95: // prepare
				prepared = append(prepared, a.PrepareCommit())
				m.prepare()
			default: // complete some prepared commit (usually the latest)
				if len(prepared) == 0 {
					continue
				}
				i := len(prepared) - 1
				if rng.IntN(4) == 0 {
					i = rng.IntN(len(prepared))
				}
				e := prepared[i]
				prepared = prepared[i+1:]
				if err := a.CommitPrepared(e); err != nil {
					t.Fatal(err)
				}
				m.commit(e)
			}
			if err := a.Check(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			m.compare(t, a)
		}
	}
}

func pickLive(rng *rand.Rand, live map[int64]int64) (int64, int64) {
	i := rng.IntN(len(live))
	for off, size := range live {
		if i == 0 {
			return off, size
		}
		i--
	}
	panic("unreachable")
}

func (m *model) prepare() {
	snap := make([]bool, m.eof-ds)
	for b := int64(ds); b < m.eof; b++ {
		switch m.at(b) {
		case stFresh:
			m.set(b, stHeld, 0)
			snap[b-ds] = true
		case stHeld:
			snap[b-ds] = true
		}
	}
	m.snaps[m.epoch] = snap
	m.epoch++
	m.inFlight = true
}

func (m *model) commit(e Epoch) {
	for b := int64(ds); b < m.eof; b++ {
		if m.at(b) == stPending && m.tag[b-ds] <= e {
			m.set(b, stFree, 0)
		}
	}
	m.committed = m.snaps[e]
	for x := range m.snaps {
		if x <= e {
			delete(m.snaps, x)
		}
	}
	if e == m.epoch-1 {
		m.inFlight = false
	}
}

func (m *model) compare(t *testing.T, a *Allocator) {
	t.Helper()
	if a.EOF() != m.eof {
		t.Fatalf("EOF %d, model %d", a.EOF(), m.eof)
	}
	var free, pending []Extent
	for b := int64(ds); b < m.eof; b++ {
		for _, p := range []struct {
			s   state
			out *[]Extent
		}{{stFree, &free}, {stPending, &pending}} {
			if m.at(b) != p.s {
				continue
			}
			if n := len(*p.out); n > 0 && (*p.out)[n-1].End() == b {
				(*p.out)[n-1].Size++
			} else {
				*p.out = append(*p.out, Extent{b, 1})
			}
		}
	}
	if got := a.FreeExtents(); !reflect.DeepEqual(got, free) {
		t.Fatalf("free extents %v, model %v", got, free)
	}
	if got := a.PendingExtents(); !reflect.DeepEqual(got, pending) {
		t.Fatalf("pending extents %v, model %v", got, pending)
	}
}

// TestConcurrent: many goroutines allocate, free and commit at once. Every
// byte has an owner slot claimed with CAS, so two live allocations that
// overlap are caught at once; Check runs at the end.
func TestConcurrent(t *testing.T) {
	workers, iters := 8, 2000
	if testing.Short() {
		iters = 300
	}
	const span = 1 << 20
	owner := make([]atomic.Int32, span)
	a := New(ds, ds)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := 1; w <= workers; w++ {
		wg.Add(1)
		go func(id int32) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 7))
			var mine []Extent
			for i := 0; i < iters && !failed.Load(); i++ {
				if len(mine) > 0 && rng.IntN(2) == 0 {
					j := rng.IntN(len(mine))
					e := mine[j]
					mine[j] = mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					for b := e.Off; b < e.End(); b++ {
						owner[b-ds].Store(0)
					}
					if err := a.FreeChecked(e.Off, e.Size); err != nil {
						t.Error(err)
						failed.Store(true)
					}
					continue
				}
				size := 1 + rng.Int64N(64)
				off, err := a.Alloc(size)
				if err != nil || off+size > ds+span {
					t.Errorf("alloc: %d %v", off, err)
					failed.Store(true)
					return
				}
				for b := off; b < off+size; b++ {
					if !owner[b-ds].CompareAndSwap(0, id) {
						t.Errorf("byte %d handed to worker %d while worker %d holds it", b, id, owner[b-ds].Load())
						failed.Store(true)
						return
					}
				}
				mine = append(mine, Extent{off, size})
			}
		}(int32(w))
	}
	// Committers: simple and two-phase, concurrently with the workers.
	stop := make(chan struct{})
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				a.Commit()
			} else if err := a.CommitPrepared(a.PrepareCommit()); err != nil {
				t.Error(err)
			}
			_ = a.Stats()
			_ = a.FreeExtents()
		}
	}()
	wg.Wait()
	close(stop)
	cwg.Wait()
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
}

// naive is the baseline for the benchmark: a sorted slice of free extents,
// best fit by linear scan, coalescing by binary search and slice insertion.
type naive struct {
	free []Extent
	eof  int64
}

func (n *naive) alloc(size int64) int64 {
	best := -1
	for i, e := range n.free {
		if e.Size >= size && (best < 0 || e.Size < n.free[best].Size) {
			best = i
		}
	}
	if best < 0 {
		off := n.eof
		n.eof += size
		return off
	}
	off := n.free[best].Off
	n.free[best].Off += size
	n.free[best].Size -= size
	if n.free[best].Size == 0 {
		n.free = append(n.free[:best], n.free[best+1:]...)
	}
	return off
}

func (n *naive) release(off, size int64) {
	i := 0
	lo, hi := 0, len(n.free)
	for lo < hi {
		mid := (lo + hi) / 2
		if n.free[mid].Off < off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	i = lo
	e := Extent{off, size}
	if i > 0 && n.free[i-1].End() == off {
		i--
		n.free[i].Size += size
		e = n.free[i]
		if i+1 < len(n.free) && n.free[i+1].Off == e.End() {
			n.free[i].Size += n.free[i+1].Size
			n.free = append(n.free[:i+1], n.free[i+2:]...)
		}
		return
	}
	if i < len(n.free) && n.free[i].Off == e.End() {
		n.free[i].Off = off
		n.free[i].Size += size
		return
	}
	n.free = append(n.free, Extent{})
	copy(n.free[i+1:], n.free[i:])
	n.free[i] = e
}

// BenchmarkAllocFree: one Alloc and one Free per op against a file with
// 20,000 free holes of assorted sizes (a long-lived, fragmented file). The
// baseline is a sorted-slice allocator with a linear best-fit scan.
func BenchmarkAllocFree(b *testing.B) {
	const holes = 20000
	sizes := make([]int64, holes)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range sizes {
		sizes[i] = 512 + rng.Int64N(64<<10)
	}
	req := make([]int64, 1024)
	for i := range req {
		req[i] = 512 + rng.Int64N(64<<10)
	}
	b.Run("scc", func(b *testing.B) {
		a := New(ds, ds)
		for _, s := range sizes {
			mustAlloc(b, a, s)
			mustAlloc(b, a, 1) // separator: keeps the holes apart
		}
		a.Commit()
		off := int64(ds)
		for _, s := range sizes {
			a.Free(off, s)
			off += s + 1
		}
		a.Commit()
		i := 0
		for b.Loop() {
			s := req[i%len(req)]
			o := mustAlloc(b, a, s)
			a.Free(o, s)
			i++
		}
	})
	b.Run("baseline", func(b *testing.B) {
		n := &naive{eof: ds}
		off := int64(ds)
		for _, s := range sizes {
			n.free = append(n.free, Extent{off, s})
			off += s + 1
		}
		n.eof = off
		i := 0
		for b.Loop() {
			s := req[i%len(req)]
			o := n.alloc(s)
			n.release(o, s)
			i++
		}
	})
}
