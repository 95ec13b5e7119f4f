package format

// CombineChecksum returns Checksum(a||b) from sa = Checksum(a), sb =
// Checksum(b) and len(b), without the bytes: a run read in pieces by
// several goroutines is summed by each on its own piece (the bytes stay in
// the cache of the core that read them) and the sums combined. The method
// is zlib's crc32_combine (1.2.12 and later): the CRC of a shifted by
// len(b) bytes is a multiplication by x^(8·len(b)) modulo the polynomial,
// the power taken by squares from a table; its cost grows with
// log2(len(b)), a microsecond or two for any chunk. It holds for the
// pre- and post-inverted CRC-32C Checksum computes. (Written here, not
// taken from a library: hash/crc32 has no combine, and the one Go package
// that offers it, github.com/dsnet/golib/hashmerge, uses zlib's older
// 32x32 GF(2) matrix squarings, tens of microseconds per combine, a
// sizeable part of the 1 MiB read it would serve.)
func CombineChecksum(sa, sb uint32, nb int64) uint32 {
	if nb <= 0 {
		return sa
	}
	return multModP(x2nModP(nb, 3), sa) ^ sb
}

// castagnoliPoly is the CRC-32C polynomial, reflected.
const castagnoliPoly = 0x82f63b78

// multModP returns a·b modulo the polynomial (bit-reflected, x^0 in the
// top bit).
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliPoly
		} else {
			b >>= 1
		}
	}
}

// x2nTable[k] is x^(2^k) modulo the polynomial.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
		p = multModP(p, p)
		t[k] = p
	}
	return t
}()

// x2nModP returns x^(n·2^k) modulo the polynomial.
func x2nModP(n int64, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for n != 0 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
		n >>= 1
		k++
	}
	return p
}
