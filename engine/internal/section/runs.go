package section

import (
	"encoding/binary"
	"fmt"
)

// Run is a run of consecutive defined elements of a chunk: Len elements
// from linear (C-order) offset Start. At is where the run's first value
// sits in the chunk's packed values (the sum of the lengths of the runs
// before it); it is not stored, decoders compute it.
type Run struct {
	Start, Len, At uint32
}

// End is the offset just past the run.
func (r Run) End() uint32 { return r.Start + r.Len }

// MaxRunBytes bounds the encoding of k defined elements of a chunk of
// limit elements: at most min(k, limit-k+1) runs, each a gap of at most
// limit and a length of at most k, after the count.
func MaxRunBytes(k, limit uint64) uint64 {
	runs := k
	if k <= limit && limit-k+1 < runs {
		runs = limit - k + 1
	}
	return uvarintLen(runs) + runs*(uvarintLen(limit)+uvarintLen(k))
}

func uvarintLen(v uint64) uint64 {
	n := uint64(1)
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// AppendRuns appends the run encoding of runs (FORMAT.md §16.2): the
// number of runs, then for each the gap from the end of the previous run
// (from 0 for the first) and its length, all unsigned varints. runs must
// be sorted, disjoint, non-adjacent (merged) and non-empty each.
func AppendRuns(dst []byte, runs []Run) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(runs)))
	prev := uint32(0)
	for _, r := range runs {
		dst = binary.AppendUvarint(dst, uint64(r.Start-prev))
		dst = binary.AppendUvarint(dst, uint64(r.Len))
		prev = r.End()
	}
	return dst
}

// DecodeRuns decodes a run encoding of a chunk of limit elements into
// dst[:0] and returns the runs and the number of defined elements. The
// runs come back canonical (sorted, disjoint, non-adjacent, each within
// the chunk), or the input is rejected: an over-long varint, a gap of 0
// between two runs, a
// zero length, a run past limit, a count the bytes cannot hold, and
// trailing bytes are all corruption. It allocates at most one slice of
// len(b)/2 runs.
func DecodeRuns(b []byte, limit uint64, dst []Run) ([]Run, uint64, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(k) != uvarintLen(n) {
		return nil, 0, fmt.Errorf("%w: run encoding: bad run count", ErrCorrupt)
	}
	b = b[k:]
	// Every run takes at least two bytes: bound the count by the bytes
	// before allocating for it.
	if n > uint64(len(b))/2 {
		return nil, 0, fmt.Errorf("%w: run encoding: %d runs in %d bytes", ErrCorrupt, n, len(b))
	}
	if limit > 1<<32-1 {
		limit = 1<<32 - 1
	}
	runs := dst[:0]
	if uint64(cap(runs)) < n {
		runs = make([]Run, 0, n)
	}
	var end, total uint64
	for i := uint64(0); i < n; i++ {
		gap, k1 := binary.Uvarint(b)
		if k1 <= 0 || uint64(k1) != uvarintLen(gap) {
			return nil, 0, fmt.Errorf("%w: run encoding: run %d: bad gap", ErrCorrupt, i)
		}
		b = b[k1:]
		ln, k2 := binary.Uvarint(b)
		if k2 <= 0 || uint64(k2) != uvarintLen(ln) {
			return nil, 0, fmt.Errorf("%w: run encoding: run %d: bad length", ErrCorrupt, i)
		}
		b = b[k2:]
		if ln == 0 || (i > 0 && gap == 0) {
			return nil, 0, fmt.Errorf("%w: run encoding: run %d: gap %d, length %d (not canonical)", ErrCorrupt, i, gap, ln)
		}
		if gap > limit || ln > limit || end+gap > limit-ln {
			return nil, 0, fmt.Errorf("%w: run encoding: run %d ends past the chunk's %d elements", ErrCorrupt, i, limit)
		}
		start := end + gap
		runs = append(runs, Run{Start: uint32(start), Len: uint32(ln), At: uint32(total)})
		end = start + ln
		total += ln
	}
	if len(b) != 0 {
		return nil, 0, fmt.Errorf("%w: run encoding: %d trailing bytes", ErrCorrupt, len(b))
	}
	return runs, total, nil
}
