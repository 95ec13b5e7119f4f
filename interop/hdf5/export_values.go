package hdf5

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// Layouts without pipeline images to copy (contiguous, variable-length and
// sparse datasets) are exported through their values: read from scc,
// written with H5Dwrite, HDF5 running its own pipeline.
//
//	contiguous  an HDF5 contiguous dataset of the same type, extent and
//	            fill value, written in slabs of whole rows
//	vlen        a chunked HDF5 dataset (same chunk shape, maximum
//	            dimensions) of variable-length sequences of the element
//	            type: vlen of uint8 for scc's byte datasets (h5py reads
//	            each element as a numpy uint8 array), a variable-length
//	            string for a Uint8 dataset VlenStringAttr marks as text
//	            (the engine's type keeps no such mark), unfiltered
//	sparse      a chunked HDF5 dataset with the same chunk shape and fill
//	            value holding every element (undefined ones as the fill),
//	            only the chunks that hold a defined element written, and
//	            the defined set as a companion dataset (below)
//
// The defined set of a sparse dataset "a/b" is the dataset
// DefinedPrefix+"a/b": h5py's boolean (an int8 enum), same extent and
// chunk shape, TRUE where an element is defined, fill FALSE; the exported
// dataset's attribute DefinedAttr names it (its path without the leading
// '/'). Import restores a sparse dataset from that pair, and never imports
// the companion datasets themselves.

// DefinedAttr is the attribute of an exported sparse dataset that names
// the companion dataset holding its defined set.
const DefinedAttr = "scc:defined"

// DefinedPrefix is the group path under which sparse datasets' defined
// sets are exported.
const DefinedPrefix = ".scc/defined/"

// slabBytes bounds what one values transfer holds in memory.
const slabBytes = 4 << 20

// exportValues writes p.ds's elements through H5Dwrite.
func exportValues(ctx context.Context, f *h5.File, p *exportPlan, opts *Options) (DatasetReport, error) {
	ds := p.ds
	rep := DatasetReport{Name: strings.TrimPrefix(ds.Path(), "/"), Path: p.path, Mode: Reencoded, Reason: p.reason}
	hd, err := f.CreateDataset(p.path, p.spec)
	if err != nil {
		return rep, err
	}
	defer hd.Close()
	sattrs, err := ds.Attrs()
	if err != nil {
		return rep, err
	}
	if p.spec.Type.Vlen && p.spec.Type.Class == h5.String {
		// The mark is the HDF5 type now, not an attribute.
		sattrs = slices.DeleteFunc(sattrs, func(a engine.Attr) bool { return a.Name == VlenStringAttr })
	}
	attrs, err := h5Attrs(sattrs, nil)
	if err != nil {
		return rep, err
	}
	var mask *h5.Dataset
	if ds.Layout() == engine.Sparse {
		mpath := DefinedPrefix + p.path
		attrs = append(attrs, h5.Attr{Name: DefinedAttr, Value: h5.AttrValue{Kind: h5.AttrString, Data: []byte(mpath)}})
		ms := h5.Spec{Type: h5.Type{Class: h5.Bool, Size: 1}, Dims: p.spec.Dims, MaxDims: p.spec.MaxDims, Chunk: p.spec.Chunk, Fill: []byte{0},
			Filters: []h5.Filter{{ID: h5.FilterDeflate, Level: opts.level()}}}
		if mask, err = f.CreateDataset(mpath, ms); err != nil {
			return rep, err
		}
		defer mask.Close()
	}
	if err := hd.WriteAttrs(attrs); err != nil {
		return rep, err
	}
	elem := ds.Type().Size()
	shape := p.spec.Dims
	write := func(start, count []uint64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sel := engine.Box(start, count)
		n := uint64(1)
		for _, c := range count {
			n *= c
		}
		switch ds.Layout() {
		case engine.Vlen:
			vals, err := ds.ReadVlen(ctx, sel)
			if err != nil {
				return err
			}
			lens := make([]uint64, len(vals))
			var data []byte
			for i, v := range vals {
				lens[i] = uint64(len(v) / elem)
				data = append(data, v...)
			}
			if err := hd.WriteVlen(p.spec.Type, start, count, lens, data); err != nil {
				return err
			}
			rep.LogicalBytes += int64(len(data))
		case engine.Sparse:
			pos, err := ds.DefinedElements(ctx, sel)
			if err != nil {
				return err
			}
			if len(pos) == 0 {
				return nil // erased since it was listed: stays the fill
			}
			buf := make([]byte, n*uint64(elem))
			if err := ds.Read(ctx, sel, buf); err != nil {
				return err
			}
			if err := hd.WriteBox(p.spec.Type, start, count, buf); err != nil {
				return err
			}
			def := make([]byte, n)
			for _, i := range pos {
				def[i] = 1
			}
			if err := mask.WriteBox(h5.Type{Class: h5.Bool, Size: 1}, start, count, def); err != nil {
				return err
			}
			rep.LogicalBytes += int64(len(buf))
		default:
			buf := make([]byte, n*uint64(elem))
			if err := ds.Read(ctx, sel, buf); err != nil {
				return err
			}
			if err := hd.WriteBox(p.spec.Type, start, count, buf); err != nil {
				return err
			}
			rep.LogicalBytes += int64(len(buf))
		}
		rep.Chunks++
		return nil
	}
	if p.spec.Space != "" {
		// The one element of a scalar dataset's rank-1 storage; a null
		// dataset has none.
		if p.spec.Space == "scalar" {
			if err := write([]uint64{0}, []uint64{1}); err != nil {
				return rep, err
			}
		}
		return rep, hd.Close()
	}
	if p.spec.Contiguous {
		// Slabs of whole rows along the first dimension.
		row := uint64(elem)
		for _, d := range shape[1:] {
			row *= d
		}
		rows := max(1, slabBytes/max(row, 1))
		for r := uint64(0); r < shape[0]; r += rows {
			count := append([]uint64{min(rows, shape[0]-r)}, shape[1:]...)
			start := make([]uint64, len(shape))
			start[0] = r
			if err := write(start, count); err != nil {
				return rep, err
			}
		}
		return rep, hd.Close()
	}
	// The stored chunks only: written back first (without a commit) so
	// that the index lists every chunk written before the call.
	if err := ds.Evict(ctx); err != nil {
		return rep, err
	}
	exts, err := ds.ChunkExtents(ctx)
	if err != nil {
		return rep, err
	}
	chunk := ds.Chunk()
next:
	for _, e := range exts {
		start := make([]uint64, len(chunk))
		count := make([]uint64, len(chunk))
		for i, c := range e.Coord {
			start[i] = c * chunk[i]
			if start[i] >= shape[i] {
				continue next // beyond the extent the HDF5 dataset was created with
			}
			count[i] = min(chunk[i], shape[i]-start[i])
		}
		if err := write(start, count); err != nil {
			return rep, fmt.Errorf("chunk %v: %w", e.Coord, err)
		}
	}
	if mask != nil {
		if err := mask.Close(); err != nil {
			return rep, err
		}
	}
	return rep, hd.Close()
}

// planValues plans the export of a dataset whose layout has no pipeline
// images to copy.
func planValues(ds *engine.Dataset, p *exportPlan, opts *Options) error {
	shape, maxShape, chunk := ds.Shape(), ds.MaxShape(), ds.Chunk()
	for i := range maxShape {
		if maxShape[i] == engine.Unlimited {
			maxShape[i] = h5.Unlimited
		}
	}
	p.mode = Reencoded
	p.spec = h5.Spec{Type: h5Type(ds.Type()), Dims: shape, MaxDims: maxShape}
	switch ds.Layout() {
	case engine.Contiguous:
		p.spec.Contiguous = true
		p.spec.MaxDims = shape
		p.spec.Fill = ds.Fill()
		p.reason = "contiguous layout: written through H5Dwrite as an HDF5 contiguous dataset"
		return nil
	case engine.Vlen:
		p.spec.Vlen = true
		p.spec.Chunk = chunk
		if cs, ok := vlenStringMark(ds); ok {
			p.spec.Type = h5.Type{Class: h5.String, Size: 1, Vlen: true, UTF8: cs == "utf-8"}
		}
		p.reason = "variable-length layout: written through H5Dwrite as variable-length sequences of " + p.spec.Type.String()
	case engine.Sparse:
		if _, err := ds.Attr(DefinedAttr); err == nil {
			return fmt.Errorf("%w: sparse dataset %q has an attribute %q, the name export gives the attribute naming its defined set", ErrUnsupported, ds.Path(), DefinedAttr)
		}
		p.spec.Chunk = chunk
		p.spec.Fill = ds.Fill()
		compressed := false
		for _, fl := range ds.Filters() {
			n, _ := fl.Stage()
			compressed = compressed || n != "shuffle"
		}
		if compressed {
			p.spec.Filters = []h5.Filter{{ID: h5.FilterShuffle}, {ID: h5.FilterDeflate, Level: opts.level()}}
		}
		p.reason = fmt.Sprintf("sparse layout: written through H5Dwrite (%s), the defined set as %s%s", hdf5Pipeline(p.spec.Filters), DefinedPrefix, p.path)
	}
	for i := range chunk {
		if p.spec.MaxDims[i] != h5.Unlimited && chunk[i] > p.spec.MaxDims[i] {
			return fmt.Errorf("%w: dataset %q: chunk %v exceeds the fixed max shape %v along dimension %d, which HDF5 refuses",
				ErrUnsupported, ds.Path(), chunk, ds.MaxShape(), i)
		}
	}
	return nil
}

// vlenStringMark returns the character set VlenStringAttr names on a
// variable-length Uint8 dataset: its elements are exported as HDF5
// variable-length strings.
func vlenStringMark(ds *engine.Dataset) (string, bool) {
	if ds.Layout() != engine.Vlen || ds.Type() != engine.Uint8 {
		return "", false
	}
	v, err := ds.Attr(VlenStringAttr)
	if err != nil {
		return "", false
	}
	cs, err := v.Str()
	if err != nil || cs != "utf-8" && cs != "ascii" {
		return "", false
	}
	return cs, true
}

// definedName reports whether path is a companion dataset of a sparse
// dataset's defined set.
func definedName(path string) bool {
	return strings.HasPrefix(strings.TrimPrefix(path, "/"), DefinedPrefix)
}
