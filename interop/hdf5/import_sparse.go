package hdf5

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// planSparse makes p a sparse import when the dataset carries DefinedAttr
// (an export of an scc sparse dataset, see export_values.go): the named
// companion must be a boolean dataset of the same extent and chunk shape,
// and the values dataset chunked; anything else is left out with the
// reason, never imported dense with its defined set lost.
func planSparse(f *h5.File, d *h5.Dataset, p *importPlan, opts *Options) error {
	attrs, _, err := d.ReadAttrs()
	if err != nil {
		return err
	}
	mpath := ""
	for _, a := range attrs {
		if a.Name == DefinedAttr {
			if a.Value.Kind != h5.AttrString {
				return unsupported(p.path, "attribute %s is not a string", DefinedAttr)
			}
			mpath = string(a.Value.Data)
		}
	}
	if mpath == "" {
		return nil
	}
	if !definedName(mpath) {
		return unsupported(p.path, "attribute %s names %q, outside %s", DefinedAttr, mpath, DefinedPrefix)
	}
	if p.info.Layout != h5.Chunked {
		return unsupported(p.path, "a sparse dataset's values (attribute %s) in an unchunked dataset", DefinedAttr)
	}
	m, err := f.OpenDataset(mpath)
	if err != nil {
		return unsupported(p.path, "its defined set %q cannot be opened: %v", mpath, err)
	}
	defer m.Close()
	mi, err := m.Info()
	if err != nil {
		return err
	}
	if mi.Space != "" || mi.Type.Class != h5.Bool || mi.Layout != h5.Chunked || !equalDims(mi.Dims, p.info.Dims) || !equalDims(mi.Chunk, p.info.Chunk) {
		return unsupported(p.path, "its defined set %q is not a boolean dataset of the same extent and chunk shape", mpath)
	}
	p.defined = mpath
	p.mode, p.zlibDirect = Reencoded, false
	p.reason = "sparse dataset: defined set from /" + mpath
	p.spec.Layout = engine.Sparse
	p.spec.Chunk = p.info.Chunk
	p.spec.Filters = opts.filters()
	return nil
}

func equalDims(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// importSparse writes the defined elements of the HDF5 dataset hd into the
// sparse dataset ds, chunk by chunk of the defined set's stored chunks, as
// runs along the last dimension (each Write defines what it writes).
func importSparse(ctx context.Context, f *h5.File, hd *h5.Dataset, ds *engine.Dataset, p *importPlan, rep *DatasetReport) error {
	m, err := f.OpenDataset(p.defined)
	if err != nil {
		return err
	}
	defer m.Close()
	mi, err := m.Info()
	if err != nil {
		return err
	}
	if !mi.Allocated {
		return nil // nothing defined
	}
	chunk, dims := p.spec.Chunk, p.spec.Shape
	grid := gridOf(dims, chunk)
	coords, err := storedCoords(ctx, m, grid, chunk)
	if err != nil {
		return err
	}
	elemType := p.info.Type
	elemType = elemType.LittleEndian()
	size := uint64(elemType.Size)
	one := func(c []uint64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		start, count := make([]uint64, len(c)), make([]uint64, len(c))
		n := uint64(1)
		for i := range c {
			start[i] = c[i] * chunk[i]
			count[i] = min(chunk[i], dims[i]-start[i])
			n *= count[i]
		}
		def := make([]byte, n)
		if err := m.ReadBox(h5.Type{Class: h5.Bool, Size: 1}, start, count, def); err != nil {
			return err
		}
		defined := false
		for _, b := range def {
			defined = defined || b != 0
		}
		if !defined {
			return nil
		}
		vals := make([]byte, n*size)
		if err := hd.ReadBox(elemType, start, count, vals); err != nil {
			return err
		}
		r := len(c) - 1
		row := count[r]
		at := make([]uint64, len(c))
		for base := uint64(0); base < n; base += row {
			// at: the coordinates of the row's first element.
			rem := base / row
			for i := r - 1; i >= 0; i-- {
				at[i] = start[i] + rem%count[i]
				rem /= count[i]
			}
			for j := uint64(0); j < row; {
				if def[base+j] == 0 {
					j++
					continue
				}
				k := j
				for k < row && def[base+k] != 0 {
					k++
				}
				at[r] = start[r] + j
				cnt := make([]uint64, len(c))
				for i := range cnt {
					cnt[i] = 1
				}
				cnt[r] = k - j
				if err := ds.Write(ctx, engine.Box(at, cnt), vals[(base+j)*size:(base+k)*size]); err != nil {
					return fmt.Errorf("chunk %v: %w", c, err)
				}
				j = k
			}
		}
		rep.Chunks++
		rep.LogicalBytes += int64(len(vals))
		return nil
	}
	if coords == nil {
		var err error
		forEachCoord(grid, func(c []uint64) bool {
			err = one(c)
			return err == nil
		})
		return err
	}
	for _, c := range coords {
		if err := one(c); err != nil {
			return err
		}
	}
	return nil
}
