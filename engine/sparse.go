package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/engine/internal/section"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/internal/bufpool"
)

// The sparse layout (SCC requirements §1 and §2.1; Mainzer et al.,
// "Sparse Data Management in HDF5", XLOOP 2019): a chunk stores which of
// its elements are defined and the values of those elements only. Writes
// define elements, Erase makes them undefined again, reads return the fill
// value where nothing is defined, and a chunk whose last element is erased
// is deleted from the file. Storage grows with the defined elements, not
// with the extent.
//
// On disk a chunk is a structured chunk frame (engine/internal/section, FORMAT.md
// §16) of two sections, each with its own pipeline and checksum:
//
//	0  selection: the run encoding of the defined elements, through the
//	   dataset's selection pipeline (LayoutParams; none by default)
//	1  values: the defined elements' values in C order, through the
//	   dataset's filter pipeline
//
// and the chunk index entry records (frame address, frame size, k, header
// checksum), where k, kept in the entry's mask field, is the number of
// defined elements. From k alone the cache knows how much memory the
// decoded chunk takes and how many bytes hold the selection section, so
// the selection can be read and kept without the values (SCC internal API
// decode_defined_values; see sparseSelView).
//
// In cache memory a chunk is a sparseChunk: the defined elements as
// sorted runs and their values packed in the same order. It grows and
// shrinks with every Gather, Erase and Trim; the cache re-reads MemSize
// after each (SCC requirements §2.1 item 2).

// layoutSparse is the header's layout code for sparse datasets.
const layoutSparse = format.LayoutSparse

// Sparse LayoutParams (FORMAT.md §16.3): a version byte (1), then the
// selection section's filter pipeline in engine/filter's encoding.
const sparseParamsVersion = 1

func encodeSparseParams(sel []filter.Spec) []byte {
	return append([]byte{sparseParamsVersion}, filter.EncodeSpecs(sel)...)
}

func decodeSparseParams(b []byte) ([]filter.Spec, error) {
	if len(b) < 1 || b[0] != sparseParamsVersion {
		return nil, fmt.Errorf("%w: sparse layout parameters (%d bytes) of unknown version", ErrCorrupt, len(b))
	}
	specs, err := filter.DecodeSpecs(b[1:])
	if err != nil {
		return nil, classify(err)
	}
	return specs, nil
}

// sparseLayout implements the cache's layout callbacks for a sparse
// dataset.
//
// Concurrency: the index and the allocator synchronize themselves; mu
// guards the pending map, the only state of its own.
type sparseLayout struct {
	indexedStorage
	selPipe *filter.Pipeline
	elems   uint64 // elements per chunk
	view    *sparseSelView
	// gen numbers modifications, so that Publish can tell whether the
	// image it publishes holds a chunk's last one.
	gen atomic.Uint64

	mu struct {
		sync.Mutex
		// pending holds, per chunk modified since its last published
		// image, the generation of the last modification and of each
		// image encoded since. While a chunk is pending the file holds an
		// older version of it, so DefinedElements may not answer from
		// the selection section on disk.
		pending map[string]*sparsePending
	}
}

type sparsePending struct {
	mod uint64
	enc map[uint32]uint64 // header checksum of an encoded image → its generation
}

var (
	_ layout.Layout = (*sparseLayout)(nil)
	_ layout.Layout = (*sparseSelView)(nil)
)

func newSparseLayout(s *dsState, params []byte) (*sparseLayout, error) {
	specs, err := decodeSparseParams(params)
	if err != nil {
		return nil, err
	}
	pl, err := filter.NewPipeline(specs, 1)
	if err != nil {
		return nil, classify(err)
	}
	l := &sparseLayout{indexedStorage: indexedStorage{s}, selPipe: pl, elems: uint64(s.chunkBytes) / uint64(s.elemSize)}
	l.mu.pending = map[string]*sparsePending{}
	l.view = &sparseSelView{l: l, dims: append(clone(s.chunk), 1, 1, 1)}
	return l, nil
}

// sparseChunk is a sparse chunk in cache memory: runs of defined elements
// (sorted, disjoint, non-adjacent) and their values, packed in run order.
// A chunk of the selection view (sparseSelView) has runs only.
type sparseChunk struct {
	runs []section.Run
	data []byte
	gen  uint64 // l.gen at the last modification
}

const sparseChunkOverhead = 64

func (c *sparseChunk) MemSize() int64 {
	return int64(cap(c.runs))*12 + int64(cap(c.data)) + sparseChunkOverhead
}

// defined is the number of defined elements.
func (c *sparseChunk) defined() uint64 {
	if len(c.runs) == 0 {
		return 0
	}
	r := c.runs[len(c.runs)-1]
	return uint64(r.At) + uint64(r.Len)
}

// memFor is the memory a decoded chunk with k defined elements can take:
// at most one run per element.
func (l *sparseLayout) memFor(k uint64) int64 {
	return int64(k)*int64(12+l.s.elemSize) + sparseChunkOverhead
}

// maxStored bounds a stored frame: the two sections at their raw sizes
// (filters that do not shrink are skipped) plus pipeline framing.
func (l *sparseLayout) maxStored() int64 {
	return int64(section.FrameSize(int(section.MaxRunBytes(l.elems/2, l.elems)), int(l.s.chunkBytes))) + 2*(4096+64*32)
}

func (l *sparseLayout) ChunkDims() []uint64 { return l.s.chunk }

func (l *sparseLayout) Lookup(ctx context.Context, coords []layout.Coord, locs []layout.Location) error {
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
		loc, err := l.location(c, e)
		if err != nil {
			return err
		}
		locs[i] = loc
	}
	return nil
}

// location checks an index entry and turns it into the chunk's location.
func (l *sparseLayout) location(c []uint64, e index.Entry) (layout.Location, error) {
	loc := layout.Location{SizeHint: sparseChunkOverhead}
	if !e.Exists() {
		return loc, nil
	}
	k := uint64(e.Mask)
	if k == 0 || k > l.elems || !entryFits(e, l.maxStored()) || e.Size < uint64(section.HeaderSize(2)) {
		return loc, fmt.Errorf("%w: sparse chunk %v index entry (addr %d, size %d, %d defined)", ErrCorrupt, c, e.Addr, e.Size, k)
	}
	loc.Addr, loc.Size, loc.Mask, loc.Sum = int64(e.Addr), int64(e.Size), e.Mask, e.Sum
	loc.SizeHint = l.memFor(k)
	return loc, nil
}

func (l *sparseLayout) NewChunk(layout.Coord, bool) (layout.Chunk, error) {
	// A new sparse chunk defines nothing, filled or not (SCC internal API
	// H5SC_new_chunk_t: "unless this is a sparse chunk").
	return &sparseChunk{}, nil
}

// decodeSelection verifies a frame's header (against the index's checksum)
// and decodes its selection section. frame may be a prefix of the frame
// that holds the header and the selection section.
func (l *sparseLayout) decodeSelection(coord []uint64, frameSize int64, k uint64, sum uint32, frame []byte) (section.Header, []section.Run, error) {
	maxDec := section.MaxRunBytes(k, l.elems)
	if v := k * uint64(l.s.elemSize); v > maxDec {
		maxDec = v
	}
	if maxDec > 1<<32-1 {
		maxDec = 1<<32 - 1
	}
	h, err := section.ParseHeader(frame, frameSize, 2, uint32(maxDec), l.s.csum, coord)
	if err != nil {
		return h, nil, fmt.Errorf("sparse chunk %v of %q: %w", coord, l.s.name, classify(err))
	}
	if h.Sum != sum {
		return h, nil, fmt.Errorf("%w: sparse chunk %v of %q is not the one the index names", ErrCorrupt, coord, l.s.name)
	}
	sb, err := h.Section(frame, 0)
	if err != nil {
		return h, nil, fmt.Errorf("sparse chunk %v of %q: %w", coord, l.s.name, classify(err))
	}
	if uint64(h.Sec[0].Decoded) > section.MaxRunBytes(k, l.elems) {
		return h, nil, fmt.Errorf("%w: sparse chunk %v of %q: selection of %d bytes for %d elements", ErrCorrupt, coord, l.s.name, h.Sec[0].Decoded, k)
	}
	raw, err := l.selPipe.Decode(sb, h.Sec[0].Mask, int(h.Sec[0].Decoded))
	if err != nil {
		return h, nil, fmt.Errorf("sparse chunk %v of %q selection: %w", coord, l.s.name, classify(err))
	}
	runs, n, err := section.DecodeRuns(raw, l.elems, nil)
	if err != nil {
		return h, nil, fmt.Errorf("sparse chunk %v of %q selection: %w", coord, l.s.name, classify(err))
	}
	if n != k {
		return h, nil, fmt.Errorf("%w: sparse chunk %v of %q: selection defines %d elements, index says %d", ErrCorrupt, coord, l.s.name, n, k)
	}
	return h, runs, nil
}

func (l *sparseLayout) Decode(coord layout.Coord, loc layout.Location, image []byte) (layout.Chunk, error) {
	defer bufpool.Put(image) // everything is copied out
	k := uint64(loc.Mask)
	if k == 0 || k > l.elems {
		return nil, fmt.Errorf("%w: sparse chunk %v of %q: %d defined elements", ErrCorrupt, []uint64(coord), l.s.name, k)
	}
	h, runs, err := l.decodeSelection(coord, int64(len(image)), k, loc.Sum, image)
	if err != nil {
		return nil, err
	}
	vb, err := h.Section(image, 1)
	if err != nil {
		return nil, fmt.Errorf("sparse chunk %v of %q: %w", []uint64(coord), l.s.name, classify(err))
	}
	want := k * uint64(l.s.elemSize)
	if uint64(h.Sec[1].Decoded) != want {
		return nil, fmt.Errorf("%w: sparse chunk %v of %q: %d value bytes for %d elements", ErrCorrupt, []uint64(coord), l.s.name, h.Sec[1].Decoded, k)
	}
	data, err := l.s.pipeline.DecodeVerifiedTo(make([]byte, want), vb, h.Sec[1].Mask, int(want)) // vb passed its section checksum
	if err != nil {
		return nil, fmt.Errorf("sparse chunk %v of %q values: %w", []uint64(coord), l.s.name, classify(err))
	}
	return &sparseChunk{runs: runs, data: data}, nil
}

// encodeSection runs one section through its pipeline.
func encodeSection(p *filter.Pipeline, raw []byte) (section.Stored, error) {
	if len(raw) == 0 {
		return section.Stored{}, nil
	}
	img, mask, err := p.Encode(raw)
	if err != nil {
		return section.Stored{}, classify(err)
	}
	return section.Stored{Data: img, Decoded: uint32(len(raw)), Mask: mask}, nil
}

// Encode builds the chunk's frame, each section through its own pipeline
// (SCC requirements §2.1 item 4). An empty chunk encodes to a frame with no
// defined elements, which Publish turns into a deletion.
func (l *sparseLayout) Encode(coord layout.Coord, chunk layout.Chunk) (layout.Encoded, error) {
	c := chunk.(*sparseChunk)
	sel, err := encodeSection(l.selPipe, section.AppendRuns(nil, c.runs))
	if err != nil {
		return layout.Encoded{}, err
	}
	val, err := encodeSection(l.s.pipeline, c.data)
	if err != nil {
		return layout.Encoded{}, err
	}
	size := section.FrameSize(len(sel.Data), len(val.Data))
	buf := bufpool.Get(size)
	img, sum := section.AppendFrame(buf[:0], []section.Stored{sel, val}, l.s.csum, coord)
	pooled := &img[0] == &buf[0]
	if !pooled {
		bufpool.Put(buf)
	}
	l.noteEncoded(coord, sum, c.gen)
	return layout.Encoded{Image: img, Mask: uint32(c.defined()), Sum: sum, Pooled: pooled}, nil
}

func coordKey(c []uint64) string {
	b := make([]byte, 0, 8*len(c))
	for _, v := range c {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return string(b)
}

// noteModified records a modification of the chunk at coord (the caller
// holds the chunk exclusively) and stamps the chunk with its generation.
func (l *sparseLayout) noteModified(coord []uint64, c *sparseChunk) {
	g := l.gen.Add(1)
	c.gen = g
	l.mu.Lock()
	k := coordKey(coord)
	p := l.mu.pending[k]
	if p == nil {
		p = &sparsePending{enc: map[uint32]uint64{}}
		l.mu.pending[k] = p
	}
	p.mod = g
	l.mu.Unlock()
}

func (l *sparseLayout) noteEncoded(coord []uint64, sum uint32, gen uint64) {
	l.mu.Lock()
	if p := l.mu.pending[coordKey(coord)]; p != nil && gen > 0 {
		if gen > p.enc[sum] {
			p.enc[sum] = gen
		}
	}
	l.mu.Unlock()
}

// notePublished records the outcome of publishing an image of coord: a
// written image that holds the chunk's last modification ends its pending
// state.
func (l *sparseLayout) notePublished(coord []uint64, sum uint32, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := coordKey(coord)
	p := l.mu.pending[k]
	if p == nil {
		return
	}
	g, found := p.enc[sum]
	delete(p.enc, sum)
	if ok && found && g >= p.mod {
		delete(l.mu.pending, k)
	}
}

// isPending reports whether the file may hold an older version of the
// chunk than the cache.
func (l *sparseLayout) isPending(coord []uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.pending[coordKey(coord)] != nil
}

// Insert, Publish and Delete are the shared index writes (indexed.go).
// An image with no defined elements deletes the chunk instead (SCC
// internal API erase_values with delete_chunk): its own space and the old
// frame's are released. Every outcome ends or keeps the chunk's pending
// state (notePublished), and a deleted chunk has none.
func (l *sparseLayout) Insert(_ context.Context, ins []layout.Insertion) error {
	return l.insert(ins, l)
}

func (l *sparseLayout) Publish(ctx context.Context, ins []layout.Insertion, writeErr error) error {
	return l.publish(ctx, ins, writeErr, l)
}

// sizeHint: a sparse image's mask field is its count of defined elements.
func (l *sparseLayout) sizeHint(mask uint32) int64 { return l.memFor(uint64(mask)) }

func (l *sparseLayout) erases(in *layout.Insertion) bool { return in.Mask == 0 }

func (l *sparseLayout) published(in *layout.Insertion, ok bool) {
	l.notePublished(in.Coord, in.Sum, ok)
}

const (
	pieceData    pieceKind = iota // Read: values (fill where undefined); Write: define
	pieceErase                    // Write: make the selected elements undefined
	pieceDefined                  // Read: positions of the defined elements
	pieceValues                   // Read: positions and values of the defined elements
	pieceVlen                     // variable-length Read or Write of piece.vals
)

// definedOut collects one piece's defined elements: positions in the
// selection's packed buffer, ascending, and (pieceValues) their values.
type definedOut struct {
	pos  []uint64
	vals []byte
}

// seg is one contiguous row of a piece: n elements from chunk offset lo,
// at element index buf of the caller's packed buffer.
type seg struct{ lo, n, buf uint64 }

// pieceSegs lists the rows of p in ascending chunk order.
func pieceSegs(p *selection.Piece, chunk, bufShape []uint64) []seg {
	r := len(chunk)
	cs := make([]uint64, r)
	bs := make([]uint64, r)
	c, b := uint64(1), uint64(1)
	for d := r - 1; d >= 0; d-- {
		cs[d], bs[d] = c, b
		c *= chunk[d]
		b *= bufShape[d]
	}
	var out []seg
	var walk func(d int, co, bo uint64)
	walk = func(d int, co, bo uint64) {
		if d == r-1 {
			for _, run := range p.Runs[d] {
				out = append(out, seg{lo: co + run.Chunk, n: run.Len, buf: bo + run.Buf})
			}
			return
		}
		for _, run := range p.Runs[d] {
			for i := uint64(0); i < run.Len; i++ {
				walk(d+1, co+(run.Chunk+i)*cs[d], bo+(run.Buf+i)*bs[d])
			}
		}
	}
	walk(0, 0, 0)
	return out
}

// overlap calls fn for each part of a defined run inside [lo, lo+n): its
// offset, length and index in the packed values.
func overlap(runs []section.Run, lo, n uint64, fn func(off, cnt, at uint64)) {
	hi := lo + n
	i := sort.Search(len(runs), func(i int) bool { return uint64(runs[i].End()) > lo })
	for ; i < len(runs) && uint64(runs[i].Start) < hi; i++ {
		r := runs[i]
		s, e := max(uint64(r.Start), lo), min(uint64(r.End()), hi)
		fn(s, e-s, uint64(r.At)+s-uint64(r.Start))
	}
}

// mergeMode is how apply combines a chunk's defined set with rows.
type mergeMode uint8

const (
	mergeWrite mergeMode = iota // define the rows, values from src
	mergeErase                  // undefine the rows
	mergeKeep                   // undefine everything outside the rows
)

// writeInPlace applies a write without rebuilding the chunk when it can:
// when every row overwrites elements already defined (their values are
// replaced where they are), or when every row lies after the last defined
// element (runs and values are appended, amortized). Filling a chunk in
// order, or rewriting its defined elements, then costs what the write
// carries instead of the chunk's size. It reports false, having changed
// nothing, otherwise.
func (c *sparseChunk) writeInPlace(segs []seg, src []byte, es int) bool {
	if len(segs) == 0 {
		return true
	}
	e := uint64(es)
	if n := len(c.runs); n == 0 || segs[0].lo >= uint64(c.runs[n-1].End()) {
		for _, s := range segs {
			if k := len(c.runs); k > 0 && uint64(c.runs[k-1].End()) == s.lo {
				c.runs[k-1].Len += uint32(s.n)
			} else {
				c.runs = append(c.runs, section.Run{Start: uint32(s.lo), Len: uint32(s.n), At: uint32(uint64(len(c.data)) / e)})
			}
			c.data = append(c.data, src[s.buf*e:(s.buf+s.n)*e]...)
		}
		return true
	}
	for _, s := range segs {
		covered := uint64(0)
		overlap(c.runs, s.lo, s.n, func(_, cnt, _ uint64) { covered += cnt })
		if covered != s.n {
			return false
		}
	}
	for _, s := range segs {
		overlap(c.runs, s.lo, s.n, func(off, cnt, at uint64) {
			b := s.buf + off - s.lo
			copy(c.data[at*e:(at+cnt)*e], src[b*e:(b+cnt)*e])
		})
	}
	return true
}

// apply returns the chunk's runs and values after combining them with
// segs (ascending, disjoint) under mode; the chunk itself is not changed.
func (c *sparseChunk) apply(mode mergeMode, segs []seg, src []byte, es int) ([]section.Run, []byte) {
	extra := 0
	if mode == mergeWrite {
		for _, s := range segs {
			extra += int(s.n)
		}
	}
	runs := make([]section.Run, 0, len(c.runs)+len(segs))
	data := make([]byte, 0, len(c.data)+extra*es)
	emit := func(start, n uint64, vals []byte) {
		if n == 0 {
			return
		}
		if k := len(runs); k > 0 && uint64(runs[k-1].End()) == start {
			runs[k-1].Len += uint32(n)
		} else {
			runs = append(runs, section.Run{Start: uint32(start), Len: uint32(n), At: uint32(len(data) / es)})
		}
		data = append(data, vals...)
	}
	i, x := 0, uint64(0) // old runs before i, and offsets below x, are done
	emitOld := func(upTo uint64) {
		for i < len(c.runs) && uint64(c.runs[i].Start) < upTo {
			r := c.runs[i]
			s, e := max(uint64(r.Start), x), min(uint64(r.End()), upTo)
			if s < e {
				a := uint64(r.At) + s - uint64(r.Start)
				emit(s, e-s, c.data[a*uint64(es):(a+e-s)*uint64(es)])
			}
			if uint64(r.End()) > upTo {
				break
			}
			i++
		}
		x = max(x, upTo)
	}
	skipOld := func(upTo uint64) {
		for i < len(c.runs) && uint64(c.runs[i].End()) <= upTo {
			i++
		}
		x = max(x, upTo)
	}
	const end = 1 << 62
	for _, s := range segs {
		switch mode {
		case mergeWrite:
			emitOld(s.lo)
			skipOld(s.lo + s.n)
			emit(s.lo, s.n, src[s.buf*uint64(es):(s.buf+s.n)*uint64(es)])
		case mergeErase:
			emitOld(s.lo)
			skipOld(s.lo + s.n)
		case mergeKeep:
			skipOld(s.lo)
			emitOld(s.lo + s.n)
		}
	}
	if mode != mergeKeep {
		emitOld(end)
	}
	return runs, data
}

// segsOf returns the rows of pc's selection.
func (l *sparseLayout) segsOf(pc *piece) []seg {
	segs := pieceSegs(pc.p, l.s.chunk, pc.bufShape)
	if !slices.IsSortedFunc(segs, func(a, b seg) int { return cmpU64(a.lo, b.lo) }) {
		slices.SortFunc(segs, func(a, b seg) int { return cmpU64(a.lo, b.lo) })
	}
	return segs
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (l *sparseLayout) Scatter(chunk layout.Chunk, p layout.Piece) error {
	return l.scatter(chunk.(*sparseChunk), p.(*piece))
}

func (l *sparseLayout) scatter(c *sparseChunk, pc *piece) error {
	es := uint64(l.s.elemSize)
	switch pc.kind {
	case pieceData:
		selection.FillBuf(pc.buf, pc.bufShape, pc.p, l.s.elemSize, l.s.fill)
		for _, s := range l.segsOf(pc) {
			overlap(c.runs, s.lo, s.n, func(off, cnt, at uint64) {
				b := s.buf + off - s.lo
				copy(pc.buf[b*es:(b+cnt)*es], c.data[at*es:(at+cnt)*es])
			})
		}
	case pieceDefined, pieceValues:
		for _, s := range l.segsOf(pc) {
			overlap(c.runs, s.lo, s.n, func(off, cnt, at uint64) {
				b := s.buf + off - s.lo
				for j := uint64(0); j < cnt; j++ {
					pc.out.pos = append(pc.out.pos, b+j)
				}
				if pc.kind == pieceValues {
					pc.out.vals = append(pc.out.vals, c.data[at*es:(at+cnt)*es]...)
				}
			})
		}
	default:
		return fmt.Errorf("%w: sparse read with piece kind %d", ErrInternal, pc.kind)
	}
	return nil
}

func (l *sparseLayout) ScatterFill(p layout.Piece) error {
	pc := p.(*piece)
	if pc.kind == pieceData {
		selection.FillBuf(pc.buf, pc.bufShape, pc.p, l.s.elemSize, l.s.fill)
	}
	return nil // pieceDefined/pieceValues: nothing is defined
}

func (l *sparseLayout) Gather(chunk layout.Chunk, p layout.Piece) error {
	c, pc := chunk.(*sparseChunk), p.(*piece)
	var mode mergeMode
	switch pc.kind {
	case pieceData:
		mode = mergeWrite
	case pieceErase:
		mode = mergeErase
	default:
		return fmt.Errorf("%w: sparse write with piece kind %d", ErrInternal, pc.kind)
	}
	before := c.defined()
	segs := l.segsOf(pc)
	if mode != mergeWrite || !c.writeInPlace(segs, pc.buf, l.s.elemSize) {
		runs, data := c.apply(mode, segs, pc.buf, l.s.elemSize)
		if mode == mergeWrite || uint64(len(data)/l.s.elemSize) != before {
			c.runs, c.data = runs, data
		}
	}
	// Noted even when an erase changed nothing: the cache marks the chunk
	// dirty after any Gather (a full erase replaces the stored chunk by
	// an empty one without loading it), so the file is behind it now.
	l.noteModified(pc.p.Coord, c)
	return nil
}

// Trim undefines the elements outside the new extent (SCC internal API set extent
// with erase_values): a sparse chunk never stores the fill value.
func (l *sparseLayout) Trim(coord layout.Coord, chunk layout.Chunk, dims []uint64) (bool, error) {
	c := chunk.(*sparseChunk)
	runs, data, changed := l.trimmed(coord, c, dims)
	if !changed {
		return false, nil
	}
	c.runs, c.data = runs, data
	l.noteModified(coord, c)
	return true, nil
}

// trimmed returns c's runs and values without the elements outside dims,
// and whether there were any; c is not changed.
func (l *sparseLayout) trimmed(coord []uint64, c *sparseChunk, dims []uint64) ([]section.Run, []byte, bool) {
	if c.defined() == 0 {
		return nil, nil, false
	}
	r := len(l.s.chunk)
	inside := selection.Piece{Coord: coord, Runs: make([][]selection.Run, r), N: 1}
	shape := make([]uint64, r)
	whole := true
	for d := 0; d < r; d++ {
		o := coord[d] * l.s.chunk[d]
		n := uint64(0)
		if o < dims[d] {
			n = min(l.s.chunk[d], dims[d]-o)
		}
		if n == 0 {
			return nil, nil, true
		}
		whole = whole && n == l.s.chunk[d]
		inside.Runs[d] = []selection.Run{{Chunk: 0, Buf: 0, Len: n}}
		shape[d] = n
		inside.N *= n
	}
	if whole {
		return nil, nil, false
	}
	runs, data := c.apply(mergeKeep, l.segsOf(&piece{p: &inside, bufShape: shape}), nil, l.s.elemSize)
	return runs, data, uint64(len(data)/l.s.elemSize) != c.defined()
}

// checkChunk verifies what Decode cannot: a stored chunk defines no
// element outside the extent dims (a shrink trims its edge chunks before
// the commit that names the smaller extent, so growing again shows them
// undefined). For engine.Check.
func (l *sparseLayout) checkChunk(coord []uint64, chunk layout.Chunk, dims []uint64) error {
	c, ok := chunk.(*sparseChunk)
	if !ok {
		return fmt.Errorf("%w: not a sparse chunk", ErrInternal)
	}
	if _, _, outside := l.trimmed(coord, c, dims); outside {
		return fmt.Errorf("%w: sparse chunk %v defines elements outside the extent %v", ErrCorrupt, coord, dims)
	}
	return nil
}

// sparseSelView is the selection-only view of a sparse dataset (SCC requirements
// §2.1 item 6, SCC internal API decode_defined_values): registered with the cache
// as a dataset of its own (id with the top bit set), whose chunks are the
// decoded selection sections alone, read from the first bytes of the
// frames. DefinedElements answers from it for chunks the cache does not
// hold whole, so finding where data is defined across a dataset reads
// and keeps no values.
//
// Its chunk coordinates are the sparse chunk's followed by the frame's
// address, size and (header checksum << 32 | k): a key names one stored
// version of the chunk, so a cached selection can never be stale; a
// version the index no longer names is never asked for again and ages
// out of the cache like any clean chunk. The view is read-only: the cache
// never creates, modifies or writes its chunks.
type sparseSelView struct {
	l    *sparseLayout
	dims []uint64
}

// selViewBit marks the selection view's cache dataset id.
const selViewBit = 1 << 63

func (v *sparseSelView) ChunkDims() []uint64 { return v.dims }

func (v *sparseSelView) split(c layout.Coord) (coord []uint64, addr, size int64, sum uint32, k uint64) {
	r := len(c) - 3
	return c[:r], int64(c[r]), int64(c[r+1]), uint32(c[r+2] >> 32), c[r+2] & (1<<32 - 1)
}

// viewCoord is the view's coordinate for a chunk stored as e.
func (v *sparseSelView) viewCoord(c []uint64, e index.Entry) layout.Coord {
	return append(clone(c), e.Addr, e.Size, uint64(e.Sum)<<32|uint64(e.Mask))
}

// prefix is how many bytes of a frame hold its header and selection
// section at most: the selection's stored size is at most its raw size
// (compressors that do not shrink it are skipped, the mask records it)
// plus 4 bytes per CRC32C filter.
func (v *sparseSelView) prefix(size int64, k uint64) int64 {
	crcs := 0
	for _, sp := range v.l.selPipe.Specs() {
		if sp.ID == filter.CRC32C {
			crcs++
		}
	}
	return min(size, int64(section.HeaderSize(2))+int64(section.MaxRunBytes(k, v.l.elems))+4*int64(crcs))
}

func (v *sparseSelView) Lookup(_ context.Context, coords []layout.Coord, locs []layout.Location) error {
	for i, c := range coords {
		coord, addr, size, sum, k := v.split(c)
		loc, err := v.l.location(coord, index.Entry{Addr: uint64(addr), Size: uint64(size), Mask: uint32(k), Sum: sum})
		if err != nil {
			return err
		}
		if !loc.Exists() {
			return fmt.Errorf("%w: selection view asked for a chunk stored nowhere", ErrInternal)
		}
		loc.Size = v.prefix(size, k)
		loc.SizeHint = int64(k)*12 + sparseChunkOverhead
		locs[i] = loc
	}
	return nil
}

func (v *sparseSelView) Decode(c layout.Coord, loc layout.Location, image []byte) (layout.Chunk, error) {
	defer bufpool.Put(image)
	coord, _, size, sum, k := v.split(c)
	_, runs, err := v.l.decodeSelection(coord, size, k, sum, image)
	if err != nil {
		return nil, err
	}
	return &sparseChunk{runs: runs}, nil
}

func (v *sparseSelView) Scatter(chunk layout.Chunk, p layout.Piece) error {
	pc := p.(*piece)
	if pc.kind != pieceDefined {
		return fmt.Errorf("%w: selection view read with piece kind %d", ErrInternal, pc.kind)
	}
	return v.l.scatter(chunk.(*sparseChunk), pc)
}

func (v *sparseSelView) ScatterFill(layout.Piece) error { return nil }

var errSelView = fmt.Errorf("%w: the selection view is read-only", ErrInternal)

func (v *sparseSelView) NewChunk(layout.Coord, bool) (layout.Chunk, error) { return nil, errSelView }
func (v *sparseSelView) Encode(layout.Coord, layout.Chunk) (layout.Encoded, error) {
	return layout.Encoded{}, errSelView
}
func (v *sparseSelView) Insert(context.Context, []layout.Insertion) error { return errSelView }
func (v *sparseSelView) Publish(_ context.Context, ins []layout.Insertion, _ error) error {
	return errSelView
}
func (v *sparseSelView) Gather(layout.Chunk, layout.Piece) error { return errSelView }
func (v *sparseSelView) Trim(layout.Coord, layout.Chunk, []uint64) (bool, error) {
	return false, nil
}

// SelectionFilters returns a Sparse dataset's pipeline for its selection
// sections (nil for other layouts).
func (d *Dataset) SelectionFilters() []Filter {
	l, ok := asLayout[*sparseLayout](d.s)
	if !ok {
		return nil
	}
	specs := l.selPipe.Specs()
	out := make([]Filter, len(specs))
	for i, sp := range specs {
		out[i] = Filter{sp}
	}
	return out
}

func (l *sparseLayout) kind() LayoutKind { return Sparse }

// admitBytes: a sparse chunk takes at most one run (12 bytes) and one
// value per element.
func (l *sparseLayout) admitBytes() int64 { return l.memFor(l.elems) }

// registerViews registers the selection view. Caller holds s.mu.
func (l *sparseLayout) registerViews() error {
	s := l.s
	// No reservation: the view borrows the cache like any reader.
	v, err := s.f.cfile.RegisterDataset(s.id|selViewBit, l.view, cache.DatasetOptions{MinBytes: -1})
	if err != nil {
		return classify(err)
	}
	s.mu.vcds = v
	return nil
}

// viewDataset is the sparse selection view's cache dataset.
func (s *dsState) viewDataset() (*cache.Dataset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.vcds == nil {
		return nil, ErrClosed
	}
	return s.mu.vcds, nil
}

// Condense reallocates a sparse chunk's runs and values to their lengths.
func (l *sparseLayout) Condense(_ layout.Coord, chunk layout.Chunk) layout.Chunk {
	c, ok := chunk.(*sparseChunk)
	if !ok || cap(c.runs) == len(c.runs) && cap(c.data) == len(c.data) {
		return nil
	}
	return &sparseChunk{runs: clipRuns(c.runs), data: clipBytes(c.data), gen: c.gen}
}

// PartBlocks reads the whole frame: values need both sections. (Reads
// that only ask where elements are defined go to the selection view,
// below, which reads the header and selection section alone.)
func (l *sparseLayout) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	return wholeFrame(loc, pieces, pieceData, pieceDefined, pieceValues)
}

// ReadPart decodes the frame read (Decode checks each section against its
// own checksum and the frame against the index's) and serves the pieces;
// nothing is kept.
func (l *sparseLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	return decodeServe(l, coord, loc, pieces, bufs[0])
}

// PartBlocks: the selection view's stored image is already the frame's
// header and selection section (Lookup), read whole.
func (v *sparseSelView) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	return wholeFrame(loc, pieces, pieceDefined)
}

// ReadPart decodes the selection read (Decode verifies it) and serves
// the pieces; nothing is kept.
func (v *sparseSelView) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	return decodeServe(v, coord, loc, pieces, bufs[0])
}
