package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// The extensible array (EA index §XVII–§XXI).
//
// Entries are numbered by the linearization of geom (§XXI): the unlimited
// dimension varies slowest, so extending the dataset only appends. Element
// i lives in
//
//   - the index block itself when i < D (§XIX, "chunk pointers directly
//     stored in the index block"); otherwise, with j = i - D,
//   - super block s = floor(log2(j/2^m + 1)), which covers 2^(m+s)
//     elements in 2^floor(s/2) data blocks of 2^(m+ceil(s/2)) elements
//     (§XVII, Brodnik et al.: first the data block size doubles, then the
//     number of data blocks of that size doubles).
//
// Super blocks with fewer than 2^k data blocks do not exist on disk: their
// data block pointers are hoisted into the index block (§XIX). All other
// super blocks are arrays of pointers in their own block, and the index
// block points at them (§XVIII). No element carries its key: everything is
// computed from i (§IX).
//
// Paging. A data block larger than 2^p entries is stored as 2^p-entry
// pages, each its own block, and the super block points at every page.
// HDF5 keeps a paged data block contiguous and rewrites pages in place; a
// copy-on-write index cannot write in place, so a separately placed page is
// what keeps a flush after an append from rewriting a whole (large) data
// block. A super block then holds more pointers than Brodnik's √n, so once
// a super block would exceed 2^q pages the page size grows with it instead.
// Lookup is still O(1) and needs at most 3 block reads on a cold index:
// index block → super block → data block (page).
//
// Single writer, many readers (§VII, §XVIII): every change is written to
// new space, units first, then super blocks, then the index block, and only
// the root record naming the new index block makes the change visible, so a
// reader holding any root sees a complete, consistent structure.

// maxUnitBits bounds the entries of one unit and the pointers of one super
// block (2^22 · 24 bytes = 96 MiB), which bounds every decoder allocation.
const maxUnitBits = 22

// eaSuperInfo is what the layout says about super block s.
type eaSuperInfo struct {
	base    uint64 // j of its first element
	ulog    uint8  // log2 of entries per unit (data block or page)
	nunits  int
	hoisted bool
	slot    int // hoisted: index of its first unit among the index block's data block pointers; else index among super block pointers
}

// eaLayout is the constant shape of an extensible array (EA index §XX).
type eaLayout struct {
	d          int   // direct slots
	m, k, p, q uint8 // see Config
	sb         []eaSuperInfo
	nHoist     int    // data block pointers in the index block
	nSuper     int    // super block pointers in the index block
	capacity   uint64 // elements the layout can index
	indexSize  int
}

func newEALayout(d int, m, k, p, q uint8) (*eaLayout, error) {
	if d < 0 || d > 1024 || m > 16 || k > 8 || p > maxUnitBits || p < m+k || q < 1 || q > maxUnitBits {
		return nil, corruptf("extensible array configuration d=%d m=%d k=%d p=%d q=%d out of range", d, m, k, p, q)
	}
	l := &eaLayout{d: d, m: m, k: k, p: p, q: q}
	var base uint64
	for s := 0; int(m)+s <= 62; s++ {
		dblk := int(m) + (s+1)/2
		page := max(int(p), int(m)+s-int(q))
		ulog := min(dblk, page)
		nlog := int(m) + s - ulog
		if ulog > maxUnitBits || nlog > maxUnitBits {
			break
		}
		info := eaSuperInfo{base: base, ulog: uint8(ulog), nunits: 1 << nlog, hoisted: s/2 < int(k)}
		if info.hoisted {
			info.slot = l.nHoist
			l.nHoist += info.nunits
		} else {
			info.slot = l.nSuper
			l.nSuper++
		}
		l.sb = append(l.sb, info)
		base += 1 << (int(m) + s)
	}
	l.capacity = uint64(d) + base
	l.indexSize = 24 + d*entrySize + (l.nHoist+l.nSuper)*ptrSize + trailerSize
	return l, nil
}

// locate returns where element i >= d lives: super block s, unit ui, and
// entry ei within the unit.
func (l *eaLayout) locate(i uint64) (s, ui, ei int) {
	j := i - uint64(l.d)
	s = bits.Len64(j>>l.m+1) - 1
	off := j - l.sb[s].base
	ul := l.sb[s].ulog
	return s, int(off >> ul), int(off & (1<<ul - 1))
}

// first returns the linear index of unit ui of super block s.
func (l *eaLayout) first(s, ui int) uint64 {
	return uint64(l.d) + l.sb[s].base + uint64(ui)<<l.sb[s].ulog
}

func superBlockSize(nunits int) int { return 16 + nunits*ptrSize + trailerSize }

// eaSuper is a loaded super block.
type eaSuper struct {
	units []unitSlot
	dirty bool // a unit changed since the last Flush
}

// eaSuperSlot is the index block's reference to a super block.
// INVARIANT: as unitSlot (disk changes only when a Flush commits).
type eaSuperSlot struct {
	disk ptr
	mem  *eaSuper
	next ptr
}

type eaIndex struct {
	lay *eaLayout
	ld  loader

	// mu protects everything below and every block reachable from it
	// (super blocks, units, their entries and dirty flags). Lookups of
	// loaded blocks hold it for reading; Put, Delete, Resize, Flush and
	// the install of a freshly read block hold it for writing. No store
	// I/O happens under it (Flush writes with it released; see flushTx).
	// Lock order: the loader's, at loader.writers (lazy.go).
	mu struct {
		sync.RWMutex
		gm     *geom
		nelmts uint64 // linear extent of the grid
		count  uint64 // entries that exist
		direct []Entry
		hoist  []unitSlot // data blocks of hoisted super blocks
		supers []eaSuperSlot
		dirty  bool // the index block must be rewritten
		top    ptr  // the index block as of the last Flush
	}
}

func newEA(g Geometry, s Store, cfg Config) (*eaIndex, error) {
	gm, err := newGeom(g, true)
	if err != nil {
		return nil, err
	}
	lay, err := newEALayout(cfg.DirectSlots, uint8(cfg.DataBlockMinBits), uint8(cfg.SuperBlockMinPtrsBits), uint8(cfg.PageBits), uint8(cfg.SuperBlockMaxPagesBits))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	x := newEAShell(lay, gm, s)
	n, _ := gm.extentOf(gm.grid)
	if n > lay.capacity {
		return nil, fmt.Errorf("%w: grid %v needs %d slots, the extensible array holds %d", ErrOutOfRange, gm.grid, n, lay.capacity)
	}
	x.mu.nelmts = n
	x.mu.dirty = true
	return x, nil
}

func newEAShell(lay *eaLayout, gm *geom, s Store) *eaIndex {
	x := &eaIndex{lay: lay}
	x.ld.store = s
	x.ld.idx = &x.mu.RWMutex
	x.mu.gm = gm
	x.mu.direct = make([]Entry, lay.d)
	x.mu.hoist = make([]unitSlot, lay.nHoist)
	x.mu.supers = make([]eaSuperSlot, lay.nSuper)
	return x
}

func openEA(ctx context.Context, g Geometry, r *rootRecord, s Store) (*eaIndex, error) {
	gm, err := newGeom(g, true)
	if err != nil {
		return nil, err
	}
	if int(r.rank) != len(gm.max) || int(r.unlim) != gm.u || r.slots != gm.slab {
		return nil, corruptf("root record geometry (rank %d, dimension %d, slab %d) does not match the dataset (rank %d, dimension %d, slab %d)",
			r.rank, r.unlim, r.slots, len(gm.max), gm.u, gm.slab)
	}
	if n, _ := gm.extentOf(gm.grid); n != r.nelmts {
		return nil, corruptf("root record extent %d, dataset grid gives %d", r.nelmts, n)
	}
	lay, err := newEALayout(int(r.wide), r.m, r.k, r.p, r.q)
	if err != nil {
		return nil, err
	}
	if len(lay.sb) != int(r.nsb) {
		return nil, corruptf("root record says %d super blocks, configuration gives %d", r.nsb, len(lay.sb))
	}
	if r.nelmts > lay.capacity || r.count > r.nelmts {
		return nil, corruptf("root record extent %d / count %d beyond capacity %d", r.nelmts, r.count, lay.capacity)
	}
	if int(r.top.size) != lay.indexSize {
		return nil, corruptf("index block size %d, want %d", r.top.size, lay.indexSize)
	}
	x := newEAShell(lay, gm, s)
	decode := func(b []byte) error { return x.decodeIndexBlock(b, r.nelmts, r.count) }
	if err := x.ld.openTop(ctx, r, "index block", decode, &x.mu.count, &x.mu.top); err != nil {
		return nil, err
	}
	x.mu.nelmts = r.nelmts
	return x, nil
}

// Index block: header, nelmts u64, count u64, direct entries, hoisted data
// block pointers, super block pointers, CRC.
func (x *eaIndex) encodeIndexBlockLocked() []byte {
	l := x.lay
	b := newBlock(magicEAIndex, l.indexSize)
	binary.LittleEndian.PutUint64(b[8:], x.mu.nelmts)
	binary.LittleEndian.PutUint64(b[16:], x.mu.count)
	o := 24
	for _, e := range x.mu.direct {
		putEntry(b[o:], e)
		o += entrySize
	}
	for i := range x.mu.hoist {
		putPtr(b[o:], x.mu.hoist[i].next)
		o += ptrSize
	}
	for i := range x.mu.supers {
		putPtr(b[o:], x.mu.supers[i].next)
		o += ptrSize
	}
	return b
}

// decodeIndexBlock fills the shell from an index block; the block must
// agree with the root record's extent and count, and nothing may lie
// beyond the extent.
func (x *eaIndex) decodeIndexBlock(b []byte, nelmts, count uint64) error {
	l := x.lay
	if err := checkBlock(b, magicEAIndex, l.indexSize); err != nil {
		return err
	}
	if b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return corruptf("index block reserved bytes set")
	}
	if n, c := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:]); n != nelmts || c != count {
		return corruptf("index block extent %d / count %d, root record says %d / %d", n, c, nelmts, count)
	}
	o, err := x.decodeDirect(b, 24, nelmts)
	if err != nil {
		return err
	}
	return x.decodeIndexPtrs(b, o, nelmts)
}

// decodeDirect reads the direct entries from b[o:] and returns the offset
// after them; none may exist at or beyond the extent.
func (x *eaIndex) decodeDirect(b []byte, o int, nelmts uint64) (int, error) {
	for i := range x.mu.direct {
		e, err := getEntry(b[o:])
		if err != nil {
			return 0, err
		}
		if e.Exists() && uint64(i) >= nelmts {
			return 0, corruptf("index block entry %d beyond the extent %d", i, nelmts)
		}
		x.mu.direct[i] = e
		o += entrySize
	}
	return o, nil
}

// decodeIndexPtrs reads from b[o:], in super block order, the data block
// pointers of hoisted super blocks and the pointers of the others; none
// may name a block whose first element is at or beyond the extent.
func (x *eaIndex) decodeIndexPtrs(b []byte, o int, nelmts uint64) error {
	l := x.lay
	for s, info := range l.sb {
		n, want := 1, superBlockSize(info.nunits)
		if info.hoisted {
			n, want = info.nunits, unitBlockSize(1<<info.ulog)
		}
		for ui := 0; ui < n; ui++ { // ui stays 0 for a super block pointer
			p, err := getPtr(b[o:], want)
			if err != nil {
				return err
			}
			if !p.isNil() && l.first(s, ui) >= nelmts {
				return corruptf("index block points at super block %d beyond the extent", s)
			}
			if info.hoisted {
				x.mu.hoist[info.slot+ui].disk = p
			} else {
				x.mu.supers[info.slot].disk = p
			}
			o += ptrSize
		}
	}
	return nil
}

// Super block: header (byte 5 = s), nunits u32, reserved u32, unit
// pointers, CRC.
func encodeSuper(s int, sp *eaSuper) []byte {
	b := newBlock(magicEASuper, superBlockSize(len(sp.units)))
	b[5] = uint8(s)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(sp.units)))
	for i := range sp.units {
		putPtr(b[16+i*ptrSize:], sp.units[i].next)
	}
	return b
}

func (l *eaLayout) decodeSuper(b []byte, s int, nelmts uint64) (*eaSuper, error) {
	info := l.sb[s]
	if err := checkBlock(b, magicEASuper, superBlockSize(info.nunits)); err != nil {
		return nil, err
	}
	if int(b[5]) != s || b[6] != 0 || b[7] != 0 || binary.LittleEndian.Uint32(b[12:]) != 0 {
		return nil, corruptf("super block header for %d, want %d", b[5], s)
	}
	if n := binary.LittleEndian.Uint32(b[8:]); int(n) != info.nunits {
		return nil, corruptf("super block %d has %d pointers, want %d", s, n, info.nunits)
	}
	sp := &eaSuper{units: make([]unitSlot, info.nunits)}
	used := false
	for i := range sp.units {
		p, err := getPtr(b[16+i*ptrSize:], unitBlockSize(1<<info.ulog))
		if err != nil {
			return nil, err
		}
		if !p.isNil() {
			if l.first(s, i) >= nelmts {
				return nil, corruptf("super block %d points at unit %d beyond the extent", s, i)
			}
			used = true
		}
		sp.units[i].disk = p
	}
	if !used {
		return nil, corruptf("super block %d without data blocks", s)
	}
	return sp, nil
}

func (x *eaIndex) Kind() Kind { return KindExtensibleArray }

func (x *eaIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return int(x.mu.count)
}

// unitLocked returns the slot of unit (s, ui) and the super block holding
// it (nil for hoisted units). When a block must be read first it returns a
// load request instead. create makes a missing super block or unit (the
// write lock must be held); without it a missing one yields a nil slot or
// a slot with nil mem.
func (x *eaIndex) unitLocked(s, ui int, create bool) (*unitSlot, *eaSuper, *loadReq) {
	info := x.lay.sb[s]
	var us *unitSlot
	var sp *eaSuper
	if info.hoisted {
		us = &x.mu.hoist[info.slot+ui]
	} else {
		ss := &x.mu.supers[info.slot]
		if ss.mem == nil {
			if !ss.disk.isNil() {
				return nil, nil, x.superReq(s, ss.disk)
			}
			if !create {
				return nil, nil, nil
			}
			ss.mem = &eaSuper{units: make([]unitSlot, info.nunits)}
		}
		sp = ss.mem
		us = &sp.units[ui]
	}
	if us.mem == nil {
		if !us.disk.isNil() {
			return nil, nil, x.unitReq(s, ui, us.disk)
		}
		if create {
			us.mem = &unit{ents: make([]Entry, 1<<info.ulog)}
		}
	}
	return us, sp, nil
}

// superReq asks for super block s as its slot names it now (p).
func (x *eaIndex) superReq(s int, p ptr) *loadReq {
	slot := x.lay.sb[s].slot
	nelmts := x.mu.nelmts
	return &loadReq{
		p:      p,
		decode: func(b []byte) (any, error) { return x.lay.decodeSuper(b, s, nelmts) },
		install: func(v any) {
			if ss := &x.mu.supers[slot]; ss.disk == p && ss.mem == nil {
				ss.mem = v.(*eaSuper)
			}
		},
		wanted: func() bool { ss := &x.mu.supers[slot]; return ss.disk == p && ss.mem == nil },
	}
}

// unitReq asks for unit ui of super block s as its slot names it now (p).
func (x *eaIndex) unitReq(s, ui int, p ptr) *loadReq {
	info := x.lay.sb[s]
	nelmts := x.mu.nelmts
	first := x.lay.first(s, ui)
	slot := func() *unitSlot {
		if info.hoisted {
			return &x.mu.hoist[info.slot+ui]
		}
		if sp := x.mu.supers[info.slot].mem; sp != nil {
			return &sp.units[ui]
		}
		return nil
	}
	return &loadReq{
		p: p,
		decode: func(b []byte) (any, error) {
			return decodeUnit(b, magicEAData, uint8(s), first, 1<<info.ulog, nelmts)
		},
		install: func(v any) {
			if us := slot(); us != nil && us.disk == p && us.mem == nil {
				us.mem = v.(*unit)
			}
		},
		wanted: func() bool { us := slot(); return us != nil && us.disk == p && us.mem == nil },
	}
}

// getLocked returns element i (read lock held).
func (x *eaIndex) getLocked(i uint64) (Entry, *loadReq) {
	if i < uint64(x.lay.d) {
		return x.mu.direct[i], nil
	}
	s, ui, ei := x.lay.locate(i)
	us, _, req := x.unitLocked(s, ui, false)
	if req != nil || us == nil || us.mem == nil {
		return Entry{}, req
	}
	return us.mem.ents[ei], nil
}

// setLocked stores e at element i (write lock held).
func (x *eaIndex) setLocked(i uint64, e Entry) (Entry, *loadReq) {
	var old Entry
	if i < uint64(x.lay.d) {
		old = x.mu.direct[i]
		if old == e {
			return old, nil
		}
		x.mu.direct[i] = e
	} else {
		s, ui, ei := x.lay.locate(i)
		us, sp, req := x.unitLocked(s, ui, e.Exists())
		if req != nil {
			return Entry{}, req
		}
		if us == nil || us.mem == nil {
			return Entry{}, nil // deleting an absent entry
		}
		old = us.mem.set(ei, e)
		if old == e {
			return old, nil
		}
		if sp != nil {
			sp.dirty = true
		}
	}
	x.mu.count = recount(x.mu.count, x.mu.nelmts, old, e)
	x.mu.dirty = true
	return old, nil
}

func (x *eaIndex) Get(ctx context.Context, coord []uint64) (Entry, error) {
	return x.ld.lookup(ctx, func() (Entry, *loadReq, error) {
		i, err := x.mu.gm.linear(coord)
		if err != nil {
			return Entry{}, nil, err
		}
		e, req := x.getLocked(i)
		return e, req, nil
	})
}

func (x *eaIndex) Put(ctx context.Context, coord []uint64, e Entry) (Entry, error) {
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

func (x *eaIndex) Delete(ctx context.Context, coord []uint64) (Entry, error) {
	return x.Put(ctx, coord, Entry{})
}

// units calls fn for every unit (s, ui) intersecting elements [lo, hi).
func (l *eaLayout) units(lo, hi uint64, fn func(s, ui int) bool) {
	if lo < uint64(l.d) {
		lo = uint64(l.d)
	}
	if lo >= hi {
		return
	}
	s0, u0, _ := l.locate(lo)
	s1, u1, _ := l.locate(hi - 1)
	for s := s0; s <= s1; s++ {
		from, to := 0, l.sb[s].nunits-1
		if s == s0 {
			from = u0
		}
		if s == s1 {
			to = u1
		}
		for ui := from; ui <= to; ui++ {
			if !fn(s, ui) {
				return
			}
		}
	}
}

func (x *eaIndex) Resize(ctx context.Context, g Geometry, removed func(coord []uint64, e Entry)) error {
	return x.ld.resize(ctx, x, g, removed)
}

// resizeLoadsLocked asks for the blocks holding the elements that may fall
// outside g (resizeRangeLocked).
func (x *eaIndex) resizeLoadsLocked(g Geometry) ([]*loadReq, error) {
	lo, hi, err := x.resizeRangeLocked(g)
	if err != nil {
		return nil, err
	}
	return x.missingLocked(lo, hi), nil
}

// missingLocked returns a load request for every block not in memory that
// holds elements in [lo, hi). The units of a super block not in memory are
// asked for once it is loaded: until then, each would ask for the super
// block.
func (x *eaIndex) missingLocked(lo, hi uint64) []*loadReq {
	var reqs []*loadReq
	skip := -1
	x.lay.units(lo, hi, func(s, ui int) bool {
		if s == skip {
			return true
		}
		if _, _, req := x.unitLocked(s, ui, false); req != nil {
			reqs = append(reqs, req)
			if info := x.lay.sb[s]; !info.hoisted && x.mu.supers[info.slot].mem == nil {
				skip = s
			}
		}
		return true
	})
	return reqs
}

// resizeLocked removes the entries of the elements outside g and installs
// g; the index block records the extent, so it changes with the grid.
func (x *eaIndex) resizeLocked(g Geometry) []coordEntry {
	lo, hi, _ := x.resizeRangeLocked(g) // resizeLoadsLocked accepted g under this lock
	gm := x.mu.gm
	out := removeLinear(gm, x.outsideLocked(lo, hi, g.Grid), x.setLocked)
	old := slices.Clone(gm.grid)
	_ = gm.setGrid(g.Grid)
	x.mu.nelmts, _ = gm.extentOf(gm.grid)
	if !equalGrid(old, gm.grid) {
		x.mu.dirty = true
	}
	return out
}

// outsideLocked returns the entries of elements [lo, hi) that lie outside
// grid; every block holding them is in memory.
func (x *eaIndex) outsideLocked(lo, hi uint64, grid []uint64) []linEntry {
	gm := x.mu.gm
	out := gm.outside(nil, 0, x.mu.direct, lo, hi, grid)
	x.lay.units(lo, hi, func(s, ui int) bool {
		if us, _, _ := x.unitLocked(s, ui, false); us != nil && us.mem != nil {
			out = gm.outside(out, x.lay.first(s, ui), us.mem.ents, lo, hi, grid)
		}
		return true
	})
	return out
}

func (x *eaIndex) countLocked() uint64 { return x.mu.count }

// resizeRangeLocked validates g and returns the elements [lo, hi) whose
// entries may fall outside it.
func (x *eaIndex) resizeRangeLocked(g Geometry) (lo, hi uint64, err error) {
	gm := x.mu.gm
	if err := gm.sameMax(g); err != nil {
		return 0, 0, err
	}
	for d, n := range g.Grid {
		if gm.max[d] != Unlimited && n > gm.max[d] {
			return 0, 0, fmt.Errorf("%w: grid %v exceeds maximum %v", ErrGeometry, g.Grid, gm.max)
		}
	}
	n, ok := gm.extentOf(g.Grid)
	if !ok || n > x.lay.capacity {
		return 0, 0, fmt.Errorf("%w: grid %v exceeds the extensible array's %d slots", ErrOutOfRange, g.Grid, x.lay.capacity)
	}
	hi = x.mu.nelmts
	lo = min(n, hi)
	if gm.otherShrank(g.Grid) {
		lo = 0
	}
	return lo, hi, nil
}

func equalGrid(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (x *eaIndex) Range(ctx context.Context, fn func(coord []uint64, e Entry) bool) error {
	var next uint64 // the first element not visited yet
	return x.ld.scan(ctx, func() ([]coordEntry, *loadReq, bool) { return x.rangeStepLocked(&next) }, fn)
}

// rangeStepLocked returns the entries of the block holding element *next,
// the direct entries first, and moves *next past it.
func (x *eaIndex) rangeStepLocked(next *uint64) ([]coordEntry, *loadReq, bool) {
	gm, d := x.mu.gm, uint64(x.lay.d)
	if *next < d {
		*next = d
		return gm.present(nil, 0, x.mu.direct), nil, true
	}
	if *next >= x.mu.nelmts {
		return nil, nil, false
	}
	s, ui, _ := x.lay.locate(*next)
	us, _, req := x.unitLocked(s, ui, false)
	if req != nil {
		return nil, req, true
	}
	first := x.lay.first(s, ui)
	*next = first + 1<<x.lay.sb[s].ulog
	if us == nil || us.mem == nil {
		return nil, nil, true
	}
	return gm.present(nil, first, us.mem.ents), nil, true
}

func (x *eaIndex) Flush(ctx context.Context) ([]byte, error) { return x.ld.flush(ctx, x) }

func (x *eaIndex) flushNeededLocked() bool { return x.mu.dirty || x.mu.top.isNil() }

// flushPrepareLocked encodes the changed units, then the super blocks
// naming them, then the index block naming both.
func (x *eaIndex) flushPrepareLocked(tx *flushTx) error {
	for s, info := range x.lay.sb {
		var err error
		if info.hoisted {
			_, err = x.flushUnitsLocked(tx, s, x.mu.hoist[info.slot:info.slot+info.nunits])
		} else {
			err = x.flushSuperLocked(tx, s)
		}
		if err != nil {
			return err
		}
	}
	return tx.writeTop(&x.mu.top, x.encodeIndexBlockLocked())
}

// flushUnitsLocked encodes the changed units of super block s (units[ui]
// is its unit ui) and points every slot's next at its block, changed or
// not, for the parent to record; used reports whether any remains stored.
func (x *eaIndex) flushUnitsLocked(tx *flushTx, s int, units []unitSlot) (used bool, err error) {
	for ui := range units {
		us := &units[ui]
		p, err := tx.unit(us, magicEAData, uint8(s), x.lay.first(s, ui))
		if err != nil {
			return false, err
		}
		us.next = p
		used = used || !p.isNil()
	}
	return used, nil
}

// flushSuperLocked encodes super block s if a unit of it changed; one
// left without units is dropped.
func (x *eaIndex) flushSuperLocked(tx *flushTx, s int) error {
	ss := &x.mu.supers[x.lay.sb[s].slot]
	ss.next = ss.disk
	if ss.mem == nil || !ss.mem.dirty {
		return nil
	}
	used, err := x.flushUnitsLocked(tx, s, ss.mem.units)
	if err != nil {
		return err
	}
	tx.replace(ss.disk)
	ss.next = ptr{}
	if used {
		ss.next, err = tx.write(encodeSuper(s, ss.mem))
	}
	return err
}

// flushEndLocked installs the rewritten super blocks (flushTx did the
// units and the index block) and clears every next pointer. A unit of a
// rewritten super block has its next set even when it did not change, and
// dropClean keeps any unit whose next is set, so one left set would pin
// the unit in memory.
func (x *eaIndex) flushEndLocked(ok bool) {
	for i := range x.mu.hoist {
		x.mu.hoist[i].next = ptr{}
	}
	for i := range x.mu.supers {
		ss := &x.mu.supers[i]
		if ss.mem != nil && ss.mem.dirty { // rewritten, or being rewritten when the Flush failed
			for j := range ss.mem.units {
				ss.mem.units[j].next = ptr{}
			}
			if ok {
				ss.disk = ss.next
				if ss.disk.isNil() {
					ss.mem = nil
				} else {
					ss.mem.dirty = false
				}
			}
		}
		ss.next = ptr{}
	}
	if ok {
		x.mu.dirty = false
	}
}

func (x *eaIndex) nextSetLocked() bool {
	set := func(units []unitSlot) bool {
		return slices.ContainsFunc(units, func(us unitSlot) bool { return !us.next.isNil() })
	}
	if set(x.mu.hoist) {
		return true
	}
	for i := range x.mu.supers {
		ss := &x.mu.supers[i]
		if !ss.next.isNil() || ss.mem != nil && set(ss.mem.units) {
			return true
		}
	}
	return false
}

func (x *eaIndex) rootLocked() []byte {
	l := x.lay
	r := rootRecord{
		kind: KindExtensibleArray, rank: uint8(len(x.mu.gm.max)), unlim: uint8(x.mu.gm.u),
		slots: x.mu.gm.slab, nelmts: x.mu.nelmts, count: x.mu.count,
		m: l.m, k: l.k, p: l.p, q: l.q, nsb: uint8(len(l.sb)), wide: uint16(l.d),
		top: x.mu.top,
	}
	return r.encode()
}

func (x *eaIndex) Extents(ctx context.Context, fn func(off, size int64) error) error {
	// Super blocks name their units, so they are read; units are not.
	if err := x.ld.ensure(ctx, func() ([]*loadReq, error) { return x.superLoadsLocked(), nil }); err != nil {
		return err
	}
	var all []ptr
	x.mu.RLock()
	all = append(all, x.mu.top)
	for i := range x.mu.hoist {
		all = append(all, x.mu.hoist[i].disk)
	}
	for i := range x.mu.supers {
		ss := &x.mu.supers[i]
		if ss.disk.isNil() {
			continue
		}
		all = append(all, ss.disk)
		// INVARIANT: a super slot with a disk block is loaded above or
		// was loaded before; loaded blocks never unload except by Flush,
		// which replaced the disk block too.
		if ss.mem != nil {
			for j := range ss.mem.units {
				all = append(all, ss.mem.units[j].disk)
			}
		}
	}
	x.mu.RUnlock()
	return reportExtents(all, fn)
}

// superLoadsLocked asks for every super block not in memory.
func (x *eaIndex) superLoadsLocked() []*loadReq {
	var reqs []*loadReq
	for s, info := range x.lay.sb {
		if info.hoisted {
			continue
		}
		if ss := &x.mu.supers[info.slot]; ss.mem == nil && !ss.disk.isNil() {
			reqs = append(reqs, x.superReq(s, ss.disk))
		}
	}
	return reqs
}

// reportExtents calls fn for every non-nil pointer.
func reportExtents(all []ptr, fn func(off, size int64) error) error {
	for _, p := range all {
		if p.isNil() {
			continue
		}
		if err := fn(int64(p.addr), int64(p.size)); err != nil {
			return err
		}
	}
	return nil
}

// DropClean drops the clean data blocks (Index.DropClean).
func (x *eaIndex) DropClean() {
	x.ld.writers.RLock()
	defer x.ld.writers.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range x.mu.hoist {
		x.mu.hoist[i].dropClean()
	}
	for i := range x.mu.supers {
		if sp := x.mu.supers[i].mem; sp != nil {
			for j := range sp.units {
				sp.units[j].dropClean()
			}
		}
	}
}

// MemBytes reports the encoded size of the blocks held in memory: the index
// block and every loaded or created super block and data block (page). It
// walks the slots, not the entries.
func (x *eaIndex) MemBytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := int64(x.lay.indexSize)
	for i := range x.mu.hoist {
		if u := x.mu.hoist[i].mem; u != nil {
			n += int64(unitBlockSize(len(u.ents)))
		}
	}
	for i := range x.mu.supers {
		sp := x.mu.supers[i].mem
		if sp == nil {
			continue
		}
		n += int64(superBlockSize(len(sp.units)))
		for j := range sp.units {
			if u := sp.units[j].mem; u != nil {
				n += int64(unitBlockSize(len(u.ents)))
			}
		}
	}
	return n
}
