package hdf5

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// An HDF5 virtual dataset imports as an scc virtual dataset of the same
// mappings (engine.CreateVirtualDataset): each mapping's selections are
// regular hyperslabs in both (unlimited counts and blocks stay
// unlimited, so the extent follows the sources as HDF5's does), a source
// in the same HDF5 file names the scc dataset it is imported as (its path
// without the leading '/'), and a source in another file names the scc
// file that file becomes when it is imported under the same name, ".h5"
// or ".hdf5" replaced by ".scc" (".scc" appended to any other name; %b
// block patterns kept): the inverse of what Export names the sources it
// writes, so a virtual file and its sources exported together import
// back together. The source files are not imported with it: import each
// under that name. A mapping whose selection is not a regular hyperslab
// (points, unions of slabs) has no scc form and skips the dataset, named.

// sccSourceName is the scc file name a mapping of an imported virtual
// dataset gives its HDF5 source file ("" for the same file).
func sccSourceName(name string) string {
	if name == "." {
		return ""
	}
	for _, ext := range []string{".h5", ".hdf5"} {
		if strings.HasSuffix(name, ext) {
			return strings.TrimSuffix(name, ext) + ".scc"
		}
	}
	return name + ".scc"
}

// allSource is the whole of a source whose shape is that of the virtual
// selection v without its dimensions of one element.
func allSource(v h5.Slab) engine.Selection {
	var shape []uint64
	for i := range v.Count {
		if n := v.Count[i] * v.Block[i]; n != 1 {
			shape = append(shape, n)
		}
	}
	if len(shape) == 0 {
		shape = []uint64{1}
	}
	return engine.Box(make([]uint64, len(shape)), shape)
}

func slabSel(s h5.Slab) engine.Selection {
	return engine.Hyperslab(s.Start, s.Stride, s.Count, s.Block)
}

// planVirtualImport reads the mappings of a virtual dataset.
func planVirtualImport(d *h5.Dataset, p *importPlan, typ engine.Type, maxShape []uint64) (*importPlan, error) {
	maps, err := d.VirtualMaps()
	if errors.Is(err, h5.ErrIrregular) || errors.Is(err, h5.ErrTooLarge) {
		return nil, unsupported(p.path, "virtual dataset: %v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", p.path, err)
	}
	spec := &engine.VirtualSpec{Type: typ, Shape: p.info.Dims, MaxShape: maxShape, Fill: p.info.Fill}
	var files []string
	for _, m := range maps {
		file := sccSourceName(m.File)
		if file != "" && !slices.Contains(files, file) {
			files = append(files, file)
		}
		src := slabSel(m.Source)
		if len(m.SourceDims) == 0 {
			// A selection of all of a source libhdf5 keeps without the
			// source's extent: the source is what the virtual selection
			// covers, its dimensions of one element left out.
			src = allSource(m.Virtual)
		}
		spec.Mappings = append(spec.Mappings, engine.VirtualMapping{
			Virtual: slabSel(m.Virtual), File: file, Dataset: strings.TrimPrefix(m.Dataset, "/"), Source: src,
		})
	}
	p.virtual, p.mode = spec, Virtual
	p.reason = fmt.Sprintf("virtual dataset of %d mappings", len(maps))
	if len(files) > 0 {
		p.reason += fmt.Sprintf(" (source files, to import under these names: %s)", strings.Join(files, ", "))
	}
	return p, nil
}

// importVirtual creates the virtual dataset p plans, with its attributes.
func importVirtual(ctx context.Context, dst *engine.File, p *importPlan, attrs []h5.Attr, skipped []h5.Skipped, opts *Options, rep DatasetReport) (DatasetReport, error) {
	ds, err := dst.CreateVirtualDataset(ctx, p.path, *p.virtual)
	if errors.Is(err, engine.ErrInvalid) {
		// Nothing was created: scc refuses the mappings.
		return rep, unsupported(p.path, "scc refuses its virtual mappings: %v", err)
	}
	if err != nil {
		return rep, err
	}
	defer ds.Close(ctx)
	if rep.AttrNotes, err = importAttrs(ctx, ds, attrs, skipped, opts.strict()); err != nil {
		return rep, err
	}
	rep.AttrsNotImported = len(rep.AttrNotes)
	return rep, dst.Flush(ctx)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
