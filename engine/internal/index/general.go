package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/scc-dev/scc/internal/invariants"
)

// The General index: for datasets with more than one unlimited dimension,
// where growth inserts in the middle of any linear order (EA index §X keeps
// a B-tree for them). It is a sorted map from coordinates (lexicographic, C
// order) to entries, cut into leaves of at most LeafMax entries, with one
// root block listing every leaf's first key and pointer. Lookup: root block
// (read by Open) → leaf, one read on a cold index.
//
// Leaves split in two when full, except that an append at the very end
// starts a new leaf and leaves the full one full (the common case of
// datasets growing in order). Leaves that become empty are dropped; leaves
// are never merged, so heavy deletion leaves many small leaves.

type genLeaf struct {
	keys  []uint64 // len(ents)·rank, strictly increasing keys
	ents  []Entry  // all exist
	dirty bool
}

func (lf *genLeaf) key(rank, i int) []uint64 { return lf.keys[i*rank : (i+1)*rank] }

// search returns the position of k in lf and whether it is there.
func (lf *genLeaf) search(rank int, k []uint64) (int, bool) {
	i := sort.Search(len(lf.ents), func(i int) bool { return cmpKey(lf.key(rank, i), k) >= 0 })
	return i, i < len(lf.ents) && cmpKey(lf.key(rank, i), k) == 0
}

// genSlot is the root's reference to a leaf.
//
// INVARIANT: every key of the leaf is >= first and < the next slot's
// first; disk changes only when a Flush commits; a slot removed from the
// list is marked dead so that a load in flight does not install into it.
type genSlot struct {
	first []uint64
	disk  ptr
	mem   *genLeaf
	dead  bool
	next  ptr
}

type genIndex struct {
	rank    int
	leafMax int
	ld      loader

	// mu protects everything below and the leaves' contents; see eaIndex.
	mu struct {
		sync.RWMutex
		grid, max []uint64
		count     uint64
		slots     []*genSlot
		// firsts holds slots[i].first at [i·rank, (i+1)·rank): routing
		// binary-searches contiguous memory instead of chasing pointers.
		firsts  []uint64
		dirty   bool  // the root block must be rewritten
		top     ptr   // the root block as of the last Flush
		dropped []ptr // blocks of removed leaves, freed by the next Flush
	}
}

func cmpKey(a, b []uint64) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func genGeom(g Geometry) error {
	rank := len(g.MaxGrid)
	if rank == 0 || rank > MaxRank || len(g.Grid) != rank {
		return fmt.Errorf("%w: rank %d (grid rank %d) not in [1,%d]", ErrGeometry, rank, len(g.Grid), MaxRank)
	}
	for d, n := range g.Grid {
		if g.MaxGrid[d] != Unlimited && n > g.MaxGrid[d] {
			return fmt.Errorf("%w: grid %v exceeds maximum %v", ErrGeometry, g.Grid, g.MaxGrid)
		}
	}
	return nil
}

func newGenShell(g Geometry, s Store, leafMax int) *genIndex {
	x := &genIndex{rank: len(g.MaxGrid), leafMax: leafMax}
	x.ld.store = s
	x.ld.idx = &x.mu.RWMutex
	x.mu.grid = slices.Clone(g.Grid)
	x.mu.max = slices.Clone(g.MaxGrid)
	return x
}

func newGeneral(g Geometry, s Store, cfg Config) (*genIndex, error) {
	if g.Grid == nil {
		g.Grid = make([]uint64, len(g.MaxGrid))
	}
	if err := genGeom(g); err != nil {
		return nil, err
	}
	x := newGenShell(g, s, cfg.LeafMax)
	x.mu.dirty = true
	return x, nil
}

func openGeneral(ctx context.Context, g Geometry, r *rootRecord, s Store) (*genIndex, error) {
	if err := genGeom(g); err != nil {
		return nil, err
	}
	if int(r.rank) != len(g.MaxGrid) {
		return nil, corruptf("root record rank %d, dataset rank %d", r.rank, len(g.MaxGrid))
	}
	if r.unlim != 0 || r.slots != 0 || r.nelmts != 0 || r.m != 0 || r.k != 0 || r.p != 0 || r.q != 0 || r.nsb != 0 {
		return nil, corruptf("general root record has array fields set")
	}
	if r.wide < 4 {
		return nil, corruptf("general index leaf size %d", r.wide)
	}
	x := newGenShell(g, s, int(r.wide))
	decode := func(b []byte) error { return x.decodeRootBlock(b, r.count) }
	if err := x.ld.openTop(ctx, r, "general root block", decode, &x.mu.count, &x.mu.top); err != nil {
		return nil, err
	}
	return x, nil
}

func (x *genIndex) recSize() int { return x.rank*8 + ptrSize }

// Root block: header (byte 5 = rank), count u64, nleaves u32, reserved
// u32, then per leaf its first key (rank·u64) and pointer, CRC.
func (x *genIndex) encodeRootBlockLocked() []byte {
	b := newBlock(magicGenRoot, 24+len(x.mu.slots)*x.recSize()+trailerSize)
	b[5] = uint8(x.rank)
	binary.LittleEndian.PutUint64(b[8:], x.mu.count)
	binary.LittleEndian.PutUint32(b[16:], uint32(len(x.mu.slots)))
	o := 24
	for _, sl := range x.mu.slots {
		for _, c := range sl.first {
			binary.LittleEndian.PutUint64(b[o:], c)
			o += 8
		}
		putPtr(b[o:], sl.next)
		o += ptrSize
	}
	return b
}

func (x *genIndex) decodeRootBlock(b []byte, count uint64) error {
	if err := checkBlock(b, magicGenRoot, -1); err != nil {
		return err
	}
	if len(b) < 24+trailerSize {
		return corruptf("general root block truncated")
	}
	if int(b[5]) != x.rank || b[6] != 0 || b[7] != 0 || binary.LittleEndian.Uint32(b[20:]) != 0 {
		return corruptf("general root block rank %d, want %d", b[5], x.rank)
	}
	n := int(binary.LittleEndian.Uint32(b[16:]))
	if c := binary.LittleEndian.Uint64(b[8:]); c != count {
		return corruptf("general root block count %d, root record says %d", c, count)
	}
	rec := x.recSize()
	if (len(b)-24-trailerSize)%rec != 0 || (len(b)-24-trailerSize)/rec != n {
		return corruptf("general root block of %d bytes cannot hold %d leaves", len(b), n)
	}
	if uint64(n) > count || (n == 0) != (count == 0) || count > uint64(n)*uint64(x.leafMax) {
		return corruptf("general root block: %d leaves for %d entries", n, count)
	}
	slots := make([]*genSlot, n)
	for i := range slots {
		sl, err := x.decodeLeafRecord(b[24+i*rec:], i)
		if err != nil {
			return err
		}
		if i > 0 && cmpKey(slots[i-1].first, sl.first) >= 0 {
			return corruptf("general root block: leaf keys out of order at %d", i)
		}
		slots[i] = sl
	}
	x.mu.slots = slots
	for _, sl := range slots {
		x.mu.firsts = append(x.mu.firsts, sl.first...)
	}
	return nil
}

// decodeLeafRecord reads the root block's record of leaf i (its first key
// and pointer) from b; the pointer must name a block the size of a leaf.
func (x *genIndex) decodeLeafRecord(b []byte, i int) (*genSlot, error) {
	sl := &genSlot{first: make([]uint64, x.rank)}
	for d := range sl.first {
		sl.first[d] = binary.LittleEndian.Uint64(b[d*8:])
	}
	p, err := getPtr(b[x.rank*8:], 0)
	if err != nil {
		return nil, err
	}
	if p.isNil() {
		return nil, corruptf("general root block: leaf %d has no block", i)
	}
	if sz := int(p.size) - 16 - trailerSize; sz <= 0 || sz%(x.rank*8+entrySize) != 0 || sz/(x.rank*8+entrySize) > x.leafMax {
		return nil, corruptf("general root block: leaf %d size %d", i, p.size)
	}
	sl.disk = p
	return sl, nil
}

// Leaf block: header (byte 5 = rank), n u32, reserved u32, then n records
// of key (rank·u64) and entry, CRC.
func (x *genIndex) encodeLeaf(lf *genLeaf) []byte {
	rec := x.rank*8 + entrySize
	b := newBlock(magicGenLeaf, 16+len(lf.ents)*rec+trailerSize)
	b[5] = uint8(x.rank)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(lf.ents)))
	o := 16
	for i, e := range lf.ents {
		for _, c := range lf.key(x.rank, i) {
			binary.LittleEndian.PutUint64(b[o:], c)
			o += 8
		}
		putEntry(b[o:], e)
		o += entrySize
	}
	return b
}

// decodeLeaf checks a leaf: sorted keys within [lo, hi) (hi nil: no bound)
// and inside grid, every entry present.
func (x *genIndex) decodeLeaf(b []byte, lo, hi, grid []uint64) (*genLeaf, error) {
	if err := checkBlock(b, magicGenLeaf, -1); err != nil {
		return nil, err
	}
	if int(b[5]) != x.rank || b[6] != 0 || b[7] != 0 || len(b) < 16+trailerSize || binary.LittleEndian.Uint32(b[12:]) != 0 {
		return nil, corruptf("general leaf header (rank %d, want %d)", b[5], x.rank)
	}
	rec := x.rank*8 + entrySize
	n := int(binary.LittleEndian.Uint32(b[8:]))
	if n < 1 || n > x.leafMax || len(b) != 16+n*rec+trailerSize {
		return nil, corruptf("general leaf of %d bytes with %d entries", len(b), n)
	}
	lf := &genLeaf{keys: make([]uint64, n*x.rank), ents: make([]Entry, n)}
	o := 16
	for i := 0; i < n; i++ {
		k := lf.key(x.rank, i)
		for d := range k {
			k[d] = binary.LittleEndian.Uint64(b[o:])
			if k[d] >= grid[d] {
				return nil, corruptf("general leaf key %v outside grid %v", k, grid)
			}
			o += 8
		}
		e, err := getEntry(b[o:])
		if err != nil {
			return nil, err
		}
		if !e.Exists() {
			return nil, corruptf("general leaf holds an absent entry")
		}
		o += entrySize
		lf.ents[i] = e
		if i > 0 && cmpKey(lf.key(x.rank, i-1), k) >= 0 {
			return nil, corruptf("general leaf keys out of order")
		}
	}
	if cmpKey(lf.key(x.rank, 0), lo) < 0 || hi != nil && cmpKey(lf.key(x.rank, n-1), hi) >= 0 {
		return nil, corruptf("general leaf keys outside the range its root gives")
	}
	return lf, nil
}

func (x *genIndex) Kind() Kind { return KindGeneral }

func (x *genIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return int(x.mu.count)
}

func (x *genIndex) checkCoord(coord []uint64) error {
	if len(coord) != x.rank {
		return fmt.Errorf("%w: coordinate rank %d, want %d", ErrOutOfRange, len(coord), x.rank)
	}
	for d, c := range coord {
		if c >= x.mu.grid[d] {
			return fmt.Errorf("%w: coordinate %v outside grid %v", ErrOutOfRange, coord, x.mu.grid)
		}
	}
	return nil
}

// routeLocked returns the slot whose range holds k (len(slots) > 0).
func (x *genIndex) routeLocked(k []uint64) int {
	f, r := x.mu.firsts, x.rank
	i := sort.Search(len(x.mu.slots), func(i int) bool { return cmpKey(f[i*r:(i+1)*r], k) > 0 }) - 1
	return max(i, 0)
}

// leafReq asks for the leaf of slot i.
func (x *genIndex) leafReq(i int) *loadReq {
	sl := x.mu.slots[i]
	p := sl.disk
	// Cloned: decode runs without the lock, and slot 0's first key can
	// be lowered meanwhile.
	lo := slices.Clone(sl.first)
	var hi []uint64
	if i+1 < len(x.mu.slots) {
		hi = slices.Clone(x.mu.slots[i+1].first)
	}
	grid := slices.Clone(x.mu.grid)
	return &loadReq{
		p:      p,
		decode: func(b []byte) (any, error) { return x.decodeLeaf(b, lo, hi, grid) },
		install: func(v any) {
			if !sl.dead && sl.disk == p && sl.mem == nil {
				sl.mem = v.(*genLeaf)
			}
		},
		wanted: func() bool { return !sl.dead && sl.disk == p && sl.mem == nil },
	}
}

func (x *genIndex) Get(ctx context.Context, coord []uint64) (Entry, error) {
	return x.ld.lookup(ctx, func() (Entry, *loadReq, error) {
		if err := x.checkCoord(coord); err != nil || len(x.mu.slots) == 0 {
			return Entry{}, nil, err
		}
		i := x.routeLocked(coord)
		lf := x.mu.slots[i].mem
		if lf == nil {
			return Entry{}, x.leafReq(i), nil
		}
		if pos, ok := lf.search(x.rank, coord); ok {
			return lf.ents[pos], nil, nil
		}
		return Entry{}, nil, nil
	})
}

func (x *genIndex) Put(ctx context.Context, coord []uint64, e Entry) (Entry, error) {
	e = normalize(e)
	return x.ld.mutate(ctx, func() (Entry, *loadReq, error) {
		if err := x.checkCoord(coord); err != nil {
			return Entry{}, nil, err
		}
		old, req := x.setLocked(coord, e)
		return old, req, nil
	})
}

func (x *genIndex) Delete(ctx context.Context, coord []uint64) (Entry, error) {
	return x.Put(ctx, coord, Entry{})
}

// setLocked stores e under k (write lock held).
func (x *genIndex) setLocked(k []uint64, e Entry) (Entry, *loadReq) {
	if len(x.mu.slots) == 0 {
		if !e.Exists() {
			return Entry{}, nil
		}
		x.insertSlotLocked(0, &genSlot{first: slices.Clone(k), mem: &genLeaf{}})
	}
	i := x.routeLocked(k)
	sl := x.mu.slots[i]
	lf := sl.mem
	if lf == nil {
		return Entry{}, x.leafReq(i)
	}
	pos, found := lf.search(x.rank, k)
	var old Entry
	switch {
	case found && !e.Exists():
		old = lf.ents[pos]
		lf.ents = slices.Delete(lf.ents, pos, pos+1)
		lf.keys = slices.Delete(lf.keys, pos*x.rank, (pos+1)*x.rank)
		x.mu.count = recount(x.mu.count, math.MaxUint64, old, e)
		if len(lf.ents) == 0 {
			x.dropLocked(i)
		}
	case found:
		old = lf.ents[pos]
		if old == e {
			return old, nil
		}
		lf.ents[pos] = e
	case !e.Exists():
		return Entry{}, nil
	default:
		lf.ents = slices.Insert(lf.ents, pos, e)
		lf.keys = slices.Insert(lf.keys, pos*x.rank, k...)
		x.mu.count = recount(x.mu.count, math.MaxUint64, Entry{}, e)
		if cmpKey(k, sl.first) < 0 { // only slot 0 routes keys below its first
			copy(sl.first, k)
			copy(x.mu.firsts, k)
		}
		if len(lf.ents) > x.leafMax {
			x.splitLocked(i, pos)
		}
	}
	lf.dirty = true
	x.mu.dirty = true
	return old, nil
}

// dropLocked removes the (empty) leaf of slot i.
func (x *genIndex) dropLocked(i int) {
	sl := x.mu.slots[i]
	sl.dead = true
	if !sl.disk.isNil() {
		x.mu.dropped = append(x.mu.dropped, sl.disk)
	}
	x.mu.slots = slices.Delete(x.mu.slots, i, i+1)
	x.mu.firsts = slices.Delete(x.mu.firsts, i*x.rank, (i+1)*x.rank)
	x.mu.dirty = true
}

// insertSlotLocked makes sl slot i.
func (x *genIndex) insertSlotLocked(i int, sl *genSlot) {
	x.mu.slots = slices.Insert(x.mu.slots, i, sl)
	x.mu.firsts = slices.Insert(x.mu.firsts, i*x.rank, sl.first...)
}

// splitLocked splits the over-full leaf of slot i, in which an entry was
// just inserted at pos.
func (x *genIndex) splitLocked(i, pos int) {
	lf := x.mu.slots[i].mem
	n := len(lf.ents)
	cut := n / 2
	if pos == n-1 && i == len(x.mu.slots)-1 {
		cut = n - 1 // appending in key order: keep the full leaf full
	}
	nl := &genLeaf{
		keys:  slices.Clone(lf.keys[cut*x.rank:]),
		ents:  slices.Clone(lf.ents[cut:]),
		dirty: true,
	}
	lf.keys = slices.Clip(lf.keys[:cut*x.rank])
	lf.ents = slices.Clip(lf.ents[:cut])
	if invariants.Enabled && (cut == 0 || cut > x.leafMax || n-cut > x.leafMax) {
		panic(invariants.Violation("index: leaf of %d entries split into %d and %d, max %d", n, cut, n-cut, x.leafMax))
	}
	x.insertSlotLocked(i+1, &genSlot{first: slices.Clone(nl.key(x.rank, 0)), mem: nl})
}

func (x *genIndex) Resize(ctx context.Context, g Geometry, removed func(coord []uint64, e Entry)) error {
	return x.ld.resize(ctx, x, g, removed)
}

// resizeLoadsLocked asks for every leaf not in memory when g shrinks a
// dimension: keys are ordered lexicographically, so any leaf may hold keys
// outside it.
func (x *genIndex) resizeLoadsLocked(g Geometry) ([]*loadReq, error) {
	if err := genGeom(g); err != nil {
		return nil, err
	}
	if err := x.sameMaxLocked(g); err != nil || !x.shrinksLocked(g.Grid) {
		return nil, err
	}
	var reqs []*loadReq
	for i, sl := range x.mu.slots {
		if sl.mem == nil {
			reqs = append(reqs, x.leafReq(i))
		}
	}
	return reqs, nil
}

// shrinksLocked reports whether grid is below the current grid anywhere.
func (x *genIndex) shrinksLocked(grid []uint64) bool {
	for d := range grid {
		if grid[d] < x.mu.grid[d] {
			return true
		}
	}
	return false
}

// resizeLocked removes the keys outside g and installs g.
func (x *genIndex) resizeLocked(g Geometry) []coordEntry {
	var out []coordEntry
	if x.shrinksLocked(g.Grid) {
		out = x.cutLocked(g.Grid)
	}
	if !equalGrid(x.mu.grid, g.Grid) {
		copy(x.mu.grid, g.Grid)
		x.mu.dirty = true
	}
	return out
}

// cutLocked removes every key outside grid from the leaves (all in
// memory) and drops the leaves it empties.
func (x *genIndex) cutLocked(grid []uint64) []coordEntry {
	var out []coordEntry
	for i := 0; i < len(x.mu.slots); {
		lf := x.mu.slots[i].mem
		n := len(out)
		out = lf.cut(x.rank, grid, out)
		x.mu.count -= uint64(len(out) - n)
		if len(lf.ents) == 0 {
			x.dropLocked(i) // the next slot moves to i
		} else {
			i++
		}
	}
	return out
}

// cut removes the keys outside grid, appending them to out, and marks the
// leaf dirty if any went.
func (lf *genLeaf) cut(rank int, grid []uint64, out []coordEntry) []coordEntry {
	kept := 0
	for j := range lf.ents {
		k := lf.key(rank, j)
		if !inGrid(k, grid) {
			out = append(out, coordEntry{coord: slices.Clone(k), e: lf.ents[j]})
			continue
		}
		copy(lf.keys[kept*rank:], k)
		lf.ents[kept] = lf.ents[j]
		kept++
	}
	if kept < len(lf.ents) {
		lf.ents = lf.ents[:kept]
		lf.keys = lf.keys[:kept*rank]
		lf.dirty = true
	}
	return out
}

func (x *genIndex) countLocked() uint64 { return x.mu.count }

func inGrid(k, grid []uint64) bool {
	for d := range k {
		if k[d] >= grid[d] {
			return false
		}
	}
	return true
}

func (x *genIndex) sameMaxLocked(g Geometry) error {
	if len(g.MaxGrid) != x.rank || len(g.Grid) != x.rank {
		return fmt.Errorf("%w: rank changed", ErrGeometry)
	}
	for d := range g.MaxGrid {
		if g.MaxGrid[d] != x.mu.max[d] {
			return fmt.Errorf("%w: maximum grid changed from %v to %v", ErrGeometry, x.mu.max, g.MaxGrid)
		}
	}
	return nil
}

func (x *genIndex) Range(ctx context.Context, fn func(coord []uint64, e Entry) bool) error {
	// Leaves split and go while fn runs, so the walk resumes after the
	// last key reported rather than at a leaf's position.
	var after []uint64 // nil before the first
	return x.ld.scan(ctx, func() ([]coordEntry, *loadReq, bool) {
		batch, req := x.rangeStepLocked(after)
		if len(batch) > 0 {
			after = slices.Clone(batch[len(batch)-1].coord) // fn may change its coord
		}
		return batch, req, len(batch) > 0
	}, fn)
}

// rangeStepLocked returns the entries after key after of the first leaf
// that holds any, or a request for the leaf it must see first.
func (x *genIndex) rangeStepLocked(after []uint64) ([]coordEntry, *loadReq) {
	i := 0
	if after != nil && len(x.mu.slots) > 0 {
		i = x.routeLocked(after)
	}
	for ; i < len(x.mu.slots); i++ {
		lf := x.mu.slots[i].mem
		if lf == nil {
			return nil, x.leafReq(i)
		}
		if batch := lf.above(x.rank, after); len(batch) > 0 {
			return batch, nil
		}
	}
	return nil, nil
}

// above returns the entries with keys above after (every entry when after
// is nil), keys copied.
func (lf *genLeaf) above(rank int, after []uint64) []coordEntry {
	from := 0
	if after != nil {
		pos, found := lf.search(rank, after)
		from = pos
		if found {
			from++
		}
	}
	out := make([]coordEntry, 0, len(lf.ents)-from)
	for j := from; j < len(lf.ents); j++ {
		out = append(out, coordEntry{coord: slices.Clone(lf.key(rank, j)), e: lf.ents[j]})
	}
	return out
}

func (x *genIndex) Flush(ctx context.Context) ([]byte, error) { return x.ld.flush(ctx, x) }

func (x *genIndex) flushNeededLocked() bool { return x.mu.dirty || x.mu.top.isNil() }

// flushPrepareLocked encodes the changed leaves, then the root block
// naming every leaf. The blocks of removed leaves are freed with those
// this Flush replaces, and only if it commits.
func (x *genIndex) flushPrepareLocked(tx *flushTx) error {
	for _, sl := range x.mu.slots {
		sl.next = sl.disk
		if sl.mem == nil || !sl.mem.dirty {
			continue
		}
		p, err := tx.write(x.encodeLeaf(sl.mem))
		if err != nil {
			return err
		}
		tx.replace(sl.disk)
		sl.next = p
	}
	if err := tx.writeTop(&x.mu.top, x.encodeRootBlockLocked()); err != nil {
		return err
	}
	tx.frees = append(tx.frees, x.mu.dropped...)
	return nil
}

// flushEndLocked installs the rewritten leaves (flushTx does not know
// leaves) and clears every next pointer.
func (x *genIndex) flushEndLocked(ok bool) {
	for _, sl := range x.mu.slots {
		if ok && sl.mem != nil && sl.mem.dirty {
			sl.disk = sl.next
			sl.mem.dirty = false
		}
		sl.next = ptr{}
	}
	if ok {
		x.mu.dropped = nil
		x.mu.dirty = false
	}
}

func (x *genIndex) nextSetLocked() bool {
	return slices.ContainsFunc(x.mu.slots, func(sl *genSlot) bool { return !sl.next.isNil() })
}

func (x *genIndex) rootLocked() []byte {
	r := rootRecord{
		kind: KindGeneral, rank: uint8(x.rank), count: x.mu.count,
		wide: uint16(x.leafMax), top: x.mu.top,
	}
	return r.encode()
}

func (x *genIndex) Extents(ctx context.Context, fn func(off, size int64) error) error {
	x.mu.RLock()
	all := []ptr{x.mu.top}
	for _, sl := range x.mu.slots {
		all = append(all, sl.disk)
	}
	all = append(all, x.mu.dropped...)
	x.mu.RUnlock()
	return reportExtents(all, fn)
}

// DropClean drops the clean leaves (Index.DropClean).
func (x *genIndex) DropClean() {
	x.ld.writers.RLock()
	defer x.ld.writers.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, sl := range x.mu.slots {
		// (next is only meaningful inside a Flush, which the writers
		// lock keeps out.)
		if sl.mem != nil && !sl.mem.dirty && !sl.dead && !sl.disk.isNil() {
			sl.mem = nil
		}
	}
}

// MemBytes reports the encoded size of the root block and of every loaded
// or created leaf.
func (x *genIndex) MemBytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := int64(24 + len(x.mu.slots)*x.recSize() + trailerSize)
	rec := x.rank*8 + entrySize
	for _, sl := range x.mu.slots {
		if sl.mem != nil {
			n += int64(16 + len(sl.mem.ents)*rec + trailerSize)
		}
	}
	return n
}
