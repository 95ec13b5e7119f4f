package stress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/engine"
)

// The reference model.
//
// Every element is 8 bytes. A goroutine writing an element stores
// seq<<32 | (linear ^ tag): seq is the goroutine's write counter (never 0),
// linear the element's index in the dataset's largest extent (stable across
// SetExtent, which changes only dimension 0), tag a per-dataset salt. So a
// read can tell which write an element came from, and an element that
// landed in the wrong place, the wrong dataset or was torn does not decode.
// An element never written (or cut off by a shrink) holds the fill value,
// which decodes as seq 0.
//
// Ownership: along the last dimension the dataset is cut into stripes of W
// columns; stripe s belongs to goroutine s mod G. Only the owner writes an
// element, so for its own elements the owner's model is exact. Chunks are
// deliberately not stripe-aligned, so goroutines write different parts of
// the same chunk at once.

// sel is a hyperslab in the harness's own terms.
type sel struct {
	start, stride, count, block []uint64
}

func (s sel) engine() engine.Selection {
	return engine.Hyperslab(s.start, s.stride, s.count, s.block)
}

// n is the number of selected elements.
func (s sel) n() uint64 {
	n := uint64(1)
	for d := range s.count {
		n *= s.count[d] * s.block[d]
	}
	return n
}

// each calls fn for every selected element with its coordinates and its
// position in the packed buffer (C order), like the engine's own model.
func (s sel) each(fn func(coord []uint64, pos uint64)) {
	r := len(s.start)
	shape := make([]uint64, r)
	for d := range shape {
		shape[d] = s.count[d] * s.block[d]
	}
	idx := make([]uint64, r)
	coord := make([]uint64, r)
	n := s.n()
	for pos := uint64(0); pos < n; pos++ {
		rem := pos
		for d := r - 1; d >= 0; d-- {
			idx[d] = rem % shape[d]
			rem /= shape[d]
		}
		for d := 0; d < r; d++ {
			coord[d] = s.start[d] + idx[d]/s.block[d]*s.stride[d] + idx[d]%s.block[d]
		}
		fn(coord, pos)
	}
}

func (s sel) String() string {
	return fmt.Sprintf("start %v stride %v count %v block %v", s.start, s.stride, s.count, s.block)
}

// dsModel is the model of one dataset.
type dsModel struct {
	name  string
	spec  engine.DatasetSpec
	dims  []uint64 // dims[0] is rowsCap; the others are fixed
	inner uint64   // product of dims[1:]
	tag   uint32
	fill  []byte // 8 bytes (zero when the spec has none)
	// stripe geometry along the last dimension.
	width, stripes, goroutines uint64

	// rows is the current extent along dimension 0. Workers only read it;
	// it grows under them (the extender) or changes between phases.
	rows atomic.Uint64
	// issued[l] is the latest seq the owner started writing to element l,
	// acked[l] the latest it saw acknowledged. Only the owner (or the
	// coordinator while workers are stopped) stores them.
	// INVARIANT: acked[l] <= issued[l]; both are 0 for elements outside
	// the extent or never written since the last shrink.
	issued, acked []atomic.Uint32

	// durable and rowsCommitted describe what a crash must keep: every
	// element at least at durable[l] (the acked seq when the last
	// successful Flush began) and at least rowsCommitted rows. Guarded by
	// the file's durMu.
	durable       []uint32
	rowsCommitted uint64
}

func newDSModel(name string, spec engine.DatasetSpec, rowsCap, width, stripes, goroutines uint64, tag uint32) *dsModel {
	m := &dsModel{
		name: name, spec: spec, tag: tag,
		width: width, stripes: stripes, goroutines: goroutines,
	}
	m.dims = append([]uint64{rowsCap}, spec.Shape[1:]...)
	m.inner = 1
	for _, d := range m.dims[1:] {
		m.inner *= d
	}
	m.fill = make([]byte, 8)
	copy(m.fill, spec.Fill)
	total := rowsCap * m.inner
	m.issued = make([]atomic.Uint32, total)
	m.acked = make([]atomic.Uint32, total)
	m.durable = make([]uint32, total)
	m.rows.Store(spec.Shape[0])
	return m
}

func (m *dsModel) linear(coord []uint64) uint64 {
	l := coord[0]
	for d := 1; d < len(coord); d++ {
		l = l*m.dims[d] + coord[d]
	}
	return l
}

func (m *dsModel) value(l uint64, seq uint32) uint64 {
	return uint64(seq)<<32 | uint64(uint32(l)^m.tag)
}

// decode returns the seq an element's bytes encode for element l; ok is
// false when the bytes are neither the fill value nor a value written to l.
func (m *dsModel) decode(l uint64, b []byte) (seq uint32, ok bool) {
	if bytes.Equal(b, m.fill) {
		return 0, true
	}
	v := binary.LittleEndian.Uint64(b)
	if uint32(v) != uint32(l)^m.tag || v>>32 == 0 {
		return 0, false
	}
	return uint32(v >> 32), true
}

// shape returns the dataset's current extent in the model.
func (m *dsModel) shape() []uint64 {
	s := append([]uint64(nil), m.dims...)
	s[0] = m.rows.Load()
	return s
}

// resize applies SetExtent to the model: elements of rows cut off read as
// the fill value from now on. Only with the workers stopped.
func (m *dsModel) resize(rows uint64) {
	old := m.rows.Load()
	if rows < old {
		for l := rows * m.inner; l < old*m.inner; l++ {
			m.issued[l].Store(0)
			m.acked[l].Store(0)
		}
	}
	m.rows.Store(rows)
}

// rowSel picks rows [start, ...) of dimension 0 and a box in the middle
// dimensions; the last dimension is left to the caller.
func (m *dsModel) rowSel(rng *rand.Rand, rows uint64) sel {
	r := len(m.dims)
	s := sel{start: make([]uint64, r), stride: make([]uint64, r), count: make([]uint64, r), block: make([]uint64, r)}
	s.start[0] = rng.Uint64N(rows)
	room := rows - s.start[0]
	if room >= 3 && rng.IntN(4) == 0 {
		s.stride[0], s.block[0] = 2, 1
		s.count[0] = 1 + rng.Uint64N((room-1)/2+1)
	} else {
		s.stride[0], s.block[0] = 1, 1
		s.count[0] = 1 + rng.Uint64N(min(room, 8))
	}
	for d := 1; d < r-1; d++ {
		s.start[d] = rng.Uint64N(m.dims[d])
		s.stride[d], s.block[d] = 1, 1
		s.count[d] = 1 + rng.Uint64N(m.dims[d]-s.start[d])
	}
	return s
}

// ownSel picks a selection inside goroutine g's stripes: a hyperslab along
// the last dimension taking the same columns of several of its stripes.
func (m *dsModel) ownSel(rng *rand.Rand, rows uint64, g int) sel {
	s := m.rowSel(rng, rows)
	last := len(m.dims) - 1
	k0 := rng.Uint64N(m.stripes)
	off := rng.Uint64N(m.width)
	s.start[last] = (k0*m.goroutines+uint64(g))*m.width + off
	s.stride[last] = m.goroutines * m.width
	s.count[last] = 1 + rng.Uint64N(m.stripes-k0)
	s.block[last] = 1 + rng.Uint64N(m.width-off)
	return s
}

// anySel picks a box across every goroutine's stripes.
func (m *dsModel) anySel(rng *rand.Rand, rows uint64) sel {
	s := m.rowSel(rng, rows)
	last := len(m.dims) - 1
	cols := m.dims[last]
	s.start[last] = rng.Uint64N(cols)
	s.stride[last], s.block[last] = 1, 1
	s.count[last] = 1 + rng.Uint64N(cols-s.start[last])
	return s
}

// all selects the whole current extent (nil when it is empty).
func (m *dsModel) all() (sel, bool) {
	shape := m.shape()
	r := len(shape)
	s := sel{start: make([]uint64, r), stride: make([]uint64, r), count: shape, block: make([]uint64, r)}
	for d := 0; d < r; d++ {
		s.stride[d], s.block[d] = 1, 1
		if shape[d] == 0 {
			return s, false
		}
	}
	return s, true
}

// checker accumulates the results of read checks of one run.
type checker struct {
	seed     uint64
	reads    atomic.Int64
	elements atomic.Int64
	bad      atomic.Int64
	mu       sync.Mutex
	failures []string // guarded by mu; at most maxFailures
}

func (c *checker) failf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) < maxFailures {
		c.failures = append(c.failures, fmt.Sprintf(format, args...)+"; "+replay(c.seed))
	}
}

// checkRange compares buf, read with selection s from m, element by element:
// element l must decode to a seq in [lo(l), hi(l)]. It reports how many
// elements failed; the first is described.
func (c *checker) checkRange(what string, m *dsModel, s sel, buf []byte, lo, hi func(i, l uint64) uint32) int64 {
	var bad int64
	var i uint64
	s.each(func(coord []uint64, pos uint64) {
		l := m.linear(coord)
		b := buf[pos*8 : pos*8+8]
		seq, ok := m.decode(l, b)
		want0, want1 := lo(i, l), hi(i, l)
		i++
		if ok && seq >= want0 && seq <= want1 {
			return
		}
		bad++
		if bad == 1 {
			c.failf("%s: %s element %v is %x (seq %d, decodes %v), model allows seq [%d,%d] (selection %v)",
				what, m.name, coord, b, seq, ok, want0, want1, s)
		}
	})
	c.reads.Add(1)
	c.elements.Add(int64(s.n()))
	c.bad.Add(bad)
	return bad
}

// checkExact is checkRange with the interval [acked, acked]: right for the
// owner's own elements and for anything read while the workers are stopped.
func (c *checker) checkExact(what string, m *dsModel, s sel, buf []byte) int64 {
	exact := func(_, l uint64) uint32 { return m.acked[l].Load() }
	return c.checkRange(what, m, s, buf, exact, exact)
}
