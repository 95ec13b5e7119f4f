package engine

import (
	"context"
	"fmt"
)

// Reads of one field of a compound dataset, as h5py's ds['field']: the
// selection's elements are read whole (a chunk holds whole elements), and
// the field's bytes are gathered into the caller's buffer. A field path
// names a field of a nested compound with '.' ("pos.x"; Type.FieldOf).

// fieldMaxRead bounds the whole elements read at once for a field, so a
// field read of a large selection costs the field's buffer plus this.
const fieldMaxRead = 8 << 20

// ReadFieldBytes reads the field that path names of the selection's
// elements of the compound dataset ds into out, which holds exactly
// NumElements times the field's size bytes (the field's elements, C order,
// little-endian). ErrInvalid for a dataset that is not compound or a
// buffer of another size, ErrNotFound for a path that names no field.
func ReadFieldBytes(ctx context.Context, ds *Dataset, sel Selection, path string, out []byte) error {
	ft, off, err := ds.Type().FieldOf(path)
	if err != nil {
		return fmt.Errorf("dataset %q: %w", ds.s.path(), err)
	}
	sel = ds.s.fit(sel)
	n := sel.NumElements()
	fs := ft.Size()
	if uint64(len(out)) != n*uint64(fs) || fs > 0 && uint64(len(out))/uint64(fs) != n {
		return fmt.Errorf("%w: dataset %q: field %q of %d elements needs %d bytes, buffer has %d",
			ErrInvalid, ds.s.path(), path, n, n*uint64(fs), len(out))
	}
	return readFieldRows(ctx, ds, sel, func(elems []byte, first uint64) {
		es := ds.Type().Size()
		for i := 0; i*es < len(elems); i++ {
			copy(out[(first+uint64(i))*uint64(fs):], elems[i*es+off:i*es+off+fs])
		}
	})
}

// ReadField reads the field that path names into out (one T per
// element), converting the field's elements as ReadAs does with opts: a
// numeric field into any number type, an enum field as its base type.
// A field of an array type reads as its elements in C order (out holds
// NumElements times the array's element count) when the array's element
// type converts to T.
func ReadField[T Element](ctx context.Context, ds *Dataset, sel Selection, path string, out []T, opts ConvertOptions) error {
	ft, _, err := ds.Type().FieldOf(path)
	if err != nil {
		return fmt.Errorf("dataset %q: %w", ds.s.path(), err)
	}
	st, count := ft, 1
	for st.Class() == ClassArray {
		for _, d := range st.Dims() {
			count *= d
		}
		st = st.Base()
	}
	dt := TypeOf[T]()
	if !canConvert(st, dt) {
		return fmt.Errorf("%w: dataset %q: reading field %q of type %v into %v elements", ErrInvalid, ds.s.path(), path, ft, dt)
	}
	sel = ds.s.fit(sel)
	n := sel.NumElements()
	if uint64(len(out)) != n*uint64(count) {
		return fmt.Errorf("%w: dataset %q: field %q of %d elements needs %d values, buffer has %d",
			ErrInvalid, ds.s.path(), path, n, n*uint64(count), len(out))
	}
	raw := make([]byte, len(out)*st.Size())
	if err := ReadFieldBytes(ctx, ds, sel, path, raw); err != nil {
		return err
	}
	dst := make([]byte, len(out)*dt.Size())
	if convType(st) == dt {
		copy(dst, raw)
	} else if err := convertElems(dst, dt, raw, st, opts); err != nil {
		return classifyIn(err, ds.s.path())
	}
	fromBytes(dst, out)
	return nil
}

// readFieldRows reads the selection's elements in pieces of at most
// fieldMaxRead bytes (whole rows of the selection's first dimension, at
// least one) and hands each piece to use with the index of its first
// element.
func readFieldRows(ctx context.Context, ds *Dataset, sel Selection, use func(elems []byte, first uint64)) error {
	es := uint64(ds.Type().Size())
	shape := sel.Shape()
	if len(shape) == 0 || sel.NumElements() == 0 {
		return nil
	}
	start, stride, count, block := sel.Parts()
	rowElems := sel.NumElements() / shape[0]
	rows := max(1, uint64(fieldMaxRead)/max(1, rowElems*es))
	// The selection's rows (first dimension) in order, as runs of
	// consecutive rows: one run when the blocks touch, else one per block.
	type run struct{ from, n uint64 }
	runs := []run{{start[0], count[0] * block[0]}}
	if count[0] > 1 && stride[0] != block[0] {
		runs = runs[:0]
		for c := uint64(0); c < count[0]; c++ {
			runs = append(runs, run{start[0] + c*stride[0], block[0]})
		}
	}
	first := uint64(0)
	for _, r := range runs {
		for b := uint64(0); b < r.n; b += rows {
			nr := min(rows, r.n-b)
			piece := Hyperslab(append([]uint64{r.from + b}, start[1:]...), append([]uint64{nr}, stride[1:]...),
				append([]uint64{1}, count[1:]...), append([]uint64{nr}, block[1:]...))
			buf := make([]byte, piece.NumElements()*es)
			if err := ds.Read(ctx, piece, buf); err != nil {
				return err
			}
			use(buf, first)
			first += piece.NumElements()
		}
	}
	return nil
}
