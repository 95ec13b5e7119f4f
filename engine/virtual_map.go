package engine

import (
	"fmt"
	"math"
	"math/bits"
)

// The arithmetic of virtual mappings (virtual.go), one dimension at a
// time: a mapping's selections are regular hyperslabs, products of
// one-dimensional selections, so two of them intersect when they do
// along every dimension, and a virtual element's source follows from its
// ordinal along each dimension.

// dim1 is one dimension of a regular hyperslab: count blocks of block
// indices, the i-th starting at start+i×stride; count may be Unlimited.
// Values obey format.CheckVirtualSelection (at most 2^62, bounded ends
// too), so sums of two or three of them never overflow.
type dim1 struct{ start, stride, count, block uint64 }

// size is the number of selected indices (Unlimited when count is).
func (a dim1) size() uint64 {
	if a.count == Unlimited {
		return Unlimited
	}
	return a.count * a.block
}

// end is one past the last selected index (Unlimited when count is).
func (a dim1) end() uint64 {
	if a.count == Unlimited {
		return Unlimited
	}
	return a.start + (a.count-1)*a.stride + a.block
}

// at is the index of the k-th selected index (k < size).
func (a dim1) at(k uint64) uint64 { return a.start + (k/a.block)*a.stride + k%a.block }

// contiguous reports whether the selected indices form one interval.
func (a dim1) contiguous() bool { return a.count == 1 || a.block == a.stride }

// overlap1 reports whether two one-dimensional selections share an index.
// Exact for any counts (Unlimited included): a block-by-block walk would
// not end, so the periodic case is a question about a linear function
// modulo the other stride (firstBelow).
func overlap1(a, b dim1) bool {
	ac, bc := a.contiguous(), b.contiguous()
	switch {
	case ac && bc:
		return a.start < b.end() && b.start < a.end()
	case ac:
		return intervalMeets(a.start, a.end(), b)
	case bc:
		return intervalMeets(b.start, b.end(), a)
	}
	// Both periodic with block < stride and count >= 2. For a block i of
	// a, at p = a.start+i×a.stride, the only block of b that can meet it
	// is j = ⌊(p+a.block-1-b.start)/b.stride⌋ (the last one starting at or
	// before its end: b's blocks are shorter than its stride); it meets
	// it when it ends after p, that is when (p+a.block-1-b.start) mod
	// b.stride < a.block+b.block-1, and when 0 <= j < b.count.
	//
	// iMin is the first block of a that ends after b starts (j >= 0).
	var iMin uint64
	if a.start+a.block <= b.start {
		iMin = ceilDiv(b.start-a.start-a.block+1, a.stride)
	}
	if a.count != Unlimited && iMin >= a.count {
		return false
	}
	// iTail is the first block of a whose j is past b's last block.
	iTail := Unlimited
	if b.count != Unlimited {
		t := b.start + b.count*b.stride + 1 // j >= count ⇔ p+a.block >= t
		switch {
		case t <= a.start+a.block:
			iTail = 0
		default:
			iTail = ceilDiv(t-a.start-a.block, a.stride)
		}
		iTail = max(iTail, iMin)
	}
	iEnd := min(iTail, a.count) // Unlimited when both are
	if iEnd > iMin {
		w := a.block + b.block - 1
		if w >= b.stride {
			return true
		}
		p := a.start + iMin*a.stride
		c := (p + a.block - 1 - b.start) % b.stride
		x, ok := firstBelow(c, a.stride%b.stride, b.stride, w)
		if ok && (iEnd == Unlimited || x < iEnd-iMin) {
			return true
		}
	}
	if iTail != Unlimited && (a.count == Unlimited || iTail < a.count) {
		// Past b's last block start: only that last block can meet it.
		return a.start+iTail*a.stride < b.end()
	}
	return false
}

// intervalMeets reports whether [lo, hi) meets a periodic selection b.
func intervalMeets(lo, hi uint64, b dim1) bool {
	// The first block of b that ends after lo.
	var i uint64
	if b.start+b.block <= lo {
		i = ceilDiv(lo-b.start-b.block+1, b.stride)
	}
	if b.count != Unlimited && i >= b.count {
		return false
	}
	return b.start+i*b.stride < hi
}

// firstBelow returns the smallest x >= 0 with (c + s×x) mod m < w, for
// c, s < m and 1 <= w < m, and whether one exists.
func firstBelow(c, s, m, w uint64) (uint64, bool) {
	// (c + s x) mod m in [0, w) ⇔ (s x) mod m in the cyclic interval
	// [(m-c) mod m, (m-c) mod m + w - 1].
	lo := (m - c) % m
	hi := lo + w - 1
	if hi < m {
		return modInterval(s, m, lo, hi)
	}
	x1, ok1 := modInterval(s, m, lo, m-1)
	x2, ok2 := modInterval(s, m, 0, hi-m)
	switch {
	case ok1 && ok2:
		return min(x1, x2), true
	case ok1:
		return x1, true
	default:
		return x2, ok2
	}
}

// modInterval returns the smallest x >= 0 with l <= (a×x) mod m <= r, for
// 0 <= l <= r < m and a < m, and whether one exists. Euclid's recursion on
// (m mod a, a): if no multiple of a falls in [l, r] before wrapping, a
// solution is a×x - m×y in [l, r] for the smallest y with (m×y) mod a in
// [(-r) mod a, (-l) mod a].
func modInterval(a, m, l, r uint64) (uint64, bool) {
	if l == 0 {
		return 0, true
	}
	if a == 0 {
		return 0, false
	}
	k := (l + a - 1) / a
	if a*k <= r {
		return k, true
	}
	// Here r-l < a and l mod a > 0, so the interval below does not wrap.
	y, ok := modInterval(m%a, a, a-r%a, a-l%a)
	if !ok {
		return 0, false
	}
	// x = ⌈(l + m×y) / a⌉ in 128 bits: y < a keeps x below m+2.
	hi, lo := bits.Mul64(m, y)
	lo, carry := bits.Add64(lo, l+a-1, 0)
	hi += carry
	x, _ := bits.Div64(hi, lo, a)
	return x, true
}

// slicesBelow is how many indices of a (a source selection along its
// unlimited dimension) lie below e (the source's extent there).
func slicesBelow(a dim1, e uint64) uint64 {
	if e <= a.start {
		return 0
	}
	q, r := (e-a.start)/a.stride, (e-a.start)%a.stride
	if a.count != Unlimited && q >= a.count {
		return a.size()
	}
	return q*a.block + min(r, a.block)
}

// clipExtent is the extent of a virtual dimension a whose first n
// selected indices are available (HDF5's clip extent): with trail (the
// first-missing view) up to the first index not available, otherwise up
// to the last one that is; Unlimited when that does not fit 64 bits.
func clipExtent(a dim1, n uint64, trail bool) uint64 {
	if n == 0 {
		if trail {
			return a.start
		}
		return 0
	}
	// Saturating: n follows the sources, and the extent it gives may not
	// fit (fitExtent refuses it).
	q, r := n/a.block, n%a.block
	switch {
	case r > 0:
		return addSat(addSat(a.start, mulSat(q, a.stride)), r)
	case trail:
		return addSat(a.start, mulSat(q, a.stride))
	default:
		return addSat(addSat(a.start, mulSat(q-1, a.stride)), a.block)
	}
}

// mulSat and addSat are a×b and a+b, or Unlimited when they do not fit:
// extents follow sources that keep growing, so a product or sum of two
// legal values may not fit, and saturating keeps such an extent beyond
// every limit (fitExtent) instead of wrapping to a small, wrong one.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return Unlimited
	}
	return lo
}

func addSat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return Unlimited
	}
	return s
}

// fitExtent checks an evaluated extent against the format's limit on a
// dataset's extent (its element count fits an int64, as the header
// decoder checks it): a header beyond it would make the file unreadable
// after the next commit.
func fitExtent(name string, shape []uint64) error {
	n := uint64(1)
	for d, x := range shape {
		if x > math.MaxInt64 {
			return fmt.Errorf("%w: virtual dataset %q: its mappings reach beyond index 2^63-1 along dimension %d (the extent a dataset can hold)", ErrInvalid, name, d)
		}
		hi, lo := bits.Mul64(n, x)
		if hi != 0 || lo > math.MaxInt64 {
			return fmt.Errorf("%w: virtual dataset %q: extent %v holds more than 2^63-1 elements (the most a dataset can hold)", ErrInvalid, name, shape)
		}
		n = lo
	}
	return nil
}

// blockElems is how many elements one block of a selection holds along
// its unlimited dimension (all of them for a bounded selection),
// saturating.
func blockElems(ds []dim1) uint64 {
	n := uint64(1)
	for _, x := range ds {
		s := x.block
		if x.count != Unlimited {
			s = mulSat(x.count, x.block)
		}
		n = mulSat(n, s)
	}
	return n
}

// vrun is a run of a request along one dimension: n indices at ordinal q
// of the request's packed buffer, whose sources start at src.
type vrun struct{ q, src, n uint64 }

// mapRuns returns, for the request's dimension req (finite) and a
// mapping's virtual dimension v paired with source dimension s (same
// size, ordinal k of v maps to ordinal k of s), the runs of req's indices
// that v selects, with their source indices, in request order.
func mapRuns(req, v, s dim1, out []vrun) []vrun {
	// Only the request's blocks that can meet v: the work follows the
	// runs made, not the request's extent (a printf mapping asks once per
	// block of its own).
	var qi uint64
	if req.start+req.block <= v.start {
		qi = (v.start-req.start-req.block)/req.stride + 1
	}
	for ; qi < req.count; qi++ {
		lo := req.start + qi*req.stride
		if lo >= v.end() {
			break // v.end() is Unlimited for an unlimited v
		}
		hi := lo + req.block
		qbase := qi * req.block
		if v.contiguous() {
			a, b := max(v.start, lo), min(v.end(), hi)
			if a < b {
				out = splitRuns(out, qbase+(a-lo), a-v.start, b-a, s)
			}
			continue
		}
		// The blocks of v that meet [lo, hi) (v's blocks are shorter than
		// its stride, so each meets it in one interval).
		var j uint64
		if v.start+v.block <= lo {
			j = ceilDiv(lo-v.start-v.block+1, v.stride)
		}
		for ; v.count == Unlimited || j < v.count; j++ {
			bs := v.start + j*v.stride
			if bs >= hi {
				break
			}
			a, b := max(bs, lo), min(bs+v.block, hi)
			out = splitRuns(out, qbase+(a-lo), j*v.block+(a-bs), b-a, s)
		}
	}
	return out
}

// splitRuns appends the run of n request ordinals from q whose ordinals
// along the source dimension s start at k, cut where s's blocks end.
func splitRuns(out []vrun, q, k, n uint64, s dim1) []vrun {
	for n > 0 {
		m := n
		if !s.contiguous() {
			m = min(n, s.block-k%s.block)
		}
		out = appendRun(out, vrun{q: q, src: s.at(k), n: m})
		q, k, n = q+m, k+m, n-m
	}
	return out
}

// appendRun appends r, merging it into the last run when both the
// request ordinals and the sources continue.
func appendRun(out []vrun, r vrun) []vrun {
	if n := len(out); n > 0 {
		l := &out[n-1]
		if l.q+l.n == r.q && l.src+l.n == r.src {
			l.n += r.n
			return out
		}
	}
	return append(out, r)
}
