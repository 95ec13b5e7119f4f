package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// ErrGeometry is returned when a Geometry is malformed or does not suit the
// index kind (a rank mismatch, a grid above its maximum, a changed maximum).
var ErrGeometry = errors.New("index: invalid geometry")

// ErrConfig is returned by Config.Validate.
var ErrConfig = errors.New("index: invalid config")

// MaxRank bounds the number of dimensions an index handles.
const MaxRank = 32

// MaxFixedArraySlots bounds the slots (product of the maximum grid) of a
// FixedArray, so that its header block (one pointer per page) stays small;
// ChooseKind picks ExtensibleArray for larger fixed shapes.
const MaxFixedArraySlots = 1 << 24

// Config tunes the block layout of a new index. The zero value means every
// default. Open ignores it: the layout of an existing index is read from its
// root record (EA index §XX, the configuration block).
type Config struct {
	// DirectSlots is the number of entries the extensible array's index
	// block stores itself (EA index §XIX, the last optimization): the first
	// DirectSlots chunks cost one block read. Default 4; at most 1024;
	// -1 means none.
	DirectSlots int
	// DataBlockMinBits is log2 of the smallest data block's entry count
	// (EA index §XVII, "data blocks starting at 16 elements"). Default 4.
	DataBlockMinBits int
	// SuperBlockMinPtrsBits is log2 of the least number of data blocks a
	// super block must hold to exist; the data block pointers of smaller
	// super blocks are hoisted into the index block (EA index §XIX).
	// Default 2 (four).
	SuperBlockMinPtrsBits int
	// PageBits is log2 of the most entries one stored block of entries
	// holds: larger extensible-array data blocks are paged, and a fixed
	// array is cut into pages of this size. Default 10 (1024 entries,
	// 20 KiB). Must be at least DataBlockMinBits+SuperBlockMinPtrsBits so
	// that hoisted data blocks are never paged.
	PageBits int
	// SuperBlockMaxPagesBits is log2 of the page count above which a super
	// block's pages grow instead of multiplying, so that no super block
	// exceeds 2^SuperBlockMaxPagesBits pointers for long. Default 16.
	SuperBlockMaxPagesBits int
	// LeafMax is the most entries one leaf of the General index holds.
	// Default 512.
	LeafMax int
}

// Defaults of Config.
const (
	DefaultDirectSlots            = 4
	DefaultDataBlockMinBits       = 4
	DefaultSuperBlockMinPtrsBits  = 2
	DefaultPageBits               = 10
	DefaultSuperBlockMaxPagesBits = 16
	DefaultLeafMax                = 512
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.DirectSlots == 0 {
		c.DirectSlots = DefaultDirectSlots
	}
	if c.DataBlockMinBits == 0 {
		c.DataBlockMinBits = DefaultDataBlockMinBits
	}
	if c.SuperBlockMinPtrsBits == 0 {
		c.SuperBlockMinPtrsBits = DefaultSuperBlockMinPtrsBits
	}
	if c.PageBits == 0 {
		c.PageBits = DefaultPageBits
	}
	if c.SuperBlockMaxPagesBits == 0 {
		c.SuperBlockMaxPagesBits = DefaultSuperBlockMaxPagesBits
	}
	if c.LeafMax == 0 {
		c.LeafMax = DefaultLeafMax
	}
	return c
}

// Validate reports whether c (after defaults) describes a usable layout.
// A negative DirectSlots means zero direct slots.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.DirectSlots < -1 || c.DirectSlots > 1024:
		return fmt.Errorf("%w: DirectSlots %d not in [0,1024]", ErrConfig, c.DirectSlots)
	case c.DataBlockMinBits < 0 || c.DataBlockMinBits > 16:
		return fmt.Errorf("%w: DataBlockMinBits %d not in [0,16]", ErrConfig, c.DataBlockMinBits)
	case c.SuperBlockMinPtrsBits < 0 || c.SuperBlockMinPtrsBits > 8:
		return fmt.Errorf("%w: SuperBlockMinPtrsBits %d not in [0,8]", ErrConfig, c.SuperBlockMinPtrsBits)
	case c.PageBits < c.DataBlockMinBits+c.SuperBlockMinPtrsBits || c.PageBits > maxUnitBits:
		return fmt.Errorf("%w: PageBits %d not in [DataBlockMinBits+SuperBlockMinPtrsBits,%d]", ErrConfig, c.PageBits, maxUnitBits)
	case c.SuperBlockMaxPagesBits < 1 || c.SuperBlockMaxPagesBits > maxUnitBits:
		return fmt.Errorf("%w: SuperBlockMaxPagesBits %d not in [1,%d]", ErrConfig, c.SuperBlockMaxPagesBits, maxUnitBits)
	case c.LeafMax < 4 || c.LeafMax > 65535:
		return fmt.Errorf("%w: LeafMax %d not in [4,65535]", ErrConfig, c.LeafMax)
	}
	return nil
}

// ChooseKind picks the index kind for a dataset's maximum grid as HDF5
// does (EA index §X): no unlimited dimension → FixedArray, exactly one →
// ExtensibleArray, more → General. Fixed shapes too large for one flat
// page table (MaxFixedArraySlots) get an ExtensibleArray over dimension 0,
// which stays sparse. Shapes the default extensible array cannot hold (a
// fixed shape above its capacity, or slabs so large that fewer than 65536
// of them fit) get General.
func ChooseKind(maxGrid []uint64) Kind {
	unl := 0
	for _, m := range maxGrid {
		if m == Unlimited {
			unl++
		}
	}
	if unl > 1 {
		return KindGeneral
	}
	capacity := defaultEACapacity()
	if unl == 0 {
		n, ok := product(maxGrid, -1)
		switch {
		case ok && n <= MaxFixedArraySlots:
			return KindFixedArray
		case ok && n <= capacity:
			return KindExtensibleArray
		}
		return KindGeneral
	}
	gm, err := newGeom(Geometry{MaxGrid: maxGrid}, true)
	if err != nil || gm.slab > capacity>>16 {
		// Fewer than 65536 slabs would fit: not worth an array.
		return KindGeneral
	}
	return KindExtensibleArray
}

// defaultEACapacity is the number of chunks an extensible array with the
// default Config indexes.
func defaultEACapacity() uint64 {
	c := Config{}.withDefaults()
	l, err := newEALayout(c.DirectSlots, uint8(c.DataBlockMinBits), uint8(c.SuperBlockMinPtrsBits), uint8(c.PageBits), uint8(c.SuperBlockMaxPagesBits))
	if err != nil {
		return 0
	}
	return l.capacity
}

// New returns an empty index of the given kind with the default Config.
func New(kind Kind, g Geometry, s Store) (Index, error) {
	return NewConfig(kind, g, s, Config{})
}

// NewConfig returns an empty index of the given kind laid out by cfg.
// Nothing is written until Flush.
func NewConfig(kind Kind, g Geometry, s Store, cfg Config) (Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.DirectSlots < 0 {
		cfg.DirectSlots = 0
	}
	switch kind {
	case KindExtensibleArray:
		return newEA(g, s, cfg)
	case KindFixedArray:
		return newFA(g, s, cfg)
	case KindGeneral:
		return newGeneral(g, s, cfg)
	}
	return nil, fmt.Errorf("%w: unknown index kind %d", ErrGeometry, kind)
}

// Open returns the index whose root record Flush returned. It reads the top
// block (the only read before the first lookup); every other block is read
// on first touch and then kept in memory.
func Open(ctx context.Context, kind Kind, g Geometry, root []byte, s Store) (Index, error) {
	r, err := decodeRoot(root)
	if err != nil {
		return nil, err
	}
	if r.kind != kind {
		return nil, corruptf("root record is for a %v index, want %v", r.kind, kind)
	}
	switch kind {
	case KindExtensibleArray:
		return openEA(ctx, g, r, s)
	case KindFixedArray:
		return openFA(ctx, g, r, s)
	case KindGeneral:
		return openGeneral(ctx, g, r, s)
	}
	return nil, fmt.Errorf("%w: unknown index kind %d", ErrGeometry, kind)
}

// rootSize is the length of every root record.
const rootSize = 64

// rootRecord is the decoded root record of every kind; the fields a kind
// does not use are zero. It plays the role of EA index §XX's configuration
// block: the constants of the layout live beside the top block's address.
type rootRecord struct {
	kind    Kind
	rank    uint8
	unlim   uint8  // EA: the slow dimension
	slots   uint64 // EA: slots per slab; FA: total slots
	nelmts  uint64 // EA: linear extent (slabs in the grid × slab size)
	count   uint64 // stored entries
	m, k, p uint8  // EA: data block min bits, super block min ptr bits; EA, FA: page bits
	q, nsb  uint8  // EA: super block max page bits, number of super blocks
	wide    uint16 // EA: direct slots; General: leaf max
	top     ptr
}

func (r *rootRecord) encode() []byte {
	b := newBlock(magicRoot, rootSize)
	b[5] = byte(r.kind)
	b[6] = r.rank
	b[7] = r.unlim
	binary.LittleEndian.PutUint64(b[8:], r.slots)
	binary.LittleEndian.PutUint64(b[16:], r.nelmts)
	binary.LittleEndian.PutUint64(b[24:], r.count)
	b[32] = entrySize
	b[33], b[34], b[35], b[36], b[37] = r.m, r.k, r.p, r.q, r.nsb
	binary.LittleEndian.PutUint16(b[38:], r.wide)
	putPtr(b[40:], r.top)
	seal(b)
	return b
}

func decodeRoot(b []byte) (*rootRecord, error) {
	if err := checkBlock(b, magicRoot, rootSize); err != nil {
		return nil, err
	}
	r := &rootRecord{
		kind:   Kind(b[5]),
		rank:   b[6],
		unlim:  b[7],
		slots:  binary.LittleEndian.Uint64(b[8:]),
		nelmts: binary.LittleEndian.Uint64(b[16:]),
		count:  binary.LittleEndian.Uint64(b[24:]),
		m:      b[33], k: b[34], p: b[35], q: b[36], nsb: b[37],
		wide: binary.LittleEndian.Uint16(b[38:]),
	}
	if b[32] != entrySize {
		return nil, corruptf("root record entry size %d, want %d", b[32], entrySize)
	}
	if binary.LittleEndian.Uint32(b[56:]) != 0 {
		return nil, corruptf("root record reserved bytes set")
	}
	top, err := getPtr(b[40:], 0)
	if err != nil {
		return nil, err
	}
	if top.isNil() {
		return nil, corruptf("root record without a top block")
	}
	r.top = top
	if r.rank == 0 || r.rank > MaxRank {
		return nil, corruptf("root record rank %d", r.rank)
	}
	return r, nil
}

// geom is a validated Geometry with the linearization used by the
// array-shaped kinds.
//
// EA index §XXI: with one unlimited dimension u, a chunk's linear index is
// c[u]·S + (C-order index of the other coordinates over their MAXIMUM
// grid), S being the product of the other dimensions' maxima. Growing the
// dataset along u appends whole slabs at the end; growing another
// dimension up to its maximum fills slots that were already numbered. So
// nothing is ever inserted in the middle. A fixed shape is the case u = 0,
// which is plain C order over the maximum grid.
type geom struct {
	grid, max []uint64
	u         int
	slab      uint64   // S
	stride    []uint64 // stride[u] = S; the others C order over max
	order     []int    // dimensions other than u, slowest first
}

// newGeom validates g for an array-shaped index. eaOK accepts one
// unlimited dimension; without it every dimension must be bounded.
func newGeom(g Geometry, eaOK bool) (*geom, error) {
	rank := len(g.MaxGrid)
	if rank == 0 || rank > MaxRank {
		return nil, fmt.Errorf("%w: rank %d not in [1,%d]", ErrGeometry, rank, MaxRank)
	}
	if g.Grid != nil && len(g.Grid) != rank {
		return nil, fmt.Errorf("%w: grid rank %d, max grid rank %d", ErrGeometry, len(g.Grid), rank)
	}
	u := -1
	for d, m := range g.MaxGrid {
		if m == Unlimited {
			if u >= 0 || !eaOK {
				return nil, fmt.Errorf("%w: too many unlimited dimensions for this index kind", ErrGeometry)
			}
			u = d
		}
	}
	if u < 0 {
		u = 0
	}
	gm := &geom{
		grid:   make([]uint64, rank),
		max:    append([]uint64(nil), g.MaxGrid...),
		u:      u,
		stride: make([]uint64, rank),
	}
	copy(gm.grid, g.Grid)
	s := uint64(1)
	for d := rank - 1; d >= 0; d-- {
		if d == u {
			continue
		}
		gm.stride[d] = s
		hi, lo := bits.Mul64(s, g.MaxGrid[d])
		if hi != 0 {
			return nil, fmt.Errorf("%w: slab of %v overflows 64 bits", ErrGeometry, g.MaxGrid)
		}
		s = lo
	}
	gm.slab = s
	gm.stride[u] = s
	for d := 0; d < rank; d++ {
		if d != u {
			gm.order = append(gm.order, d)
		}
	}
	if err := gm.setGrid(gm.grid); err != nil {
		return nil, err
	}
	return gm, nil
}

// setGrid validates grid against the maximum and installs it.
func (gm *geom) setGrid(grid []uint64) error {
	if len(grid) != len(gm.max) {
		return fmt.Errorf("%w: grid rank %d, want %d", ErrGeometry, len(grid), len(gm.max))
	}
	for d, n := range grid {
		if gm.max[d] != Unlimited && n > gm.max[d] {
			return fmt.Errorf("%w: grid %v exceeds maximum %v", ErrGeometry, grid, gm.max)
		}
	}
	if _, ok := gm.extentOf(grid); !ok {
		return fmt.Errorf("%w: grid %v has more than 2^64 chunks", ErrOutOfRange, grid)
	}
	copy(gm.grid, grid)
	return nil
}

// extentOf returns the linear extent (slots up to the end of the last
// slab) of grid.
func (gm *geom) extentOf(grid []uint64) (uint64, bool) {
	hi, lo := bits.Mul64(grid[gm.u], gm.slab)
	return lo, hi == 0
}

// sameMax reports whether g keeps the maximum grid (it never changes).
func (gm *geom) sameMax(g Geometry) error {
	if len(g.MaxGrid) != len(gm.max) || len(g.Grid) != len(gm.max) {
		return fmt.Errorf("%w: rank changed", ErrGeometry)
	}
	for d := range gm.max {
		if g.MaxGrid[d] != gm.max[d] {
			return fmt.Errorf("%w: maximum grid changed from %v to %v", ErrGeometry, gm.max, g.MaxGrid)
		}
	}
	return nil
}

// linear returns coord's linear index, or ErrOutOfRange outside the grid.
func (gm *geom) linear(coord []uint64) (uint64, error) {
	if len(coord) != len(gm.grid) {
		return 0, fmt.Errorf("%w: coordinate rank %d, want %d", ErrOutOfRange, len(coord), len(gm.grid))
	}
	var i uint64
	for d, c := range coord {
		if c >= gm.grid[d] {
			return 0, fmt.Errorf("%w: coordinate %v outside grid %v", ErrOutOfRange, coord, gm.grid)
		}
		i += c * gm.stride[d]
	}
	return i, nil
}

// coordOf inverts linear into c (len rank).
func (gm *geom) coordOf(i uint64, c []uint64) {
	if gm.slab == 0 {
		clear(c)
		return
	}
	c[gm.u] = i / gm.slab
	r := i % gm.slab
	for _, d := range gm.order {
		c[d] = r / gm.stride[d]
		r %= gm.stride[d]
	}
}

// inside reports whether linear index i lies within grid.
func (gm *geom) inside(i uint64, grid []uint64) bool {
	if gm.slab == 0 {
		return false
	}
	if i/gm.slab >= grid[gm.u] {
		return false
	}
	r := i % gm.slab
	for _, d := range gm.order {
		if r/gm.stride[d] >= grid[d] {
			return false
		}
		r %= gm.stride[d]
	}
	return true
}

// otherShrank reports whether a dimension other than u shrinks from the
// current grid to grid.
func (gm *geom) otherShrank(grid []uint64) bool {
	for _, d := range gm.order {
		if grid[d] < gm.grid[d] {
			return true
		}
	}
	return false
}

// anyShrank reports whether any dimension shrinks from the current grid
// to grid (same rank).
func (gm *geom) anyShrank(grid []uint64) bool {
	for d := range gm.grid {
		if grid[d] < gm.grid[d] {
			return true
		}
	}
	return false
}

// product multiplies v leaving out dimension skip; ok is false on overflow.
func product(v []uint64, skip int) (uint64, bool) {
	n := uint64(1)
	for d, x := range v {
		if d == skip {
			continue
		}
		hi, lo := bits.Mul64(n, x)
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}
