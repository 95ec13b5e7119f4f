package selection

import "github.com/scc-dev/scc/internal/memcopy"

// boxFast is walk for the commonest pieces — rank 1 to 3 with one run per
// dimension, what a Box inside a chunk or a whole chunk inside a larger
// box gives — and reports false for anything else. walk sets up
// per-dimension state in arrays sized for MaxRank (about 1.5 KiB zeroed per
// call), which for a 64-byte read of a resident chunk cost more than the
// copy and the cache's hit path together; and it steps its odometer once a
// row, which for a 3-D chunk of short rows scattered into a larger buffer
// (the one-call read of a whole 3-D array) cost more than the rows' copies.
// Same preconditions and same bytes as walk (the kernel tests compare both
// with the reference); only scatter and gather come here.
func boxFast(op kernelOp, buf []byte, bufShape []uint64, chunk []byte, chunkDims []uint64, runs [][]Run, elemSize int) bool {
	g, ok := boxGeometry(bufShape, chunkDims, runs, elemSize)
	if !ok {
		return false
	}
	if op == opScatter && streams(buf) {
		g.scatterStreaming(buf, chunk)
		return true
	}
	b, c := g.b, g.c
	for planes := g.planes; planes > 0; planes-- {
		pb, pc := b, c
		for i := g.rows; i > 0; i-- {
			if op == opScatter {
				copy(buf[pb:pb+g.n], chunk[pc:pc+g.n])
			} else {
				copy(chunk[pc:pc+g.n], buf[pb:pb+g.n])
			}
			pb += g.bRow
			pc += g.cRow
		}
		b += g.bPlane
		c += g.cPlane
	}
	return true
}

// streams reports whether a scatter into buf streams its rows
// (memcopy.Stream): a buffer larger than the last-level cache share is not
// read back before its lines are evicted, so allocating them in the cache
// on the way only doubles the memory traffic. The hit path's small reads
// never stream.
func streams(buf []byte) bool { return len(buf) >= memcopy.StreamFrom }

// scatterStreaming is boxFast's scatter with streaming stores.
func (g *box) scatterStreaming(buf, chunk []byte) {
	b, c := g.b, g.c
	for planes := g.planes; planes > 0; planes-- {
		pb, pc := b, c
		for i := g.rows; i > 0; i-- {
			memcopy.Stream(buf[pb:pb+g.n], chunk[pc:pc+g.n])
			pb += g.bRow
			pc += g.cRow
		}
		b += g.bPlane
		c += g.cPlane
	}
	memcopy.Fence()
}

// box is a boxFast piece's copy plan: planes of rows of n bytes, the first
// at b in the buffer and c in the chunk, rows bRow and cRow apart, planes
// bPlane and cPlane apart. In the chunk, rows and planes follow each
// other: rows*cRow <= cPlane, so chunk offsets grow along the plan.
type box struct {
	b, c, n, rows, bRow, cRow, planes, bPlane, cPlane uint64
}

// boxGeometry is the plan of a piece boxFast takes (ok false for others).
func boxGeometry(bufShape, chunkDims []uint64, runs [][]Run, elemSize int) (g box, ok bool) {
	es := uint64(elemSize)
	g.planes = 1
	switch len(runs) {
	case 1:
		if len(runs[0]) != 1 {
			return g, false
		}
		r := runs[0][0]
		g.b, g.c, g.n, g.rows = r.Buf*es, r.Chunk*es, r.Len*es, 1
	case 2:
		if len(runs[0]) != 1 || len(runs[1]) != 1 || len(bufShape) != 2 || len(chunkDims) != 2 {
			return g, false
		}
		r0, r1 := runs[0][0], runs[1][0]
		g.bRow, g.cRow = bufShape[1]*es, chunkDims[1]*es
		g.b, g.c = r0.Buf*g.bRow+r1.Buf*es, r0.Chunk*g.cRow+r1.Chunk*es
		g.n, g.rows = r1.Len*es, r0.Len
	case 3:
		if len(runs[0]) != 1 || len(runs[1]) != 1 || len(runs[2]) != 1 || len(bufShape) != 3 || len(chunkDims) != 3 {
			return g, false
		}
		r0, r1, r2 := runs[0][0], runs[1][0], runs[2][0]
		g.bRow, g.cRow = bufShape[2]*es, chunkDims[2]*es
		g.bPlane, g.cPlane = bufShape[1]*g.bRow, chunkDims[1]*g.cRow
		g.b = r0.Buf*g.bPlane + r1.Buf*g.bRow + r2.Buf*es
		g.c = r0.Chunk*g.cPlane + r1.Chunk*g.cRow + r2.Chunk*es
		g.n, g.rows, g.planes = r2.Len*es, r1.Len, r0.Len
		if g.n == g.bRow && g.n == g.cRow && g.rows*g.n == g.bPlane && g.rows*g.n == g.cPlane {
			// Whole planes on both sides: one block of them.
			g.n, g.rows, g.planes = g.n*g.rows*g.planes, 1, 1
			g.bRow, g.cRow, g.bPlane, g.cPlane = g.n, g.n, g.n, g.n
		}
	default:
		return g, false
	}
	if g.rows > 1 && g.n == g.bRow && g.n == g.cRow {
		g.n, g.rows = g.n*g.rows, 1 // whole rows on both sides: one block a plane
		g.bRow, g.cRow = g.n, g.n   // the block is the plane's one row
	}
	return g, true
}

// CanScatterRange reports whether ScatterRange takes the piece: rank 1 to
// 3 with one run per dimension (boxFast's pieces).
func CanScatterRange(bufShape, chunkDims []uint64, p *Piece, elemSize int) bool {
	_, ok := boxGeometry(bufShape, chunkDims, p.Runs, elemSize)
	return ok
}

// ScatterRange is Scatter for the part of a chunk that lies at byte offset
// off: part holds the chunk's bytes [off, off+len(part)), and the piece's
// elements among them are copied to their places in dst. Scattering every
// part of a chunk, in any order and cut anywhere, does what Scatter of the
// whole chunk does; a streamed decode scatters each part while it is in the
// core's cache. It reports false, doing nothing, for a piece
// CanScatterRange refuses.
func ScatterRange(dst []byte, bufShape []uint64, part []byte, off uint64, chunkDims []uint64, p *Piece, elemSize int) bool {
	g, ok := boxGeometry(bufShape, chunkDims, p.Runs, elemSize)
	if !ok {
		return false
	}
	end := off + uint64(len(part))
	if len(part) == 0 || end <= g.c {
		return true
	}
	// Planes and rows before the part are skipped by arithmetic, not
	// walked: a chunk streams in many parts.
	stream := streams(dst)
	p0 := uint64(0)
	if g.cPlane > 0 && off > g.c {
		p0 = min((off-g.c)/g.cPlane, g.planes)
	}
	for pl := p0; pl < g.planes; pl++ {
		pc := g.c + pl*g.cPlane
		if pc >= end {
			break
		}
		r0 := uint64(0)
		if g.cRow > 0 && off > pc {
			r0 = min((off-pc)/g.cRow, g.rows)
		}
		pb := g.b + pl*g.bPlane + r0*g.bRow
		for r, rc := r0, pc+r0*g.cRow; r < g.rows && rc < end; r, rc, pb = r+1, rc+g.cRow, pb+g.bRow {
			lo, hi := max(rc, off), min(rc+g.n, end)
			if lo < hi {
				if stream {
					memcopy.Stream(dst[pb+lo-rc:pb+hi-rc], part[lo-off:hi-off])
				} else {
					copy(dst[pb+lo-rc:pb+hi-rc], part[lo-off:hi-off])
				}
			}
		}
	}
	if stream {
		memcopy.Fence()
	}
	return true
}
