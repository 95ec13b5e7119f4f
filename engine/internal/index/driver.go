package index

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/internal/invariants"
)

// This file holds the loops every index kind runs the same way over its own
// blocks: Resize (load what the resize must see, then change it under the
// write lock), Range (visit the blocks in order, loading each on first
// touch, with no lock held while fn runs) and Flush (encode under the write
// lock, write without it, commit). A kind supplies only what differs: which
// blocks, how a block's entries are read or cut, how its blocks encode.

// coordEntry is an entry with its coordinates, as Resize and Range report it.
type coordEntry struct {
	coord []uint64
	e     Entry
}

// linEntry is an entry of an array kind with its linear index.
type linEntry struct {
	i uint64
	e Entry
}

// ensure loads what missing asks for until it asks for nothing, so that
// every block it looks at is in memory (until a DropClean lets go of it
// again). missing runs under the read lock and must ask for a block at
// most once: fetch merges concurrent requests for a block, not requests
// made one after the other.
func (l *loader) ensure(ctx context.Context, missing func() ([]*loadReq, error)) error {
	for {
		l.idx.RLock()
		reqs, err := missing()
		l.idx.RUnlock()
		if err != nil || len(reqs) == 0 {
			return err
		}
		for _, r := range reqs {
			if err := l.fetch(ctx, r); err != nil {
				return err
			}
		}
	}
}

// openTop is the one read of Open: the top block r names, decoded into the
// new index by decode (which checks it against r's count, and what else r
// fixes) and checked to be the block r names. Every other block is read
// on first touch. On success the index takes r's count and top pointer.
func (l *loader) openTop(ctx context.Context, r *rootRecord, what string, decode func(b []byte) error, count *uint64, top *ptr) error {
	b := make([]byte, r.top.size) // bounded by getPtr, and checked by the kind against its layout
	if err := readPtr(ctx, l.store, b, r.top); err != nil {
		return fmt.Errorf("index: reading %s: %w", what, err)
	}
	if err := decode(b); err != nil {
		return err
	}
	if err := checkParent(b, r.top); err != nil {
		return err
	}
	*count, *top = r.count, r.top
	return nil
}

// resizer is an index kind's part of Resize.
type resizer interface {
	// resizeLoadsLocked validates g and returns a load request for every
	// block not in memory that may hold entries outside g (none when g
	// shrinks nothing). It runs under the index lock, read or write, and
	// asks for a block at most once (see ensure).
	resizeLoadsLocked(g Geometry) ([]*loadReq, error)
	// resizeLocked removes the entries outside g, installs g and returns
	// what it removed. It runs under the write lock, right after
	// resizeLoadsLocked(g) asked for nothing and found g valid.
	resizeLocked(g Geometry) []coordEntry
	// countLocked is the index's count of stored entries.
	countLocked() uint64
}

// resize is the one Resize: it loads, with no lock held, every block the
// resize must see, then checks under the write lock that they are all still
// there (a DropClean, or a Put that split or dropped a leaf, may have run in
// between) and applies it; otherwise it loads again. removed runs after
// the lock is released, so it may call the index.
func (l *loader) resize(ctx context.Context, k resizer, g Geometry, removed func(coord []uint64, e Entry)) error {
	// Shared writers: no Flush between the steps' view of the blocks and
	// their writes; Put, Delete and DropClean still interleave.
	l.writers.RLock()
	defer l.writers.RUnlock()
	var out []coordEntry
	for done := false; !done; {
		err := l.ensure(ctx, func() ([]*loadReq, error) { return k.resizeLoadsLocked(g) })
		if err == nil {
			out, done, err = l.resizeApply(k, g)
		}
		if err != nil {
			return err
		}
	}
	if removed != nil {
		for _, r := range out {
			removed(r.coord, r.e)
		}
	}
	return nil
}

// resizeApply applies the resize under the write lock when every block it
// needs is in memory; done is false when one is missing again.
func (l *loader) resizeApply(k resizer, g Geometry) (out []coordEntry, done bool, err error) {
	l.idx.Lock()
	defer l.idx.Unlock()
	reqs, err := k.resizeLoadsLocked(g)
	if err != nil || len(reqs) > 0 {
		return nil, false, err
	}
	before := k.countLocked()
	out = k.resizeLocked(g)
	if invariants.Enabled && k.countLocked() != before-uint64(len(out)) {
		panic(invariants.Violation("index: resize reports %d entries removed, the count went from %d to %d", len(out), before, k.countLocked()))
	}
	return out, true, nil
}

// removeLinear clears every entry of gone through set (an array kind's
// setLocked) and returns them with their coordinates. resizeLoadsLocked
// has brought in every block holding them, so set asks for no load.
func removeLinear(gm *geom, gone []linEntry, set func(i uint64, e Entry) (Entry, *loadReq)) []coordEntry {
	out := make([]coordEntry, len(gone))
	for k, r := range gone {
		if _, req := set(r.i, Entry{}); invariants.Enabled && req != nil {
			panic(invariants.Violation("index: resize removes element %d from a block not in memory", r.i))
		}
		out[k] = coordEntry{coord: gm.coords(r.i), e: r.e}
	}
	return out
}

// outside appends the existing entries of ents (ents[0] at linear index
// first) within [lo, hi) that lie outside grid.
func (gm *geom) outside(out []linEntry, first uint64, ents []Entry, lo, hi uint64, grid []uint64) []linEntry {
	for ei, e := range ents {
		if i := first + uint64(ei); i >= lo && i < hi && e.Exists() && !gm.inside(i, grid) {
			out = append(out, linEntry{i, e})
		}
	}
	return out
}

// present appends the existing entries of ents (ents[0] at linear index
// first) with their coordinates.
func (gm *geom) present(out []coordEntry, first uint64, ents []Entry) []coordEntry {
	for ei, e := range ents {
		if e.Exists() {
			out = append(out, coordEntry{coord: gm.coords(first + uint64(ei)), e: e})
		}
	}
	return out
}

// coords returns the coordinates of linear index i in a new slice.
func (gm *geom) coords(i uint64) []uint64 {
	c := make([]uint64, len(gm.max))
	gm.coordOf(i, c)
	return c
}

// scan is the one Range loop. step runs under the read lock and returns
// the entries of the next block (more is false once there is none) or a
// block to load first, after which it runs again; a step that returns a
// batch has moved past it. fn sees each batch with no lock held, so it may
// call the index; the context is checked between batches.
func (l *loader) scan(ctx context.Context, step func() (batch []coordEntry, req *loadReq, more bool), fn func(coord []uint64, e Entry) bool) error {
	for {
		l.idx.RLock()
		batch, req, more := step()
		l.idx.RUnlock()
		if req != nil {
			if err := l.fetch(ctx, req); err != nil {
				return err
			}
			continue
		}
		for _, it := range batch {
			if !fn(it.coord, it.e) {
				return nil
			}
		}
		if !more {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// flusher is an index kind's part of Flush.
type flusher interface {
	// flushNeededLocked reports whether anything changed since the last
	// Flush, or nothing was ever written.
	flushNeededLocked() bool
	// flushPrepareLocked encodes every changed block through tx,
	// children before parents and the top block last (writeTop), and
	// points the slots' next at what their parents must record.
	flushPrepareLocked(tx *flushTx) error
	// flushEndLocked runs after tx committed (ok) or was aborted: it
	// installs or forgets what flushTx does not track (the blocks between
	// the top block and the units) and clears every next pointer, which
	// only means something inside a Flush.
	flushEndLocked(ok bool)
	// rootLocked encodes the root record of the state as of now.
	rootLocked() []byte
	// nextSetLocked reports whether any slot's next pointer is set (for
	// the driver's assertion that none is outside a Flush).
	nextSetLocked() bool
}

// flush is the one Flush (see flushTx for its three steps). Writers are
// held exclusively throughout, so nothing prepare encoded can change
// while the blocks are written without the index lock.
func (l *loader) flush(ctx context.Context, k flusher) ([]byte, error) {
	l.writers.Lock()
	defer l.writers.Unlock()
	l.idx.Lock()
	defer l.idx.Unlock()
	if !k.flushNeededLocked() {
		return k.rootLocked(), nil
	}
	tx := &flushTx{ctx: ctx, store: l.store}
	err := k.flushPrepareLocked(tx)
	if err == nil {
		err = l.writeUnlocked(tx)
	}
	if err != nil {
		tx.abort()
		k.flushEndLocked(false)
	} else {
		tx.commit()
		k.flushEndLocked(true)
	}
	if invariants.Enabled && k.nextSetLocked() {
		panic(invariants.Violation("index: a slot's next pointer outlives the Flush (dropClean would keep its block for good)"))
	}
	if err != nil {
		return nil, err
	}
	return k.rootLocked(), nil
}

// writeUnlocked writes tx's blocks with the index lock released, so that
// lookups go on while they are written. The caller holds the write lock.
func (l *loader) writeUnlocked(tx *flushTx) error {
	l.idx.Unlock()
	defer l.idx.Lock()
	return tx.writeAll()
}
