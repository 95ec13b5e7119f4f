package engine

import (
	"context"
	"fmt"
)

// Append adds buf along the dataset's unlimited dimension, the commonest
// ingest step: buf holds whole slabs (one element along that dimension,
// the full extent along the others; C order, packed little-endian as
// Write takes them), the extent grows by as many slabs as buf holds and
// they are written there. first is the index of the first appended slab
// along the dimension. The dimension is the dataset's first one whose max
// shape is Unlimited; a dataset without one is ErrInvalid.
//
// Appends of one process to one dataset are ordered: each gets the slabs
// after the previous one's, whatever goroutine calls it. A failed write
// shrinks the extent back, so an error leaves the dataset as it was
// (unless that shrink fails too, which the error then says). The slabs
// are durable after the next Flush, as every write is.
func (d *Dataset) Append(ctx context.Context, buf []byte) (first uint64, err error) {
	s := d.s
	u := -1
	for i, m := range s.maxShape {
		if m == Unlimited {
			u = i
			break
		}
	}
	if u < 0 {
		return 0, fmt.Errorf("%w: dataset %q has no unlimited dimension to append along", ErrInvalid, d.Path())
	}
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if err := d.check(true); err != nil {
		return 0, err
	}
	shape := d.Shape()
	slab := uint64(s.elemSize)
	for i, n := range shape {
		if i != u {
			slab = mulSat(slab, n)
		}
	}
	if slab == 0 || uint64(len(buf))%slab != 0 || len(buf) == 0 {
		return 0, fmt.Errorf("%w: append of %d bytes to %q: not a whole number of slabs of %d bytes", ErrInvalid, len(buf), d.Path(), slab)
	}
	n := uint64(len(buf)) / slab
	first = shape[u]
	grown := append([]uint64(nil), shape...)
	grown[u] = addSat(first, n)
	if err := d.SetExtent(ctx, grown); err != nil {
		return 0, err
	}
	start := make([]uint64, len(shape))
	start[u] = first
	count := append([]uint64(nil), shape...)
	count[u] = n
	if err := d.Write(ctx, Box(start, count), buf); err != nil {
		if serr := d.SetExtent(context.WithoutCancel(ctx), shape); serr != nil {
			return 0, fmt.Errorf("%w (and shrinking the extent back failed: %v)", err, serr)
		}
		return 0, err
	}
	return first, nil
}

// AppendSlice is Append of typed elements; T must match the dataset's
// element type exactly.
func AppendSlice[T Element](ctx context.Context, ds *Dataset, data []T) (first uint64, err error) {
	if TypeOf[T]() != ds.Type() {
		return 0, fmt.Errorf("%w: append of %v to a dataset of %v", ErrInvalid, TypeOf[T](), ds.Type())
	}
	return ds.Append(ctx, toBytes(data))
}
