package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// This file holds the machinery the kinds share: lazy, coalesced block
// loading; the unit (a block of consecutive entries: an extensible array's
// data block or data block page, a fixed array's page); and the
// copy-on-write flush transaction.

// loadReq describes one block a lookup needs before it can proceed.
//
// decode runs without any lock; install and wanted run with the index lock
// held (write and read respectively). install must check that the slot
// still names p and is still unloaded: between the lookup that built the
// request and the install, another goroutine may have loaded, modified or
// dropped the block.
type loadReq struct {
	p       ptr
	decode  func(b []byte) (any, error)
	install func(v any)
	wanted  func() bool
}

// loader reads blocks on first touch. Concurrent requests for one block
// share one read: the first requester (the leader) reads, decodes and
// installs; the others wait for it and then retry their lookup, which now
// finds the block in memory.
type loader struct {
	store Store
	idx   *sync.RWMutex // the index's lock; install takes it for writing

	// writers keeps mutations out of a Flush's unlocked block writes. Put
	// and Delete (each locked step of mutate) and Resize hold it shared,
	// so they exclude only Flush, which holds it exclusively from its
	// prepare to its swap: what it encoded cannot change while its blocks
	// are written without the index lock, and lookups (and the installs
	// of blocks they read) proceed meanwhile.
	// Lock order: writers, then the index lock, then flight.
	writers sync.RWMutex

	flight struct {
		sync.Mutex
		// calls holds the loads in progress by block pointer.
		calls map[ptr]*loadCall
	}
}

type loadCall struct {
	done    chan struct{}
	err     error // valid once done is closed
	waiters int   // requesters sharing the leader's read (guarded by flight)
}

// lookup runs step under the index's read lock until it completes without
// needing a block first (see mutate).
func (l *loader) lookup(ctx context.Context, step func() (Entry, *loadReq, error)) (Entry, error) {
	for {
		l.idx.RLock()
		e, req, err := step()
		l.idx.RUnlock()
		if err != nil || req == nil {
			return e, err
		}
		if err := l.fetch(ctx, req); err != nil {
			return Entry{}, err
		}
	}
}

// mutate runs step under the index's write lock until it completes without
// needing a block first: a step that returns a load request is retried once
// fetch has brought the block in (with no lock held while reading).
func (l *loader) mutate(ctx context.Context, step func() (Entry, *loadReq, error)) (Entry, error) {
	for {
		l.writers.RLock()
		l.idx.Lock()
		old, req, err := step()
		l.idx.Unlock()
		l.writers.RUnlock()
		if err != nil || req == nil {
			return old, err
		}
		if err := l.fetch(ctx, req); err != nil {
			return Entry{}, err
		}
	}
}

// fetch loads r.p. A nil return means "retry the lookup": the block is in
// memory now, or it no longer matters. The caller must hold no index lock.
func (l *loader) fetch(ctx context.Context, r *loadReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.flight.Lock()
	if l.flight.calls == nil {
		l.flight.calls = make(map[ptr]*loadCall)
	}
	c, busy := l.flight.calls[r.p]
	if busy {
		c.waiters++
	} else {
		c = &loadCall{done: make(chan struct{})}
		l.flight.calls[r.p] = c
	}
	l.flight.Unlock()

	var err error
	if busy {
		select {
		case <-c.done:
			err = c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		err = l.read(ctx, r)
		c.err = err
		l.flight.Lock()
		delete(l.flight.calls, r.p)
		l.flight.Unlock()
		close(c.done)
	}
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if busy && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil // the leader gave up; try ourselves
	}
	l.idx.RLock()
	still := r.wanted()
	l.idx.RUnlock()
	if !still {
		return nil
	}
	return err
}

func (l *loader) read(ctx context.Context, r *loadReq) error {
	b := make([]byte, r.p.size)
	if err := readPtr(ctx, l.store, b, r.p); err != nil {
		return fmt.Errorf("index: reading block at %#x: %w", r.p.addr, err)
	}
	v, err := r.decode(b)
	if err == nil {
		err = checkParent(b, r.p)
	}
	if err != nil {
		return fmt.Errorf("index: block at %#x: %w", r.p.addr, err)
	}
	l.idx.Lock()
	r.install(v)
	l.idx.Unlock()
	return nil
}

// unit is one stored run of consecutive entries.
type unit struct {
	ents  []Entry
	live  int  // entries that exist
	dirty bool // differs from the block its slot's disk names
}

// set stores e at i and returns the entry it replaced.
func (u *unit) set(i int, e Entry) Entry {
	old := u.ents[i]
	if old == e {
		return old
	}
	u.ents[i] = e
	if old.Exists() {
		u.live--
	}
	if e.Exists() {
		u.live++
	}
	u.dirty = true
	return old
}

// unitSlot is a parent's reference to a unit.
//
// INVARIANT: disk names the unit as of the last successful Flush (nil if it
// was not stored then); it changes only when a Flush commits. mem is nil
// when the unit is not loaded (disk non-nil) or does not exist (disk nil).
type unitSlot struct {
	disk ptr
	mem  *unit
	next ptr // the Flush in progress's new block
}

// dropClean forgets the slot's unit when it is the block on disk (not
// changed since the last Flush), so that the next touch reads it again.
// Callers hold the index's lock for writing and the loader's writers lock
// (no Flush is between its prepare and its swap, so next is nil).
func (us *unitSlot) dropClean() {
	if us.mem != nil && !us.mem.dirty && !us.disk.isNil() && us.next.isNil() {
		us.mem = nil
	}
}

// unitBlockSize is the size of a unit block holding n entries.
func unitBlockSize(n int) int { return 20 + n*entrySize + trailerSize }

// encodeUnit lays out a unit block: header, super block number s (0 for a
// fixed array), the linear index of its first entry, the entry count and
// the entries.
func encodeUnit(m magic, s uint8, first uint64, u *unit) []byte {
	b := newBlock(m, unitBlockSize(len(u.ents)))
	b[5] = s
	binary.LittleEndian.PutUint64(b[8:], first)
	binary.LittleEndian.PutUint32(b[16:], uint32(len(u.ents)))
	for i, e := range u.ents {
		putEntry(b[20+i*entrySize:], e)
	}
	return b
}

// decodeUnit checks and decodes a unit block that must hold n entries
// starting at linear index first; entries at or beyond limit must be
// absent, and at least one entry must exist (empty units are never stored).
func decodeUnit(b []byte, m magic, s uint8, first uint64, n int, limit uint64) (*unit, error) {
	if err := checkBlock(b, m, unitBlockSize(n)); err != nil {
		return nil, err
	}
	if b[5] != s || b[6] != 0 || b[7] != 0 {
		return nil, corruptf("%s block for super block %d, want %d", m[:], b[5], s)
	}
	if f := binary.LittleEndian.Uint64(b[8:]); f != first {
		return nil, corruptf("%s block starts at element %d, want %d", m[:], f, first)
	}
	if c := binary.LittleEndian.Uint32(b[16:]); int(c) != n {
		return nil, corruptf("%s block holds %d entries, want %d", m[:], c, n)
	}
	u := &unit{ents: make([]Entry, n)}
	for i := range u.ents {
		e, err := getEntry(b[20+i*entrySize:])
		if err != nil {
			return nil, err
		}
		if e.Exists() {
			if first+uint64(i) >= limit {
				return nil, corruptf("%s block has entry %d beyond the extent %d", m[:], first+uint64(i), limit)
			}
			u.live++
		}
		u.ents[i] = e
	}
	if u.live == 0 {
		return nil, corruptf("%s block without entries", m[:])
	}
	return u, nil
}

// flushTx is one Flush, in three steps so that lookups need not wait for
// its I/O:
//
//  1. prepare, under the index's write lock: every changed block is
//     encoded, sealed (its checksum goes into its parent) and given new
//     space, children before parents; nothing in memory changes but the
//     slots' next pointers.
//  2. writeAll, with no index lock (but loader.writers held exclusively, so
//     no mutation can run): the blocks are written, children first.
//  3. commit (or abort), under the write lock again: the slots take their
//     new addresses and replaced blocks are freed; on failure the new
//     space is handed back and the index stays dirty with its old
//     addresses, as if the Flush had not run.
//
// INVARIANT: no block the last commit references is written (copy on
// write), and a parent's recorded checksum is that of the bytes written
// for the child, since both come from the same sealed buffer.
type flushTx struct {
	ctx     context.Context
	store   Store
	allocs  []ptr // new blocks allocated so far
	pending []pendingWrite
	frees   []ptr // old blocks the committed state replaces
	units   []*unitSlot
	top     *ptr // the index's top pointer, set to newTop on commit
	newTop  ptr
}

type pendingWrite struct {
	b   []byte
	off int64
}

// writeAll writes the prepared blocks in the order they were prepared
// (children before parents). The caller holds no index lock.
func (tx *flushTx) writeAll() error {
	for _, w := range tx.pending {
		if err := tx.store.WriteAt(tx.ctx, w.b, w.off); err != nil {
			return fmt.Errorf("index: writing block at %#x: %w", w.off, err)
		}
	}
	return nil
}

// write seals a block and gives it new space; writeAll writes it.
func (tx *flushTx) write(b []byte) (ptr, error) {
	crc := seal(b)
	off, err := tx.store.Alloc(int64(len(b)))
	if err != nil {
		return ptr{}, fmt.Errorf("index: allocating %d bytes: %w", len(b), err)
	}
	if off <= 0 {
		return ptr{}, fmt.Errorf("index: store allocated offset %d (0 is the nil pointer)", off)
	}
	p := ptr{addr: uint64(off), size: uint32(len(b)), crc: crc}
	tx.allocs = append(tx.allocs, p)
	tx.pending = append(tx.pending, pendingWrite{b: b, off: off})
	return p, nil
}

// replace records that old is superseded once the transaction commits.
func (tx *flushTx) replace(old ptr) {
	if !old.isNil() {
		tx.frees = append(tx.frees, old)
	}
}

// writeTop prepares the index's new top block, last (children before
// parents); commit points *top at it and frees the old top block.
func (tx *flushTx) writeTop(top *ptr, b []byte) error {
	p, err := tx.write(b)
	if err != nil {
		return err
	}
	tx.replace(*top)
	tx.top, tx.newTop = top, p
	return nil
}

// unit writes a dirty unit (or drops an empty one) and sets us.next. It
// returns the pointer the parent must record.
func (tx *flushTx) unit(us *unitSlot, m magic, s uint8, first uint64) (ptr, error) {
	if us.mem == nil || !us.mem.dirty {
		return us.disk, nil
	}
	tx.units = append(tx.units, us)
	tx.replace(us.disk)
	if us.mem.live == 0 {
		us.next = ptr{}
		return ptr{}, nil
	}
	p, err := tx.write(encodeUnit(m, s, first, us.mem))
	if err != nil {
		return ptr{}, err
	}
	us.next = p
	return p, nil
}

// abort hands back the space of a failed flush.
func (tx *flushTx) abort() {
	for _, p := range tx.allocs {
		tx.store.Free(int64(p.addr), int64(p.size))
	}
}

// commit installs the new addresses of the units and frees replaced blocks.
func (tx *flushTx) commit() {
	if tx.top != nil {
		*tx.top = tx.newTop
	}
	for _, us := range tx.units {
		us.disk = us.next
		us.next = ptr{}
		if us.disk.isNil() {
			us.mem = nil
		} else {
			us.mem.dirty = false
		}
	}
	for _, p := range tx.frees {
		tx.store.Free(int64(p.addr), int64(p.size))
	}
}
