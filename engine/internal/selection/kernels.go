package selection

import "encoding/binary"

// The copy kernels. They are the dense-layout bodies of SCC internal API's
// H5SC_chunk_scatter_mem_t (Scatter: chunk → caller's buffer, and FillBuf for
// chunks that exist nowhere), H5SC_chunk_gather_mem_t (Gather: caller's
// buffer → chunk) and H5SC_chunk_fill_t (Trim after a shrinking set-extent,
// SCC internal API "H5Dset_extent()"; FillChunk for new chunks).
//
// Every kernel reduces a piece to as few copy() calls as the memory layout
// allows. Trailing dimensions that the piece covers completely, in the chunk
// and in the buffer alike, are contiguous in both, so they are folded into
// the last dimension that is not: a whole-chunk piece is one copy, a piece of
// whole rows one copy per run of rows. Only the dimensions in front of that
// are walked, index by index, with an odometer whose state lives in
// fixed-size arrays on the stack: the kernels never allocate.
//
// Preconditions: the piece fits chunkDims and bufShape (Piece.Check; always
// true for pieces from Split over a validated selection with Shape() as
// bufShape), and the buffers are at least ChunkLen / BufferLen long. A
// violation cannot write outside the slices: Go's bounds checks stop it with
// a panic, which is a programming error, not bad input.

type kernelOp uint8

const (
	opScatter kernelOp = iota // chunk → buf
	opGather                  // buf → chunk
	opFill                    // fill pattern → buf (chunk unused)
)

// Scatter copies the piece's elements from chunk (a dense chunk of chunkDims,
// C order) into dst, the caller's packed selection buffer of shape bufShape.
func Scatter(dst []byte, bufShape []uint64, chunk []byte, chunkDims []uint64, p *Piece, elemSize int) {
	if boxFast(opScatter, dst, bufShape, chunk, chunkDims, p.Runs, elemSize) {
		return
	}
	walk(opScatter, dst, bufShape, chunk, chunkDims, p.Runs, elemSize, fillValue{})
}

// Gather copies the piece's elements from src, the caller's packed selection
// buffer of shape bufShape, into chunk (a dense chunk of chunkDims, C order).
func Gather(chunk []byte, chunkDims []uint64, src []byte, bufShape []uint64, p *Piece, elemSize int) {
	if boxFast(opGather, src, bufShape, chunk, chunkDims, p.Runs, elemSize) {
		return
	}
	walk(opGather, src, bufShape, chunk, chunkDims, p.Runs, elemSize, fillValue{})
}

// FillBuf writes the fill value into the piece's places in dst, the caller's
// packed selection buffer of shape bufShape: the read of a chunk that exists
// nowhere. fill is one element (elemSize bytes); nil or empty means zero. A
// fill of another length is cut or zero-padded to elemSize.
func FillBuf(dst []byte, bufShape []uint64, p *Piece, elemSize int, fill []byte) {
	walk(opFill, dst, bufShape, nil, nil, p.Runs, elemSize, normFill(fill, elemSize))
}

// FillChunk sets every element of chunk to fill (nil or empty means zero).
func FillChunk(chunk []byte, elemSize int, fill []byte) {
	fillPattern(chunk, normFill(fill, elemSize))
}

// Trim sets every element of a chunk (at scaled coordinates coord, of shape
// chunkDims) whose global index along any dimension d is >= dims[d] to fill,
// and reports whether any element lay outside dims. SCC internal API
// "H5Dset_extent()": a chunk partly outside a shrunk extent gets the fill
// value in its newly out-of-bounds elements, so that a later grow shows the
// fill value there and not stale data. Ranks that do not match report false
// and touch nothing.
func Trim(chunk []byte, coord, chunkDims, dims []uint64, elemSize int, fill []byte) bool {
	r := len(chunkDims)
	if r == 0 || r > MaxRank || len(coord) != r || len(dims) != r {
		return false
	}
	var valid [MaxRank]uint64
	outside := false
	for d := range r {
		valid[d] = inExtent(coord[d], chunkDims[d], dims[d])
		if valid[d] < chunkDims[d] {
			outside = true
		}
	}
	if !outside {
		return false
	}
	f := normFill(fill, elemSize)
	// The outside is the disjoint union over d of the boxes
	//   [0,valid) along dims < d, [valid_d, chunkDim_d) along d, all of dims > d.
	var backing [MaxRank]Run
	var hdr [MaxRank][]Run
	for d := range r {
		backing[d] = Run{Buf: 0, Len: chunkDims[d]}
		hdr[d] = backing[d : d+1 : d+1]
	}
	runs := hdr[:r]
	for d := range r {
		if valid[d] < chunkDims[d] {
			backing[d] = Run{Buf: valid[d], Len: chunkDims[d] - valid[d]}
			walk(opFill, chunk, chunkDims, nil, nil, runs, elemSize, f)
		}
		if valid[d] == 0 {
			break // every later box is empty
		}
		backing[d] = Run{Buf: 0, Len: valid[d]}
	}
	return true
}

// fillValue is a normalized fill: zero means clear(), else pat is exactly
// one element.
type fillValue struct {
	pat  []byte
	zero bool
}

func normFill(fill []byte, elemSize int) fillValue {
	if elemSize <= 0 {
		return fillValue{zero: true}
	}
	zero := true
	for _, b := range fill {
		if b != 0 {
			zero = false
			break
		}
	}
	if zero {
		return fillValue{zero: true}
	}
	if len(fill) != elemSize {
		f := make([]byte, elemSize)
		copy(f, fill)
		fill = f
	}
	return fillValue{pat: fill}
}

// fillPattern tiles seg with the fill element, doubling the filled prefix so
// a long segment costs O(log n) copy() calls.
func fillPattern(seg []byte, f fillValue) {
	if f.zero || len(f.pat) == 0 {
		clear(seg)
		return
	}
	n := copy(seg, f.pat)
	for n < len(seg) {
		n += copy(seg[n:], seg[:n])
	}
}

// walk performs op over the runs. For opFill only buf/bufShape are used. It
// returns the number of contiguous segments it copied or filled, which the
// tests use to prove that covered dimensions are merged.
func walk(op kernelOp, buf []byte, bufShape []uint64, chunk []byte, chunkDims []uint64,
	runs [][]Run, elemSize int, f fillValue) int {
	r := len(runs)
	if r == 0 || r > MaxRank {
		return 0
	}
	// Byte strides per dimension.
	var bstr, cstr [MaxRank]int
	bs, cs := elemSize, elemSize
	for d := r - 1; d >= 0; d-- {
		bstr[d] = bs
		bs *= int(bufShape[d])
		if op != opFill {
			cstr[d] = cs
			cs *= int(chunkDims[d])
		}
	}
	// m: dimensions m..r-1 are fully covered on both sides, hence one
	// contiguous block of bstr[m-1] bytes per index of dimension m-1.
	m := r
	for m > 0 {
		rs := runs[m-1]
		if len(rs) != 1 || rs[0].Buf != 0 || rs[0].Len != bufShape[m-1] {
			break
		}
		if op != opFill && (rs[0].Chunk != 0 || rs[0].Len != chunkDims[m-1]) {
			break
		}
		m--
	}
	if m == 0 {
		segment(op, buf, 0, chunk, 0, bs, f)
		return 1
	}
	k := m - 1 // the row dimension: one segment per run
	for d := 0; d <= k; d++ {
		if len(runs[d]) == 0 {
			return 0
		}
	}
	// Odometer over the indices of dimensions 0..k-1. boff[d]/coff[d] is the
	// byte offset contributed by dimensions < d.
	var ri, ii [MaxRank]int
	var boff, coff [MaxRank + 1]int
	for d := range k {
		run := runs[d][0]
		boff[d+1] = boff[d] + int(run.Buf)*bstr[d]
		coff[d+1] = coff[d] + int(run.Chunk)*cstr[d]
	}
	rowRuns := runs[k]
	// Dimensions after k are merged and equal on both sides, so one index
	// of the row dimension is the same number of bytes in chunk and buffer.
	rk := bstr[k]
	// unit: every segment is a single index of rk bytes, a machine word size
	// (block 1 along the last dimension): move it with one load and store
	// instead of a memmove call.
	unit := 0
	if op != opFill && rk <= 8 && rk&(rk-1) == 0 && allLen1(rowRuns) {
		unit = rk
	}
	segs := 0
	for {
		bb, cb := boff[k], coff[k]
		switch {
		case op == opFill:
			fillRow(buf, bb, rk, rowRuns, f)
		case unit != 0 && op == opScatter:
			moveUnits(buf, bb, chunk, cb, unit, rowRuns, true)
		case unit != 0:
			moveUnits(chunk, cb, buf, bb, unit, rowRuns, false)
		case op == opScatter:
			for _, run := range rowRuns {
				b, c, n := bb+int(run.Buf)*rk, cb+int(run.Chunk)*rk, int(run.Len)*rk
				copy(buf[b:b+n], chunk[c:c+n])
			}
		default:
			for _, run := range rowRuns {
				b, c, n := bb+int(run.Buf)*rk, cb+int(run.Chunk)*rk, int(run.Len)*rk
				copy(chunk[c:c+n], buf[b:b+n])
			}
		}
		segs += len(rowRuns)
		d := k - 1
		for ; d >= 0; d-- {
			ii[d]++
			if uint64(ii[d]) < runs[d][ri[d]].Len {
				break
			}
			ii[d] = 0
			ri[d]++
			if ri[d] < len(runs[d]) {
				break
			}
			ri[d] = 0
		}
		if d < 0 {
			return segs
		}
		for ; d < k; d++ {
			run := runs[d][ri[d]]
			boff[d+1] = boff[d] + (int(run.Buf)+ii[d])*bstr[d]
			coff[d+1] = coff[d] + (int(run.Chunk)+ii[d])*cstr[d]
		}
	}
}

// segment moves n bytes between buf[b:] and chunk[c:] as op says.
func segment(op kernelOp, buf []byte, b int, chunk []byte, c int, n int, f fillValue) {
	switch op {
	case opScatter:
		copy(buf[b:b+n], chunk[c:c+n])
	case opGather:
		copy(chunk[c:c+n], buf[b:b+n])
	default:
		fillPattern(buf[b:b+n], f)
	}
}

func fillRow(buf []byte, bb, rk int, runs []Run, f fillValue) {
	for _, run := range runs {
		b := bb + int(run.Buf)*rk
		fillPattern(buf[b:b+int(run.Len)*rk], f)
	}
}

func allLen1(runs []Run) bool {
	for _, r := range runs {
		if r.Len != 1 {
			return false
		}
	}
	return true
}

// moveUnits copies one unit-byte index per run from src to dst. toBuf says
// dst is the packed buffer (scatter: dst offsets from Run.Buf, src from
// Run.Chunk); otherwise the other way round (gather). Each size has its own
// loop so that the move compiles to one load and one store.
func moveUnits(dst []byte, db int, src []byte, sb int, unit int, runs []Run, toBuf bool) {
	le := binary.LittleEndian
	switch unit {
	case 1:
		for _, r := range runs {
			d, s := unitOffsets(r, toBuf, db, sb, 1)
			dst[d] = src[s]
		}
	case 2:
		for _, r := range runs {
			d, s := unitOffsets(r, toBuf, db, sb, 2)
			le.PutUint16(dst[d:d+2], le.Uint16(src[s:s+2]))
		}
	case 4:
		for _, r := range runs {
			d, s := unitOffsets(r, toBuf, db, sb, 4)
			le.PutUint32(dst[d:d+4], le.Uint32(src[s:s+4]))
		}
	default:
		for _, r := range runs {
			d, s := unitOffsets(r, toBuf, db, sb, 8)
			le.PutUint64(dst[d:d+8], le.Uint64(src[s:s+8]))
		}
	}
}

func unitOffsets(r Run, toBuf bool, db, sb, w int) (d, s int) {
	if toBuf {
		return db + int(r.Buf)*w, sb + int(r.Chunk)*w
	}
	return db + int(r.Chunk)*w, sb + int(r.Buf)*w
}
