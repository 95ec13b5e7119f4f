package selection

// box2 is walk for the commonest piece — rank 1 or 2 with one run per
// dimension, what a Box inside a chunk gives — and reports false for
// anything else. walk sets up per-dimension state in arrays sized for
// MaxRank (about 1.5 KiB zeroed per call), which for a 64-byte read of a
// resident chunk cost more than the copy and the cache's hit path together.
// Same preconditions and same bytes as walk (the kernel tests compare both
// with the reference); only scatter and gather come here.
func box2(op kernelOp, buf []byte, bufShape []uint64, chunk []byte, chunkDims []uint64, runs [][]Run, elemSize int) bool {
	es := uint64(elemSize)
	var b, c, n, rows, bRow, cRow uint64
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
		if n == bRow && n == cRow {
			n, rows = n*rows, 1 // whole rows on both sides: one block
		}
	default:
		return false
	}
	for ; rows > 0; rows-- {
		if op == opScatter {
			copy(buf[b:b+n], chunk[c:c+n])
		} else {
			copy(chunk[c:c+n], buf[b:b+n])
		}
		b += bRow
		c += cRow
	}
	return true
}
