package vfd

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
)

// iovMax is the most iovecs one preadv/pwritev call accepts on Linux
// (IOV_MAX, UIO_MAXIOV). Longer runs are split into several calls.
const iovMax = 1024

// SectorSize is the granularity at which simulated crashes and torn writes
// keep or lose data: the unit a disk writes atomically.
const SectorSize = 512

// sortExtents validates exts and returns its non-empty extents in offset
// order. The caller's slice is never reordered: when it is already sorted and
// has no empty extents it is returned as is, otherwise a copy is sorted. The
// copies share the caller's buffers, so reading into a sorted copy fills the
// caller's buffers.
//
// Offsets must be non-negative and extents must not run past math.MaxInt64.
// When disjoint is set (writes), extents must not overlap: two writes to the
// same byte in one vector call would have no defined winner.
func sortExtents(exts []Extent, disjoint bool) (sorted []Extent, total int64, err error) {
	inOrder, empty := true, false
	prev := int64(-1) // offset of the previous non-empty extent
	for i, e := range exts {
		if e.Off < 0 || int64(len(e.Buf)) > math.MaxInt64-e.Off {
			return nil, 0, fmt.Errorf("%w: extent %d at offset %d, length %d", ErrInvalid, i, e.Off, len(e.Buf))
		}
		if len(e.Buf) == 0 {
			empty = true
			continue
		}
		total += int64(len(e.Buf))
		// Compare with the previous non-empty extent: an empty one in
		// between says nothing about order (found by FuzzVectors).
		if e.Off < prev {
			inOrder = false
		}
		prev = e.Off
	}
	sorted = exts
	if !inOrder || empty {
		sorted = make([]Extent, 0, len(exts))
		for _, e := range exts {
			if len(e.Buf) > 0 {
				sorted = append(sorted, e)
			}
		}
		if !inOrder {
			// Unstable is fine: equal offsets are legal only for reads, where
			// each buffer gets the same bytes whatever the order.
			slices.SortFunc(sorted, func(a, b Extent) int { return cmp.Compare(a.Off, b.Off) })
		}
	}
	if disjoint {
		for i := 1; i < len(sorted); i++ {
			if sorted[i].Off < sorted[i-1].End() {
				return nil, 0, fmt.Errorf("%w: extents [%d,%d) and [%d,%d) overlap", ErrInvalid,
					sorted[i-1].Off, sorted[i-1].End(), sorted[i].Off, sorted[i].End())
			}
		}
	}
	return sorted, total, nil
}

// forRuns calls fn for every run of sorted extents that are adjacent (each
// begins where the previous ends) and that holds at most maxLen extents, in
// offset order, stopping at the first error.
func forRuns(sorted []Extent, maxLen int, fn func(run []Extent) error) error {
	for start := 0; start < len(sorted); {
		end := start + 1
		for end < len(sorted) && end-start < maxLen && sorted[end].Off == sorted[end-1].End() {
			end++
		}
		if err := fn(sorted[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// checkOff validates the position of a single ReadAt/WriteAt/Truncate.
func checkOff(off int64, n int) error {
	if off < 0 || int64(n) > math.MaxInt64-off {
		return fmt.Errorf("%w: offset %d, length %d", ErrInvalid, off, n)
	}
	return nil
}

// readFrom implements ReadAt over an in-memory image: io.EOF when nothing
// could be read, io.ErrUnexpectedEOF when the image ends inside p.
func readFrom(data, p []byte, off int64) (int, error) {
	if err := checkOff(off, len(p)); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

// readVFrom implements ReadV over an in-memory image.
func readVFrom(data []byte, exts []Extent) error {
	for i, e := range exts {
		if err := checkOff(e.Off, len(e.Buf)); err != nil {
			return fmt.Errorf("extent %d: %w", i, err)
		}
	}
	for _, e := range exts {
		if len(e.Buf) == 0 {
			continue // reading nothing succeeds anywhere, as with preadv
		}
		if e.End() > int64(len(data)) {
			return fmt.Errorf("vfd: readv [%d,%d) past end of file (%d bytes): %w",
				e.Off, e.End(), len(data), io.ErrUnexpectedEOF)
		}
		copy(e.Buf, data[e.Off:])
	}
	return nil
}

// MaxMemSize is the largest file an in-memory driver (Mem, Crash) holds.
// Its bytes live in one slice, so a write or truncate at an absurd offset
// (from a corrupt index, say) is refused with ErrInvalid instead of
// attempting the allocation.
const MaxMemSize = 1 << 36

// growImage returns data resized to at least size bytes, new bytes zero.
//
// INVARIANT (kept by growImage and shrinkImage): data[len(data):cap(data)] is
// zero, so growing by reslicing exposes zeros.
func growImage(data []byte, size int64) ([]byte, error) {
	if size <= int64(len(data)) {
		return data, nil
	}
	if size > MaxMemSize {
		return data, fmt.Errorf("%w: size %d exceeds the in-memory limit %d", ErrInvalid, size, int64(MaxMemSize))
	}
	if size <= int64(cap(data)) {
		return data[:size], nil
	}
	c := max(size, min(2*int64(cap(data)), MaxMemSize))
	grown := make([]byte, size, c)
	copy(grown, data)
	return grown, nil
}

// resizeImage sets the image size, zeroing what a shrink cuts off so that a
// later growth reads zeros, as a truncated file does.
func resizeImage(data []byte, size int64) ([]byte, error) {
	if size < 0 {
		return data, fmt.Errorf("%w: size %d", ErrInvalid, size)
	}
	if size >= int64(len(data)) {
		return growImage(data, size)
	}
	clear(data[size:])
	return data[:size], nil
}

// writeInto writes p at off into data, growing it. Writing nothing changes
// nothing, as pwrite of zero bytes does not extend a file.
func writeInto(data, p []byte, off int64) ([]byte, error) {
	if len(p) == 0 {
		return data, nil
	}
	data, err := growImage(data, off+int64(len(p)))
	if err != nil {
		return data, err
	}
	copy(data[off:], p)
	return data, nil
}
