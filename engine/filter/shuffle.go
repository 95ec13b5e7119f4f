package filter

import "encoding/binary"

// The byte shuffle is HDF5's: with n = len(src)/es whole elements, byte j of
// element i goes to dst[j*n+i], and the len(src)%es tail bytes that do not
// form a whole element are copied unchanged to the end. Grouping the k-th
// bytes of all elements puts the slowly varying high bytes of smooth integer
// data next to each other, which is what makes the compressors behind it
// work.
//
// Element sizes 2, 4 and 8 (the common numeric types) take word-at-a-time
// paths that transpose 8 elements per step with 64-bit loads and stores;
// other sizes take a plain byte loop.

// shuffle writes the shuffled form of src to dst; len(dst) must equal len(src).
func shuffle(dst, src []byte, es int) {
	n := len(src) / es
	if es <= 1 || n <= 1 {
		copy(dst, src)
		return
	}
	done := 0 // elements already shuffled
	switch es {
	case 2:
		done = shuffle2(dst, src, n)
	case 4:
		done = shuffle4(dst, src, n)
	case 8:
		done = shuffle8(dst, src, n)
	}
	for j := 0; j < es && done < n; j++ {
		lane := dst[j*n+done : j*n+n]
		s := src[done*es+j:]
		for i := range lane {
			lane[i] = s[i*es]
		}
	}
	copy(dst[n*es:], src[n*es:])
}

// unshuffle is the inverse of shuffle; len(dst) must equal len(src).
func unshuffle(dst, src []byte, es int) {
	n := len(src) / es
	if es <= 1 || n <= 1 {
		copy(dst, src)
		return
	}
	done := 0
	switch es {
	case 2:
		done = unshuffle2(dst, src, n)
	case 4:
		done = unshuffle4(dst, src, n)
	case 8:
		done = unshuffle8(dst, src, n)
	}
	for j := 0; j < es && done < n; j++ {
		lane := src[j*n+done : j*n+n]
		d := dst[done*es+j:]
		for i, b := range lane {
			d[i*es] = b
		}
	}
	copy(dst[n*es:], src[n*es:])
}

// evenBytes packs bytes 0, 2, 4, 6 of v into the low 32 bits.
func evenBytes(v uint64) uint64 {
	v &= 0x00FF00FF00FF00FF
	v = (v | v>>8) & 0x0000FFFF0000FFFF
	return (v | v>>16) & 0x00000000FFFFFFFF
}

// spreadBytes is the inverse of evenBytes: the 4 low bytes of v go to bytes
// 0, 2, 4, 6 and the odd bytes are zero.
func spreadBytes(v uint64) uint64 {
	v &= 0x00000000FFFFFFFF
	v = (v | v<<16) & 0x0000FFFF0000FFFF
	return (v | v<<8) & 0x00FF00FF00FF00FF
}

// swap is one round of the recursive transpose of a matrix of units held
// one row per word: it exchanges the high s-bit half of every 2s-bit group
// of a with the low half of the same group of b. m selects the low halves.
// Callers keep rows in locals so they stay in registers.
func swap(a, b uint64, s uint, m uint64) (uint64, uint64) {
	t := ((a >> s) ^ b) & m
	return a ^ t<<s, b ^ t
}

const (
	lo32 = 0x00000000FFFFFFFF
	lo16 = 0x0000FFFF0000FFFF
	lo8  = 0x00FF00FF00FF00FF
)

func shuffle2(dst, src []byte, n int) int {
	le := binary.LittleEndian
	lo, hi := dst[:n], dst[n:2*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		s := src[2*i : 2*i+16]
		v0, v1 := le.Uint64(s), le.Uint64(s[8:])
		le.PutUint64(lo[i:], evenBytes(v0)|evenBytes(v1)<<32)
		le.PutUint64(hi[i:], evenBytes(v0>>8)|evenBytes(v1>>8)<<32)
	}
	return i
}

func unshuffle2(dst, src []byte, n int) int {
	le := binary.LittleEndian
	lo, hi := src[:n], src[n:2*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		l, h := le.Uint64(lo[i:]), le.Uint64(hi[i:])
		d := dst[2*i : 2*i+16]
		le.PutUint64(d, spreadBytes(l)|spreadBytes(h)<<8)
		le.PutUint64(d[8:], spreadBytes(l>>32)|spreadBytes(h>>32)<<8)
	}
	return i
}

// transpose4x16 transposes the 4x4 matrix of 16-bit units whose rows are
// w0..w3 (unit k of a row at bits 16k).
func transpose4x16(w0, w1, w2, w3 uint64) (uint64, uint64, uint64, uint64) {
	w0, w2 = swap(w0, w2, 32, lo32)
	w1, w3 = swap(w1, w3, 32, lo32)
	w0, w1 = swap(w0, w1, 16, lo16)
	w2, w3 = swap(w2, w3, 16, lo16)
	return w0, w1, w2, w3
}

// pairUp interleaves the two 4-byte elements of v so byte j of both sits in
// 16-bit unit j; unpair is its inverse.
func pairUp(v uint64) uint64 { return spreadBytes(v) | spreadBytes(v>>32)<<8 }
func unpair(v uint64) uint64 { return evenBytes(v) | evenBytes(v>>8)<<32 }

// shuffle4 handles 8 elements (4 words of 2 elements) per step: pairUp each
// word, then a 4x4 transpose of 16-bit units gathers unit j of all words
// into word j, which is lane j's next 8 bytes.
func shuffle4(dst, src []byte, n int) int {
	le := binary.LittleEndian
	d0, d1, d2, d3 := dst[:n], dst[n:2*n], dst[2*n:3*n], dst[3*n:4*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		s := src[4*i : 4*i+32]
		w0, w1, w2, w3 := transpose4x16(pairUp(le.Uint64(s)), pairUp(le.Uint64(s[8:])),
			pairUp(le.Uint64(s[16:])), pairUp(le.Uint64(s[24:])))
		le.PutUint64(d0[i:], w0)
		le.PutUint64(d1[i:], w1)
		le.PutUint64(d2[i:], w2)
		le.PutUint64(d3[i:], w3)
	}
	return i
}

func unshuffle4(dst, src []byte, n int) int {
	le := binary.LittleEndian
	s0, s1, s2, s3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		w0, w1, w2, w3 := transpose4x16(le.Uint64(s0[i:]), le.Uint64(s1[i:]), le.Uint64(s2[i:]), le.Uint64(s3[i:]))
		d := dst[4*i : 4*i+32]
		le.PutUint64(d, unpair(w0))
		le.PutUint64(d[8:], unpair(w1))
		le.PutUint64(d[16:], unpair(w2))
		le.PutUint64(d[24:], unpair(w3))
	}
	return i
}

// transpose8 transposes the 8x8 byte matrix whose rows are w0..w7 (byte k
// of a row at bits 8k). It is its own inverse.
func transpose8(w0, w1, w2, w3, w4, w5, w6, w7 uint64) (uint64, uint64, uint64, uint64, uint64, uint64, uint64, uint64) {
	w0, w4 = swap(w0, w4, 32, lo32)
	w1, w5 = swap(w1, w5, 32, lo32)
	w2, w6 = swap(w2, w6, 32, lo32)
	w3, w7 = swap(w3, w7, 32, lo32)
	w0, w2 = swap(w0, w2, 16, lo16)
	w1, w3 = swap(w1, w3, 16, lo16)
	w4, w6 = swap(w4, w6, 16, lo16)
	w5, w7 = swap(w5, w7, 16, lo16)
	w0, w1 = swap(w0, w1, 8, lo8)
	w2, w3 = swap(w2, w3, 8, lo8)
	w4, w5 = swap(w4, w5, 8, lo8)
	w6, w7 = swap(w6, w7, 8, lo8)
	return w0, w1, w2, w3, w4, w5, w6, w7
}

func shuffle8(dst, src []byte, n int) int {
	le := binary.LittleEndian
	d0, d1, d2, d3 := dst[:n], dst[n:2*n], dst[2*n:3*n], dst[3*n:4*n]
	d4, d5, d6, d7 := dst[4*n:5*n], dst[5*n:6*n], dst[6*n:7*n], dst[7*n:8*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		s := src[8*i : 8*i+64]
		w0, w1, w2, w3, w4, w5, w6, w7 := transpose8(le.Uint64(s), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:]),
			le.Uint64(s[32:]), le.Uint64(s[40:]), le.Uint64(s[48:]), le.Uint64(s[56:]))
		le.PutUint64(d0[i:], w0)
		le.PutUint64(d1[i:], w1)
		le.PutUint64(d2[i:], w2)
		le.PutUint64(d3[i:], w3)
		le.PutUint64(d4[i:], w4)
		le.PutUint64(d5[i:], w5)
		le.PutUint64(d6[i:], w6)
		le.PutUint64(d7[i:], w7)
	}
	return i
}

func unshuffle8(dst, src []byte, n int) int {
	le := binary.LittleEndian
	s0, s1, s2, s3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
	s4, s5, s6, s7 := src[4*n:5*n], src[5*n:6*n], src[6*n:7*n], src[7*n:8*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		w0, w1, w2, w3, w4, w5, w6, w7 := transpose8(le.Uint64(s0[i:]), le.Uint64(s1[i:]), le.Uint64(s2[i:]), le.Uint64(s3[i:]),
			le.Uint64(s4[i:]), le.Uint64(s5[i:]), le.Uint64(s6[i:]), le.Uint64(s7[i:]))
		d := dst[8*i : 8*i+64]
		le.PutUint64(d, w0)
		le.PutUint64(d[8:], w1)
		le.PutUint64(d[16:], w2)
		le.PutUint64(d[24:], w3)
		le.PutUint64(d[32:], w4)
		le.PutUint64(d[40:], w5)
		le.PutUint64(d[48:], w6)
		le.PutUint64(d[56:], w7)
	}
	return i
}
