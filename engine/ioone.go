package engine

import (
	"context"
	"math/bits"
	"unsafe"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/serialize"
)

// The single-chunk read (Dataset.read's first step).
//
// A read whose selection is one block per dimension (a Box, or blocks
// that touch) inside the extent and inside one chunk is the common small
// read. For it, io's general path did the same work three times: the
// serializer's chunk box (regionInto, two divisions per dimension), the
// serializer's check of that box (TryFastRead), the fused prepare
// (prepareOne) and then, in the layout, the generic box copy re-deriving
// byte offsets from the runs (selection.Scatter). readOne does it in one
// pass:
//
//  1. the fast serializer hold is taken on the dataset alone
//     (serialize.TryFastReadDataset): a fast hold conflicts with writers
//     per dataset shard, never per box, so the box is not needed to take
//     it; the box is built only if the read falls back to the locked path;
//  2. under it (the extent cannot change, see io.go), one loop over the
//     dimensions validates the selection against the extent and the
//     buffer, finds the chunk (a shift when the chunk's edge is a power of
//     two), builds the same request prepareOne builds, and a byte-level
//     copy plan (rowCopy) that the dense layout's Scatter runs instead of
//     the generic kernel;
//  3. cache.ServeResident serves it if the chunk is resident.
//
// Anything else — another selection shape, a selection crossing a chunk
// edge or the extent, a wrong buffer, a writer registered on the shard —
// returns "not done" having decided nothing, and io takes its general
// path unchanged, which also reports every error. A chunk that is not
// resident returns the built request, and io goes straight to the locked
// path with it (the fast attempt has been made). Byte order and type
// conversion do not arise: Read's buffer holds the stored element bytes.

// rowCopy is the byte-level copy of one box out of a dense chunk into the
// caller's packed buffer: the box's trailing dimensions that span the
// whole chunk are folded into one contiguous run, and the remaining outer
// dimensions are walked. The buffer side is packed, so it advances by one
// run per run.
type rowCopy struct {
	c0    uint64 // byte offset of the box's first element in the chunk
	run   uint64 // bytes per contiguous run
	outer int    // outer dimensions walked (0: one run)
	// Per outer dimension (at most the scratch's rank, 8):
	count [8]uint64 // runs along it
	cstep [8]uint64 // chunk bytes between runs along it
	idx   [8]uint64 // walk state (outer >= 2)
}

// scatter copies the box from chunk to dst.
func (rc *rowCopy) scatter(dst, chunk []byte) {
	n := rc.run
	c := rc.c0
	switch rc.outer {
	case 0:
		copy(dst[:n], chunk[c:c+n])
		return
	case 1:
		step := rc.cstep[0]
		if n == 4 || n == 8 || n == 16 {
			if rc.shortRows(dst, chunk) {
				return
			}
		}
		b := uint64(0)
		for i := rc.count[0]; i > 0; i-- {
			copy(dst[b:b+n], chunk[c:c+n])
			b += n
			c += step
		}
		return
	}
	last := rc.outer - 1
	idx := rc.idx[:rc.outer]
	clear(idx)
	b := uint64(0)
	for {
		step := rc.cstep[last]
		for i := rc.count[last]; i > 0; i-- {
			copy(dst[b:b+n], chunk[c:c+n])
			b += n
			c += step
		}
		c -= rc.count[last] * step
		d := last - 1
		for ; d >= 0; d-- {
			idx[d]++
			c += rc.cstep[d]
			if idx[d] < rc.count[d] {
				break
			}
			c -= rc.count[d] * rc.cstep[d]
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// shortRows is scatter's walk of one outer dimension for rows of 4, 8 or
// 16 bytes, as fixed-size moves rather than memmove calls, with the
// bounds checked once for the whole walk (its last row's ends) rather
// than twice a row: for the few bytes of a short row the checks were
// most of the loop. It reports false, having copied nothing, when the
// walk does not fit dst and chunk (scatter's checked loop then panics as
// any out-of-range copy does).
func (rc *rowCopy) shortRows(dst, chunk []byte) bool {
	n, c, step, cnt := rc.run, rc.c0, rc.cstep[0], rc.count[0]
	if cnt == 0 {
		return true
	}
	hi, total := bits.Mul64(n, cnt)
	hi2, span := bits.Mul64(step, cnt-1)
	last := c + span
	if hi != 0 || hi2 != 0 || last < c || total > uint64(len(dst)) || last > uint64(len(chunk)) || n > uint64(len(chunk))-last {
		return false
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(chunk))
	// Offsets, not advancing pointers: every pointer formed is inside
	// its slice (a pointer one past the last row would not be).
	b := uintptr(0)
	o := uintptr(c)
	switch n {
	case 4:
		for i := cnt; i > 0; i-- {
			*(*[4]byte)(unsafe.Add(d, b)) = *(*[4]byte)(unsafe.Add(s, o))
			b += 4
			o += uintptr(step)
		}
	case 8:
		for i := cnt; i > 0; i-- {
			*(*[8]byte)(unsafe.Add(d, b)) = *(*[8]byte)(unsafe.Add(s, o))
			b += 8
			o += uintptr(step)
		}
	default:
		for i := cnt; i > 0; i-- {
			*(*[16]byte)(unsafe.Add(d, b)) = *(*[16]byte)(unsafe.Add(s, o))
			b += 16
			o += uintptr(step)
		}
	}
	return true
}

// readOne is the single-chunk read (see above). done true: the read is
// finished with err. done false: io takes its general path, with *p the
// request built here if the chunk was not resident (left empty
// otherwise). An inline box is read as it is, never expanded into a
// hyperslab. (p is an out parameter, not a result: the caller's copy of a
// returned prepared stalled on store forwarding, a tenth of a resident
// read.)
func (s *dsState) readOne(ctx context.Context, sel *Selection, buf []byte, sc *ioScratch, p *prepared) (done bool, err error) {
	r := len(s.chunk)
	if r == 0 || r > len(sc.coord) {
		return false, nil
	}
	var start, ext []uint64
	if sel.box {
		if int(sel.rank) != r {
			return false, nil
		}
		start, ext = sel.start[:r], sel.count[:r]
	} else {
		// The block's extents go to sc.coord, free until buildBlock's
		// plan (which has its own) is built: an array here would be
		// zeroed on every call, the inline box's too.
		if sel.slab == nil || !oneBlock(sel.slab, r, &sc.coord) {
			return false, nil
		}
		start, ext = sel.slab.Start, sc.coord[:r]
	}
	hold, ok := s.f.ser.TryFastReadDataset(s.id)
	if !ok {
		return false, nil
	}
	defer hold.Release()
	if s.deleted.Load() {
		return false, nil // the locked path says ErrDeleted
	}
	// See io.go: the extent cannot change while the dataset is held. The
	// cache dataset is loaded under the hold too, as prepare does.
	shape := s.mu.shape
	cds := s.hot.Load()
	if cds == nil || !sc.buildBlock(start, ext, shape, s.chunk, s.elemSize, buf, cds) {
		return false, nil
	}
	n, err := s.f.cache.ServeResident(ctx, false, sc.one[:])
	if err != nil {
		return true, classify(err)
	}
	if n == 1 {
		sc.hitReq = true // put keeps the request for the next read of the plan
		return true, nil
	}
	p.reqs, p.shape = sc.one[:], shape
	return false, nil
}

// oneBlock reports whether h, of rank r, is one block per dimension (one
// block, or blocks that touch) and writes the block's extent along each
// dimension to ext.
func oneBlock(h *selection.Hyperslab, r int, ext *[8]uint64) bool {
	if r > len(ext) || len(h.Start) != r || len(h.Count) != r || len(h.Block) != r || len(h.Stride) != r {
		return false
	}
	for d := 0; d < r; d++ {
		cnt, blk, st := h.Count[d], h.Block[d], h.Stride[d]
		if cnt == 0 || blk == 0 || st == 0 || cnt != 1 && st != blk {
			return false
		}
		hi, m := bits.Mul64(cnt, blk)
		if hi != 0 {
			return false // overflow: the general path says so
		}
		ext[d] = m
	}
	return true
}

// buildOne validates h (rank already checked against chunk) against the
// extent and buf and, if it is one block per dimension inside one chunk,
// builds sc.one[0] (as prepareOne does) with the copy plan sc.plan, and
// reports true; otherwise it reports false having decided nothing.
func (sc *ioScratch) buildOne(h selection.Hyperslab, shape, chunk []uint64, elemSize int, buf []byte, cds *cache.Dataset) bool {
	var ext [8]uint64
	if !oneBlock(&h, len(chunk), &ext) {
		return false
	}
	return sc.buildBlock(h.Start, ext[:len(chunk)], shape, chunk, elemSize, buf, cds)
}

// onePlan is what buildBlock builds for a block in one chunk — the
// chunk, the piece, the buffer's shape and the byte-level copy plan — and
// the block it was built for. Only buildBlock writes it (the general
// path's single-chunk cut has the scratch's other fields), so a block
// equal to the last one, in the same dataset under the same extent, reuses
// it as it is: a goroutine that reads the same shape at the same place
// again (a polled box, the resident-read benchmark) builds nothing but the
// request's pointers. The scratch comes back to the goroutine's P from
// the pool, so the plan usually survives from one call to the next.
type onePlan struct {
	// The key: the cache dataset (one per dataset state), the extent and
	// chunk slices by identity (SetExtent and adopt replace the extent,
	// never modify it; the chunk shape is fixed), the element size, the
	// buffer's length and the block. cds nil: no plan.
	cds          *cache.Dataset
	shape, chunk *uint64
	rank         int
	elemSize     int
	bufLen       int
	start, ext   [8]uint64
	// The plan.
	full     bool
	coord    [8]uint64
	bufShape [8]uint64
	runs     [8][]selection.Run
	runArr   [8]selection.Run
	sel      selection.Piece
	rows     rowCopy
}

// same reports whether the plan was built for this block.
func (pl *onePlan) same(start, ext, shape, chunk []uint64, elemSize int, buf []byte, cds *cache.Dataset) bool {
	r := len(chunk)
	if pl.cds != cds || pl.rank != r || r == 0 || len(shape) != r || len(start) != r || len(ext) != r ||
		pl.shape != &shape[0] || pl.chunk != &chunk[0] || pl.elemSize != elemSize || pl.bufLen != len(buf) {
		return false
	}
	for d := 0; d < r; d++ {
		if pl.start[d] != start[d] || pl.ext[d] != ext[d] {
			return false
		}
	}
	return true
}

// buildBlock is buildOne of the block of ext[d] elements from start[d]
// along each dimension d (rank checked by the caller).
func (sc *ioScratch) buildBlock(start, ext, shape, chunk []uint64, elemSize int, buf []byte, cds *cache.Dataset) bool {
	pl := &sc.plan
	r := len(chunk)
	kept := sc.planReq // the request of this plan is in place but for buf
	sc.planReq = false
	if !pl.same(start, ext, shape, chunk, elemSize, buf, cds) {
		if !pl.build(start, ext, shape, chunk, elemSize, buf) {
			return false
		}
		pl.cds, pl.shape, pl.chunk, pl.rank, pl.elemSize, pl.bufLen = cds, &shape[0], &chunk[0], r, elemSize, len(buf)
		copy(pl.start[:], start)
		copy(pl.ext[:], ext)
		kept = false
	}
	op := &sc.onePiece
	if kept {
		op.buf = buf
		return true
	}
	// Field by field: put left the rest of onePiece and one[0] zero, and
	// whole-struct stores of them were a tenth of this function.
	op.p, op.buf, op.bufShape, op.rows = &pl.sel, buf, pl.bufShape[:r], &pl.rows
	rq := &sc.one[0]
	rq.Dataset, rq.Coord, rq.Full, rq.Piece, rq.Memo = cds, layout.Coord(pl.sel.Coord), pl.full, op, &sc.memo
	return true
}

// build computes the plan for the block (see buildOne), dropping the key:
// false, having built nothing usable, for a block buildOne refuses.
func (pl *onePlan) build(start, ext, shape, chunk []uint64, elemSize int, buf []byte) bool {
	pl.cds = nil
	r := len(chunk)
	if len(shape) != r || len(start) != r || len(ext) != r || r == 0 || r > len(pl.coord) || elemSize <= 0 {
		return false
	}
	var off [8]uint64
	n := uint64(1)
	full := true
	for d := 0; d < r; d++ {
		m, st := ext[d], start[d]
		if m == 0 || st >= shape[d] || m > shape[d]-st {
			return false // empty or outside the extent: the general path says which
		}
		cd := chunk[d]
		var c uint64
		if cd&(cd-1) == 0 {
			c = st >> uint(bits.TrailingZeros64(cd))
		} else {
			c = st / cd
		}
		o := st - c*cd
		if m > cd-o {
			return false // crosses a chunk edge
		}
		var hi uint64
		if hi, n = bits.Mul64(n, m); hi != 0 {
			return false
		}
		off[d] = o
		pl.coord[d] = c
		pl.bufShape[d] = m
		pl.runArr[d] = selection.Run{Chunk: o, Buf: 0, Len: m}
		pl.runs[d] = pl.runArr[d : d+1 : d+1]
		full = full && m == cd
	}
	es := uint64(elemSize)
	if hi, nb := bits.Mul64(n, es); hi != 0 || uint64(len(buf)) != nb {
		return false
	}
	// The copy plan. Chunk strides in bytes fit: a chunk's size is bounded
	// by the header's limits (chunkBytes is an int64).
	rc := &pl.rows
	k := r - 1
	stride := es // chunk bytes per step along dimension k
	rc.c0 = off[k] * stride
	rc.run = pl.bufShape[k] * es
	for k > 0 && pl.bufShape[k] == chunk[k] {
		stride *= chunk[k]
		k--
		rc.c0 += off[k] * stride
		rc.run *= pl.bufShape[k]
	}
	rc.outer = k
	for d := k - 1; d >= 0; d-- {
		stride *= chunk[d+1]
		rc.count[d] = pl.bufShape[d]
		rc.cstep[d] = stride
		rc.c0 += off[d] * stride
	}
	p := &pl.sel
	p.Coord, p.Runs, p.N = pl.coord[:r], pl.runs[:r], n
	pl.full = full
	return true
}

// oneRegion is the serializer's region of the request buildOne built:
// its one chunk (what regionInto computes for that selection).
func (sc *ioScratch) oneRegion(id uint64, r int) serialize.Region {
	lo, hi := sc.lo[:r], sc.hi[:r]
	for d := range lo {
		lo[d] = sc.plan.coord[d]
		hi[d] = sc.plan.coord[d] + 1
	}
	return serialize.Region{Dataset: id, Lo: lo, Hi: hi}
}
