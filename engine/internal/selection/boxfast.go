package selection

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
	es := uint64(elemSize)
	var b, c, n, rows, bRow, cRow uint64
	planes, bPlane, cPlane := uint64(1), uint64(0), uint64(0)
	switch len(runs) {
	case 1:
		if len(runs[0]) != 1 {
			return false
		}
		r := runs[0][0]
		b, c, n, rows = r.Buf*es, r.Chunk*es, r.Len*es, 1
	case 2:
		if len(runs[0]) != 1 || len(runs[1]) != 1 || len(bufShape) != 2 || len(chunkDims) != 2 {
			return false
		}
		r0, r1 := runs[0][0], runs[1][0]
		bRow, cRow = bufShape[1]*es, chunkDims[1]*es
		b, c = r0.Buf*bRow+r1.Buf*es, r0.Chunk*cRow+r1.Chunk*es
		n, rows = r1.Len*es, r0.Len
	case 3:
		if len(runs[0]) != 1 || len(runs[1]) != 1 || len(runs[2]) != 1 || len(bufShape) != 3 || len(chunkDims) != 3 {
			return false
		}
		r0, r1, r2 := runs[0][0], runs[1][0], runs[2][0]
		bRow, cRow = bufShape[2]*es, chunkDims[2]*es
		bPlane, cPlane = bufShape[1]*bRow, chunkDims[1]*cRow
		b = r0.Buf*bPlane + r1.Buf*bRow + r2.Buf*es
		c = r0.Chunk*cPlane + r1.Chunk*cRow + r2.Chunk*es
		n, rows, planes = r2.Len*es, r1.Len, r0.Len
		if n == bRow && n == cRow && rows*n == bPlane && rows*n == cPlane {
			// Whole planes on both sides: one block of them.
			n, rows, planes = n*rows*planes, 1, 1
		}
	default:
		return false
	}
	if rows > 1 && n == bRow && n == cRow {
		n, rows = n*rows, 1 // whole rows on both sides: one block a plane
	}
	for ; planes > 0; planes-- {
		pb, pc := b, c
		for i := rows; i > 0; i-- {
			if op == opScatter {
				copy(buf[pb:pb+n], chunk[pc:pc+n])
			} else {
				copy(chunk[pc:pc+n], buf[pb:pb+n])
			}
			pb += bRow
			pc += cRow
		}
		b += bPlane
		c += cPlane
	}
	return true
}
