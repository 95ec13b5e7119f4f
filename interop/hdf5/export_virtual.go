package hdf5

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// Virtual datasets export as HDF5 virtual datasets (VDS) with the same
// type, extent, max extent, fill value and mappings. A mapping's source in
// the same file is named "." and exported beside it (it must be among the
// datasets exported). A source in another scc file, named by a relative
// or absolute path, is exported as an HDF5 file beside the output (see
// Options.SkipSources for the naming rule) and the mapping names that file
// by its relative name, which libhdf5 resolves against the directory of
// the HDF5 file. The block-number pattern %b in a file or dataset name is
// HDF5's printf mapping with the same pattern; of a %b file name, every
// block file that exists within the virtual dataset's extent is exported.
// A source file that does not exist is not exported and the mapping is
// kept: both libraries read its elements as the fill value (in the
// last-available view; libhdf5 1.10 ends the first-missing view of an
// unlimited mapping whose source file is missing at 0, where scc ends it
// at that mapping's first element). Unlimited
// mappings stay unlimited (H5S_UNLIMITED counts), and libhdf5 computes the
// extent from the sources as scc does; the view (first missing or last
// available) and the printf gap are access properties in both, chosen by
// the reader. Refused with ErrUnsupported, naming the mapping and before
// any file is made: a source named by URL (s3://...: export reads local
// source files only; export that file first and map it by hand), a
// relative source name that climbs out of the virtual file's directory,
// two sources that would be written under the same name (or under the
// name of the output or of a source file read), and a source
// selection that reaches past its source's extent where it cannot be cut
// to it.

// exportRun is the state of one Export across the files it writes.
type exportRun struct {
	// written maps each output path (cleaned) to the scc file exported
	// there ("" for the main output).
	written map[string]string
	// read holds the scc source files read (cleaned), none of which
	// may be written over.
	read    map[string]bool
	sources []SourceFile
}

// SourceFile is a source file of a virtual dataset that Export wrote.
type SourceFile struct {
	Source string // the scc file, as the virtual file resolves it
	Path   string // the HDF5 file written
}

// h5SourceName is the name an HDF5 mapping gives the export of scc
// source file name (%b kept): see Options.SkipSources.
func h5SourceName(name string) (string, error) {
	if filepath.IsAbs(name) {
		name = filepath.Base(name)
	} else if !filepath.IsLocal(name) {
		return "", fmt.Errorf("relative source file name %q leaves the virtual file's directory", name)
	}
	if strings.HasSuffix(name, ".scc") {
		return strings.TrimSuffix(name, ".scc") + ".h5", nil
	}
	return name + ".h5", nil
}

// srcInfo is what planVirtual needs of one concrete source: nil shape
// when the file or dataset does not exist.
type srcInfo struct {
	shape []uint64
	typ   engine.Type
}

// planVirtual fills in p's HDF5 spec from the virtual dataset's stored
// mappings and returns the source files to export beside dstPath.
func planVirtual(ctx context.Context, src *engine.File, p *exportPlan, opts *Options, dstPath string, run *exportRun) ([]SourceFile, error) {
	name := strings.TrimPrefix(p.ds.Path(), "/")
	spec, ok, err := src.VirtualSpec(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: dataset %q is not virtual", engine.ErrInvalid, name)
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
		return nil, nil
	}
	refuse := func(i int, m engine.VirtualMapping, why string) error {
		return fmt.Errorf("%w: virtual dataset %q: mapping %d (%s:%s): %s", ErrUnsupported, name, i, m.File, m.Dataset, why)
	}
	// A source that cannot be read fails the export with its own error
	// (ErrIO, ErrCorrupt, ...), not as something export cannot express.
	failed := func(i int, m engine.VirtualMapping, err error) error {
		return fmt.Errorf("virtual dataset %q: mapping %d (%s:%s): %w", name, i, m.File, m.Dataset, err)
	}
	var files []SourceFile
	outDir := filepath.Dir(dstPath)
	for i, m := range spec.Mappings {
		vs, vst, vc, vb := m.Virtual.Parts()
		ss, sst, sc, sb := m.Source.Parts()
		_, fileHas := engine.ExpandBlock(m.File, 0)
		_, dsetHas := engine.ExpandBlock(m.Dataset, 0)
		printf := fileHas || dsetHas
		u := slices.Index(vc, engine.Unlimited)
		unlimited := u >= 0
		self := m.File == "" || m.File == "."
		hfile := "."
		if !self {
			if strings.Contains(m.File, "://") {
				return nil, refuse(i, m, "source named by URL: HDF5 export reads local source files only")
			}
			if hfile, err = h5SourceName(m.File); err != nil {
				return nil, refuse(i, m, err.Error())
			}
		}
		// The concrete sources: one, or one per block of a printf
		// mapping whose virtual block starts within the extent.
		blocks := []uint64{0}
		if printf {
			blocks = blocks[:0]
			for b := uint64(0); vs[u]+b*max(vst[u], 1) < shape[u]; b++ {
				blocks = append(blocks, b)
			}
		}
		var infos []srcInfo
		for _, b := range blocks {
			file, _ := engine.ExpandBlock(m.File, b)
			dset, _ := engine.ExpandBlock(m.Dataset, b)
			var info srcInfo
			if self {
				names, err := tree.DatasetNames(src)
				if err != nil {
					return nil, err
				}
				if !slices.Contains(names, dset) {
					infos = append(infos, info)
					continue
				}
				if !opts.selected(dset) {
					return nil, refuse(i, m, fmt.Sprintf("source dataset %q is not among the datasets exported", dset))
				}
				sd, err := src.OpenDataset(ctx, dset, nil)
				if err != nil {
					return nil, failed(i, m, fmt.Errorf("source %q: %w", dset, err))
				}
				info = srcInfo{shape: sd.Shape(), typ: sd.Type()}
				sd.Close(ctx)
				infos = append(infos, info)
				continue
			}
			loc, _, err := src.VirtualSource(file)
			if err != nil {
				return nil, refuse(i, m, err.Error())
			}
			if info, err = sourceInfo(ctx, loc, dset); err != nil {
				return nil, failed(i, m, err)
			}
			infos = append(infos, info)
			if info.shape == nil && errors.Is(statErr(loc), os.ErrNotExist) {
				continue
			}
			run.read[filepath.Clean(loc)] = true
			hname, _ := engine.ExpandBlock(hfile, b)
			out := filepath.Join(outDir, hname)
			_, over := run.written[filepath.Clean(loc)]
			if over || run.read[out] {
				return nil, refuse(i, m, fmt.Sprintf("exporting source %s as %s would write over a source file", loc, out))
			}
			if prev, ok := run.written[out]; ok {
				if prev != loc {
					return nil, refuse(i, m, fmt.Sprintf("source %s would be exported as %s, which another file takes", loc, out))
				}
				continue
			}
			run.written[out] = loc
			if !opts.skipSources() {
				files = append(files, SourceFile{Source: loc, Path: out})
			}
		}
		for _, info := range infos {
			if info.shape != nil && info.typ != spec.Type {
				return nil, refuse(i, m, fmt.Sprintf("source of type %v, the virtual dataset's is %v", info.typ, spec.Type))
			}
		}
		srcDims := func(sh []uint64) []uint64 {
			if sh != nil {
				return sh
			}
			// No source: any extent that holds the selection.
			d := make([]uint64, len(ss))
			for k := range d {
				n := sc[k]
				if n == engine.Unlimited {
					n = 1
				}
				d[k] = ss[k] + (n-1)*max(sst[k], 1) + max(sb[k], 1)
			}
			return d
		}
		inside := func(sh []uint64, skip int) bool {
			for d := range sh {
				if d != skip && ss[d]+(sc[d]-1)*max(sst[d], 1)+max(sb[d], 1) > sh[d] {
					return false
				}
			}
			return true
		}
		hmap := h5.VirtualMap{File: hfile, Dataset: "/" + strings.TrimPrefix(m.Dataset, "/")}
		switch {
		case printf || unlimited:
			// libhdf5 takes an unlimited source selection up to the
			// source's current extent, as scc does; the bounded
			// dimensions, and the per-block selection of a printf
			// mapping, must lie within every source present.
			us := slices.Index(sc, engine.Unlimited)
			var dims []uint64
			for _, info := range infos {
				if info.shape == nil {
					continue
				}
				if !inside(info.shape, us) {
					return nil, refuse(i, m, fmt.Sprintf("source selection reaches past the source's extent %v", info.shape))
				}
				dims = info.shape
			}
			hmap.Virtual, hmap.SourceDims, hmap.Source = slab(vs, vst, unl(vc), vb), srcDims(dims), slab(ss, sst, unl(sc), sb)
		default:
			sdims := infos[0].shape
			if sdims == nil {
				hmap.Virtual, hmap.SourceDims, hmap.Source = slab(vs, vst, vc, vb), srcDims(nil), slab(ss, sst, sc, sb)
				break
			}
			// libhdf5 1.10 reads a source selection that reaches past
			// the source's extent as other elements, where scc reads
			// the fill value: such a mapping is cut to the extent (the
			// virtual elements it no longer maps read as the fill value
			// in both), which is done for boxes of the same shape;
			// other such mappings are refused.
			if !inside(sdims, -1) {
				vlen, vok := boxLen(vst, vc, vb)
				slen, sok := boxLen(sst, sc, sb)
				if !vok || !sok || !slices.Equal(vlen, slen) {
					return nil, refuse(i, m, fmt.Sprintf("source selection reaches past the source's extent %v (cut to it for boxes of the same shape only)", sdims))
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
			hmap.Virtual, hmap.SourceDims, hmap.Source = slab(vs, vst, vc, vb), sdims, slab(ss, sst, sc, sb)
		}
		p.spec.Virtual = append(p.spec.Virtual, hmap)
	}
	if len(p.spec.Virtual) == 0 {
		// Every mapping lies past its source's extent.
		p.virtual, p.values, p.mode = false, true, Reencoded
		p.spec.Virtual, p.spec.Contiguous, p.spec.MaxDims = nil, true, shape
		p.reason = "virtual dataset whose mappings all lie past their sources' extents: written as a contiguous dataset of the fill value"
		return files, nil
	}
	p.reason = fmt.Sprintf("HDF5 virtual dataset of %d mappings", len(p.spec.Virtual))
	return files, nil
}

// unl maps engine.Unlimited counts to h5.Unlimited.
func unl(v []uint64) []uint64 {
	out := slices.Clone(v)
	for i := range out {
		if out[i] == engine.Unlimited {
			out[i] = h5.Unlimited
		}
	}
	return out
}

func statErr(path string) error {
	_, err := os.Stat(path)
	return err
}

// sourceInfo opens the scc file at loc read-only and returns dataset
// dset's shape and type; a zero srcInfo (no error) when the file or the
// dataset does not exist, as both libraries then read the fill value.
func sourceInfo(ctx context.Context, loc, dset string) (srcInfo, error) {
	f, err := engine.Open(ctx, loc, &engine.Options{ReadOnly: true})
	if errors.Is(err, engine.ErrNotFound) {
		return srcInfo{}, nil
	}
	if err != nil {
		return srcInfo{}, fmt.Errorf("source file %s: %w", loc, err)
	}
	defer f.Close(ctx)
	d, err := f.OpenDataset(ctx, dset, nil)
	if errors.Is(err, engine.ErrNotFound) {
		return srcInfo{}, nil
	}
	if err != nil {
		return srcInfo{}, fmt.Errorf("source %s:%s: %w", loc, dset, err)
	}
	defer d.Close(ctx)
	return srcInfo{shape: d.Shape(), typ: d.Type()}, nil
}

// exportSource exports the source file sf names (all its datasets) and
// records it in run.
func exportSource(ctx context.Context, sf SourceFile, opts *Options, run *exportRun) error {
	f, err := engine.Open(ctx, sf.Source, &engine.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("source file %s: %w", sf.Source, err)
	}
	defer f.Close(ctx)
	var sub Options
	if opts != nil {
		sub = *opts
	}
	sub.Datasets = nil
	if err := os.MkdirAll(filepath.Dir(sf.Path), 0o755); err != nil {
		return fmt.Errorf("%w: %v", engine.ErrIO, err)
	}
	if _, err := exportFile(ctx, f, sf.Path, &sub, run); err != nil {
		return fmt.Errorf("source file %s: %w", sf.Source, err)
	}
	run.sources = append(run.sources, sf)
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
	rep := DatasetReport{Name: strings.TrimPrefix(p.ds.Path(), "/"), Path: p.path, Mode: Virtual, Reason: p.reason}
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
