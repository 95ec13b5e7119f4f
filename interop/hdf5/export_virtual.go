package hdf5

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// Virtual datasets export as HDF5 virtual datasets (VDS) with the same
// type, extent, fill value and mappings, each mapping's source named in
// the HDF5 file itself ("."): the sources are exported beside it. Only
// what HDF5 can express that way is exported; a virtual dataset with a
// mapping whose source lives in another scc file, whose names carry the
// block-number pattern %b, whose count is unlimited, or whose source is
// not among the exported datasets is refused (ErrUnsupported, naming the
// mapping and why) before the file is made.

// planVirtual fills in p's HDF5 spec from the virtual dataset's stored
// mappings.
func planVirtual(ctx context.Context, src *engine.File, p *exportPlan, opts *Options) error {
	name := p.ds.Name()
	spec, ok, err := src.VirtualSpec(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: dataset %q is not virtual", engine.ErrInvalid, name)
	}
	shape, maxShape := p.ds.Shape(), p.ds.MaxShape()
	for i := range maxShape {
		if maxShape[i] == engine.Unlimited {
			maxShape[i] = h5.Unlimited
		}
	}
	p.spec = h5.Spec{Type: h5Type(spec.Type), Dims: shape, MaxDims: maxShape, Fill: spec.Fill}
	if len(spec.Mappings) == 0 {
		// HDF5 has no virtual dataset without a mapping; every element
		// is the fill value, as a contiguous dataset never written is.
		p.virtual, p.values, p.mode = false, true, Reencoded
		p.spec.Contiguous, p.spec.MaxDims = true, shape
		p.reason = "virtual dataset without mappings: written as a contiguous dataset of the fill value"
		return nil
	}
	refuse := func(i int, m engine.VirtualMapping, why string) error {
		return fmt.Errorf("%w: virtual dataset %q: mapping %d (%s:%s): %s", ErrUnsupported, name, i, m.File, m.Dataset, why)
	}
	for i, m := range spec.Mappings {
		if m.File != "" && m.File != "." {
			return refuse(i, m, "source in another file (HDF5 export writes sources of the same file only)")
		}
		if strings.Contains(m.Dataset, "%b") {
			return refuse(i, m, "block-number pattern %b in the source name")
		}
		if !opts.selected(m.Dataset) {
			return refuse(i, m, "source dataset is not among the datasets exported")
		}
		vs, vst, vc, vb := m.Virtual.Parts()
		ss, sst, sc, sb := m.Source.Parts()
		if slices.Contains(vc, engine.Unlimited) || slices.Contains(sc, engine.Unlimited) {
			return refuse(i, m, "unlimited mapping")
		}
		sd, err := src.OpenDatasetContext(ctx, m.Dataset)
		if err != nil {
			return refuse(i, m, fmt.Sprintf("source: %v", err))
		}
		sdims := sd.Shape()
		styp := sd.Type()
		sd.Close()
		if styp != spec.Type {
			return refuse(i, m, fmt.Sprintf("source of type %v, the virtual dataset's is %v", styp, spec.Type))
		}
		// libhdf5 1.10 reads a source selection that reaches past the
		// source's extent as other elements, where scc reads the fill
		// value: such a mapping is cut to the extent (the virtual
		// elements it no longer maps read as the fill value in both),
		// which is done for boxes of the same shape; other such mappings
		// are refused.
		inside := true
		for d := range sdims {
			if ss[d]+(sc[d]-1)*max(sst[d], 1)+max(sb[d], 1) > sdims[d] {
				inside = false
			}
		}
		if !inside {
			vlen, vok := boxLen(vst, vc, vb)
			slen, sok := boxLen(sst, sc, sb)
			if !vok || !sok || !slices.Equal(vlen, slen) {
				return refuse(i, m, fmt.Sprintf("source selection reaches past the source's extent %v (cut to it for boxes of the same shape only)", sdims))
			}
			empty := false
			for d := range slen {
				if ss[d] >= sdims[d] {
					empty = true
					break
				}
				slen[d] = min(slen[d], sdims[d]-ss[d])
			}
			if empty {
				continue
			}
			vst, vc, vb = ones(len(slen)), slen, ones(len(slen))
			sst, sc, sb = ones(len(slen)), slen, ones(len(slen))
		}
		p.spec.Virtual = append(p.spec.Virtual, h5.VirtualMap{
			Virtual: slab(vs, vst, vc, vb), File: ".", Dataset: "/" + strings.TrimPrefix(m.Dataset, "/"),
			SourceDims: sdims, Source: slab(ss, sst, sc, sb),
		})
	}
	if len(p.spec.Virtual) == 0 {
		// Every mapping lies past its source's extent.
		p.virtual, p.values, p.mode = false, true, Reencoded
		p.spec.Virtual, p.spec.Contiguous, p.spec.MaxDims = nil, true, shape
		p.reason = "virtual dataset whose mappings all lie past their sources' extents: written as a contiguous dataset of the fill value"
		return nil
	}
	p.reason = fmt.Sprintf("HDF5 virtual dataset of %d mappings", len(p.spec.Virtual))
	return nil
}

// boxLen returns the length along each dimension of a hyperslab that is
// a box (along each dimension one block, or blocks that touch), ok false
// for another.
func boxLen(stride, count, block []uint64) (n []uint64, ok bool) {
	n = make([]uint64, len(count))
	for i := range count {
		b := max(block[i], 1)
		if count[i] > 1 && max(stride[i], 1) != b {
			return nil, false
		}
		n[i] = count[i] * b
	}
	return n, true
}

func ones(n int) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// slab makes an h5.Slab, with HDF5's defaults (1) for zero strides and
// blocks.
func slab(start, stride, count, block []uint64) h5.Slab {
	fix := func(v []uint64) []uint64 {
		out := make([]uint64, len(start))
		for i := range out {
			out[i] = 1
			if i < len(v) && v[i] != 0 {
				out[i] = v[i]
			}
		}
		return out
	}
	return h5.Slab{Start: start, Stride: fix(stride), Count: count, Block: fix(block)}
}

// exportVirtual creates the HDF5 virtual dataset p plans.
func exportVirtual(_ context.Context, f *h5.File, p *exportPlan, _ *Options) (DatasetReport, error) {
	rep := DatasetReport{Name: p.ds.Name(), Path: p.path, Mode: Virtual, Reason: p.reason}
	hd, err := f.CreateDataset(p.path, p.spec)
	if err != nil {
		return rep, err
	}
	defer hd.Close()
	attrs, err := h5Attrs(p.ds.Attrs())
	if err != nil {
		return rep, err
	}
	if err := hd.WriteAttrs(attrs); err != nil {
		return rep, err
	}
	return rep, hd.Close()
}
