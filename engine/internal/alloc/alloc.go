// Package alloc is the container's free-space allocator: it hands out file
// space for chunks and metadata blocks and takes it back, so that space is
// never reused while the last committed state may still reference it.
//
// # The rule
//
// The container commits by writing new metadata into free space and then a
// superblock that points at it (FORMAT.md "Commit protocol"). A crash at any
// moment must leave the last committed superblock's whole state intact, so
// space that state references is never handed out again before the next
// commit has made it unreferenced. SCC requirements §3.2.3 describes a chunk flush
// that relocates a chunk whose encoded size changed and "releases the file
// space allocated to the old version"; here that release is deferred until
// the commit that stops referencing the old version.
//
// Every byte of [dataStart, EOF) is in one of four states:
//
//	free     reusable now
//	fresh    allocated since the last commit point, while no commit was in
//	         flight: nothing durable references it, so freeing it makes it
//	         free at once
//	held     allocated; the committed state (or a commit in flight) may
//	         reference it
//	pending  freed, but the committed state (or a commit in flight) may
//	         still reference it; free after the commit that drops it
//
// Bytes beyond EOF are free; Alloc extends EOF when no free extent fits.
//
// # Commits
//
// Commit is the simple form: call it after a superblock commit succeeded
// when no Alloc or Free ran between capturing that commit's metadata and
// the call. When chunk flushes keep running during a commit, use the two
// phases instead (FORMAT.md "Commit protocol" gives the order):
//
//	e := a.PrepareCommit()  // before capturing any metadata of the commit
//	... flush indexes, write catalog, sync, write superblock, sync ...
//	a.CommitPrepared(e)     // only if the superblock is durable
//
// Frees before PrepareCommit become reusable at CommitPrepared(e); frees
// after it wait for the next commit; space allocated before or during the
// window counts as held. If the commit fails, simply do not call
// CommitPrepared: everything stays conservatively reserved until a later
// commit succeeds. There is no Rollback: nothing needs undoing, since a
// failed commit only leaves space reserved longer.
//
// An Allocator is safe for concurrent use. One mutex guards it: it is called
// once per chunk flush or metadata block, not per element, and every
// operation is O(log n) in the number of extents (commit points are O(k) in
// the extents they change).
package alloc

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/scc-dev/scc/internal/invariants"
)

var (
	// ErrOverlap: two live extents given to Rebuild overlap (the file's
	// metadata references the same bytes twice). Match with errors.Is;
	// errors.As with *OverlapError gives the two extents.
	ErrOverlap = errors.New("alloc: overlapping extents")
	// ErrOutOfRange: an extent lies outside [dataStart, EOF).
	ErrOutOfRange = errors.New("alloc: extent out of range")
	// ErrInvalid: a size or an argument that cannot be meant.
	ErrInvalid = errors.New("alloc: invalid argument")
	// ErrNoSpace: the allocation would take EOF past 2^63-1.
	ErrNoSpace = errors.New("alloc: address space exhausted")
	// ErrBadFree: Free of space that is not allocated (a double free, a
	// free of never-allocated space, or a range outside [dataStart, EOF)).
	ErrBadFree = errors.New("alloc: free of unallocated space")
	// ErrCorrupt: Check found a broken internal invariant.
	ErrCorrupt = errors.New("alloc: internal invariant broken")
)

// Extent is a byte range [Off, Off+Size) of the file.
type Extent struct{ Off, Size int64 }

// End is the first byte after e.
func (e Extent) End() int64 { return e.Off + e.Size }

func (e Extent) String() string { return fmt.Sprintf("[%d,+%d)", e.Off, e.Size) }

// OverlapError reports two overlapping live extents found by Rebuild.
type OverlapError struct{ A, B Extent }

func (e *OverlapError) Error() string {
	return fmt.Sprintf("%v: %v and %v", ErrOverlap, e.A, e.B)
}

// Unwrap makes errors.Is(err, ErrOverlap) hold.
func (e *OverlapError) Unwrap() error { return ErrOverlap }

// Epoch names one PrepareCommit.
type Epoch uint64

type state uint8

const (
	stFree state = iota + 1
	stFresh
	stHeld
	stPending
)

func (s state) String() string {
	return [...]string{"invalid", "free", "fresh", "held", "pending"}[min(int(s), 4)]
}

// run is a maximal range of bytes in one state. tag is the epoch of a
// pending run's Free (0 otherwise).
type run struct {
	size int64
	st   state
	tag  Epoch
}

func (r run) same(o run) bool { return r.st == o.st && r.tag == o.tag }

type sizeKey struct{ size, off int64 }

func cmpSizeKey(a, b sizeKey) int {
	if c := cmp.Compare(a.size, b.size); c != 0 {
		return c
	}
	return cmp.Compare(a.off, b.off)
}

// Stats is a snapshot of the allocator's accounting.
type Stats struct {
	EOF          int64
	FreeBytes    int64 // reusable now (below EOF)
	FreshBytes   int64
	HeldBytes    int64
	PendingBytes int64
	FreeExtents  int
}

// Allocator tracks the file space of one container.
type Allocator struct {
	dataStart int64

	mu struct {
		sync.Mutex
		// runs maps a run's first byte to the run.
		// INVARIANT: the runs tile [dataStart, eof) exactly, in order,
		// each of positive size, and no two neighbours are same().
		runs *treap[int64, run]
		// free indexes the free runs by (size, offset) for best fit.
		// INVARIANT: it holds exactly the stFree runs.
		free *treap[sizeKey, struct{}]
		// fresh and pending hold the first bytes of the stFresh and
		// stPending runs, so commit points visit only those.
		fresh, pending map[int64]struct{}
		// bytes[s] sums the sizes of the runs in state s.
		bytes [5]int64
		eof   int64
		// epoch tags the frees made now; PrepareCommit returns it and
		// advances it. Starts at 1.
		epoch Epoch
		// inFlight: a PrepareCommit has no matching CommitPrepared yet;
		// INVARIANT: no stFresh run exists while inFlight.
		inFlight bool
		// misuse is the first bad Free, reported by Check.
		misuse error
	}
}

// New returns the allocator of a fresh file: every byte from dataStart up is
// free ([dataStart, eof) as free extents, the rest beyond EOF). A negative
// dataStart is taken as 0 and an eof below dataStart as dataStart.
func New(dataStart, eof int64) *Allocator {
	dataStart = max(dataStart, 0)
	a := newAllocator(dataStart, max(eof, dataStart))
	if a.mu.eof > dataStart {
		a.putRun(dataStart, run{size: a.mu.eof - dataStart, st: stFree})
	}
	return a
}

func newAllocator(dataStart, eof int64) *Allocator {
	a := &Allocator{dataStart: dataStart}
	a.mu.runs = newTreap[int64, run](cmp.Compare[int64])
	a.mu.free = newTreap[sizeKey, struct{}](cmpSizeKey)
	a.mu.fresh = make(map[int64]struct{})
	a.mu.pending = make(map[int64]struct{})
	a.mu.eof = eof
	a.mu.epoch = 1
	return a
}

// Rebuild returns the allocator for an opened file whose committed state
// (EOF eof) references exactly the live extents: they are held, everything
// else in [dataStart, eof) is free. Live extents that overlap give an error
// wrapping ErrOverlap (an *OverlapError); one outside [dataStart, eof)
// gives ErrOutOfRange; a non-positive size gives ErrInvalid. Adjacent live
// extents are fine.
func Rebuild(dataStart, eof int64, live []Extent) (*Allocator, error) {
	return tile(dataStart, eof, live, stHeld, stFree)
}

// tile returns the allocator whose [dataStart, eof) is the listed extents
// in state listed and the gaps between them in state gap: Rebuild (live
// extents held) and RebuildFree (free extents free) are the two sides of
// it. Adjacent listed extents coalesce into one run; overlapping ones give
// ErrOverlap, one outside [dataStart, eof) ErrOutOfRange, a non-positive
// size ErrInvalid.
func tile(dataStart, eof int64, listed []Extent, in, gap state) (*Allocator, error) {
	if dataStart < 0 || eof < dataStart {
		return nil, fmt.Errorf("%w: dataStart %d, eof %d", ErrInvalid, dataStart, eof)
	}
	ext := slices.Clone(listed)
	slices.SortFunc(ext, func(a, b Extent) int {
		if c := cmp.Compare(a.Off, b.Off); c != 0 {
			return c
		}
		return cmp.Compare(a.Size, b.Size)
	})
	for _, e := range ext {
		if e.Size <= 0 {
			return nil, fmt.Errorf("%w: extent %v has no size", ErrInvalid, e)
		}
		if e.Off < dataStart || e.Off > eof || e.Size > eof-e.Off {
			return nil, fmt.Errorf("%w: %v outside [%d, %d)", ErrOutOfRange, e, dataStart, eof)
		}
	}
	a := newAllocator(dataStart, eof)
	pos := dataStart // end of what is tiled so far
	var prev Extent  // the listed extent before e (no overlaps: the one reaching furthest)
	for _, e := range ext {
		if e.Off < pos {
			return nil, &OverlapError{A: prev, B: e}
		}
		if e.Off > pos {
			a.putRun(pos, run{size: e.Off - pos, st: gap})
		} else if last := a.mu.runs.floor(e.Off - 1); last != nil && last.val.st == in {
			r := last.val // adjacent listed extents: one run
			r.size += e.Size
			a.putRun(last.key, r)
			pos, prev = e.End(), e
			continue
		}
		a.putRun(e.Off, run{size: e.Size, st: in})
		pos, prev = e.End(), e
	}
	if pos < eof {
		a.putRun(pos, run{size: eof - pos, st: gap})
	}
	return a, nil
}

// putRun records r at off, replacing any run that starts there, and keeps
// the indexes in step. It does not coalesce.
func (a *Allocator) putRun(off int64, r run) {
	if n := a.mu.runs.find(off); n != nil {
		a.unindex(off, n.val)
		n.val = r
	} else {
		a.mu.runs.insertNew(off, r)
	}
	a.index(off, r)
}

func (a *Allocator) index(off int64, r run) {
	a.mu.bytes[r.st] += r.size
	switch r.st {
	case stFree:
		a.mu.free.insertNew(sizeKey{r.size, off}, struct{}{})
	case stFresh:
		a.mu.fresh[off] = struct{}{}
	case stPending:
		a.mu.pending[off] = struct{}{}
	}
}

// insertRun records r at off, where no run starts.
func (a *Allocator) insertRun(off int64, r run) {
	if invariants.Enabled {
		a.assertFits(off, r)
	}
	a.mu.runs.insertNew(off, r)
	a.index(off, r)
}

// assertFits panics if a run r inserted at off would overlap a neighbour or
// leave [dataStart, eof): two runs over one byte give it two states, so an
// extent could be free and allocated at once.
func (a *Allocator) assertFits(off int64, r run) {
	if r.size <= 0 || off < a.dataStart || r.size > a.mu.eof-off {
		panic(invariants.Violation("alloc: %s run %v outside [%d, %d)", r.st, Extent{off, r.size}, a.dataStart, a.mu.eof))
	}
	if p := a.mu.runs.floor(off); p != nil && p.key+p.val.size > off {
		panic(invariants.Violation("alloc: %s run %v overlaps %s run %v", r.st, Extent{off, r.size}, p.val.st, Extent{p.key, p.val.size}))
	}
	if n := a.mu.runs.ceil(off); n != nil && n.key < off+r.size {
		panic(invariants.Violation("alloc: %s run %v overlaps %s run %v", r.st, Extent{off, r.size}, n.val.st, Extent{n.key, n.val.size}))
	}
}

// delRun removes the run starting at off.
func (a *Allocator) delRun(off int64) {
	if r, ok := a.mu.runs.take(off); ok {
		a.unindex(off, r)
	}
}

func (a *Allocator) unindex(off int64, r run) {
	a.mu.bytes[r.st] -= r.size
	if invariants.Enabled && a.mu.bytes[r.st] < 0 {
		panic(invariants.Violation("alloc: %s bytes %d below zero after removing %v", r.st, a.mu.bytes[r.st], Extent{off, r.size}))
	}
	switch r.st {
	case stFree:
		a.mu.free.delete(sizeKey{r.size, off})
	case stFresh:
		delete(a.mu.fresh, off)
	case stPending:
		delete(a.mu.pending, off)
	}
}

// setRange puts [off, end) into state r.st/r.tag (r.size is ignored) and
// coalesces with equal neighbours. [off, end) must lie in [dataStart, eof).
//
// It runs once or twice per Alloc and Free under the mutex, so it visits
// the tree as few times as it can: one floor for the first overlapped run,
// a walk only when the range spans several runs, one lookup per neighbour.
func (a *Allocator) setRange(off, end int64, r run) {
	type span struct {
		off int64
		r   run
	}
	first := a.mu.runs.floor(off) // INVARIANT: exists, the runs tile [dataStart, eof)
	var buf [4]span
	over := append(buf[:0], span{first.key, first.val})
	if first.key+first.val.size < end {
		over = over[:0]
		a.mu.runs.ascend(first.key, func(k int64, v run) bool {
			if k >= end {
				return false
			}
			over = append(over, span{k, v})
			return true
		})
	}
	last := over[len(over)-1]
	lastEnd := last.off + last.r.size
	for _, o := range over {
		a.delRun(o.off)
	}
	newOff, newEnd := off, end
	// The part of the first run before off stays in its state, or merges.
	if head := over[0]; head.off < off {
		if head.r.same(r) {
			newOff = head.off
		} else {
			head.r.size = off - head.off
			a.insertRun(head.off, head.r)
		}
	} else if off > a.dataStart {
		if l := a.mu.runs.floor(off - 1); l != nil && l.val.same(r) {
			newOff = l.key
			a.delRun(l.key)
		}
	}
	// Likewise the part of the last run after end.
	if lastEnd > end {
		if last.r.same(r) {
			newEnd = lastEnd
		} else {
			tail := last.r
			tail.size = lastEnd - end
			a.insertRun(end, tail)
		}
	} else if rn := a.mu.runs.find(end); rn != nil && rn.val.same(r) {
		newEnd = end + rn.val.size
		a.delRun(end)
	}
	r.size = newEnd - newOff
	a.insertRun(newOff, r)
}

// Alloc returns the offset of size bytes that nothing committed references:
// the smallest free extent that fits (lowest offset among equals), else the
// end of the file, extending EOF (starting inside a free tail extent if the
// file ends with one).
func (a *Allocator) Alloc(size int64) (int64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("%w: allocation of %d bytes", ErrInvalid, size)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := run{st: stFresh}
	if a.mu.inFlight {
		// A commit in flight may capture this space (an index block
		// written during the commit), so it must not count as fresh.
		st.st = stHeld
	}
	if n := a.mu.free.ceil(sizeKey{size, math.MinInt64}); n != nil {
		off := n.key.off
		if invariants.Enabled {
			// Handing out an extent the free index names but the runs do
			// not hold as free would give out referenced space.
			if rn := a.mu.runs.find(off); rn == nil || rn.val.st != stFree || rn.val.size != n.key.size {
				panic(invariants.Violation("alloc: free index names %v, which is not a free run", Extent{off, n.key.size}))
			}
		}
		a.setRange(off, off+size, st)
		return off, nil
	}
	start := a.mu.eof
	if last := a.mu.runs.max(); last != nil && last.val.st == stFree {
		start = last.key
	}
	if start > math.MaxInt64-size {
		return 0, fmt.Errorf("%w: %d bytes at %d", ErrNoSpace, size, start)
	}
	if end := start + size; end > a.mu.eof {
		// Grow by free space (widening a free tail run), then take it
		// like any other.
		grow := a.mu.eof
		a.mu.eof = end
		if last := a.mu.runs.max(); last != nil && last.val.st == stFree {
			r := last.val
			r.size += end - grow
			a.putRun(last.key, r)
		} else {
			a.putRun(grow, run{size: end - grow, st: stFree})
		}
	}
	a.setRange(start, start+size, st)
	return start, nil
}

// AllocAligned is Alloc for an offset that is a multiple of align (a power
// of two): from the smallest free extent with room for size bytes at an
// aligned offset inside it, else at the first aligned offset at or past the
// file's free tail. The bytes skipped to reach the aligned offset stay free
// (a later Alloc of a small block can take them).
func (a *Allocator) AllocAligned(size, align int64) (int64, error) {
	if size <= 0 || align <= 0 || align&(align-1) != 0 {
		return 0, fmt.Errorf("%w: allocation of %d bytes aligned to %d", ErrInvalid, size, align)
	}
	if align == 1 {
		return a.Alloc(size)
	}
	if size > math.MaxInt64-align {
		return 0, fmt.Errorf("%w: %d bytes aligned to %d", ErrNoSpace, size, align)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := run{st: stFresh}
	if a.mu.inFlight {
		st.st = stHeld // as in Alloc
	}
	up := func(off int64) int64 { return (off + align - 1) &^ (align - 1) }
	// The free extents of at least size bytes, smallest first, until one
	// has room at an aligned offset; any of size+align-1 bytes has, so
	// after a few misfits the walk jumps to the smallest of those (a mutex
	// is held: no walk over every near fit).
	found, tries := int64(-1), 0
	a.mu.free.ascend(sizeKey{size, math.MinInt64}, func(k sizeKey, _ struct{}) bool {
		if start := up(k.off); start-k.off <= k.size-size {
			found = start
			return false
		}
		tries++
		return tries < 16 && k.size < size+align-1
	})
	if found < 0 {
		if n := a.mu.free.ceil(sizeKey{size + align - 1, math.MinInt64}); n != nil {
			found = up(n.key.off)
		}
	}
	if found >= 0 {
		a.setRange(found, found+size, st)
		return found, nil
	}
	start := a.mu.eof
	if last := a.mu.runs.max(); last != nil && last.val.st == stFree {
		start = last.key
	}
	start = up(start)
	if start < 0 || start > math.MaxInt64-size {
		return 0, fmt.Errorf("%w: %d bytes at %d", ErrNoSpace, size, start)
	}
	if end := start + size; end > a.mu.eof {
		grow := a.mu.eof
		a.mu.eof = end
		if last := a.mu.runs.max(); last != nil && last.val.st == stFree {
			r := last.val
			r.size += end - grow
			a.putRun(last.key, r)
		} else {
			a.putRun(grow, run{size: end - grow, st: stFree})
		}
	}
	a.setRange(start, start+size, st)
	return start, nil
}

// Free returns [off, off+size) to the allocator. Fresh space is reusable at
// once; space the committed state (or a commit in flight) may reference
// becomes reusable at the next commit point. A bad free (see FreeChecked) is
// ignored and remembered for Check.
func (a *Allocator) Free(off, size int64) {
	_ = a.FreeChecked(off, size)
}

// FreeChecked is Free that reports a bad free: a range that is not wholly
// allocated (part of it free or already pending: a double free), outside
// [dataStart, EOF), or of non-positive size. A bad free changes nothing; the
// error wraps ErrBadFree and is also remembered for Check.
func (a *Allocator) FreeChecked(off, size int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	err := a.freeLocked(off, size, a.mu.epoch)
	if err != nil && a.mu.misuse == nil {
		a.mu.misuse = err
	}
	return err
}

// freeLocked frees [off, off+size); space that may be referenced goes
// pending with tag.
func (a *Allocator) freeLocked(off, size int64, tag Epoch) error {
	if size <= 0 || off < a.dataStart || off > a.mu.eof || size > a.mu.eof-off {
		return fmt.Errorf("%w: %v outside [%d, %d)", ErrBadFree, Extent{off, size}, a.dataStart, a.mu.eof)
	}
	end := off + size
	type piece struct {
		off, end int64
		st       state
	}
	var pieces []piece
	var bad error
	start := a.mu.runs.floor(off).key // exists: off is inside [dataStart, eof)
	a.mu.runs.ascend(start, func(k int64, r run) bool {
		if k >= end {
			return false
		}
		if r.st == stFree || r.st == stPending {
			bad = fmt.Errorf("%w: %v overlaps %s space %v", ErrBadFree, Extent{off, size}, r.st, Extent{k, r.size})
			return false
		}
		pieces = append(pieces, piece{max(k, off), min(k+r.size, end), r.st})
		return true
	})
	if bad != nil {
		return bad
	}
	for _, p := range pieces {
		if p.st == stFresh {
			a.setRange(p.off, p.end, run{st: stFree})
		} else {
			a.setRange(p.off, p.end, run{st: stPending, tag: tag})
		}
	}
	return nil
}

// PrepareCommit marks the start of a commit, before any of its metadata is
// captured, and returns its epoch for CommitPrepared. From now until that
// commit completes, allocations count as held and frees wait for a later
// commit.
func (a *Allocator) PrepareCommit() Epoch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prepareLocked()
}

func (a *Allocator) prepareLocked() Epoch {
	for _, off := range sortedKeys(a.mu.fresh) {
		if n := a.mu.runs.find(off); n != nil && n.val.st == stFresh {
			// A neighbour may already have absorbed this run when an
			// earlier one coalesced; find() then misses or sees held.
			a.setRange(off, off+n.val.size, run{st: stHeld})
		}
	}
	e := a.mu.epoch
	a.mu.epoch++
	a.mu.inFlight = true
	return e
}

// CommitPrepared is called after the superblock of the commit prepared as e
// is durable: space freed before PrepareCommit returned e becomes reusable.
// Completing an older epoch than the latest prepared one is allowed (a later
// attempt failed); an epoch never prepared gives ErrInvalid.
func (a *Allocator) CommitPrepared(e Epoch) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.commitLocked(e)
}

func (a *Allocator) commitLocked(e Epoch) error {
	if e == 0 || e >= a.mu.epoch {
		return fmt.Errorf("%w: epoch %d was never prepared (next is %d)", ErrInvalid, e, a.mu.epoch)
	}
	for _, off := range sortedKeys(a.mu.pending) {
		if n := a.mu.runs.find(off); n != nil && n.val.st == stPending && n.val.tag <= e {
			a.setRange(off, off+n.val.size, run{st: stFree})
		}
	}
	if e == a.mu.epoch-1 {
		a.mu.inFlight = false
	}
	return nil
}

// Commit is PrepareCommit and CommitPrepared at once: call it after a
// superblock commit succeeded when no Alloc or Free ran since the commit's
// metadata was captured. Pending frees become free; allocations since the
// last commit become held.
func (a *Allocator) Commit() {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Cannot fail: the epoch was just prepared.
	_ = a.commitLocked(a.prepareLocked())
}

func sortedKeys(m map[int64]struct{}) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// EOF returns the end of the space handed out so far; the container records
// it in the superblock.
func (a *Allocator) EOF() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.eof
}

// DataStart returns the first allocatable byte.
func (a *Allocator) DataStart() int64 { return a.dataStart }

// FreeExtents returns the extents reusable now, in offset order (not the
// unbounded space beyond EOF).
func (a *Allocator) FreeExtents() []Extent { return a.extents(stFree) }

// PendingExtents returns the freed extents waiting for a commit, in offset
// order.
func (a *Allocator) PendingExtents() []Extent { return a.extents(stPending) }

func (a *Allocator) extents(s state) []Extent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Extent
	a.mu.runs.ascend(math.MinInt64, func(k int64, r run) bool {
		if r.st == s {
			// Pending runs with different tags may be neighbours;
			// report them as one extent.
			if n := len(out); n > 0 && out[n-1].End() == k {
				out[n-1].Size += r.size
			} else {
				out = append(out, Extent{k, r.size})
			}
		}
		return true
	})
	return out
}

// Stats returns a snapshot of the accounting.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Stats{
		EOF:          a.mu.eof,
		FreeBytes:    a.mu.bytes[stFree],
		FreshBytes:   a.mu.bytes[stFresh],
		HeldBytes:    a.mu.bytes[stHeld],
		PendingBytes: a.mu.bytes[stPending],
		FreeExtents:  a.mu.free.n,
	}
}

// Check verifies the internal invariants (runs tile [dataStart, EOF) in
// order, coalesced; the indexes and byte counts agree with the runs; no
// fresh space while a commit is in flight) and reports the first bad Free
// seen, if any (wrapping ErrBadFree). Broken invariants wrap ErrCorrupt.
func (a *Allocator) Check() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkLocked(); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return a.mu.misuse
}

func (a *Allocator) checkLocked() error {
	pos := a.dataStart
	var prev run
	var bytes [5]int64
	var nFree, nFresh, nPending int
	var err error
	a.mu.runs.ascend(math.MinInt64, func(k int64, r run) bool {
		switch {
		case k != pos:
			err = fmt.Errorf("run at %d, expected one at %d", k, pos)
		case r.size <= 0:
			err = fmt.Errorf("run at %d has size %d", k, r.size)
		case r.st < stFree || r.st > stPending:
			err = fmt.Errorf("run at %d has state %d", k, r.st)
		case k > a.dataStart && prev.same(r):
			err = fmt.Errorf("runs at %d and %d not coalesced (%s)", k-prev.size, k, r.st)
		case r.st == stFree && a.mu.free.find(sizeKey{r.size, k}) == nil:
			err = fmt.Errorf("free run %v missing from the size index", Extent{k, r.size})
		case r.st == stFresh && a.mu.inFlight:
			err = fmt.Errorf("fresh run %v during a commit", Extent{k, r.size})
		case r.st == stPending && (r.tag == 0 || r.tag > a.mu.epoch):
			err = fmt.Errorf("pending run %v tagged %d (epoch %d)", Extent{k, r.size}, r.tag, a.mu.epoch)
		case r.st != stPending && r.tag != 0:
			err = fmt.Errorf("%s run %v tagged %d", r.st, Extent{k, r.size}, r.tag)
		}
		if err != nil {
			return false
		}
		if _, ok := a.mu.fresh[k]; ok != (r.st == stFresh) {
			err = fmt.Errorf("fresh index disagrees at %d", k)
		} else if _, ok := a.mu.pending[k]; ok != (r.st == stPending) {
			err = fmt.Errorf("pending index disagrees at %d", k)
		}
		switch r.st {
		case stFree:
			nFree++
		case stFresh:
			nFresh++
		case stPending:
			nPending++
		}
		bytes[r.st] += r.size
		pos += r.size
		prev = r
		return err == nil
	})
	switch {
	case err != nil:
		return err
	case pos != a.mu.eof:
		return fmt.Errorf("runs end at %d, EOF is %d", pos, a.mu.eof)
	case nFree != a.mu.free.n || nFresh != len(a.mu.fresh) || nPending != len(a.mu.pending):
		return fmt.Errorf("index sizes free %d/%d fresh %d/%d pending %d/%d",
			nFree, a.mu.free.n, nFresh, len(a.mu.fresh), nPending, len(a.mu.pending))
	case bytes != a.mu.bytes:
		return fmt.Errorf("byte counts %v, recorded %v", bytes, a.mu.bytes)
	}
	return nil
}
