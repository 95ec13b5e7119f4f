package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/internal/bufpool"
)

// The contiguous layout (SCC internal API, SCC requirements §3.4): a
// fixed-shape dataset stored as one extent of the file, its elements in C
// order, with no chunk index. It goes through the shared cache like any
// other dataset, in pieces the layout defines: runs of whole rows along
// the first dimension of about contigPieceBytes each (the piece shape is
// the header's Chunk field), so a contiguous dataset shares the budget
// and the cache's I/O machinery, and a piece is the unit of its checksums.
// Pieces not resident are read directly: whole ones into the caller's
// buffer (DirectTarget, below), and, above the cache's bypass threshold,
// parts of them by reading the whole pieces into pooled buffers
// (PartBlocks, ReadPart, below; engine/directpart.go), where whole pieces
// are also written directly (DirectSource).
//
// Crash safety without a chunk index: the committed extent is never
// written over (DESIGN.md "No data loss"). The first piece written back
// after a commit allocates a working extent of the whole size; pieces are
// written there at their fixed offsets; the next commit copies the pieces
// not rewritten since from the committed extent (or writes the fill value
// for a dataset never stored), records every piece's CRC32C in the
// header's LayoutParams and makes the working extent the committed one.
// A commit of a dataset with any modified piece therefore writes the whole
// extent: contiguous storage suits small datasets, and is the default only
// for them (contigDefaultMax).
//
// Nor is the working copy of a piece written over: once a piece is in the
// working extent, that copy may be the only one of an acknowledged write
// (a direct write keeps nothing in memory, an evicted piece is dropped),
// and a write over it that fails part way would lose it and leave bytes
// no checksum describes. So a piece's writes alternate between its fixed
// place and a side slot of its own: each goes where the current copy is
// not, and only a successful write moves the current copy (Publish). A
// failed write leaves the piece as it was, and space nothing references
// torn. The commit copies a piece whose current copy is in its side slot
// to its fixed place, checked against its checksum, before it names the
// extent.
//
// A commit moves pieces the cache does not know moved: every piece not
// rewritten since the last commit goes from the committed extent to the
// working one, a piece in its side slot to its fixed place. A read or a
// load of a piece that is not resident looks its place up and reads it
// later, holding the piece in the serializer, which keeps writes of the
// piece out but not the commit. So the space a commit stops naming (the
// old extent, the side slots) is retired, not freed: the next commit
// first waits for the dataset's requests that started before it
// (contigLayout.drain, an exclusive hold in the serializer) and frees it
// then. Freed at once, it was handed out and written while such a read
// had still to read it, which then failed its checksum (ErrCorrupt for a
// race: TestContiguousReadDuringCommit).
//
// LayoutParams (FORMAT.md §17): u8 version 1, u64 extent address (0: never
// stored, every element is the fill value), u32 piece count P, P × u32
// CRC32C of each piece's bytes.

// layoutContig is the header's layout code for contiguous datasets.
const layoutContig = format.LayoutContiguous

// Contiguous is the contiguous layout: one extent, no chunk index (see
// engine/contig.go); for fixed-shape datasets only.
const Contiguous LayoutKind = 2

// contigPieceBytes is the size of the pieces a contiguous dataset goes
// through the cache in: whole rows along the first dimension, at least
// one row.
const contigPieceBytes = 64 << 10

// contigDefaultMax is the largest dataset that is contiguous by default:
// a fixed-shape DatasetSpec with no Chunk shape and at most this many
// bytes gets the contiguous layout (HDF5's default for datasets created
// without chunking). Larger ones need a chunk shape, or Layout:
// Contiguous explicitly (every commit that changes one rewrites it
// whole).
const contigDefaultMax = 1 << 20

// contigMaxPieces bounds the piece count, so the checksum table fits a
// header part (FORMAT.md §12).
const contigMaxPieces = (format.MaxPartBytes - 13) / 4

const contigParamsVersion = 1

// contigGeometry is a contiguous dataset's piece shape for its extent.
func contigGeometry(shape []uint64, elemSize int) (piece []uint64, rowBytes uint64) {
	rowBytes = uint64(elemSize)
	piece = make([]uint64, len(shape))
	for d := 1; d < len(shape); d++ {
		piece[d] = max(shape[d], 1)
		rowBytes *= piece[d]
	}
	piece[0] = max(1, min(max(shape[0], 1), contigPieceBytes/rowBytes))
	return piece, rowBytes
}

// contigState is a contiguous dataset's committed storage.
type contigState struct {
	base int64    // extent address; 0 when never stored
	sums []uint32 // CRC32C of each piece
}

func encodeContigParams(st contigState) []byte {
	b := []byte{contigParamsVersion}
	b = binary.LittleEndian.AppendUint64(b, uint64(st.base))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(st.sums)))
	for _, s := range st.sums {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return b
}

func decodeContigParams(b []byte, pieces uint64) (contigState, error) {
	var st contigState
	if len(b) < 13 || b[0] != contigParamsVersion {
		return st, fmt.Errorf("%w: contiguous layout parameters of %d bytes (unknown version)", ErrCorrupt, len(b))
	}
	base := binary.LittleEndian.Uint64(b[1:])
	n := uint64(binary.LittleEndian.Uint32(b[9:]))
	if uint64(len(b)-13) != 4*n {
		return st, fmt.Errorf("%w: contiguous layout parameters: %d pieces in %d bytes", ErrCorrupt, n, len(b))
	}
	switch {
	case base == 0 && n != 0, base != 0 && n != pieces:
		return st, fmt.Errorf("%w: contiguous layout parameters: %d piece checksums, extent at %d, %d pieces", ErrCorrupt, n, base, pieces)
	case base != 0 && (base < format.DataStart || base >= 1<<62):
		return st, fmt.Errorf("%w: contiguous extent at %d", ErrCorrupt, base)
	}
	st.base = int64(base)
	if n > 0 {
		st.sums = make([]uint32, n)
		for i := range st.sums {
			st.sums[i] = binary.LittleEndian.Uint32(b[13+4*i:])
		}
	}
	return st, nil
}

// contigLayout implements the cache's layout callbacks for a contiguous
// dataset.
//
// Concurrency: mu guards the committed and working extents. Insert and
// Publish count insertions in flight; the commit (commitParams) waits
// for them to drain and keeps new ones out while it copies, so no piece
// is written by the cache and by the copy at once; a piece has at most
// one write in flight (busy), as each write's target depends on where the
// one before it went. The copy holds mu, so
// misses (Lookup) of the dataset wait for it too: a commit of a changed
// contiguous dataset costs one pass over the extent, which is why the
// layout is the default only for small datasets; hits do not wait.
type contigLayout struct {
	s        *dsState
	rows     uint64 // rows per piece
	rowBytes int64
	pieces   uint64
	size     int64 // bytes of the extent

	mu struct {
		sync.Mutex
		cond      *sync.Cond // signalled when inflight drops or committing ends
		committed contigState
		wbase     int64 // working extent; 0 when none
		wsums     []uint32
		// cur is where the current copy of each piece published since the
		// last commit is: its fixed place in the working extent or its
		// side slot; 0 for a piece not written since.
		cur []int64
		// side is each piece's side slot (0: none yet); busy marks the
		// pieces with a write in flight, so that two writes of a piece
		// never get the same target.
		side       []int64
		busy       []bool
		inflight   int
		committing bool
		// retired is space a commit stopped naming (the extent it
		// replaced, the side slots it copied from), kept allocated until
		// the requests that may have looked it up have ended (drain).
		// gen counts the commits that retired space; drained is the
		// last of them whose requests have ended.
		retired      []contigRetired
		gen, drained uint64
		// closeDrained: Close drained the dataset's requests (drain with
		// closing) and refuses new ones, so its commit frees at once.
		closeDrained bool
	}
}

// contigRetired is space retired by commit gen.
type contigRetired struct {
	off, size int64
	gen       uint64
}

var _ layout.Layout = (*contigLayout)(nil)

func newContigLayout(s *dsState, shape []uint64, params []byte) (*contigLayout, error) {
	piece, rowBytes := contigGeometry(shape, s.elemSize)
	if !equal(piece, s.chunk) {
		return nil, fmt.Errorf("%w: contiguous dataset %q: piece shape %v, want %v", ErrCorrupt, s.name, s.chunk, piece)
	}
	l := &contigLayout{s: s, rows: piece[0], rowBytes: int64(rowBytes)}
	l.size = int64(rowBytes * shape[0])
	if l.size > 0 {
		l.pieces = ceilDiv(shape[0], l.rows)
	}
	if l.pieces > contigMaxPieces {
		return nil, fmt.Errorf("%w: contiguous dataset %q of %d pieces", ErrCorrupt, s.name, l.pieces)
	}
	st, err := decodeContigParams(params, l.pieces)
	if err != nil {
		return nil, err
	}
	l.mu.cond = sync.NewCond(&l.mu.Mutex)
	l.mu.committed = st
	return l, nil
}

// piece returns piece p's offset in the extent and its stored size.
func (l *contigLayout) piece(p uint64) (int64, int64) {
	off := int64(p*l.rows) * l.rowBytes
	return off, min(int64(l.rows)*l.rowBytes, l.size-off)
}

func (l *contigLayout) ChunkDims() []uint64 { return l.s.chunk }

func (l *contigLayout) Lookup(_ context.Context, coords []layout.Coord, locs []layout.Location) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range coords {
		p := c[0]
		loc := layout.Location{SizeHint: int64(bufpool.Cap(int(l.s.chunkBytes)))}
		for _, x := range c[1:] {
			if x != 0 {
				return fmt.Errorf("%w: contiguous piece %v", ErrInternal, []uint64(c))
			}
		}
		if p < l.pieces {
			off, size := l.piece(p)
			switch {
			case l.mu.wbase != 0 && l.mu.cur[p] != 0:
				loc.Addr, loc.Size, loc.Sum = l.mu.cur[p], size, l.mu.wsums[p]
			case l.mu.committed.base != 0:
				loc.Addr, loc.Size, loc.Sum = l.mu.committed.base+off, size, l.mu.committed.sums[p]
			}
		}
		locs[i] = loc
	}
	return nil
}

func (l *contigLayout) NewChunk(_ layout.Coord, fill bool) (layout.Chunk, error) {
	return &denseChunk{buf: newChunkBuf(l.s, fill)}, nil
}

func (l *contigLayout) Evict(_ layout.Coord, chunk layout.Chunk) {
	if c, ok := chunk.(*denseChunk); ok {
		bufpool.Put(c.buf)
		c.buf = nil
	}
}

// Decode checks a piece read from the extent against the checksum the
// header (or the working table) records for it. The rows past the
// extent's end in the last piece hold the fill value.
func (l *contigLayout) Decode(coord layout.Coord, loc layout.Location, image []byte) (layout.Chunk, error) {
	if format.Checksum(image) != loc.Sum {
		bufpool.Put(image)
		return nil, fmt.Errorf("%w: contiguous dataset %q piece %d at %d: checksum mismatch", ErrCorrupt, l.s.name, coord[0], loc.Addr)
	}
	buf := bufpool.Get(int(l.s.chunkBytes))
	n := copy(buf, image)
	bufpool.Put(image)
	if n < len(buf) {
		if l.s.fill != nil {
			selection.FillChunk(buf[n:], l.s.elemSize, l.s.fill)
		} else {
			clear(buf[n:])
		}
	}
	return &denseChunk{buf: buf}, nil
}

// Encode is the piece's rows inside the extent, unfiltered (contiguous
// datasets have no filters), with their checksum.
func (l *contigLayout) Encode(coord layout.Coord, chunk layout.Chunk) (layout.Encoded, error) {
	c := chunk.(*denseChunk)
	if coord[0] >= l.pieces {
		return layout.Encoded{}, fmt.Errorf("%w: contiguous piece %d of %d", ErrInternal, coord[0], l.pieces)
	}
	_, size := l.piece(coord[0])
	img := bufpool.Get(int(size))[:size]
	copy(img, c.buf)
	return layout.Encoded{Image: img, Sum: format.Checksum(img), Pooled: true}, nil
}

// Insert places each piece in the working extent, allocating it on the
// first write-back after a commit: at its fixed place, or in its side
// slot when the current copy is at the fixed place (see the top of the
// file). A piece with a write in flight waits for it.
func (l *contigLayout) Insert(_ context.Context, ins []layout.Insertion) error {
	for _, in := range ins {
		if p := in.Coord[0]; p >= l.pieces {
			return fmt.Errorf("%w: contiguous piece %d of %d", ErrInternal, p, l.pieces)
		} else if _, size := l.piece(p); size != in.Size {
			return fmt.Errorf("%w: contiguous piece %d of %d bytes, want %d", ErrInternal, p, in.Size, size)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.mu.committing || l.anyBusyLocked(ins) {
		l.mu.cond.Wait()
	}
	if l.mu.wbase == 0 {
		base, err := l.s.f.space.alloc(l.size)
		if err != nil {
			return err
		}
		l.mu.wbase = base
		l.mu.wsums = make([]uint32, l.pieces)
		l.mu.cur = make([]int64, l.pieces)
		l.mu.side = make([]int64, l.pieces)
		l.mu.busy = make([]bool, l.pieces)
	}
	for i := range ins {
		p := ins[i].Coord[0]
		off, size := l.piece(p)
		addr := l.mu.wbase + off
		if l.mu.cur[p] == addr {
			if l.mu.side[p] == 0 {
				a, err := l.s.f.space.alloc(size)
				if err != nil {
					return err // nothing is marked busy yet
				}
				l.mu.side[p] = a
			}
			addr = l.mu.side[p]
		}
		ins[i].New = layout.Location{Addr: addr, Size: size, Sum: ins[i].Sum, SizeHint: int64(bufpool.Cap(int(l.s.chunkBytes)))}
	}
	for _, in := range ins {
		l.mu.busy[in.Coord[0]] = true
	}
	l.mu.inflight += len(ins)
	return nil
}

func (l *contigLayout) anyBusyLocked(ins []layout.Insertion) bool {
	if l.mu.busy == nil {
		return false
	}
	for _, in := range ins {
		if l.mu.busy[in.Coord[0]] {
			return true
		}
	}
	return false
}

// Publish makes a written piece's new copy the current one. A failed
// write changes nothing: it went where the current copy is not.
func (l *contigLayout) Publish(_ context.Context, ins []layout.Insertion, writeErr error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, in := range ins {
		p := in.Coord[0]
		l.mu.busy[p] = false
		if writeErr == nil {
			l.mu.cur[p], l.mu.wsums[p] = in.New.Addr, in.Sum
		}
	}
	if writeErr == nil {
		l.s.dirty.Store(true)
	}
	l.mu.inflight -= len(ins)
	l.mu.cond.Broadcast()
	return nil
}

func (l *contigLayout) Scatter(chunk layout.Chunk, p layout.Piece) error {
	return l.ScatterFlat(chunk.(*denseChunk).buf, p)
}

// FlatBytes is the chunk's buffer (layout.FlatScatterer), fixed from
// NewChunk or Decode to Evict as for the dense layout.
func (l *contigLayout) FlatBytes(chunk layout.Chunk) []byte {
	if c, ok := chunk.(*denseChunk); ok {
		return c.buf
	}
	return nil
}

// ScatterFlat is Scatter out of the chunk buffer buf.
func (l *contigLayout) ScatterFlat(buf []byte, p layout.Piece) error {
	pc := p.(*piece)
	selection.Scatter(pc.buf, pc.bufShape, buf, l.s.chunk, pc.p, l.s.elemSize)
	return nil
}

var _ layout.FlatScatterer = (*contigLayout)(nil)

func (l *contigLayout) ScatterFill(p layout.Piece) error {
	pc := p.(*piece)
	selection.FillBuf(pc.buf, pc.bufShape, pc.p, l.s.elemSize, l.s.fill)
	return nil
}

func (l *contigLayout) Gather(chunk layout.Chunk, p layout.Piece) error {
	pc := p.(*piece)
	if pc.kind != pieceData {
		return fmt.Errorf("%w: contiguous write with piece kind %d", ErrInternal, pc.kind)
	}
	selection.Gather(chunk.(*denseChunk).buf, l.s.chunk, pc.buf, pc.bufShape, pc.p, l.s.elemSize)
	return nil
}

// Trim is never needed: a contiguous dataset's extent does not change.
func (l *contigLayout) Trim(layout.Coord, layout.Chunk, []uint64) (bool, error) { return false, nil }

// commitParams is the commit's step for a contiguous dataset (run by
// writeHeader before it encodes the header): it completes the working
// extent, if there is one, by copying every piece not rewritten since the
// last commit from the committed extent (or writing the fill value) and
// every piece whose current copy is in its side slot from there, makes
// it the committed extent, retires the old one and the side slots (see
// drain; a closing commit frees them), and
// returns the LayoutParams that name it. On error nothing is switched and the copy is
// redone by the next commit.
func (l *contigLayout) commitParams(ctx context.Context) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.committing = true
	defer func() {
		l.mu.committing = false
		l.mu.cond.Broadcast()
	}()
	for l.mu.inflight > 0 {
		l.mu.cond.Wait()
	}
	if l.mu.wbase == 0 {
		return encodeContigParams(l.mu.committed), nil
	}
	old := l.mu.committed
	var fillPiece []byte
	for p := uint64(0); p < l.pieces; p++ {
		off, size := l.piece(p)
		if l.mu.cur[p] == l.mu.wbase+off {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var b []byte
		if at := l.mu.cur[p]; at != 0 {
			// The current copy is in the side slot.
			b = make([]byte, size)
			if err := readFull(l.s.f.drv, b, at); err != nil {
				return nil, err
			}
			if format.Checksum(b) != l.mu.wsums[p] {
				return nil, fmt.Errorf("%w: contiguous dataset %q piece %d at %d: checksum mismatch", ErrCorrupt, l.s.name, p, at)
			}
		} else if old.base != 0 {
			b = make([]byte, size)
			if err := readFull(l.s.f.drv, b, old.base+off); err != nil {
				return nil, err
			}
			if format.Checksum(b) != old.sums[p] {
				return nil, fmt.Errorf("%w: contiguous dataset %q piece %d: checksum mismatch", ErrCorrupt, l.s.name, p)
			}
		} else {
			if fillPiece == nil {
				fillPiece = make([]byte, int64(l.rows)*l.rowBytes)
				if l.s.fill != nil {
					selection.FillChunk(fillPiece, l.s.elemSize, l.s.fill)
				}
			}
			b = fillPiece[:size]
		}
		if err := l.s.f.writeFull(b, l.mu.wbase+off); err != nil {
			return nil, err
		}
		l.mu.cur[p], l.mu.wsums[p] = l.mu.wbase+off, format.Checksum(b)
	}
	// The old extent and the side slots are not freed here: a read or a
	// load of a piece that is not resident looks its place up and reads
	// it later, holding the piece in the serializer but nothing the
	// commit waits for, and the copy above moved the piece behind the
	// cache's back. Freed now, the space could be handed out and written
	// before that read. A closing commit frees them: Close drained the
	// dataset's requests first (File.drainRetired) and refuses new ones.
	closing := l.mu.closeDrained
	l.mu.gen++
	retire := func(off, size int64) {
		if closing {
			// Replaced by the working extent this commit names
			// (space.freeReplaced: the image's free-space map holds it).
			l.s.f.space.freeReplaced(off, size)
			return
		}
		l.mu.retired = append(l.mu.retired, contigRetired{off: off, size: size, gen: l.mu.gen})
	}
	for p, a := range l.mu.side {
		if a != 0 {
			_, size := l.piece(uint64(p))
			retire(a, size)
		}
	}
	if old.base != 0 {
		retire(old.base, l.size)
	}
	l.mu.committed = contigState{base: l.mu.wbase, sums: l.mu.wsums}
	l.mu.wbase, l.mu.wsums, l.mu.cur, l.mu.side, l.mu.busy = 0, nil, nil, nil, nil
	return encodeContigParams(l.mu.committed), nil
}

// drain frees the space earlier commits retired, once the requests that
// may have looked it up have ended: every request on the dataset holds its
// region in the serializer from before its lookups until after its reads,
// so an exclusive hold taken now waits exactly for those that started
// before it. The space is freed outside a commit, so it becomes reusable
// after the next one (alloc's pending state). closing drains a dataset
// with a working extent too: the closing commit frees what it retires at
// once. Called before the commit takes commitMu (the serializer is the
// outer lock), and never while this dataset's commitParams runs.
func (l *contigLayout) drain(ctx context.Context, closing bool) error {
	l.mu.Lock()
	gen := l.mu.gen
	need := gen > l.mu.drained && len(l.mu.retired) > 0 || closing && l.mu.wbase != 0
	l.mu.Unlock()
	if !need {
		return nil
	}
	if h := testHookContigDrain.Load(); h != nil {
		(*h)()
	}
	release, err := l.s.f.ser.AcquireExclusive(ctx, l.s.id)
	if err != nil {
		return err
	}
	release()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.drained = max(l.mu.drained, gen)
	l.mu.closeDrained = l.mu.closeDrained || closing
	keep := l.mu.retired[:0]
	for _, r := range l.mu.retired {
		if r.gen <= l.mu.drained {
			l.s.f.space.free(r.off, r.size)
		} else {
			keep = append(keep, r)
		}
	}
	clear(l.mu.retired[len(keep):])
	l.mu.retired = keep
	return nil
}

// testHookContigDrain, when set (tests only), runs when drain is about to
// wait for the dataset's requests: TestContiguousReadDuringCommit lets its
// paused read go on from there.
var testHookContigDrain atomic.Pointer[func()]

// adopt switches a read-only dataset to a newer committed header's extent.
func (l *contigLayout) adoptParams(params []byte) error {
	st, err := decodeContigParams(params, l.pieces)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.committed = st
	l.mu.Unlock()
	return nil
}

// committedExtent is the committed extent (size 0 when never stored) and
// its piece checksums.
func (l *contigLayout) committedExtent() (int64, int64, []uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.committed.base == 0 {
		return 0, 0, nil
	}
	return l.mu.committed.base, l.size, l.mu.committed.sums
}

// check verifies the committed extent's pieces against their checksums,
// for engine.Check.
func (l *contigLayout) check() error {
	base, _, sums := l.committedExtent()
	if base == 0 {
		return nil
	}
	for p := uint64(0); p < l.pieces; p++ {
		off, size := l.piece(p)
		b := make([]byte, size)
		if err := readFull(l.s.f.drv, b, base+off); err != nil {
			return err
		}
		if format.Checksum(b) != sums[p] {
			return fmt.Errorf("%w: contiguous dataset %q piece %d: checksum mismatch", ErrCorrupt, l.s.name, p)
		}
	}
	return nil
}

// storage is Dataset.Storage for a contiguous dataset: its pieces count
// as chunks once the extent is stored.
func (l *contigLayout) storage() Storage {
	base, size, _ := l.committedExtent()
	if base == 0 {
		return Storage{}
	}
	return Storage{Chunks: int(l.pieces), StoredBytes: uint64(size)}
}

// withContiguous applies the contiguous default and fills in a
// contiguous spec's piece shape (Chunk). s.MaxShape is set.
func (s DatasetSpec) withContiguous() (DatasetSpec, error) {
	if s.Layout == Chunked && s.Chunk == nil && len(s.Filters) == 0 && equal(s.Shape, s.MaxShape) {
		if n, ok := specBytes(s.Shape, s.Type.Size()); ok && n <= contigDefaultMax {
			s.Layout = Contiguous
		}
	}
	if s.Layout != Contiguous {
		return s, nil
	}
	if s.Chunk != nil {
		return s, fmt.Errorf("%w: a contiguous dataset takes no chunk shape", ErrInvalid)
	}
	if !equal(s.Shape, s.MaxShape) {
		return s, fmt.Errorf("%w: a contiguous dataset has a fixed shape (max shape %v, shape %v)", ErrInvalid, s.MaxShape, s.Shape)
	}
	n, ok := specBytes(s.Shape, s.Type.Size())
	if !ok {
		return s, fmt.Errorf("%w: contiguous dataset of shape %v is too large", ErrInvalid, s.Shape)
	}
	piece, rowBytes := contigGeometry(s.Shape, s.Type.Size())
	if n > 0 && ceilDiv(s.Shape[0], piece[0]) > contigMaxPieces || rowBytes > maxChunkBytes {
		return s, fmt.Errorf("%w: contiguous dataset of shape %v is too large (at most %d pieces of %d rows)", ErrInvalid, s.Shape, contigMaxPieces, piece[0])
	}
	s.Chunk = piece
	return s, nil
}

// specBytes is the size of an extent, and false on overflow.
func specBytes(shape []uint64, es int) (uint64, bool) {
	n := uint64(es)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

var _ layout.DirectReader = (*contigLayout)(nil)

// DirectTarget lets a read that selects a whole piece, contiguous in the
// caller's buffer, go from the extent straight into the caller's buffer
// (cache/direct.go): the stored piece is the caller's bytes, with no
// trailer; VerifyDirect checks them against the piece's checksum. The
// last piece, shorter than the piece shape when the rows do not divide,
// and pieces under directMin stay on the cached path.
func (l *contigLayout) DirectTarget(loc layout.Location, p layout.Piece) ([]byte, int, bool) {
	if l.s.chunkBytes < directMin || loc.Size != l.s.chunkBytes {
		return nil, 0, false
	}
	dst, ok := (&denseLayout{indexedStorage: indexedStorage{l.s}}).wholeRun(p)
	if !ok {
		return nil, 0, false
	}
	return dst, 0, true
}

// VerifyDirect checks a piece read directly against the checksum the
// header (or the working table) records for it.
func (l *contigLayout) VerifyDirect(coord layout.Coord, loc layout.Location, dst, _ []byte) error {
	if format.Checksum(dst) != loc.Sum {
		return fmt.Errorf("%w: contiguous dataset %q piece %d at %d: checksum mismatch", ErrCorrupt, l.s.name, coord[0], loc.Addr)
	}
	return nil
}

// contigLayout keeps one extent and no index.

func (l *contigLayout) kind() LayoutKind { return Contiguous }

// maxStored: a contiguous dataset's chunk is a piece of its extent.
func (l *contigLayout) maxStored() int64 { return l.s.chunkBytes }

func (l *contigLayout) admitBytes() int64 { return l.s.chunkBytes }

func (l *contigLayout) registerViews() error { return nil }

func (l *contigLayout) chunkIndex() (*lazyIndex, bool) { return nil, false }

func (l *contigLayout) checkChunk([]uint64, layout.Chunk, []uint64) error { return nil }

func (l *contigLayout) checkExtent(dims []uint64) error {
	if !equal(dims, l.s.shape()) {
		return fmt.Errorf("%w: a contiguous dataset's extent is fixed", ErrInvalid)
	}
	return nil
}

func (l *contigLayout) commit(ctx context.Context) (root, params []byte, err error) {
	params, err = l.commitParams(ctx)
	return nil, params, err
}

func (l *contigLayout) checkAdopt(hdr format.DatasetHeader) error {
	_, err := decodeContigParams(hdr.LayoutParams, l.pieces)
	return err
}

func (l *contigLayout) adopt(hdr format.DatasetHeader) error { return l.adoptParams(hdr.LayoutParams) }

func (l *contigLayout) usage(context.Context) (Storage, error) { return l.storage(), nil }

func (l *contigLayout) chunkExtents(context.Context) ([]ChunkExtent, error) {
	base, size, _ := l.committedExtent()
	if base == 0 {
		return nil, nil
	}
	return []ChunkExtent{{Off: base, Size: size}}, nil // one extent, no chunks
}

func (l *contigLayout) liveExtents(_ context.Context, live []alloc.Extent) ([]alloc.Extent, error) {
	if base, size, _ := l.committedExtent(); base != 0 {
		live = append(live, alloc.Extent{Off: base, Size: size})
	}
	return live, nil
}

func (l *contigLayout) checkStored(_ context.Context, name string, c *checkRun) error {
	base, size, _ := l.committedExtent()
	if base == 0 {
		return nil
	}
	c.add(base, size, "contiguous extent of "+name)
	if err := l.check(); err != nil {
		c.problem("dataset %q: %v", name, err)
		return nil
	}
	c.r.Chunks += int(l.pieces)
	return nil
}

// PartBlocks reads a whole piece for any part of it: its checksum covers
// all of it. The last piece, shorter than the piece shape when the rows do
// not divide, stays on the cached path (Scatter works on a full piece).
func (l *contigLayout) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	if loc.Size != l.s.chunkBytes || !readPieces(pieces, pieceData) {
		return nil, false
	}
	return []layout.Block{{Len: loc.Size}}, true
}

// ReadPart verifies the piece read and copies the parts the pieces select
// to the caller's buffer.
func (l *contigLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, _ []layout.Block, bufs [][]byte) error {
	b := bufs[0]
	defer bufpool.Put(b)
	if err := l.VerifyDirect(coord, loc, b, nil); err != nil {
		return err
	}
	for _, p := range pieces {
		pc := p.(*piece)
		selection.Scatter(pc.buf, pc.bufShape, b, l.s.chunk, pc.p, l.s.elemSize)
	}
	return nil
}

// DirectSource lets a write of a whole piece, contiguous in the caller's
// buffer, go from it to the file (cache/directwrite.go decides when: pieces
// above the cache's bypass threshold). Insert places it in the working
// extent, never the committed one, so a crash before the commit leaves the
// committed extent as it was. The short last piece stays on the cached path.
func (l *contigLayout) DirectSource(coord layout.Coord, p layout.Piece) ([]byte, bool) {
	if coord[0] >= l.pieces {
		return nil, false
	}
	if _, size := l.piece(coord[0]); size != l.s.chunkBytes {
		return nil, false
	}
	if pc, ok := p.(*piece); !ok || pc.kind != pieceData {
		return nil, false
	}
	return (&denseLayout{indexedStorage: indexedStorage{l.s}}).wholeRun(p)
}

// DirectFrame: a stored piece is its bytes, with no frame; its checksum
// goes to the working table (Publish).
func (l *contigLayout) DirectFrame(_ layout.Coord, src []byte) (head, tail []byte, sum uint32) {
	return nil, nil, format.Checksum(src)
}

// DirectFrameLate and SealFrame: with no frame, a late checksum only
// waits for Publish (cache/latesum.go).
func (l *contigLayout) DirectFrameLate(layout.Coord, []byte) (head, tail []byte) { return nil, nil }

func (l *contigLayout) SealFrame(_ layout.Coord, src, _ []byte) uint32 { return format.Checksum(src) }

var _ layout.LateFramer = (*contigLayout)(nil)
