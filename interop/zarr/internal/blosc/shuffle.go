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
	// The 8 rows of a byte are read a tile at a time into buf: reading
	// them in place, 8 streams rows apart (often a power of two) keep
	// evicting each other from the cache.
	const tile = 64
	var buf [8 * tile]byte
	for g0 := 0; g0 < rows; g0 += tile {
		w := min(tile, rows-g0)
		for j := range ts {
			for k := range 8 {
				copy(buf[k*tile:k*tile+w], src[(8*j+k)*rows+g0:])
			}
			for g := range w {
				// Byte k of x is row 8*j+k's byte for elements 8g..8g+7;
				// transposed, byte m of x is byte j of element 8g+m.
				x := uint64(buf[g]) | uint64(buf[tile+g])<<8 | uint64(buf[2*tile+g])<<16 | uint64(buf[3*tile+g])<<24 |
					uint64(buf[4*tile+g])<<32 | uint64(buf[5*tile+g])<<40 | uint64(buf[6*tile+g])<<48 | uint64(buf[7*tile+g])<<56
				x = transpose8(x)
				o := dst[8*(g0+g)*ts+j:]
				_ = o[7*ts]
				o[0], o[ts], o[2*ts], o[3*ts] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
				o[4*ts], o[5*ts], o[6*ts], o[7*ts] = byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
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
