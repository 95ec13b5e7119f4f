package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// The fixed array: for datasets without an unlimited dimension. Slots are
// numbered in C order over the MAXIMUM grid (so a dataset that grows up to
// its maximum never renumbers) and cut into pages of 2^p entries; a header
// block holds one pointer per page. A page that holds no entry is not
// stored (nil pointer), so a sparse dataset costs only its header.
// Lookup: header (read by Open) → page, one read on a cold index.

// maxFAPages bounds the header block (16 bytes per page).
const maxFAPages = 1 << 20

type faIndex struct {
	p      uint8
	nslots uint64
	ld     loader

	// mu protects everything below and the pages' contents; see eaIndex.
	mu struct {
		sync.RWMutex
		gm    *geom
		count uint64
		pages []unitSlot
		dirty bool // the header must be rewritten
		top   ptr  // the header as of the last Flush
	}
}

func faPages(nslots uint64, p uint8) (int, bool) {
	n := (nslots + 1<<p - 1) >> p
	if nslots > MaxFixedArraySlots || n > maxFAPages {
		return 0, false
	}
	return int(n), true
}

func faHeaderSize(npages int) int { return 24 + npages*ptrSize + trailerSize }

func newFAShell(gm *geom, p uint8, s Store) (*faIndex, error) {
	nslots, ok := product(gm.max, -1)
	if !ok {
		return nil, fmt.Errorf("%w: fixed array of %v overflows", ErrGeometry, gm.max)
	}
	np, ok := faPages(nslots, p)
	if !ok {
		return nil, fmt.Errorf("%w: fixed array of %d slots in pages of %d is too large (use an extensible array)", ErrGeometry, nslots, 1<<p)
	}
	x := &faIndex{p: p, nslots: nslots}
	x.ld.store = s
	x.ld.idx = &x.mu.RWMutex
	x.mu.gm = gm
	x.mu.pages = make([]unitSlot, np)
	return x, nil
}

func newFA(g Geometry, s Store, cfg Config) (*faIndex, error) {
	gm, err := newGeom(g, false)
	if err != nil {
		return nil, err
	}
	x, err := newFAShell(gm, uint8(cfg.PageBits), s)
	if err != nil {
		return nil, err
	}
	x.mu.dirty = true
	return x, nil
}

func openFA(ctx context.Context, g Geometry, r *rootRecord, s Store) (*faIndex, error) {
	gm, err := newGeom(g, false)
	if err != nil {
		return nil, err
	}
	if int(r.rank) != len(gm.max) || r.slots != gm.slab*gm.max[0] {
		return nil, corruptf("root record (rank %d, %d slots) does not match the dataset (rank %d, max grid %v)", r.rank, r.slots, len(gm.max), gm.max)
	}
	if r.unlim != 0 || r.nelmts != 0 || r.m != 0 || r.k != 0 || r.q != 0 || r.nsb != 0 || r.wide != 0 {
		return nil, corruptf("fixed array root record has extensible array fields set")
	}
	if r.p < 1 || r.p > maxUnitBits || r.count > r.slots {
		return nil, corruptf("fixed array page bits %d / count %d out of range", r.p, r.count)
	}
	x, err := newFAShell(gm, r.p, s)
	if err != nil {
		return nil, corruptf("%v", err)
	}
	if int(r.top.size) != faHeaderSize(len(x.mu.pages)) {
		return nil, corruptf("fixed array header size %d, want %d", r.top.size, faHeaderSize(len(x.mu.pages)))
	}
	decode := func(b []byte) error { return x.decodeHeader(b, r.count) }
	if err := x.ld.openTop(ctx, r, "fixed array header", decode, &x.mu.count, &x.mu.top); err != nil {
		return nil, err
	}
	return x, nil
}

// Header: header (byte 5 = p), nslots u64, count u64, page pointers, CRC.
func (x *faIndex) encodeHeaderLocked() []byte {
	b := newBlock(magicFAHeader, faHeaderSize(len(x.mu.pages)))
	b[5] = x.p
	binary.LittleEndian.PutUint64(b[8:], x.nslots)
	binary.LittleEndian.PutUint64(b[16:], x.mu.count)
	for i := range x.mu.pages {
		putPtr(b[24+i*ptrSize:], x.mu.pages[i].next)
	}
	return b
}

func (x *faIndex) decodeHeader(b []byte, count uint64) error {
	if err := checkBlock(b, magicFAHeader, faHeaderSize(len(x.mu.pages))); err != nil {
		return err
	}
	if b[5] != x.p || b[6] != 0 || b[7] != 0 {
		return corruptf("fixed array header page bits %d, want %d", b[5], x.p)
	}
	if n, c := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:]); n != x.nslots || c != count {
		return corruptf("fixed array header slots %d / count %d, want %d / %d", n, c, x.nslots, count)
	}
	for i := range x.mu.pages {
		p, err := getPtr(b[24+i*ptrSize:], unitBlockSize(x.pageLen(i)))
		if err != nil {
			return err
		}
		x.mu.pages[i].disk = p
	}
	return nil
}

// pageLen is the number of slots of page i (the last may be short).
func (x *faIndex) pageLen(i int) int {
	first := uint64(i) << x.p
	return int(min(uint64(1)<<x.p, x.nslots-first))
}

func (x *faIndex) Kind() Kind { return KindFixedArray }

func (x *faIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return int(x.mu.count)
}

func (x *faIndex) pageReq(pi int, p ptr) *loadReq {
	n := x.pageLen(pi)
	return &loadReq{
		p: p,
		decode: func(b []byte) (any, error) {
			return decodeUnit(b, magicFAPage, 0, uint64(pi)<<x.p, n, x.nslots)
		},
		install: func(v any) {
			if us := &x.mu.pages[pi]; us.disk == p && us.mem == nil {
				us.mem = v.(*unit)
			}
		},
		wanted: func() bool { us := &x.mu.pages[pi]; return us.disk == p && us.mem == nil },
	}
}

// pageLocked returns page pi's slot, or a load request.
func (x *faIndex) pageLocked(pi int, create bool) (*unitSlot, *loadReq) {
	us := &x.mu.pages[pi]
	if us.mem == nil {
		if !us.disk.isNil() {
			return nil, x.pageReq(pi, us.disk)
		}
		if create {
			us.mem = &unit{ents: make([]Entry, x.pageLen(pi))}
		}
	}
	return us, nil
}

func (x *faIndex) Get(ctx context.Context, coord []uint64) (Entry, error) {
	return x.ld.lookup(ctx, func() (Entry, *loadReq, error) {
		i, err := x.mu.gm.linear(coord)
		if err != nil {
			return Entry{}, nil, err
		}
		us, req := x.pageLocked(int(i>>x.p), false)
		if us != nil && us.mem != nil {
			return us.mem.ents[i&(1<<x.p-1)], req, nil
		}
		return Entry{}, req, nil
	})
}

// setLocked stores e at slot i (write lock held).
func (x *faIndex) setLocked(i uint64, e Entry) (Entry, *loadReq) {
	us, req := x.pageLocked(int(i>>x.p), e.Exists())
	if req != nil || us.mem == nil {
		return Entry{}, req
	}
	old := us.mem.set(int(i&(1<<x.p-1)), e)
	if old == e {
		return old, nil
	}
	x.mu.count = recount(x.mu.count, x.nslots, old, e)
	x.mu.dirty = true
	return old, nil
}

func (x *faIndex) Put(ctx context.Context, coord []uint64, e Entry) (Entry, error) {
	e = normalize(e)
	return x.ld.mutate(ctx, func() (Entry, *loadReq, error) {
		i, err := x.mu.gm.linear(coord)
		if err != nil {
			return Entry{}, nil, err
		}
		old, req := x.setLocked(i, e)
		return old, req, nil
	})
}

func (x *faIndex) Delete(ctx context.Context, coord []uint64) (Entry, error) {
	return x.Put(ctx, coord, Entry{})
}

func (x *faIndex) Resize(ctx context.Context, g Geometry, removed func(coord []uint64, e Entry)) error {
	return x.ld.resize(ctx, x, g, removed)
}

// resizeLoadsLocked asks for every stored page not in memory when g
// shrinks a dimension: slots are numbered over the maximum grid, so any
// page may hold slots outside it.
func (x *faIndex) resizeLoadsLocked(g Geometry) ([]*loadReq, error) {
	if err := x.checkResizeLocked(g); err != nil || !x.mu.gm.anyShrank(g.Grid) {
		return nil, err
	}
	var reqs []*loadReq
	for pi := range x.mu.pages {
		if us := &x.mu.pages[pi]; us.mem == nil && !us.disk.isNil() {
			reqs = append(reqs, x.pageReq(pi, us.disk))
		}
	}
	return reqs, nil
}

// resizeLocked removes the entries outside g and installs g.
func (x *faIndex) resizeLocked(g Geometry) []coordEntry {
	gm := x.mu.gm
	var gone []linEntry
	for pi := range x.mu.pages {
		if u := x.mu.pages[pi].mem; u != nil {
			gone = gm.outside(gone, uint64(pi)<<x.p, u.ents, 0, x.nslots, g.Grid)
		}
	}
	out := removeLinear(gm, gone, x.setLocked)
	if !equalGrid(gm.grid, g.Grid) {
		_ = gm.setGrid(g.Grid) // resizeLoadsLocked accepted g under this lock
		x.mu.dirty = true
	}
	return out
}

func (x *faIndex) countLocked() uint64 { return x.mu.count }

func (x *faIndex) checkResizeLocked(g Geometry) error {
	gm := x.mu.gm
	if err := gm.sameMax(g); err != nil {
		return err
	}
	for d, n := range g.Grid {
		if n > gm.max[d] {
			return fmt.Errorf("%w: grid %v exceeds maximum %v", ErrGeometry, g.Grid, gm.max)
		}
	}
	return nil
}

func (x *faIndex) Range(ctx context.Context, fn func(coord []uint64, e Entry) bool) error {
	pi := 0 // the next page to visit
	return x.ld.scan(ctx, func() ([]coordEntry, *loadReq, bool) {
		if pi >= len(x.mu.pages) { // the page count never changes
			return nil, nil, false
		}
		us, req := x.pageLocked(pi, false)
		if req != nil {
			return nil, req, true
		}
		var batch []coordEntry
		if us.mem != nil {
			batch = x.mu.gm.present(nil, uint64(pi)<<x.p, us.mem.ents)
		}
		pi++
		return batch, nil, true
	}, fn)
}

func (x *faIndex) Flush(ctx context.Context) ([]byte, error) { return x.ld.flush(ctx, x) }

func (x *faIndex) flushNeededLocked() bool { return x.mu.dirty || x.mu.top.isNil() }

// flushPrepareLocked encodes the changed pages, then the header naming
// every page.
func (x *faIndex) flushPrepareLocked(tx *flushTx) error {
	for pi := range x.mu.pages {
		us := &x.mu.pages[pi]
		p, err := tx.unit(us, magicFAPage, 0, uint64(pi)<<x.p)
		if err != nil {
			return err
		}
		us.next = p
	}
	return tx.writeTop(&x.mu.top, x.encodeHeaderLocked())
}

// flushEndLocked clears the pages' next pointers (flushTx installed the
// changed pages and the header).
func (x *faIndex) flushEndLocked(ok bool) {
	for pi := range x.mu.pages {
		x.mu.pages[pi].next = ptr{}
	}
	if ok {
		x.mu.dirty = false
	}
}

func (x *faIndex) nextSetLocked() bool {
	return slices.ContainsFunc(x.mu.pages, func(us unitSlot) bool { return !us.next.isNil() })
}

func (x *faIndex) rootLocked() []byte {
	r := rootRecord{
		kind: KindFixedArray, rank: uint8(len(x.mu.gm.max)), slots: x.nslots,
		count: x.mu.count, p: x.p, top: x.mu.top,
	}
	return r.encode()
}

func (x *faIndex) Extents(ctx context.Context, fn func(off, size int64) error) error {
	x.mu.RLock()
	all := []ptr{x.mu.top}
	for i := range x.mu.pages {
		all = append(all, x.mu.pages[i].disk)
	}
	x.mu.RUnlock()
	return reportExtents(all, fn)
}

// DropClean drops the clean pages (Index.DropClean).
func (x *faIndex) DropClean() {
	x.ld.writers.RLock()
	defer x.ld.writers.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range x.mu.pages {
		x.mu.pages[i].dropClean()
	}
}

// MemBytes reports the encoded size of the header and of every loaded or
// created page.
func (x *faIndex) MemBytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := int64(faHeaderSize(len(x.mu.pages)))
	for i := range x.mu.pages {
		if u := x.mu.pages[i].mem; u != nil {
			n += int64(unitBlockSize(len(u.ents)))
		}
	}
	return n
}
