package selection

import "slices"

// Written boxes of a chunk whose fill is deferred. A chunk created for a
// write that does not cover it used to be filled whole before the write
// copied its part in; when the writes that follow cover the chunk (a chunk
// written in quarters), that fill is a pass over memory the writes
// overwrite at once. Instead the chunk remembers the boxes written since
// it was created, and the fill covers only what lies outside them, when
// the chunk is first read or encoded (FillOutside).

// AppendBox appends to boxes the box p selects in a chunk of rank r, as r
// (start, length) pairs, and reports whether p is a box (one run along
// every dimension); boxes is unchanged when it is not.
func AppendBox(boxes []uint64, p *Piece, r int) ([]uint64, bool) {
	if len(p.Runs) != r {
		return boxes, false
	}
	for _, rs := range p.Runs {
		if len(rs) != 1 {
			return boxes, false
		}
	}
	for _, rs := range p.Runs {
		boxes = append(boxes, rs[0].Chunk, rs[0].Len)
	}
	return boxes, true
}

// FillOutside sets every element of chunk (of shape chunkDims) that lies
// in none of boxes (AppendBox's encoding) to fill, and returns how many
// bytes it set. Boxes that are disjoint and together as large as the chunk
// cover it, and then nothing is read or written.
func FillOutside(chunk []byte, chunkDims []uint64, boxes []uint64, elemSize int, fill []byte) (filled int) {
	r := len(chunkDims)
	if r == 0 || r > MaxRank || elemSize <= 0 {
		return 0
	}
	nb := len(boxes) / (2 * r)
	f := normFill(fill, elemSize)
	if nb == 0 {
		fillPattern(chunk, f)
		return len(chunk)
	}
	if coveredByDisjoint(chunkDims, boxes, nb) {
		return 0
	}
	es := uint64(elemSize)
	rowLen := chunkDims[r-1]
	var idx [MaxRank]uint64
	var spans [][2]uint64
	for off := uint64(0); off+rowLen*es <= uint64(len(chunk)); off += rowLen * es {
		// The intervals of the last dimension that boxes holding this row
		// cover, in order; the gaps between them get the fill.
		spans = spans[:0]
		for b := 0; b < nb; b++ {
			bx := boxes[b*2*r : (b+1)*2*r]
			in := true
			for d := 0; d < r-1 && in; d++ {
				in = idx[d] >= bx[2*d] && idx[d]-bx[2*d] < bx[2*d+1]
			}
			if in {
				spans = append(spans, [2]uint64{bx[2*(r-1)], bx[2*(r-1)] + bx[2*(r-1)+1]})
			}
		}
		slices.SortFunc(spans, func(a, b [2]uint64) int {
			switch {
			case a[0] < b[0]:
				return -1
			case a[0] > b[0]:
				return 1
			}
			return 0
		})
		at := uint64(0)
		for _, s := range spans {
			if s[0] > at {
				fillPattern(chunk[off+at*es:off+s[0]*es], f)
				filled += int((s[0] - at) * es)
			}
			at = max(at, min(s[1], rowLen))
		}
		if at < rowLen {
			fillPattern(chunk[off+at*es:off+rowLen*es], f)
			filled += int((rowLen - at) * es)
		}
		// Next row: the odometer over every dimension but the last.
		for d := r - 2; d >= 0; d-- {
			if idx[d]++; idx[d] < chunkDims[d] {
				break
			}
			idx[d] = 0
		}
	}
	return filled
}

// coveredByDisjoint reports whether nb boxes, pairwise disjoint, hold as
// many elements as the chunk: then, each lying inside it, they cover it.
func coveredByDisjoint(chunkDims []uint64, boxes []uint64, nb int) bool {
	r := len(chunkDims)
	whole := uint64(1)
	for _, c := range chunkDims {
		whole *= c
	}
	var sum uint64
	for b := 0; b < nb; b++ {
		bx := boxes[b*2*r : (b+1)*2*r]
		v := uint64(1)
		for d := 0; d < r; d++ {
			if bx[2*d]+bx[2*d+1] > chunkDims[d] || bx[2*d+1] == 0 {
				return false
			}
			v *= bx[2*d+1]
		}
		sum += v
		for o := 0; o < b; o++ {
			if boxesMeet(bx, boxes[o*2*r:(o+1)*2*r], r) {
				return false
			}
		}
	}
	return sum == whole
}

// boxesMeet reports whether two boxes of rank r share an element.
func boxesMeet(a, b []uint64, r int) bool {
	for d := 0; d < r; d++ {
		if a[2*d]+a[2*d+1] <= b[2*d] || b[2*d]+b[2*d+1] <= a[2*d] {
			return false
		}
	}
	return true
}
