package hdf5

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
	"github.com/scc-dev/scc/internal/zarrmap"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// importPlan is how one HDF5 dataset maps onto a new scc dataset.
type importPlan struct {
	path   string // HDF5 path, no leading '/'
	info   h5.Info
	spec   engine.DatasetSpec
	mode   Mode
	reason string
	// zlibDirect: the pipeline is [shuffle+]deflate, whose chunks are
	// stored without inflating them (engine.Dataset.WriteChunkRawZlib).
	zlibDirect bool
	// vlen: variable-length elements, read through H5Dread (importVlen).
	vlen bool
	// virtual: an HDF5 virtual dataset, created as an scc virtual
	// dataset of these mappings (import_virtual.go).
	virtual *engine.VirtualSpec
	// lz4Stage is the index of a last HDF5 LZ4 stage whose chunks are
	// reframed as scc's LZ4 images (lz4.go), -1 if none.
	lz4Stage int
	// defined: the companion dataset holding the defined set of a sparse
	// dataset scc exported (DefinedAttr); the dataset is imported sparse.
	defined string
	// dims and chunk are the extent and chunk shape the copy walks: the
	// spec's, or for a scalar (null) dataset the one element (none) of
	// its rank-1 storage, [1] ([0]) in chunks of [1].
	dims, chunk []uint64
}

// Import creates one scc dataset in dst per HDF5 dataset of srcPath (all, or
// opts.Datasets), named by its HDF5 path without the leading '/'
// ("grp/sub/x"), and copies the data, flushing dst after each dataset.
// Each HDF5 group becomes an scc group with its attributes.
//
// Every dataset is checked before anything is created. A dataset scc
// cannot represent — an element type other than 1-, 2-, 4- or 8-byte
// integers, IEEE floats of 2 (binary16 as h5py writes numpy's float16,
// or bfloat16), 4 or 8 bytes, h5py's bool and complex, fixed-length
// strings, enums, opaque types, bitfields, array types and compounds of
// those (nested, within engine.MaxTypeDepth and the other bounds of
// described types; big-endian parts read as little-endian, per member),
// variable-length strings and sequences of those types but strings
// (import_vlen.go) and object references (imported as paths), a region
// reference, a compound with a variable-length or reference member, a
// virtual dataset over a scalar or null dataspace, a virtual dataset whose
// selections are not regular hyperslabs (import_virtual.go), a filter
// without a plugin here that a stored chunk needs (checkMissingFilter),
// raw data in external files outside the HDF5 file's directory
// (checkExternal; those inside it are read through libhdf5, a relative
// name resolved against that directory), a chunk larger than scc's 1 GiB
// limit, a grid that would have to be walked and
// is larger than maxGrid chunks — is left out and listed in
// Report.Skipped with the reason; the others are imported. So is a
// dataset (or any object) whose header libhdf5 cannot read, named with
// the library's error (the skip matches ErrHDF5 too); an attribute or a
// group's attributes it cannot read are left out and named in the
// report's attribute notes. A dataset or group whose name scc refuses
// (engine.ValidateName: "..", control characters, bytes that are not
// UTF-8, ...) is left out and named with the rule, never renamed, and so
// is an attribute whose name scc refuses (in the attribute notes). With
// opts.Strict a skipped dataset or group fails the import before anything
// is created (a refused attribute name fails it when met). Without it, a
// file in which every dataset is skipped still imports: its groups and
// attributes, the skipped datasets named (a file libhdf5 opens is never
// refused whole for what is in it). A name that already exists in
// dst fails the whole import (engine.ErrExists) with dst unchanged.
//
// A dataset with a stored chunk that neither scc can copy nor libhdf5's
// filter pipeline decode (a filter without a plugin that the chunk did
// not skip, a plugin that rejects the chunk: a codec version it does not
// read, a damaged stream) is skipped when that chunk is met, what was
// written of it removed, and named with the filter and the library's
// error. A filter without a plugin that no stored chunk needs keeps
// nothing out.
//
// An error after the checks (I/O, ctx ending)
// leaves dst with the datasets imported before it and the one being
// imported partly written: ImportFile is the all-or-nothing form, which
// imports into a temporary file and renames it into place on success.
//
// Scalar (H5S_SCALAR) and null (H5S_NULL) datasets become scc scalar and
// null datasets with their fill value.
//
// Chunked datasets keep their chunk shape; their stored chunks are copied
// without re-encoding when the filters are shuffle, deflate (HDF5's
// deflate chunk is scc's Zlib filter's image), zstd and a last one-block
// LZ4 (reframed, lz4.go) and the type is little-endian. A [shuffle+]deflate chunk is stored without inflating it
// (unless opts.Verify): its zlib framing and size are checked, its
// Adler-32 on every later read; edge chunks and other pipelines are
// decoded once by the engine to verify them. Any other chunk — and every chunk of a
// contiguous or compact dataset — is read through HDF5's own pipeline and
// written through the engine with opts.Filters. A dataset whose chunk
// index cannot be used for direct chunk reads (see
// h5.Info.ChunkInfoUnreliable, or an index that answers inconsistently)
// is read through H5Dread one chunk-sized box at a time instead. Storage
// HDF5 never allocated is the fill value and is not visited.
func Import(ctx context.Context, srcPath string, dst *engine.File, opts *Options) (rep Report, err error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	f, err := h5.Open(srcPath)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	paths, unreadable, err := f.Objects()
	if err != nil {
		return rep, err
	}
	fileSize, err := f.Size()
	if err != nil {
		return rep, err
	}
	var plans []*importPlan
	var problems, skips []error
	existing := map[string]bool{}
	names, err := tree.DatasetNames(dst)
	if err != nil {
		return rep, err
	}
	for _, n := range names {
		existing[n] = true
	}
	selected := 0
	// An object whose header the library cannot read may have been a
	// dataset: it is left out and named, like one scc cannot hold.
	for _, path := range unreadable {
		if !opts.selected(path) {
			continue
		}
		oerr := f.ObjectError(path)
		if oerr == nil {
			continue
		}
		err := unreadableErr(path, "its object header cannot be read", oerr)
		rep.Skipped = append(rep.Skipped, SkippedDataset{Path: "/" + path, Reason: err.reason})
		skips = append(skips, err)
	}
	for _, path := range paths {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if !opts.selected(path) || definedName(path) {
			// Under DefinedPrefix: a sparse dataset's defined set, imported
			// with that dataset, never on its own.
			continue
		}
		selected++
		var p *importPlan
		if err = nameErr(path); err != nil {
			// A link name scc refuses: left out and named, never renamed.
			err = &skipError{path: path, reason: err.Error(), err: err}
		} else {
			p, err = planImport(f, path, srcPath, fileSize, opts)
		}
		if err != nil && errors.Is(err, h5.ErrHDF5) && !errors.Is(err, ErrUnsupported) {
			// The library cannot read what the dataset's header says (a
			// damaged datatype, layout or filter message): that dataset
			// is left out, named with the library's error.
			err = unreadableErr(path, "HDF5 cannot read it", err)
		}
		var skip *skipError
		switch {
		case errors.As(err, &skip):
			rep.Skipped = append(rep.Skipped, SkippedDataset{Path: "/" + path, Reason: skip.reason})
			skips = append(skips, err)
			continue
		case err == nil && existing[path]:
			err = fmt.Errorf("%w: dataset %q already exists in the scc file", engine.ErrExists, path)
		}
		if err != nil {
			problems = append(problems, err)
			continue
		}
		plans = append(plans, p)
	}
	// A group whose name scc refuses is left out and named; what it
	// holds is, by its own names.
	badGroups, err := groupNameErrs(f, opts, plans)
	if err != nil {
		return rep, err
	}
	for _, p := range slices.Sorted(maps.Keys(badGroups)) {
		rep.Skipped = append(rep.Skipped, SkippedDataset{Path: "/" + p, Reason: "group: " + badGroups[p].Error()})
		skips = append(skips, fmt.Errorf("%w: group %q: %w", ErrUnsupported, p, badGroups[p]))
	}
	if len(problems) > 0 {
		// Each problem keeps its sentinel (engine.ErrExists, ErrHDF5) for
		// errors.Is.
		return rep, fmt.Errorf("import of %s: nothing imported: %w", srcPath, errors.Join(problems...))
	}
	if opts != nil && opts.Datasets != nil && selected != len(opts.Datasets) {
		return rep, fmt.Errorf("%w: some of the datasets %q are not in %s", engine.ErrNotFound, opts.Datasets, srcPath)
	}
	if len(skips) > 0 && opts.strict() {
		return rep, fmt.Errorf("import of %s: nothing imported (strict): %w", srcPath, errors.Join(skips...))
	}
	// The root group's attributes become dst's file attributes (replacing
	// same-named ones).
	rootAttrs, rootSkipped, err := f.ReadRootAttrs()
	if errors.Is(err, h5.ErrHDF5) {
		// The root group's attributes cannot even be counted: left out
		// and said, the datasets still imported.
		rootSkipped = []h5.Skipped{{Name: "(all)", Why: "not read: " + err.Error()}}
	} else if err != nil {
		return rep, err
	}
	if rep.RootAttrNotes, err = importAttrs(ctx, dst, rootAttrs, rootSkipped, opts.strict()); err != nil {
		return rep, err
	}
	rep.RootAttrsNotImported = len(rep.RootAttrNotes)
	if err := importGroups(ctx, f, dst, plans, badGroups, opts, &rep); err != nil {
		return rep, err
	}
	// Virtual datasets last: their sources in this file then exist,
	// which lets the engine check their element types.
	slices.SortStableFunc(plans, func(a, b *importPlan) int {
		return cmpBool(a.virtual != nil, b.virtual != nil)
	})
	for _, p := range plans {
		dr, err := importDataset(ctx, f, dst, p, opts)
		var skip *skipError
		if errors.As(err, &skip) && !opts.strict() {
			rep.Skipped = append(rep.Skipped, SkippedDataset{Path: "/" + p.path, Reason: skip.reason})
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("import %q: %w", p.path, err)
		}
		rep.Datasets = append(rep.Datasets, dr)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// skipError is a dataset Import leaves out: scc cannot represent it, or
// this libhdf5 cannot read it. It wraps ErrUnsupported, and the library's
// error (ErrHDF5) when there is one.
type skipError struct {
	path, reason string
	err          error
}

func (e *skipError) Error() string {
	return fmt.Sprintf("%v: dataset %q: %s", ErrUnsupported, e.path, e.reason)
}

func (e *skipError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrUnsupported, e.err}
	}
	return []error{ErrUnsupported}
}

// unreadableErr is the skip of a dataset the library cannot read.
func unreadableErr(path, what string, err error) *skipError {
	return &skipError{path: path, reason: fmt.Sprintf("%s: %v", what, err), err: err}
}

func unsupported(path, format string, args ...any) error {
	return &skipError{path: path, reason: fmt.Sprintf(format, args...)}
}

// directDespiteIndex sends datasets whose chunk index libhdf5 misreports
// down the direct chunk path all the same. Only tests set it: it shows
// that the direct path's consistency checks catch such an index at run
// time and hand the dataset to H5Dread (a last line of defence for
// index kinds not known to be misreported).
var directDespiteIndex = false

// maxChunkBytes is scc's limit on a chunk's decoded size (FORMAT.md §6).
const maxChunkBytes = 1 << 30

// maxGrid bounds the chunk grid an import walks cell by cell (a
// contiguous dataset, or a chunked one read through H5Dread), as the Zarr
// importer bounds its own: past it a dataset is refused, not visited.
// Unallocated storage is never walked, whatever its extent.
const maxGrid = 1 << 26

// maxListChunks bounds the stored chunks listed one by one: libhdf5 1.10
// takes about n²/2 index steps for n (each H5Dget_chunk_info walks the
// index from its start), 2^33 for this many.
const maxListChunks = 1 << 17

// gridCells is the number of cells of grid, saturating at MaxUint64.
func gridCells(grid []uint64) uint64 {
	cells := uint64(1)
	for _, g := range grid {
		hi, lo := bits.Mul64(cells, g)
		if hi != 0 {
			return math.MaxUint64
		}
		cells = lo
	}
	return cells
}

func gridOf(dims, chunk []uint64) []uint64 {
	g := make([]uint64, len(dims))
	for i := range dims {
		g[i] = dims[i]/chunk[i] + min(1, dims[i]%chunk[i])
	}
	return g
}

// filterNames names the registered HDF5 filters a file may record without a
// name (the HDF5 filter registry).
var filterNames = map[int]string{
	h5.FilterDeflate: "deflate", h5.FilterShuffle: "shuffle", h5.FilterFletcher32: "fletcher32",
	h5.FilterSzip: "szip", h5.FilterNbit: "nbit", h5.FilterScaleOff: "scaleoffset",
	305: "lzo", 307: "bzip2", 32000: "lzf", 32001: "blosc", 32002: "mafisc", 32003: "snappy",
	32004: "lz4", 32005: "apax", 32006: "cbf", 32007: "jpeg-xr", 32008: "bitshuffle",
	32009: "spdp", 32010: "lpc-rice", 32011: "ccsds-123", 32012: "jpeg-ls", 32013: "zfp",
	32014: "fpzip", 32015: "zstd", 32016: "b3d", 32017: "sz", 32018: "fcidecomp",
	32019: "jpeg", 32020: "vbz", 32021: "fapec", 32022: "bitgroom", 32023: "granularbr",
	32024: "sz3", 32025: "delta-rice", 32026: "blosc2",
}

// checkExternal admits the external raw data files of a dataset that lie
// in the directory of the HDF5 file at srcPath or below it (symbolic
// links resolved), as regular files; libhdf5 then reads them. A file
// elsewhere is refused and named: the metadata of a file being imported
// must not make the import copy whatever file it names into the scc file.
func checkExternal(srcPath string, files []h5.ExternalFile) error {
	dir, err := filepath.EvalSymlinks(filepath.Dir(srcPath))
	if err != nil {
		return err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, ef := range files {
		name := ef.Name
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(srcPath), name)
		}
		real, err := filepath.EvalSymlinks(name)
		if err != nil {
			return fmt.Errorf("external file %q: %w", ef.Name, err)
		}
		if real, err = filepath.Abs(real); err != nil {
			return err
		}
		if rel, err := filepath.Rel(dir, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("external file %q lies outside the HDF5 file's directory %s", ef.Name, dir)
		}
		if st, err := os.Stat(real); err != nil {
			return fmt.Errorf("external file %q: %w", ef.Name, err)
		} else if !st.Mode().IsRegular() {
			return fmt.Errorf("external file %q is not a regular file", ef.Name)
		}
	}
	return nil
}

// missingFilter returns the first filter of fs this libhdf5 cannot
// decode.
func missingFilter(fs []h5.Filter) (h5.Filter, bool) {
	for _, fl := range fs {
		if !fl.Available {
			return fl, true
		}
	}
	return h5.Filter{}, false
}

// pluginPathString names the plugin search path for a refusal.
func pluginPathString() string {
	dirs := h5.PluginPath()
	if len(dirs) == 0 {
		return "an empty plugin path"
	}
	return strings.Join(dirs, ":")
}

func filterName(fl h5.Filter) string {
	if n, ok := filterNames[fl.ID]; ok {
		return fmt.Sprintf("%s (id %d)", n, fl.ID)
	}
	if fl.Name != "" {
		return fmt.Sprintf("%q (id %d)", fl.Name, fl.ID)
	}
	return fmt.Sprintf("id %d", fl.ID)
}

func planImport(f *h5.File, path, srcPath string, fileSize uint64, opts *Options) (*importPlan, error) {
	d, err := f.OpenDataset(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	in, err := d.Info()
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", path, err)
	}
	space := engine.SpaceSimple
	switch in.Space {
	case "":
	case "scalar", "null":
		// Planned as the rank-1 storage of its one element (none), then
		// given its dataspace (below).
		space = map[string]engine.Space{"scalar": engine.SpaceScalar, "null": engine.SpaceNull}[in.Space]
		n := uint64(1)
		if space == engine.SpaceNull {
			n = 0
		}
		in.Dims, in.MaxDims = []uint64{n}, []uint64{n}
		if in.Layout == h5.Virtual {
			return nil, unsupported(path, "virtual dataset over a %s dataspace (scc's virtual datasets have dimensions)", in.Space)
		}
	default:
		return nil, unsupported(path, "%s dataspace", in.Space)
	}
	if in.Type.Class == h5.Other && in.Type.Name == "region reference" {
		return nil, unsupported(path, "region references (selections of other datasets) have no scc form")
	}
	if in.Type.Class == h5.Other {
		return nil, unsupported(path, "element type %v has no scc counterpart", in.Type)
	}
	typ, ok := sccType(in.Type)
	if !ok {
		return nil, unsupported(path, "element type %v has no scc counterpart", in.Type)
	}
	r := len(in.Dims)
	if r == 0 || r > engine.MaxRank {
		return nil, unsupported(path, "rank %d not in [1, %d]", r, engine.MaxRank)
	}
	if in.External {
		if err := checkExternal(srcPath, in.ExternalFiles); err != nil {
			return nil, unsupported(path, "raw data in external files: %v", err)
		}
	}
	p := &importPlan{path: path, info: in, mode: Raw, lz4Stage: -1}
	maxShape := make([]uint64, r)
	for i, m := range in.MaxDims {
		if m == h5.Unlimited {
			maxShape[i] = engine.Unlimited
		} else {
			maxShape[i] = m
		}
	}
	if in.Layout == h5.Virtual {
		return planVirtualImport(d, p, typ, maxShape)
	}
	p.spec = engine.DatasetSpec{Type: typ, Shape: in.Dims, MaxShape: maxShape, Fill: in.Fill}
	reencode := func(why string) {
		p.mode, p.reason, p.zlibDirect = Reencoded, why, false
		p.spec.Filters = opts.filters()
	}
	switch {
	case in.Type.Vlen || in.Type.Class == h5.ObjRef:
		// Variable-length elements (and object references, which become
		// the referenced objects' paths) have no chunk image scc could
		// copy: they are read through H5Dread, one chunk-sized box at a
		// time, onto scc's variable-length layout (empty is the fill
		// value).
		p.spec.Layout, p.spec.Fill, p.spec.Filters = engine.Vlen, nil, opts.filters()
		p.mode, p.vlen = Reencoded, true
		p.reason = fmt.Sprintf("%v: read through H5Dread onto scc's variable-length layout", in.Type)
		if in.Type.Class == h5.ObjRef {
			p.reason = fmt.Sprintf("object references: imported as the referenced objects' paths (strings marked by attribute %s)", ReferenceAttr)
		}
		if in.Layout == h5.Chunked {
			p.spec.Chunk = in.Chunk
			if err := checkMissingFilter(d, p); err != nil {
				return nil, err
			}
		} else {
			// About 64 Ki elements a chunk: scc keeps 8 bytes an element
			// beside the heap, whose size is unknown here.
			p.spec.Chunk = opts.chunkFor(in.Dims, 16)
		}
	case in.Layout == h5.Chunked:
		p.spec.Chunk = in.Chunk
		var fs []engine.Filter
		var why []string
		for i, fl := range in.Filters {
			switch {
			case fl.ID == h5.FilterShuffle:
				fs = append(fs, engine.Shuffle())
			case fl.ID == h5.FilterDeflate:
				// HDF5's deflate chunk is a zlib stream: scc's Zlib
				// filter stores it as it is, wherever it stands. Level 0
				// (stored blocks) decodes like any other; scc's levels
				// start at 1 and only matter for encoding.
				fs = append(fs, engine.Zlib(max(1, min(9, fl.Level))))
				p.zlibDirect = i == len(in.Filters)-1 && (i == 0 || i == 1 && in.Filters[0].ID == h5.FilterShuffle)
			case fl.ID == h5.FilterZstd:
				// The zstd plugin stores one Zstandard frame with its
				// content size (ZSTD_compress), scc's Zstd image; the
				// level (its first client value) only matters for
				// encoding.
				fs = append(fs, engine.Zstd(max(-(1<<17), min(22, fl.Level))))
			case fl.ID == h5.FilterLZ4 && i == len(in.Filters)-1:
				// A one-block HDF5 LZ4 chunk is scc's LZ4 image but for
				// its framing (lz4.go); only the last stage's stored
				// bytes can be reframed.
				fs = append(fs, engine.LZ4())
				p.lz4Stage = i
			default:
				why = append(why, fmt.Sprintf("HDF5 filter %s has no scc counterpart", filterName(fl)))
			}
		}
		if in.Type.AnyBigEndian() {
			why = append(why, "big-endian elements")
		}
		if in.ChunkInfoUnreliable && directDespiteIndex {
			in.ChunkInfoUnreliable = false
			p.info.ChunkInfoUnreliable = false
		}
		if in.ChunkInfoUnreliable {
			why = append(why, "extensible-array chunk index over a dimension other than the first, whose chunks libhdf5 1.10 cannot list: read through H5Dread")
		}
		if len(why) == 0 {
			p.spec.Filters = fs
		} else {
			reencode(strings.Join(why, "; "))
		}
		// Re-encoded chunks go through libhdf5's pipeline, which needs
		// every filter a chunk did not skip; a chunk that needs a filter
		// without a plugin fails then, and the dataset is skipped and
		// named with it (filterSkip). One whose chunks all skipped it
		// (an optional filter that did not shrink them), or that has none
		// stored, imports.
		if p.mode != Reencoded && p.lz4Stage >= 0 {
			p.mode = Rewrapped
		}
		if p.mode == Reencoded {
			if err := checkMissingFilter(d, p); err != nil {
				return nil, err
			}
		}
	default:
		p.spec.Chunk = opts.chunkFor(in.Dims, in.Type.Size)
		reencode(fmt.Sprintf("%s layout", map[h5.Layout]string{h5.Compact: "compact", h5.Contiguous: "contiguous"}[in.Layout]))
		if in.Allocated && in.StorageSize > fileSize {
			// Raw data cannot extend past the end of the file it is in.
			return nil, fmt.Errorf("%w: dataset %q: %d bytes of raw data in a file of %d bytes", ErrHDF5, path, in.StorageSize, fileSize)
		}
	}
	elems := uint64(in.Type.Size)
	for _, c := range p.spec.Chunk {
		elems *= c
		if elems > maxChunkBytes {
			return nil, unsupported(path, "chunk %v is larger than scc's 1 GiB chunk limit", p.spec.Chunk)
		}
	}
	cells := gridCells(gridOf(p.spec.Shape, p.spec.Chunk))
	switch walked := in.Layout != h5.Chunked || in.ChunkInfoUnreliable || p.vlen; {
	case !in.Allocated:
	case walked && cells > maxGrid:
		return nil, unsupported(path, "its %d chunks of %v would be read one by one through H5Dread (at most %d)", cells, p.spec.Chunk, maxGrid)
	case !walked && cells > maxGrid:
		// Too large a grid to ask about each cell: the stored chunks are
		// listed, at a cost quadratic in their number (storedCoords).
		// An index that cannot say how many it holds is left to the
		// run-time fallback.
		n, err := d.NumChunks()
		if err == nil && n > maxListChunks {
			return nil, unsupported(path, "%d stored chunks in a grid of %d cells: libhdf5 1.10 lists stored chunks in time quadratic in their number (at most %d in a grid of more than %d cells)", n, cells, maxListChunks, maxGrid)
		}
	}
	if err := planSparse(f, d, p, opts); err != nil {
		return nil, err
	}
	p.dims, p.chunk = p.spec.Shape, p.spec.Chunk
	if space != engine.SpaceSimple {
		if p.defined != "" {
			return nil, unsupported(path, "sparse dataset over a %s dataspace", in.Space)
		}
		p.spec.Space, p.spec.Shape, p.spec.MaxShape, p.spec.Chunk = space, nil, nil, nil
		p.dims, p.chunk = in.Dims, []uint64{1}
	}
	return p, nil
}

func (o *Options) filters() []engine.Filter {
	if o != nil && o.Filters != nil {
		return o.Filters
	}
	return []engine.Filter{engine.Shuffle(), engine.Zlib(o.level())}
}

// chunkFor picks an scc chunk for a dataset HDF5 does not chunk:
// opts.Chunk, or whole trailing dimensions and enough of the leading ones
// to make about 1 MiB (at least one element along each).
func (o *Options) chunkFor(dims []uint64, elemSize int) []uint64 {
	if o != nil && o.Chunk != nil && len(o.Chunk) == len(dims) {
		return o.Chunk
	}
	const target = 1 << 20
	c := make([]uint64, len(dims))
	size := uint64(elemSize)
	for i := len(dims) - 1; i >= 0; i-- {
		n := max(dims[i], 1)
		if size*n <= target {
			c[i] = n
			size *= n
			continue
		}
		c[i] = max(1, target/size)
		for j := i - 1; j >= 0; j-- {
			c[j] = 1
		}
		break
	}
	return c
}

// imported is one chunk on its way into scc: a stored image to copy, or
// (image nil) the chunk's in-extent elements to write through the engine.
type imported struct {
	coord []uint64
	image []byte
	mask  uint32
	elems []byte
	start []uint64
	count []uint64
}

// errIndex marks a failure of the direct chunk path's use of the chunk
// index (a lookup, a listing, a stored size that does not match): the
// dataset is then read again through H5Dread.
type errIndex struct{ err error }

func (e errIndex) Error() string { return e.err.Error() }
func (e errIndex) Unwrap() error { return e.err }

// filterSkip is the skip of a dataset whose chunk at start the filter
// pipeline cannot decode (err wraps h5.ErrFilter): a filter without a
// plugin, or a plugin that fails on the chunk (a codec version it does
// not read, a chunk it rejects). It names the filters, those without a
// plugin first.
func filterSkip(p *importPlan, start []uint64, err error) *skipError {
	if fl, missing := missingFilter(p.info.Filters); missing {
		// libhdf5's own message then tells how its plugin search failed,
		// which may be on another plugin's library.
		return &skipError{path: p.path, err: err, reason: fmt.Sprintf("filter %s is not available in this libhdf5 (no plugin for it in %s), and the chunk at %v needs it", filterName(fl), pluginPathString(), start)}
	}
	names := make([]string, len(p.info.Filters))
	for i, fl := range p.info.Filters {
		names[i] = filterName(fl)
	}
	return &skipError{path: p.path, err: err, reason: fmt.Sprintf("the chunk at %v cannot be decoded by its filters %s: %v", start, strings.Join(names, ", "), err)}
}

// checkMissingFilter refuses, before anything is created, a dataset read
// through libhdf5's pipeline whose filter has no plugin here when a stored
// chunk needs it (its filter mask does not say the filter was skipped). A
// dataset none of whose chunks needs it (an optional filter every chunk
// skipped, or no chunk stored) is read without it. Past maxListChunks
// stored chunks the question is left to the import, which skips the
// dataset at the first chunk that needs the filter (filterSkip).
func checkMissingFilter(d *h5.Dataset, p *importPlan) error {
	fl, missing := missingFilter(p.info.Filters)
	if !missing || !p.info.Allocated {
		return nil
	}
	bit := uint32(0)
	for i, f := range p.info.Filters {
		if f.ID == fl.ID {
			bit |= 1 << i
		}
	}
	refuse := unsupported(p.path, "filter %s is not available in this libhdf5 (no plugin for it in %s)", filterName(fl), pluginPathString())
	n, err := d.NumChunks()
	if err != nil || n > maxListChunks {
		return nil
	}
	stored, err := d.StoredChunks(context.Background(), n)
	if err != nil {
		return nil
	}
	for _, c := range stored {
		if c.Mask&bit != bit {
			return refuse
		}
	}
	return nil
}

func importDataset(ctx context.Context, f *h5.File, dst *engine.File, p *importPlan, opts *Options) (rep DatasetReport, err error) {
	rep = DatasetReport{Name: p.path, Path: "/" + p.path, Mode: p.mode, Reason: p.reason}
	hd, err := f.OpenDataset(p.path)
	if err != nil {
		return rep, err
	}
	defer hd.Close()
	attrs, skipped, err := hd.ReadAttrs()
	if err != nil {
		return rep, err
	}
	if p.virtual != nil {
		return importVirtual(ctx, dst, p, attrs, skipped, opts, rep)
	}
	ds, err := dst.CreateDataset(ctx, p.path, p.spec)
	if errors.Is(err, engine.ErrInvalid) {
		// Nothing was created: scc refuses the dataset's shape.
		return rep, unsupported(p.path, "scc refuses it: %v", err)
	}
	if err != nil {
		return rep, err
	}
	defer ds.Close(ctx)
	defer func() {
		var skip *skipError
		if errors.As(err, &skip) {
			// What neither scc nor this libhdf5 can decode (or hold):
			// the dataset goes, partly written as it is, and is named.
			ds.Close(ctx)
			if derr := dst.Delete(ctx, p.path, nil); derr != nil {
				err = fmt.Errorf("%v; removing what was imported of it: %w", err, derr)
			}
		}
	}()
	if p.defined != "" {
		// The attribute naming the defined set is the export's bookkeeping,
		// not the dataset's.
		attrs = slices.DeleteFunc(attrs, func(a h5.Attr) bool { return a.Name == DefinedAttr })
	}
	if rep.AttrNotes, err = importAttrs(ctx, ds, attrs, skipped, opts.strict()); err != nil {
		return rep, err
	}
	rep.AttrsNotImported = len(rep.AttrNotes)
	if p.vlen {
		if err := importVlen(ctx, hd, ds, p, &rep); err != nil {
			return rep, err
		}
		if err := dst.Flush(ctx); err != nil {
			return rep, err
		}
		if st, err := ds.Storage(ctx); err == nil {
			rep.StoredBytes = int64(st.StoredBytes)
		}
		return rep, nil
	}
	if p.defined != "" {
		if err := importSparse(ctx, f, hd, ds, p, &rep); err != nil {
			return rep, err
		}
		if err := dst.Flush(ctx); err != nil {
			return rep, err
		}
		if st, err := ds.Storage(ctx); err == nil {
			rep.StoredBytes = int64(st.StoredBytes)
		}
		return rep, nil
	}
	chunk, dims := p.chunk, p.dims
	chunkBytes := ds.ChunkBytes()
	grid := ds.ChunkGrid()
	elemType := p.info.Type
	elemType = elemType.LittleEndian() // memory type for HDF5 reads: little-endian
	fill := p.spec.Fill
	if fill == nil {
		fill = make([]byte, elemType.Size)
	}

	// readBox reads a chunk's in-extent part through HDF5's pipeline.
	readBox := func(c []uint64) (imported, error) {
		it := imported{coord: c, start: make([]uint64, len(c)), count: make([]uint64, len(c))}
		n := uint64(elemType.Size)
		for i := range c {
			it.start[i] = c[i] * chunk[i]
			it.count[i] = min(chunk[i], dims[i]-it.start[i])
			n *= it.count[i]
		}
		it.elems = make([]byte, n)
		err := hd.ReadBox(elemType, it.start, it.count, it.elems)
		if errors.Is(err, h5.ErrFilter) {
			err = filterSkip(p, it.start, err)
		}
		return it, err
	}
	// goBox is readBox for a chunk libhdf5 cannot decode: its stored
	// image decoded by decodeChunkGo.
	goBox := func(c []uint64, img []byte, mask uint32) (imported, error) {
		full, err := decodeChunkGo(p.info.Filters, mask, img, chunkBytes, elemType.Size)
		if err != nil {
			return imported{}, err
		}
		it := imported{coord: c, start: make([]uint64, len(c)), count: make([]uint64, len(c))}
		n := uint64(elemType.Size)
		for i := range c {
			it.start[i] = c[i] * chunk[i]
			it.count[i] = min(chunk[i], dims[i]-it.start[i])
			n *= it.count[i]
		}
		it.elems = make([]byte, n)
		zarrmap.CopyBox(full, chunk, it.elems, it.count, elemType.Size, true)
		return it, nil
	}
	allFill := func(b []byte) bool {
		for i := 0; i < len(b); i += len(fill) {
			if !bytes.Equal(b[i:i+len(fill)], fill) {
				return false
			}
		}
		return true
	}

	// run moves the chunks produce hands it: produce owns every HDF5 call
	// (chunk lookups, raw reads and the decoded reads of chunks that
	// cannot be copied); opts.workers() goroutines copy raw images
	// (checking and stripping the zlib wrapper) or write decoded elements
	// through the engine. A raw image the engine refuses falls back to
	// HDF5's decoder for that chunk (readBox: an HDF5 call beside the
	// producer's, which the binding serializes).
	var mu sync.Mutex // guards rep's counters (workers add to them) and copyWhy
	var copyWhy error // why the first chunk that could not be copied was not
	run := func(produce func(gctx context.Context, send func(imported) error) error) error {
		g, gctx := errgroup.WithContext(ctx)
		work := make(chan imported, 2*opts.workers())
		g.Go(func() error {
			defer close(work)
			return produce(gctx, func(it imported) error {
				select {
				case work <- it:
					return nil
				case <-gctx.Done():
					return gctx.Err()
				}
			})
		})
		for w := 0; w < opts.workers(); w++ {
			g.Go(func() error {
				for it := range work {
					copied, untouched := false, false
					if it.image != nil {
						var err error
						lz4Framed := p.lz4Stage >= 0 && it.mask&(1<<p.lz4Stage) == 0
						switch {
						case lz4Framed:
							// An image that is not one compressed block, or
							// whose framing is damaged, goes through HDF5's
							// decoder, which reports real damage.
							var img []byte
							if img, err = lz4FromHDF5(it.image, chunkBytes); err == nil {
								err = ds.WriteChunkRaw(gctx, it.coord, img, it.mask)
							} else if !errors.Is(err, engine.ErrInvalid) {
								err = fmt.Errorf("%w: %w", engine.ErrInvalid, err)
							}
						case p.zlibDirect && it.mask == 0 && !opts.verify():
							var verified bool
							verified, err = ds.WriteChunkRawZlib(gctx, it.coord, it.image, 0)
							untouched = err == nil && !verified
						default:
							err = ds.WriteChunkRaw(gctx, it.coord, it.image, it.mask)
						}
						switch {
						case err == nil:
							copied = true
						case !errors.Is(err, engine.ErrInvalid):
							return err
						}
						if !copied {
							// Not scc's form (a filter skipped in a way scc
							// does not record, a stream that did not shrink
							// the chunk, edge padding other than the fill
							// value): HDF5's decoder, which also reports
							// real damage.
							copyErr := err
							mu.Lock()
							if copyWhy == nil {
								copyWhy = copyErr
							}
							mu.Unlock()
							img, mask, coord := it.image, it.mask, it.coord
							if it, err = readBox(coord); err != nil {
								fl, missing := missingFilter(p.info.Filters)
								if !missing || !errors.Is(err, h5.ErrHDF5) {
									return err
								}
								// No plugin: decoded here if scc's libraries
								// can (godecode.go), else the dataset goes.
								if !goDecodable(p.info.Filters) {
									return &skipError{path: p.path, err: err, reason: fmt.Sprintf("chunk %v: scc cannot copy it (%v) and this libhdf5 has no plugin for filter %s (in %s) to decode it", coord, copyErr, filterName(fl), pluginPathString())}
								}
								if it, err = goBox(coord, img, mask); err != nil {
									return &skipError{path: p.path, err: err, reason: fmt.Sprintf("chunk %v: scc cannot copy it (%v) nor decode it (%v), and this libhdf5 has no plugin for filter %s (in %s)", coord, copyErr, err, filterName(fl), pluginPathString())}
								}
							}
						}
					}
					if !copied {
						if err := ds.Write(gctx, engine.Box(it.start, it.count), it.elems); err != nil {
							return err
						}
					}
					mu.Lock()
					rep.Chunks++
					if copied {
						rep.CopiedChunks++
					}
					if untouched {
						rep.UntouchedChunks++
					}
					rep.LogicalBytes += int64(chunkBytes)
					mu.Unlock()
				}
				return nil
			})
		}
		return g.Wait()
	}

	// walk reads every chunk-sized box of the grid through H5Dread and
	// sends those that hold something other than the fill value.
	walk := func() func(context.Context, func(imported) error) error {
		return func(gctx context.Context, send func(imported) error) error {
			if n := gridCells(grid); n > maxGrid {
				// Not a skip: the direct pass may have written chunks.
				return fmt.Errorf("%w: dataset %q: its %d chunks would be read one by one through H5Dread (at most %d)", ErrUnsupported, p.path, n, maxGrid)
			}
			var err error
			forEachCoord(grid, func(c []uint64) bool {
				if err = gctx.Err(); err != nil {
					return false
				}
				var it imported
				if it, err = readBox(c); err != nil {
					return false
				}
				if allFill(it.elems) {
					return true
				}
				err = send(it)
				return err == nil
			})
			return err
		}
	}

	// direct copies the chunks the index lists, raw where the pipelines
	// agree.
	direct := func(gctx context.Context, send func(imported) error) error {
		off := make([]uint64, len(chunk))
		// emit hands one chunk to the workers: its stored bytes when they
		// may be copied, else its elements through HDF5's decoder. size
		// is the chunk's stored size (0: look it up).
		emit := func(c []uint64, size uint64) error {
			var it imported
			if p.mode != Reencoded {
				for i := range off {
					off[i] = c[i] * chunk[i]
				}
				if size == 0 {
					var err error
					if _, size, err = hd.ChunkInfo(off); err != nil {
						return errIndex{err}
					}
				}
				if size > 0 && size <= uint64(chunkBytes)+max(zlibOverhead, lz4HDF5Overhead) {
					buf := make([]byte, size)
					mask, err := hd.ReadChunk(off, buf)
					if err != nil {
						return errIndex{err}
					}
					it = imported{coord: c, image: buf, mask: mask}
				}
			}
			if it.image == nil {
				var err error
				if it, err = readBox(c); err != nil {
					return err
				}
			}
			return send(it)
		}
		coords, err := storedCoords(gctx, hd, grid, chunk)
		if err != nil {
			return err
		}
		if coords != nil {
			for _, c := range coords {
				if err := gctx.Err(); err != nil {
					return err
				}
				if err := emit(c, 0); err != nil {
					return err
				}
			}
			return nil
		}
		// Dense: walk the grid, asking the index about each chunk.
		forEachCoord(grid, func(c []uint64) bool {
			if err = gctx.Err(); err != nil {
				return false
			}
			for i := range off {
				off[i] = c[i] * chunk[i]
			}
			var size uint64
			if _, size, err = hd.ChunkInfo(off); err != nil {
				err = errIndex{err}
				return false
			}
			if size == 0 {
				return true // not stored: fill value on both sides
			}
			err = emit(c, size)
			return err == nil
		})
		return err
	}

	switch {
	case !p.info.Allocated:
		// Nothing stored: every element is the fill value, which the new
		// dataset already reads as. Its extent may be any size; it is not
		// visited.
	case p.info.Layout != h5.Chunked || p.info.ChunkInfoUnreliable:
		err = run(walk())
	default:
		err = run(direct)
		var ie errIndex
		if errors.As(err, &ie) && ctx.Err() == nil {
			// The index answered inconsistently (libhdf5 misreads some
			// indexes; see h5.Info.ChunkInfoUnreliable): read the whole
			// dataset again through H5Dread. What the direct pass wrote
			// stays right: H5Dread_chunk finds a chunk by its own lookup,
			// which is correct, and its stored size was checked against
			// that lookup's (a chunk listed where none is stored fails
			// that check), so every chunk written holds the elements of its
			// coordinates, and the walk writes the same elements again
			// or leaves them. The workers have all stopped (run waited).
			rep.Chunks, rep.CopiedChunks, rep.UntouchedChunks, rep.LogicalBytes = 0, 0, 0, 0
			rep.Mode = Reencoded
			rep.Reason = fmt.Sprintf("chunk index not usable for direct chunk reads (%v): read through H5Dread", ie.err)
			err = run(walk())
		}
	}
	if err != nil {
		return rep, err
	}
	// Commit each dataset as it completes.
	if err := dst.Flush(ctx); err != nil {
		return rep, err
	}
	st, err := ds.Storage(ctx)
	if err == nil {
		rep.StoredBytes = int64(st.StoredBytes)
	}
	if rep.Mode != Reencoded && rep.CopiedChunks < rep.Chunks {
		rep.Reason = fmt.Sprintf("%d of %d chunks re-encoded (filters skipped in a way scc does not record, deflate that did not shrink the chunk, LZ4 in several blocks, ...; the first: %v)", rep.Chunks-rep.CopiedChunks, rep.Chunks, copyWhy)
	}
	return rep, err
}

// storedCoords lists the chunk coordinates of the stored chunks of a sparse
// dataset, in C order, or returns nil for a dense one. HDF5 1.10 finds the
// i-th stored chunk by walking its index from the start, so listing n
// chunks costs about n²/2 steps against one lookup per grid cell for a
// walk of the grid: the list is used when that is cheaper, which keeps a
// sparse dataset with a huge grid (a long unlimited axis) from costing a
// lookup per empty cell, and whenever the grid is larger than maxGrid.
// Failures of the index calls are errIndex.
func storedCoords(ctx context.Context, hd *h5.Dataset, grid, chunk []uint64) ([][]uint64, error) {
	n, err := hd.NumChunks()
	if err != nil {
		return nil, errIndex{err}
	}
	cells := gridCells(grid)
	if hi, sq := bits.Mul64(n, n); hi == 0 && sq/2 >= cells && cells <= maxGrid {
		return nil, nil
	}
	if n > cells {
		return nil, errIndex{fmt.Errorf("%w: %d chunks stored in a grid of %d", ErrHDF5, n, cells)}
	}
	stored, err := hd.StoredChunks(ctx, n)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, errIndex{err}
	}
	coords := make([][]uint64, 0, len(stored))
	for _, sc := range stored {
		c := make([]uint64, len(chunk))
		for i := range c {
			c[i] = sc.Offset[i] / chunk[i]
			if c[i] >= grid[i] || sc.Offset[i]%chunk[i] != 0 {
				return nil, errIndex{fmt.Errorf("%w: stored chunk at %v outside the extent", ErrHDF5, sc.Offset)}
			}
		}
		coords = append(coords, c)
	}
	slices.SortFunc(coords, slices.Compare[[]uint64])
	return coords, nil
}

// importGroups creates an scc group, with its attributes, for each HDF5
// group: all of them, or with opts.Datasets those holding a selected
// dataset, but those named in bad. h5.File.Groups lists parents first, so
// each parent exists.
func importGroups(ctx context.Context, f *h5.File, dst *engine.File, plans []*importPlan, bad map[string]error, opts *Options, rep *Report) error {
	paths, err := f.Groups()
	if err != nil {
		return err
	}
	var names []string
	for _, p := range plans {
		names = append(names, p.path)
	}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		if opts != nil && opts.Datasets != nil && !holdsAny(p, names) || bad[p] != nil {
			continue
		}
		g, err := dst.OpenGroup(ctx, p)
		if errors.Is(err, engine.ErrNotFound) {
			g, err = dst.CreateGroup(ctx, p)
		}
		if errors.Is(err, engine.ErrInvalid) {
			// A file whose names are not paths takes no groups.
			rep.GroupAttrNotes = append(rep.GroupAttrNotes, fmt.Sprintf("/%s: group left out: %v", p, err))
			continue
		}
		if err != nil {
			return fmt.Errorf("group %q: %w", p, err)
		}
		attrs, skipped, err := f.ReadGroupAttrs(p)
		if errors.Is(err, h5.ErrHDF5) {
			// A group the library cannot open or whose attributes it
			// cannot count: its attributes are left out and said.
			attrs, skipped = nil, []h5.Skipped{{Name: "(all)", Why: "not read: " + err.Error()}}
		} else if err != nil {
			return fmt.Errorf("group %q: %w", p, err)
		}
		notes, err := importAttrs(ctx, g, attrs, skipped, opts.strict())
		if err != nil {
			return fmt.Errorf("group %q: %w", p, err)
		}
		for _, n := range notes {
			rep.GroupAttrNotes = append(rep.GroupAttrNotes, "/"+p+": "+n)
		}
	}
	return nil
}

// groupNameErrs is the refusal of each group of f (all, or with
// opts.Datasets those holding a selected dataset) whose name scc
// refuses.
func groupNameErrs(f *h5.File, opts *Options, plans []*importPlan) (map[string]error, error) {
	paths, err := f.Groups()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range plans {
		names = append(names, p.path)
	}
	bad := map[string]error{}
	for _, p := range paths {
		if opts != nil && opts.Datasets != nil && !holdsAny(p, names) {
			continue
		}
		if err := nameErr(p); err != nil {
			bad[p] = err
		}
	}
	return bad, nil
}
