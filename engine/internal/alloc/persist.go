package alloc

import (
	"math"
)

// Persisting the free-space map (the cache image carries it, engine
// image.go; FORMAT.md §20): an open that finds the map of the committed
// state need not walk every index to rebuild it. Two things make a map
// written during a commit exact for the state that commit makes durable:
//
//   - FreeAfter(e) lists what the state prepared as e leaves unreferenced,
//     as far as the allocator can tell: free space, and space freed before
//     e (the rule CommitPrepared(e) applies).
//   - The commit frees the blocks it replaces (old index blocks, old
//     headers) with FreeReplaced, tagged e rather than e+1: the state it
//     captures does not reference them, so they are free in it. Frees by
//     anything racing the commit stay tagged e+1 — such a state may still
//     reference them — and a map taken then leaves them out: a map may
//     leak space until a full rebuild, never hand out referenced space.

// FreeReplaced frees [off, off+size), which the commit prepared as e (the
// latest PrepareCommit, not yet completed) replaced by blocks it wrote: the
// state it is capturing does not reference the range, so the range becomes
// reusable at CommitPrepared(e), and FreeAfter(e) reports it. Outside such
// a commit it is Free. A bad free is reported as FreeChecked does.
func (a *Allocator) FreeReplaced(e Epoch, off, size int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	tag := a.mu.epoch
	if a.mu.inFlight && e != 0 && e == a.mu.epoch-1 {
		tag = e
	}
	err := a.freeLocked(off, size, tag)
	if err != nil && a.mu.misuse == nil {
		a.mu.misuse = err
	}
	return err
}

// FreeAfter returns, in offset order and coalesced, the extents of
// [dataStart, EOF) that the state committed by the commit prepared as e
// leaves unreferenced: the free space and the space freed (or replaced)
// before e. It is what RebuildFree takes back once that state is durable.
func (a *Allocator) FreeAfter(e Epoch) []Extent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Extent
	a.mu.runs.ascend(math.MinInt64, func(k int64, r run) bool {
		if r.st == stFree || r.st == stPending && r.tag <= e {
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

// RebuildFree returns the allocator for an opened file whose committed
// state (EOF eof) leaves exactly the free extents unreferenced: they are
// free, everything else in [dataStart, eof) is held. It is Rebuild from the
// other side, for a map FreeAfter wrote. Extents that overlap give
// ErrOverlap, one outside [dataStart, eof) ErrOutOfRange, a non-positive
// size ErrInvalid; adjacent ones coalesce.
func RebuildFree(dataStart, eof int64, free []Extent) (*Allocator, error) {
	return tile(dataStart, eof, free, stFree, stHeld)
}
