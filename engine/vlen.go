package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/section"
	"github.com/scc-dev/scc/internal/bufpool"
)

// The variable-length layout (SCC requirements §2.1 items 1-3):
// every element is a variable-length sequence of values of the dataset's
// Type (bytes and strings with Uint8), stored in the chunk's heap section;
// the chunk's fixed section holds each element's offset and length in the
// heap. Dense: every element is defined, the fill value is the empty
// sequence.
//
// In cache memory a chunk is a vlenChunk: the offsets, the lengths, and
// the heap. Writing an element appends its bytes to the heap and leaves
// the old ones as garbage; when garbage passes the dataset's threshold
// (LayoutParams; 25 % by default) the heap is defragmented at once, so
// the heap an Encode writes is never more than that share unused (SCC requirements
// §2.1 item 3: defragment heap sections before filtering and writing).
//
// On disk a chunk is a structured chunk frame (FORMAT.md §16.1) of two
// sections, both through the dataset's filter pipeline:
//
//	0  fixed: per element in C order, u32 offset and u32 length in bytes
//	1  heap: the bytes the fixed section points into
//
// The chunk index entry's mask field holds the heap's size, so the decoded
// size is known before the chunk is read.

// layoutVlen is the header's layout code for variable-length datasets.
const layoutVlen = format.LayoutVlen

// Vlen is the variable-length layout: each element is a sequence of Type
// values of its own length (see Dataset.WriteVlen, ReadVlen,
// WriteStrings, ReadStrings).
const Vlen LayoutKind = 3

// vlenMaxHeap bounds one chunk's heap: a write that would grow a heap past
// it fails with ErrInvalid (use smaller chunks), and a reader refuses a
// stored heap larger than it before allocating.
const vlenMaxHeap = 256 << 20

// vlenDefaultDefrag is the default share of a heap, in percent, that may be
// unused before the heap is defragmented.
const vlenDefaultDefrag = 25

const vlenParamsVersion = 1

// Vlen LayoutParams (FORMAT.md §18): version 1, then u8 defragmentation
// threshold in percent (1..100).
func encodeVlenParams(pct int) []byte { return []byte{vlenParamsVersion, uint8(pct)} }

func decodeVlenParams(b []byte) (int, error) {
	if len(b) != 2 || b[0] != vlenParamsVersion || b[1] < 1 || b[1] > 100 {
		return 0, fmt.Errorf("%w: variable-length layout parameters %x", ErrCorrupt, b)
	}
	return int(b[1]), nil
}

// vlenLayout implements the cache's layout callbacks for a variable-length
// dataset. It keeps no state besides the dataset's; safe from any
// goroutine.
type vlenLayout struct {
	indexedStorage
	elems  uint64
	defrag int // percent
}

var _ layout.Layout = (*vlenLayout)(nil)

func newVlenLayout(s *dsState, params []byte) (*vlenLayout, error) {
	pct, err := decodeVlenParams(params)
	if err != nil {
		return nil, err
	}
	if s.fill != nil {
		return nil, fmt.Errorf("%w: variable-length dataset %q with a fill value", ErrCorrupt, s.name)
	}
	if n := uint64(s.chunkBytes) / uint64(s.elemSize); n > maxChunkBytes/8 {
		return nil, fmt.Errorf("%w: variable-length dataset %q: chunk of %d elements", ErrCorrupt, s.name, n)
	}
	return &vlenLayout{indexedStorage: indexedStorage{s}, elems: uint64(s.chunkBytes) / uint64(s.elemSize), defrag: pct}, nil
}

// vlenChunk is a variable-length chunk in cache memory.
type vlenChunk struct {
	off, ln []uint32 // per element: its bytes are heap[off:off+ln]
	heap    []byte
	garbage int64 // heap bytes no element references
}

const vlenChunkOverhead = 64

func (c *vlenChunk) MemSize() int64 {
	return int64(cap(c.off))*4 + int64(cap(c.ln))*4 + int64(cap(c.heap)) + vlenChunkOverhead
}

func (l *vlenLayout) fixedBytes() int64 { return int64(l.elems) * 8 }

func (l *vlenLayout) memFor(heap int64) int64 { return l.fixedBytes() + heap + vlenChunkOverhead }

func (l *vlenLayout) maxStored() int64 {
	return int64(section.FrameSize(int(l.fixedBytes()), vlenMaxHeap)) + 2*(4096+64*32)
}

func (l *vlenLayout) ChunkDims() []uint64 { return l.s.chunk }

func (l *vlenLayout) Lookup(ctx context.Context, coords []layout.Coord, locs []layout.Location) error {
	x, err := l.s.idx.get(ctx)
	if err != nil {
		return err
	}
	defer l.s.idx.account(x)
	for i, c := range coords {
		e, err := x.Get(ctx, c)
		if err != nil {
			return classify(err)
		}
		loc := layout.Location{SizeHint: l.memFor(0)}
		if e.Exists() {
			if e.Mask > vlenMaxHeap || !entryFits(e, l.maxStored()) {
				return fmt.Errorf("%w: variable-length chunk %v index entry (addr %d, size %d, heap %d)", ErrCorrupt, []uint64(c), e.Addr, e.Size, e.Mask)
			}
			loc.Addr, loc.Size, loc.Mask, loc.Sum = int64(e.Addr), int64(e.Size), e.Mask, e.Sum
			loc.SizeHint = l.memFor(int64(e.Mask))
		}
		locs[i] = loc
	}
	return nil
}

func (l *vlenLayout) NewChunk(layout.Coord, bool) (layout.Chunk, error) {
	// Filled or not, a new chunk's elements are empty: a full write
	// replaces every one of them anyway.
	return &vlenChunk{off: make([]uint32, l.elems), ln: make([]uint32, l.elems)}, nil
}

func (l *vlenLayout) Decode(coord layout.Coord, loc layout.Location, image []byte) (layout.Chunk, error) {
	defer bufpool.Put(image)
	heapLen := uint64(loc.Mask)
	if heapLen > vlenMaxHeap {
		return nil, fmt.Errorf("%w: variable-length chunk %v of %q: heap of %d bytes", ErrCorrupt, []uint64(coord), l.s.name, heapLen)
	}
	fixed := uint64(l.fixedBytes())
	h, err := section.ParseHeader(image, int64(len(image)), 2, uint32(max(fixed, heapLen)), l.s.csum, coord)
	if err != nil {
		return nil, fmt.Errorf("variable-length chunk %v of %q: %w", []uint64(coord), l.s.name, classify(err))
	}
	if h.Sum != loc.Sum {
		return nil, fmt.Errorf("%w: variable-length chunk %v of %q is not the one the index names", ErrCorrupt, []uint64(coord), l.s.name)
	}
	if uint64(h.Sec[0].Decoded) != fixed || uint64(h.Sec[1].Decoded) != heapLen {
		return nil, fmt.Errorf("%w: variable-length chunk %v of %q: sections of %d and %d bytes, want %d and %d",
			ErrCorrupt, []uint64(coord), l.s.name, h.Sec[0].Decoded, h.Sec[1].Decoded, fixed, heapLen)
	}
	var raw [2][]byte
	for i := range raw {
		b, err := h.Section(image, i)
		if err != nil {
			return nil, fmt.Errorf("variable-length chunk %v of %q: %w", []uint64(coord), l.s.name, classify(err))
		}
		if h.Sec[i].Decoded == 0 {
			if len(b) != 0 {
				return nil, fmt.Errorf("%w: variable-length chunk %v of %q: empty section %d stored in %d bytes", ErrCorrupt, []uint64(coord), l.s.name, i, len(b))
			}
			continue
		}
		if raw[i], err = l.s.pipeline.Decode(b, h.Sec[i].Mask, int(h.Sec[i].Decoded)); err != nil {
			return nil, fmt.Errorf("variable-length chunk %v of %q section %d: %w", []uint64(coord), l.s.name, i, classify(err))
		}
	}
	c := &vlenChunk{off: make([]uint32, l.elems), ln: make([]uint32, l.elems), heap: raw[1]}
	var used uint64
	for i := range c.off {
		o := uint64(binary.LittleEndian.Uint32(raw[0][8*i:]))
		n := uint64(binary.LittleEndian.Uint32(raw[0][8*i+4:]))
		if o+n > heapLen || n%uint64(l.s.elemSize) != 0 {
			return nil, fmt.Errorf("%w: variable-length chunk %v of %q: element %d at [%d,+%d) of a %d-byte heap",
				ErrCorrupt, []uint64(coord), l.s.name, i, o, n, heapLen)
		}
		if n == 0 {
			o = 0
		}
		c.off[i], c.ln[i] = uint32(o), uint32(n)
		used += n
	}
	c.garbage = max(0, int64(heapLen)-int64(used))
	return c, nil
}

func (l *vlenLayout) Encode(coord layout.Coord, chunk layout.Chunk) (layout.Encoded, error) {
	c := chunk.(*vlenChunk)
	fixed := make([]byte, 8*len(c.off))
	for i := range c.off {
		binary.LittleEndian.PutUint32(fixed[8*i:], c.off[i])
		binary.LittleEndian.PutUint32(fixed[8*i+4:], c.ln[i])
	}
	fs, err := encodeSection(l.s.pipeline, fixed)
	if err != nil {
		return layout.Encoded{}, err
	}
	hs, err := encodeSection(l.s.pipeline, c.heap)
	if err != nil {
		return layout.Encoded{}, err
	}
	buf := bufpool.Get(section.FrameSize(len(fs.Data), len(hs.Data)))
	img, sum := section.AppendFrame(buf[:0], []section.Stored{fs, hs}, l.s.csum, coord)
	pooled := &img[0] == &buf[0]
	if !pooled {
		bufpool.Put(buf)
	}
	return layout.Encoded{Image: img, Mask: uint32(len(c.heap)), Sum: sum, Pooled: pooled}, nil
}

// Insert, Publish and Delete are the shared index writes (indexed.go):
// a variable-length chunk has nothing beside its index.
func (l *vlenLayout) Insert(_ context.Context, ins []layout.Insertion) error {
	return l.insert(ins, l)
}

func (l *vlenLayout) Publish(ctx context.Context, ins []layout.Insertion, writeErr error) error {
	return l.publish(ctx, ins, writeErr, l)
}

// sizeHint: a variable-length image's mask field is its heap's size.
func (l *vlenLayout) sizeHint(mask uint32) int64 { return l.memFor(int64(mask)) }

// Scatter copies the selected elements' sequences into the piece's vals.
func (l *vlenLayout) Scatter(chunk layout.Chunk, p layout.Piece) error {
	c, pc := chunk.(*vlenChunk), p.(*piece)
	if pc.kind != pieceVlen {
		return fmt.Errorf("%w: variable-length dataset read with piece kind %d", ErrInternal, pc.kind)
	}
	for _, s := range pieceSegs(pc.p, l.s.chunk, pc.bufShape) {
		for j := uint64(0); j < s.n; j++ {
			e := s.lo + j
			var v []byte
			if n := c.ln[e]; n > 0 {
				o := c.off[e]
				v = append([]byte(nil), c.heap[o:o+n]...)
			}
			pc.vals[s.buf+j] = v
		}
	}
	return nil
}

// ScatterFill: elements of chunks stored nowhere are empty.
func (l *vlenLayout) ScatterFill(p layout.Piece) error {
	pc := p.(*piece)
	if pc.kind != pieceVlen {
		return fmt.Errorf("%w: variable-length dataset read with piece kind %d", ErrInternal, pc.kind)
	}
	for _, s := range pieceSegs(pc.p, l.s.chunk, pc.bufShape) {
		clear(pc.vals[s.buf : s.buf+s.n])
	}
	return nil
}

// Gather stores the selected elements' new sequences at the heap's end,
// then defragments the heap if too much of it is unused.
func (l *vlenLayout) Gather(chunk layout.Chunk, p layout.Piece) error {
	c, pc := chunk.(*vlenChunk), p.(*piece)
	if pc.kind != pieceVlen {
		return fmt.Errorf("%w: variable-length dataset write with piece kind %d", ErrInternal, pc.kind)
	}
	segs := pieceSegs(pc.p, l.s.chunk, pc.bufShape)
	grow := int64(0)
	for _, s := range segs {
		for j := uint64(0); j < s.n; j++ {
			grow += int64(len(pc.vals[s.buf+j]))
		}
	}
	if int64(len(c.heap))-c.garbage+grow > vlenMaxHeap {
		// Checked before anything changes: the chunk stays as it was.
		return fmt.Errorf("%w: chunk %v would hold %d bytes of variable-length data (at most %d per chunk)",
			ErrInvalid, pc.p.Coord, int64(len(c.heap))-c.garbage+grow, vlenMaxHeap)
	}
	if int64(len(c.heap))+grow > vlenMaxHeap {
		l.compact(c)
	}
	c.heap = slices.Grow(c.heap, int(grow))
	for _, s := range segs {
		for j := uint64(0); j < s.n; j++ {
			e, v := s.lo+j, pc.vals[s.buf+j]
			c.garbage += int64(c.ln[e])
			if len(v) == 0 {
				c.off[e], c.ln[e] = 0, 0
				continue
			}
			c.off[e], c.ln[e] = uint32(len(c.heap)), uint32(len(v))
			c.heap = append(c.heap, v...)
		}
	}
	l.maybeCompact(c)
	return nil
}

// maybeCompact defragments c's heap when its unused share passes the
// threshold.
func (l *vlenLayout) maybeCompact(c *vlenChunk) {
	if c.garbage > 0 && c.garbage*100 > int64(l.defrag)*int64(len(c.heap)) {
		l.compact(c)
	}
}

// compact rewrites the heap with only the referenced bytes, in element
// order, into an exactly sized buffer.
func (l *vlenLayout) compact(c *vlenChunk) {
	heap := make([]byte, 0, int64(len(c.heap))-c.garbage)
	for e := range c.off {
		if n := c.ln[e]; n > 0 {
			o := c.off[e]
			c.off[e] = uint32(len(heap))
			heap = append(heap, c.heap[o:o+n]...)
		}
	}
	c.heap, c.garbage = heap, 0
}

// Trim empties the elements outside the new extent (their fill value).
func (l *vlenLayout) Trim(coord layout.Coord, chunk layout.Chunk, dims []uint64) (bool, error) {
	c := chunk.(*vlenChunk)
	r := len(l.s.chunk)
	stride := make([]uint64, r)
	st := uint64(1)
	for d := r - 1; d >= 0; d-- {
		stride[d] = st
		st *= l.s.chunk[d]
	}
	changed := false
	for e := range c.off {
		if c.ln[e] == 0 {
			continue
		}
		rem := uint64(e)
		for d := 0; d < r; d++ {
			i := rem / stride[d]
			rem %= stride[d]
			if coord[d]*l.s.chunk[d]+i >= dims[d] {
				c.garbage += int64(c.ln[e])
				c.off[e], c.ln[e] = 0, 0
				changed = true
				break
			}
		}
	}
	if changed {
		l.maybeCompact(c)
	}
	return changed, nil
}

// vlenWrite stores vals (one per selected element, in the selection's C
// order) on a variable-length dataset (the caller has asked needLayouts).
func (d *Dataset) vlenWrite(ctx context.Context, sel Selection, vals [][]byte) error {
	sel = d.s.fit(sel)
	s := d.s
	if err := s.vlenCount(sel, vals); err != nil {
		return err
	}
	for i, v := range vals {
		if len(v)%s.elemSize != 0 || int64(len(v)) > vlenMaxHeap {
			return fmt.Errorf("%w: value %d has %d bytes (a multiple of %d, at most %d)", ErrInvalid, i, len(v), s.elemSize, vlenMaxHeap)
		}
	}
	return s.vlenSubmit(ctx, sel, vals, true)
}

// vlenRead fills vals (one per selected element) from a variable-length
// dataset, as vlenWrite stores them.
func (d *Dataset) vlenRead(ctx context.Context, sel Selection, vals [][]byte) error {
	if err := d.s.vlenCount(sel, vals); err != nil {
		return err
	}
	return d.s.vlenSubmit(ctx, sel, vals, false)
}

// vlenCount checks that vals has one value per selected element.
func (s *dsState) vlenCount(sel Selection, vals [][]byte) error {
	if n, err := sel.hyper().CountElements(); err != nil {
		return classifyIn(err, s.path())
	} else if n != uint64(len(vals)) {
		return fmt.Errorf("%w: dataset %q: %d values for %d selected elements", ErrInvalid, s.path(), len(vals), n)
	}
	return nil
}

// vlenSubmit runs vlenRead's or vlenWrite's checked request: the same
// steps, write choosing the hold and the cache's direction.
func (s *dsState) vlenSubmit(ctx context.Context, sel Selection, vals [][]byte, write bool) error {
	h, err := s.hold(ctx, sel, write)
	if err != nil {
		return err
	}
	defer h.Release()
	reqs, pieces, err := s.kindRequests(sel, pieceVlen, nil)
	if err != nil || len(reqs) == 0 {
		return err
	}
	for _, pc := range pieces {
		pc.vals = vals
	}
	return s.submit(ctx, reqs, write, nil)
}

// WriteVlen stores vals[i] as the i-th selected element (C order of
// sel.Shape()) of a variable-length dataset: each a whole number of Type
// values, little-endian; nil or empty stores the empty sequence (the fill
// value). Atomic per chunk like Write. Other layouts refuse it
// (ErrInvalid), as they refuse ReadVlen, WriteStrings and ReadStrings.
func (d *Dataset) WriteVlen(ctx context.Context, sel Selection, vals [][]byte) error {
	if err := d.checkVlen(true, "WriteVlen"); err != nil {
		return err
	}
	return d.vlenWrite(ctx, sel, vals)
}

// ReadVlen returns the selected elements of a variable-length dataset, in
// C order of sel.Shape(); empty elements are nil.
func (d *Dataset) ReadVlen(ctx context.Context, sel Selection) ([][]byte, error) {
	if err := d.checkVlen(false, "ReadVlen"); err != nil {
		return nil, err
	}
	return d.readVlen(ctx, sel)
}

func (d *Dataset) readVlen(ctx context.Context, sel Selection) ([][]byte, error) {
	sel = d.s.fit(sel)
	n, err := sel.hyper().CountElements()
	if err != nil {
		return nil, classifyIn(err, d.s.path())
	}
	if n > maxChunkBytes {
		return nil, fmt.Errorf("%w: %d elements at once", ErrInvalid, n)
	}
	vals := make([][]byte, n)
	if err := d.s.f.follow(ctx, func() error { return d.vlenRead(ctx, sel, vals) }); err != nil {
		return nil, err
	}
	return vals, nil
}

// checkVlen is check for the variable-length calls: the dataset must be
// one (needLayouts).
func (d *Dataset) checkVlen(write bool, call string) error {
	if err := d.check(write); err != nil {
		return err
	}
	return needLayouts(d.s, call, Vlen)
}

// checkStrings is checkVlen for the string calls, which also need 1-byte
// elements.
func (d *Dataset) checkStrings(write bool, call string) error {
	if err := d.checkVlen(write, call); err != nil {
		return err
	}
	if d.s.elemSize != 1 {
		return fmt.Errorf("%w: strings need a variable-length dataset of 1-byte elements", ErrInvalid)
	}
	return nil
}

// WriteStrings is WriteVlen for a variable-length dataset of Uint8 or Int8
// (strings stored as their bytes; UTF-8 is not checked). For a dataset of
// a fixed-length string type (FixedString) each string is encoded by
// EncodeString instead, and one that does not fit fails the call.
func (d *Dataset) WriteStrings(ctx context.Context, sel Selection, vals []string) error {
	if d.Type().IsString() {
		return d.writeFixedStrings(ctx, sel, vals)
	}
	if err := d.checkStrings(true, "WriteStrings"); err != nil {
		return err
	}
	// One buffer for all the strings' bytes instead of one per string.
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	all := make([]byte, 0, n)
	b := make([][]byte, len(vals))
	for i, v := range vals {
		all = append(all, v...)
		b[i] = all[len(all)-len(v) : len(all) : len(all)]
	}
	return d.vlenWrite(ctx, sel, b)
}

// ReadStrings is ReadVlen returning strings, or for a dataset of a
// fixed-length string type each element's text (DecodeString).
func (d *Dataset) ReadStrings(ctx context.Context, sel Selection) ([]string, error) {
	if d.Type().IsString() {
		return d.readFixedStrings(ctx, sel)
	}
	if err := d.checkStrings(false, "ReadStrings"); err != nil {
		return nil, err
	}
	b, err := d.readVlen(ctx, sel)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(b))
	for i, v := range b {
		out[i] = string(v)
	}
	return out, nil
}

// checkChunk verifies what Decode cannot: a stored chunk holds no
// non-empty element outside the extent dims (a shrink empties them before
// the commit that records it). For engine.Check.
func (l *vlenLayout) checkChunk(coord []uint64, chunk layout.Chunk, dims []uint64) error {
	c, ok := chunk.(*vlenChunk)
	if !ok {
		return fmt.Errorf("%w: not a variable-length chunk", ErrInternal)
	}
	probe := &vlenChunk{off: append([]uint32(nil), c.off...), ln: append([]uint32(nil), c.ln...), heap: c.heap, garbage: c.garbage}
	if changed, _ := l.Trim(coord, probe, dims); changed {
		return fmt.Errorf("%w: variable-length chunk %v has elements outside the extent %v", ErrCorrupt, coord, dims)
	}
	return nil
}

func (l *vlenLayout) kind() LayoutKind { return Vlen }

// admitBytes: the fixed section plus a heap estimate; the heap's real
// size is charged by the cache once loaded.
func (l *vlenLayout) admitBytes() int64 { return l.memFor(1 << 20) }

// Condense defragments a variable-length chunk's heap and drops its slack.
func (l *vlenLayout) Condense(_ layout.Coord, chunk layout.Chunk) layout.Chunk {
	if h := testHookCondense.Load(); h != nil {
		(*h)(l.s)
	}
	c, ok := chunk.(*vlenChunk)
	if !ok || c.garbage == 0 && cap(c.heap) == len(c.heap) {
		return nil
	}
	n := &vlenChunk{off: c.off, ln: c.ln, heap: c.heap, garbage: c.garbage}
	if n.garbage > 0 {
		// compact rewrites off in place: give the new chunk its own copy
		// so the old one, which the cache drops, stays consistent.
		n.off = append([]uint32(nil), c.off...)
		l.compact(n)
	} else {
		n.heap = clipBytes(c.heap)
	}
	return n
}

// PartBlocks reads the whole frame of a variable-length chunk.
func (l *vlenLayout) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	return wholeFrame(loc, pieces, pieceVlen)
}

// ReadPart decodes the frame read (Decode verifies it) and serves the
// pieces; nothing is kept.
func (l *vlenLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	return decodeServe(l, coord, loc, pieces, bufs[0])
}
