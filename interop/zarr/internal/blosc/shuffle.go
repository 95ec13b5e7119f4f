package blosc

// unshuffle undoes Blosc's byte shuffle of one block: src holds byte j of
// every element, then byte j+1 of every element, ...; bytes after the last
// whole element were not shuffled.
func unshuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	switch ts {
	case 2:
		a, b := src[:n], src[n:2*n]
		for i := range n {
			dst[2*i], dst[2*i+1] = a[i], b[i]
		}
	case 4:
		a, b, c, d := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
		for i := range n {
			o := dst[4*i : 4*i+4]
			o[0], o[1], o[2], o[3] = a[i], b[i], c[i], d[i]
		}
	case 8:
		for i := range n {
			o := dst[8*i : 8*i+8]
			for j := range o {
				o[j] = src[j*n+i]
			}
		}
	default:
		for j := range ts {
			row := src[j*n : (j+1)*n]
			for i, b := range row {
				dst[i*ts+j] = b
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// bitUnshuffle undoes Blosc's bit shuffle of one block. The shuffle works
// on the block's whole elements when their number is a multiple of 8 (the
// bytes after the last element stay as they are), and copies the block
// unchanged otherwise. A shuffled block holds 8*ts rows of n/8 bytes: row
// 8*j+k holds bit k of byte j of every element, element i at bit i%8 of
// the row's byte i/8.
func bitUnshuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	rows := n / 8
	for j := range ts {
		plane := src[8*j*rows : 8*(j+1)*rows]
		for g := range rows {
			// Byte k of x is row 8*j+k's byte for elements 8g..8g+7;
			// transposed, byte m of x is byte j of element 8g+m.
			var x uint64
			for k := range 8 {
				x |= uint64(plane[k*rows+g]) << (8 * k)
			}
			x = transpose8(x)
			o := dst[8*g*ts+j:]
			for m := range 8 {
				o[m*ts] = byte(x >> (8 * m))
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// transpose8 transposes the 8x8 bit matrix whose row r is byte r of x
// (bit c of byte r goes to bit r of byte c).
func transpose8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	return x ^ t ^ t<<28
}
