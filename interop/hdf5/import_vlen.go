package hdf5

import (
	"context"
	"errors"
	"fmt"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// Variable-length data crosses onto scc's variable-length layout
// (engine.Vlen): an HDF5 variable-length sequence of a numeric, bool,
// complex or described type (enum, opaque, bitfield, array, compound of
// fixed-size members) as a dataset of that type (big-endian values made
// little-endian, per member), a variable-length string (ASCII or UTF-8) as a dataset
// of Uint8 holding each string's bytes, with the attribute VlenStringAttr
// naming the character set, which export reads to write a variable-length
// HDF5 string again (and which it does not write as an attribute). An
// empty sequence is scc's fill value.

// An HDF5 object reference crosses as the path of the object it points to
// (absolute, as H5Rget_name gives it; the null reference as ""): a
// dataset of references as a variable-length string dataset marked by
// ReferenceAttr, an attribute of references as a string (scalar) or an
// array of fixed-length strings, marked by the attribute named
// ReferenceAttr+":"+its name on the same object. An attribute of
// variable-length sequences of one object reference each (HDF5's
// dimension lists, DIMENSION_LIST: the dimension scale of each
// dimension) crosses the same way, its mark "object-sequence"; sequences
// of other lengths are left out and named. Region references (a
// selection of another dataset) are refused and named: scc has no form
// for a selection.

// ReferenceAttr marks a dataset of strings that were HDF5 object
// references; its value is "object".
const ReferenceAttr = "scc:hdf5-reference"

// VlenStringAttr marks an scc variable-length Uint8 dataset whose elements
// are strings: its value is the character set, "utf-8" or "ascii". The
// Zarr bridge sets and reads the same attribute.
const VlenStringAttr = zarrmap.VlenStringAttr

// maxVlenBox bounds the variable-length bytes one chunk-sized box may
// hold: scc's limit on a chunk's heap.
const maxVlenBox = 256 << 20

// importVlen copies a variable-length dataset box by box.
func importVlen(ctx context.Context, hd *h5.Dataset, ds *engine.Dataset, p *importPlan, rep *DatasetReport) error {
	t := p.info.Type.LittleEndian() // the memory type: little-endian, per member
	refs := t.Class == h5.ObjRef
	if t.Class == h5.String || refs {
		cs := "ascii"
		if t.UTF8 || refs {
			cs = "utf-8"
		}
		if err := ds.SetAttr(ctx, VlenStringAttr, engine.StringAttr(cs)); err != nil {
			return err
		}
	}
	if refs {
		if err := ds.SetAttr(ctx, ReferenceAttr, engine.StringAttr("object")); err != nil {
			return err
		}
		t.Size = 1 // the paths' bytes
	}
	if !p.info.Allocated {
		return nil
	}
	chunk, dims := p.chunk, p.dims
	elem := uint64(t.Size)
	var err error
	forEachCoord(gridOf(dims, chunk), func(c []uint64) bool {
		if err = ctx.Err(); err != nil {
			return false
		}
		start, count := make([]uint64, len(c)), make([]uint64, len(c))
		for i := range c {
			start[i] = c[i] * chunk[i]
			count[i] = min(chunk[i], dims[i]-start[i])
		}
		var lens []uint64
		var data []byte
		if refs {
			lens, data, err = readRefBox(hd, start, count)
		} else {
			lens, data, err = hd.ReadVlen(t, start, count, maxVlenBox)
		}
		switch {
		case errors.Is(err, h5.ErrTooLarge):
			err = &skipError{path: p.path, err: err, reason: err.Error()}
		case errors.Is(err, h5.ErrFilter):
			err = filterSkip(p, start, err)
		}
		if err != nil {
			return false
		}
		vals := make([][]byte, len(lens))
		off, empty := uint64(0), true
		for i, l := range lens {
			n := l * elem
			if n > uint64(len(data))-off {
				err = fmt.Errorf("%w: dataset %q: sequence lengths exceed the data read", ErrHDF5, p.path)
				return false
			}
			if n > 0 {
				vals[i] = data[off : off+n : off+n]
				empty = false
			}
			off += n
		}
		if empty {
			return true // the fill value on both sides
		}
		if err = ds.WriteVlen(ctx, engine.Box(start, count), vals); err != nil {
			return false
		}
		rep.Chunks++
		rep.LogicalBytes += int64(len(data))
		return true
	})
	return err
}

// readRefBox reads a box of object references as the paths' bytes, in
// ReadVlen's form.
func readRefBox(hd *h5.Dataset, start, count []uint64) ([]uint64, []byte, error) {
	names, err := hd.ReadObjRefs(start, count, maxVlenBox/8)
	if err != nil {
		return nil, nil, err
	}
	lens := make([]uint64, len(names))
	var n int
	for i, s := range names {
		lens[i] = uint64(len(s))
		n += len(s)
		if n > maxVlenBox {
			return nil, nil, fmt.Errorf("%w: paths of %v+%v exceed %d bytes", h5.ErrTooLarge, start, count, maxVlenBox)
		}
	}
	data := make([]byte, 0, n)
	for _, s := range names {
		data = append(data, s...)
	}
	return lens, data, nil
}
