package hdf5

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/internal/tree"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// exportPlan is how one scc dataset maps onto an HDF5 dataset.
type exportPlan struct {
	ds      *engine.Dataset
	path    string
	spec    h5.Spec
	mode    Mode
	reason  string
	deflate int // pipeline index of the deflate filter when rewrapping, else -1
	// re-encoding: shuffle first (by element size), then zlib at level.
	shuffle *filter.Pipeline
	level   int // 0: no deflate
	// values: the layout has no pipeline images; exportValues writes it.
	values bool
	// virtual: an HDF5 virtual dataset over the exported sources.
	virtual bool
}

// Export writes the datasets of src (all, or opts.Datasets) to a new HDF5
// file at dstPath, which must not exist unless opts.Replace. Chunks that
// are cached and dirty in src are written back to src first (they are
// exported as Read would see them; src is not committed). The file is
// written under a temporary name beside dstPath and renamed to dstPath
// once complete; on error (ctx ending included) it is removed and dstPath
// is as it was. The source files of virtual datasets in other scc files
// are exported beside dstPath the same way (see Options.SkipSources and
// Report.Sources); on error those already written are removed.
//
// Dataset names become HDF5 paths: "a/b" is dataset b in group a; every
// group of src becomes an HDF5 group with its attributes. A dataset or
// group whose name the engine's name rule refuses (an older file may
// hold "." components or NUL, which HDF5 would resolve or cut short) is
// left out, never renamed, and named in Report.Skipped; opts.Strict
// refuses the export instead. Only stored chunks are exported (chunks never
// written read as the fill value on both sides), so a sparse dataset costs
// what it stores, not what its grid spans.
func Export(ctx context.Context, src *engine.File, dstPath string, opts *Options) (rep Report, err error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	run := &exportRun{written: map[string]string{filepath.Clean(dstPath): ""}, read: map[string]bool{}}
	rep, err = exportFile(ctx, src, dstPath, opts, run)
	if err != nil {
		// All or nothing: the source files already written go too.
		for _, s := range run.sources {
			os.Remove(s.Path)
		}
		return Report{}, err
	}
	rep.Sources = run.sources
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// exportFile exports src to dstPath and then the source files its
// virtual datasets name (run records them, so that each is written once).
func exportFile(ctx context.Context, src *engine.File, dstPath string, opts *Options, run *exportRun) (rep Report, err error) {
	var pending []SourceFile
	var plans []*exportPlan
	defer func() {
		for _, p := range plans {
			p.ds.Close(ctx)
		}
	}()
	names, err := tree.DatasetNames(src)
	if err != nil {
		return rep, err
	}
	selected := 0
	for _, name := range names {
		if !opts.selected(name) {
			continue
		}
		selected++
		if err := nameErr(name); err != nil {
			// An older file's name HDF5 would not hold as it is: left
			// out and named, or refused under Strict.
			if opts.strict() {
				return rep, fmt.Errorf("%w: dataset %q (strict): %w", ErrUnsupported, name, err)
			}
			rep.Skipped = append(rep.Skipped, SkippedDataset{Path: name, Reason: err.Error()})
			continue
		}
		ds, err := src.OpenDataset(ctx, name, nil)
		if err != nil {
			return rep, err
		}
		p, err := planExport(ds, opts)
		if err == nil && ds.Layout() == engine.Virtual {
			var files []SourceFile
			files, err = planVirtual(ctx, src, p, opts, dstPath, run)
			pending = append(pending, files...)
		}
		if err != nil {
			ds.Close(ctx)
			return rep, err
		}
		plans = append(plans, p)
	}
	if opts != nil && opts.Datasets != nil && selected != len(opts.Datasets) {
		return rep, fmt.Errorf("%w: some of the datasets %q are not in the file", engine.ErrNotFound, opts.Datasets)
	}
	if !opts.replace() {
		if _, err := os.Lstat(dstPath); err == nil {
			return rep, fmt.Errorf("%w: %s exists", engine.ErrExists, dstPath)
		}
	}
	// Written under a temporary name and renamed into place when whole
	// (see atomic.go): readers never see a partial file at dstPath.
	tmp, err := tempBeside(dstPath)
	if err != nil {
		return rep, err
	}
	os.Remove(tmp) // h5.Create makes it anew, exclusively
	f, err := h5.Create(tmp)
	if err != nil {
		return rep, err
	}
	defer func() {
		cerr := f.Close()
		if err == nil {
			err = cerr
		}
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = publish(tmp, dstPath, opts.replace())
		}
		if err != nil {
			os.Remove(tmp)
		}
	}()
	rootAttrs, err := h5Attrs(src.Attrs())
	if err != nil {
		return rep, err
	}
	if err := f.WriteRootAttrs(rootAttrs); err != nil {
		return rep, err
	}
	var planned []string
	for _, p := range plans {
		planned = append(planned, strings.TrimPrefix(p.ds.Path(), "/"))
	}
	if err := exportGroups(ctx, f, src.Group, planned, opts, &rep); err != nil {
		return rep, err
	}
	for _, p := range plans {
		export := exportDataset
		if p.values {
			export = exportValues
		} else if p.virtual {
			export = exportVirtual
		}
		dr, err := export(ctx, f, p, opts)
		if err != nil {
			return rep, fmt.Errorf("export %q: %w", p.ds.Path(), err)
		}
		rep.Datasets = append(rep.Datasets, dr)
	}
	for _, sf := range pending {
		if err := exportSource(ctx, sf, opts, run); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func planExport(ds *engine.Dataset, opts *Options) (*exportPlan, error) {
	name := strings.TrimPrefix(ds.Path(), "/")
	if definedName(name) {
		return nil, fmt.Errorf("%w: dataset %q: names under %q are where export records sparse datasets' defined sets", ErrUnsupported, name, DefinedPrefix)
	}
	if t := ds.Type(); !h5Maps(t) {
		return nil, fmt.Errorf("%w: dataset %q of type %v has no HDF5 type", ErrUnsupported, name, t)
	}
	if sp := ds.Space(); sp != engine.SpaceSimple {
		// HDF5 keeps a scalar or null dataset contiguous (it cannot be
		// chunked): its one element is written through H5Dwrite.
		p := &exportPlan{ds: ds, path: name, deflate: -1, values: true, mode: Reencoded,
			spec:   h5.Spec{Type: h5Type(ds.Type()), Space: sp.String(), Fill: ds.Fill()},
			reason: fmt.Sprintf("%v dataspace: written through H5Dwrite as an HDF5 %v dataset", sp, sp)}
		switch ds.Layout() {
		case engine.Chunked, engine.Contiguous:
		case engine.Vlen:
			// h5py's scalar str is a scalar variable-length string.
			p.spec.Vlen, p.spec.Fill = true, nil
			if cs, ok := vlenStringMark(ds); ok {
				p.spec.Type = h5.Type{Class: h5.String, Size: 1, Vlen: true, UTF8: cs == "utf-8"}
			}
		default:
			return nil, fmt.Errorf("%w: dataset %q: a %v dataset of the %s layout, which HDF5 export does not write", ErrUnsupported, name, sp, ds.Layout())
		}
		return p, nil
	}
	switch l := ds.Layout(); l {
	case engine.Chunked:
	case engine.Virtual:
		// Mapped by planVirtual, which needs the file.
		return &exportPlan{ds: ds, path: strings.TrimPrefix(name, "/"), deflate: -1, virtual: true, mode: Virtual}, nil
	case engine.Contiguous, engine.Vlen, engine.Sparse:
		p := &exportPlan{ds: ds, path: strings.TrimPrefix(name, "/"), deflate: -1, values: true}
		if err := planValues(ds, p, opts); err != nil {
			return nil, err
		}
		return p, nil
	default:
		// Refused before the file is made.
		return nil, fmt.Errorf("%w: dataset %q has the %s layout, which HDF5 export does not write (read it into a chunked dataset first)", ErrUnsupported, name, l)
	}
	p := &exportPlan{ds: ds, path: strings.TrimPrefix(name, "/"), deflate: -1, mode: Raw}
	shape, maxShape, chunk := ds.Shape(), ds.MaxShape(), ds.Chunk()
	for i := range maxShape {
		if maxShape[i] == engine.Unlimited {
			maxShape[i] = h5.Unlimited
		} else if chunk[i] > maxShape[i] {
			// H5Pset_chunk/H5Dcreate: "chunk size must be <= maximum
			// dimension size for fixed-sized dimensions".
			return nil, fmt.Errorf("%w: dataset %q: chunk %v exceeds the fixed max shape %v along dimension %d, which HDF5 refuses",
				ErrUnsupported, name, chunk, ds.MaxShape(), i)
		}
	}
	p.spec = h5.Spec{Type: h5Type(ds.Type()), Dims: shape, MaxDims: maxShape, Chunk: chunk, Fill: ds.Fill()}
	type stage struct {
		name  string
		level int
	}
	var stages []stage
	for _, fl := range ds.Filters() {
		n, l := fl.Stage()
		stages = append(stages, stage{n, l})
	}
	// Raw when every filter is shuffle or zlib: scc's Zlib stream is
	// HDF5's deflate chunk byte for byte, in any order. Rewrapped when a
	// raw deflate comes last instead (files written with scc's Deflate):
	// its input is then the whole (shuffled) chunk, whose size the
	// Adler-32 needs.
	var hf []h5.Filter
	// A sharded chunk's stored bytes are inner chunks and an index, which
	// no HDF5 filter reads: its chunks are decoded and encoded again.
	copyable := ds.InnerChunk() == nil
	hasZlib := false
	for _, st := range stages {
		hasZlib = hasZlib || st.name == "zlib"
	}
	for i, st := range stages {
		switch {
		case st.name == "shuffle":
			hf = append(hf, h5.Filter{ID: h5.FilterShuffle})
		case st.name == "zlib":
			hf = append(hf, h5.Filter{ID: h5.FilterDeflate, Level: st.level})
		case st.name == "deflate" && i == len(stages)-1 && !hasZlib:
			hf = append(hf, h5.Filter{ID: h5.FilterDeflate, Level: st.level})
			p.deflate = i
			p.mode = Rewrapped
		default:
			copyable = false
		}
	}
	if copyable {
		p.spec.Filters = hf
		return p, nil
	}
	// Re-encode: keep the shuffle, compress with deflate if scc compressed.
	p.mode, p.deflate = Reencoded, -1
	var why []string
	hasShuffle, compressed := false, false
	for _, st := range stages {
		switch st.name {
		case "shuffle":
			hasShuffle = true
		case "deflate":
			compressed = true
			why = append(why, "deflate not last in the pipeline")
		case "zlib":
			compressed = true
		case "zstd", "lz4":
			compressed = true
			why = append(why, st.name+" has no filter in libhdf5")
		default:
			why = append(why, st.name+" has no filter in libhdf5")
		}
	}
	p.spec.Filters = nil
	if hasShuffle {
		sh, err := filter.NewPipeline([]filter.Spec{{ID: filter.Shuffle}}, ds.Type().Size())
		if err != nil {
			return nil, err
		}
		p.shuffle = sh
		p.spec.Filters = append(p.spec.Filters, h5.Filter{ID: h5.FilterShuffle})
	}
	if compressed {
		p.level = opts.level()
		p.spec.Filters = append(p.spec.Filters, h5.Filter{ID: h5.FilterDeflate, Level: p.level})
	}
	p.reason = strings.Join(why, "; ") + fmt.Sprintf(": written as %s", hdf5Pipeline(p.spec.Filters))
	return p, nil
}

func hdf5Pipeline(fs []h5.Filter) string {
	if len(fs) == 0 {
		return "unfiltered"
	}
	var names []string
	for _, f := range fs {
		if f.ID == h5.FilterShuffle {
			names = append(names, "shuffle")
		} else {
			names = append(names, fmt.Sprintf("deflate(%d)", f.Level))
		}
	}
	return strings.Join(names, "+")
}

// exported is one chunk ready for H5Dwrite_chunk.
type exported struct {
	coord  []uint64
	data   []byte
	mask   uint32
	copied bool
}

func exportDataset(ctx context.Context, f *h5.File, p *exportPlan, opts *Options) (DatasetReport, error) {
	rep := DatasetReport{Name: strings.TrimPrefix(p.ds.Path(), "/"), Path: p.path, Mode: p.mode, Reason: p.reason}
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
	chunk := p.spec.Chunk
	chunkBytes := p.ds.ChunkBytes()
	g, gctx := errgroup.WithContext(ctx)
	coords := make(chan []uint64, 2*opts.workers())
	out := make(chan exported, 2*opts.workers())
	g.Go(func() error {
		defer close(coords)
		// The stored chunks (dirty cached ones are written back first), not
		// the whole grid: a sparse dataset with a long unlimited axis has
		// far more cells than chunks. Chunks beyond the extent the HDF5
		// dataset was created with (the scc dataset grew meanwhile) are left
		// out.
		var stored []engine.StoredChunk
		for c, err := range p.ds.Chunks(gctx) {
			if err != nil {
				return err
			}
			stored = append(stored, c)
		}
	next:
		for _, sc := range stored {
			for i, c := range sc.Coords {
				if c*chunk[i] >= p.spec.Dims[i] {
					continue next
				}
			}
			select {
			case coords <- sc.Coords:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	var wg sync.WaitGroup
	for w := 0; w < opts.workers(); w++ {
		wg.Add(1)
		g.Go(func() error {
			defer wg.Done()
			for c := range coords {
				data, mask, err := p.ds.ReadChunkRaw(gctx, c)
				if errors.Is(err, engine.ErrNotFound) {
					continue // deleted by a shrink since it was listed
				}
				if err != nil {
					return err
				}
				e, err := p.convert(c, data, mask, chunkBytes)
				if err != nil {
					return fmt.Errorf("chunk %v: %w", c, err)
				}
				select {
				case out <- e:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}
	g.Go(func() error { wg.Wait(); close(out); return nil })
	g.Go(func() error {
		off := make([]uint64, len(chunk))
		for e := range out {
			for i := range off {
				off[i] = e.coord[i] * chunk[i]
			}
			if err := hd.WriteChunk(off, e.mask, e.data); err != nil {
				// Drain so the workers can finish.
				go func() {
					for range out {
					}
				}()
				return err
			}
			rep.Chunks++
			if e.copied {
				rep.CopiedChunks++
				if p.mode == Raw {
					rep.UntouchedChunks++
				}
			}
			rep.StoredBytes += int64(len(e.data))
			rep.LogicalBytes += int64(chunkBytes)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return rep, err
	}
	return rep, hd.Close()
}

// convert turns an scc chunk image into what HDF5's pipeline would have
// stored for the same chunk.
func (p *exportPlan) convert(c []uint64, data []byte, mask uint32, chunkBytes int) (exported, error) {
	e := exported{coord: c, mask: mask, copied: true}
	switch p.mode {
	case Raw:
		e.data = data
	case Rewrapped:
		if mask&(1<<p.deflate) != 0 {
			e.data = data // deflate was skipped: HDF5 skips it on read too
			break
		}
		z, err := wrapZlib(data, chunkBytes)
		if err != nil {
			// scc verified this image's checksum; a stream that does not
			// inflate is damage scc's frame checksum could not see.
			return e, fmt.Errorf("%w: %v", engine.ErrCorrupt, err)
		}
		e.data = z
	default:
		elems, err := p.ds.DecodeChunk(data, mask)
		if err != nil {
			return e, err
		}
		e.copied, e.mask = false, 0
		if p.shuffle != nil {
			if elems, _, err = p.shuffle.Encode(elems); err != nil {
				return e, err
			}
		}
		if p.level > 0 {
			if elems, err = zlibCompress(elems, p.level); err != nil {
				return e, err
			}
		}
		e.data = elems
	}
	if len(e.data) == 0 {
		return e, errors.New("empty chunk image")
	}
	return e, nil
}

// exportGroups writes g's subgroups, and theirs, parents first, as HDF5
// groups with their attributes: all of them, or with opts.Datasets those
// holding a selected dataset. A group whose name HDF5 would not hold as
// it is is left out with what it holds and named in rep.Skipped (the
// datasets below it are, by their names), or refused under Strict.
func exportGroups(ctx context.Context, f *h5.File, g *engine.Group, names []string, opts *Options, rep *Report) error {
	return tree.Groups(ctx, g, func(sub *engine.Group, p string) (bool, error) {
		if opts != nil && opts.Datasets != nil && !holdsAny(p, names) {
			return false, nil
		}
		if err := nameErr(p); err != nil {
			if opts.strict() {
				return false, fmt.Errorf("%w: group %q (strict): %w", ErrUnsupported, p, err)
			}
			rep.Skipped = append(rep.Skipped, SkippedDataset{Path: p, Reason: "group: " + err.Error()})
			return false, nil
		}
		attrs, err := h5Attrs(sub.Attrs())
		if err != nil {
			return false, fmt.Errorf("group %q: %w", p, err)
		}
		if err := f.WriteGroup(p, attrs); err != nil {
			return false, fmt.Errorf("group %q: %w", p, err)
		}
		return true, nil
	})
}

// holdsAny reports whether group path p holds one of the named datasets.
func holdsAny(p string, names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(strings.TrimPrefix(n, "/"), p+"/") {
			return true
		}
	}
	return false
}
