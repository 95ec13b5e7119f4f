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
	return castagnoliCombine.combine(sa, sb, nb)
}

// crcCombiner combines CRCs of one reflected polynomial.
type crcCombiner struct {
	poly uint32
	// x2n[k] is x^(2^k) modulo the polynomial.
	x2n [32]uint32
}

func newCombiner(poly uint32) *crcCombiner {
	c := &crcCombiner{poly: poly}
	p := uint32(1) << 30 // x^1
	c.x2n[0] = p
	for k := 1; k < 32; k++ {
		p = c.multModP(p, p)
		c.x2n[k] = p
	}
	return c
}

// The CRC-32C polynomial (Checksum's) and the CRC-32 (IEEE) one (the keyed
// chunk checksums'), reflected.
var (
	castagnoliCombine = newCombiner(0x82f63b78)
	ieeeCombine       = newCombiner(0xedb88320)
)

func (c *crcCombiner) combine(sa, sb uint32, nb int64) uint32 {
	if nb <= 0 {
		return sa
	}
	return c.multModP(c.x2nModP(nb, 3), sa) ^ sb
}

// multModP returns a·b modulo the polynomial (bit-reflected, x^0 in the
// top bit).
func (c *crcCombiner) multModP(a, b uint32) uint32 {
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
			b = b>>1 ^ c.poly
		} else {
			b >>= 1
		}
	}
}

// x2nModP returns x^(n·2^k) modulo the polynomial.
func (c *crcCombiner) x2nModP(n int64, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for n != 0 {
		if n&1 != 0 {
			p = c.multModP(c.x2n[k&31], p)
		}
		n >>= 1
		k++
	}
	return p
}
