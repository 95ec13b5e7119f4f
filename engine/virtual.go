package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/selection"
)

// Virtual datasets (FORMAT.md §21): a dataset whose elements are stored
// nowhere in its own file but in regions of source datasets, of this file
// or others, each named by a mapping. Many writers each append to their
// own file and one small file stitches them into one array (HDF5's
// virtual datasets: printf names, unlimited mappings, the two extent
// views).
//
// A virtual dataset is a layout like the others (virtualLayout implements
// storage); it keeps no chunks of its own (no chunkedStorage) and is not
// registered with the cache. A read is split by mapping into reads of the
// source datasets, which run concurrently, each through the source's own
// path: its serializer, the cache's admission and the
// shared cache, since source files open with the virtual file's cache.
// Missing sources, and the parts of a mapping beyond a source's extent,
// read as the fill value; a source that fails to read fails the read.

// layoutVirtual is the header's layout code of virtual datasets.
const layoutVirtual = format.LayoutVirtual

// Virtual is the layout of a dataset made with File.CreateVirtualDataset.
const Virtual LayoutKind = 4

// VirtualSpec describes a virtual dataset to create.
type VirtualSpec struct {
	Type Type
	// Shape is the extent along dimensions that are not unlimited. Along
	// an unlimited dimension the extent follows the mappings (the ends of
	// the bounded ones, and the sources of the unlimited ones, seen
	// through VirtualOptions.View), and Shape there is ignored.
	Shape    []uint64
	MaxShape []uint64 // nil means Shape; Unlimited along growable dimensions
	Fill     []byte   // nil (zero) or exactly Type.Size() bytes
	Mappings []VirtualMapping
}

// VirtualMapping maps the elements of a virtual selection, in C order, to
// those of a source selection of a source dataset.
type VirtualMapping struct {
	// Virtual is a Box or Hyperslab of the virtual dataset; its count may
	// be Unlimited along one dimension whose max shape is Unlimited.
	Virtual Selection
	// File names the source file: "" or "." for the virtual dataset's own
	// file, a path (relative paths are resolved against
	// VirtualOptions.Base, by default the virtual file's directory), or
	// anything VirtualOptions.Open understands (an s3:// URL).
	File string
	// Dataset names the source dataset.
	Dataset string
	// Source is the selection in the source dataset. It selects as many
	// elements as Virtual, in the same shape once dimensions of one
	// element are left out; with an unlimited Virtual, Source is
	// unlimited along the matching dimension, or File and Dataset carry
	// the block-number pattern "%b" (one source per block of Virtual
	// along its unlimited dimension, Source then selecting one block's
	// elements). "%%" is a literal percent sign.
	Source Selection
}

// VirtualView chooses how far an unlimited virtual dataset reaches (HDF5's
// H5D_VDS_LAST_AVAILABLE and H5D_VDS_FIRST_MISSING).
type VirtualView uint8

const (
	// LastAvailable: up to the furthest element any source has.
	LastAvailable VirtualView = iota
	// FirstMissing: up to the first element a source does not have yet.
	FirstMissing
)

// VirtualOptions configure how a File's virtual datasets reach their
// sources (Options.Virtual). The zero value is valid.
type VirtualOptions struct {
	// View is the extent view of unlimited virtual datasets.
	View VirtualView
	// PrintfGap is how many consecutive missing sources a printf mapping
	// skips when looking for later ones in the LastAvailable view (HDF5's
	// printf gap). Default 0.
	PrintfGap int
	// MaxSourceFiles bounds the source files kept open (least recently
	// used first closed; files in use by a read stay open). Default 64.
	MaxSourceFiles int
	// Base resolves relative source file names; default the directory of
	// the virtual file (a File made by Create or Open).
	Base string
	// Open opens a source file read-only; nil opens local paths with Open
	// (ReadOnly, the virtual file's cache). opts carries the virtual
	// file's cache. It must return an error matching ErrNotFound for a
	// source that does not exist (yet): such a source reads as fill.
	Open func(ctx context.Context, name string, opts *Options) (*File, error)
	// OpenURL opens a source file named by a URL (scheme://...) when Open
	// is nil. Without it, s3:// sources open as Open opens an s3:// path
	// (with the virtual file's Options.S3), and a URL of another scheme is
	// an ErrIO naming it, never a missing source: this File cannot look,
	// so it cannot say the source is not there.
	OpenURL func(ctx context.Context, url string, opts *Options) (*File, error)
}

// errVirtualWrite refuses every change of a virtual dataset's elements.
func errVirtualWrite(name string) error {
	return fmt.Errorf("%w: dataset %q is virtual: virtual datasets are read-only (write the source datasets)", ErrReadOnly, name)
}

// vmap is one mapping, checked and prepared for the arithmetic.
type vmap struct {
	v, src      []dim1 // virtual and source selection
	file, dset  string
	printf      bool
	u           int    // the virtual selection's unlimited dimension, or -1
	us          int    // the source selection's unlimited dimension, or -1
	pair        []int  // per virtual dimension: its source dimension, or -1 (one element)
	spair       []int  // per source dimension: its virtual dimension, or -1
	blockShape  []dim1 // printf: the virtual selection of block 0
	printfFound map[uint64]bool
}

func toDims(h selection.Hyperslab) []dim1 {
	out := make([]dim1, len(h.Start))
	for d := range out {
		out[d] = dim1{h.Start[d], h.Stride[d], h.Count[d], h.Block[d]}
	}
	return out
}

// fromSel is a mapping's selection as stored. A Box with an Unlimited
// count along a dimension (one block of Unlimited indices, as Box writes
// it) selects every index from its start on: the hyperslab of stride 1,
// Unlimited count and block 1 there, which the format stores.
func fromSel(s Selection) format.VirtualSelection {
	h := s.hyper()
	v := format.VirtualSelection{Start: clone(h.Start), Stride: clone(h.Stride), Count: clone(h.Count), Block: clone(h.Block)}
	for d := range v.Count {
		if v.Count[d] == 1 && v.Block[d] == Unlimited {
			v.Stride[d], v.Count[d], v.Block[d] = 1, Unlimited, 1
		}
	}
	return v
}

// pairDims pairs the dimensions of two selections of the same shape once
// dimensions of one element are left out; ok is false when the shapes
// differ.
func pairDims(v, s []dim1) (pair, spair []int, ok bool) {
	pair, spair = make([]int, len(v)), make([]int, len(s))
	var vi, si []int
	for d, x := range v {
		pair[d] = -1
		if x.size() != 1 {
			vi = append(vi, d)
		}
	}
	for d, x := range s {
		spair[d] = -1
		if x.size() != 1 {
			si = append(si, d)
		}
	}
	if len(vi) != len(si) {
		return nil, nil, false
	}
	for i := range vi {
		if v[vi[i]].size() != s[si[i]].size() {
			return nil, nil, false
		}
		pair[vi[i]], spair[si[i]] = si[i], vi[i]
	}
	return pair, spair, true
}

func unlimDim(ds []dim1) int {
	for d, x := range ds {
		if x.count == Unlimited {
			return d
		}
	}
	return -1
}

// checkPattern checks a name's printf pattern ("%b", "%%") and reports
// whether it has %b.
func checkPattern(name string) (bool, error) {
	has := false
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			continue
		}
		if i+1 < len(name) && (name[i+1] == 'b' || name[i+1] == '%') {
			has = has || name[i+1] == 'b'
			i++
			continue
		}
		return false, fmt.Errorf("%q: only %%b and %%%% may follow %%", name)
	}
	return has, nil
}

// expand replaces %b by block and %% by %.
func expand(name string, block uint64) string {
	if !strings.Contains(name, "%") {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] == '%' && i+1 < len(name) {
			i++
			if name[i] == 'b' {
				b.WriteString(strconv.FormatUint(block, 10))
				continue
			}
		}
		b.WriteByte(name[i])
	}
	return b.String()
}

// prepareMappings checks a mapping list against a dataset of max shape
// maxShape; the error says what is wrong (the caller picks the sentinel:
// ErrInvalid at creation, ErrCorrupt when loaded).
func prepareMappings(ms []format.VirtualMapping, maxShape []uint64) ([]*vmap, error) {
	if len(ms) == 0 || len(ms) > format.MaxVirtualMappings {
		return nil, fmt.Errorf("%d mappings (1..%d)", len(ms), format.MaxVirtualMappings)
	}
	out := make([]*vmap, len(ms))
	for i, m := range ms {
		if err := format.CheckVirtualSelection(m.Virtual); err != nil {
			return nil, fmt.Errorf("mapping %d: virtual selection: %v", i, err)
		}
		if err := format.CheckVirtualSelection(m.Source); err != nil {
			return nil, fmt.Errorf("mapping %d: source selection: %v", i, err)
		}
		if len(m.Virtual.Start) != len(maxShape) {
			return nil, fmt.Errorf("mapping %d: virtual selection of rank %d, dataset rank %d", i, len(m.Virtual.Start), len(maxShape))
		}
		if len(m.File) > format.MaxVirtualFileBytes || !utf8.ValidString(m.File) {
			return nil, fmt.Errorf("mapping %d: source file name", i)
		}
		if err := format.ValidName(m.Dataset); err != nil {
			return nil, fmt.Errorf("mapping %d: source dataset name: %v", i, err)
		}
		pf, err := checkPattern(m.File)
		if err != nil {
			return nil, fmt.Errorf("mapping %d: file %v", i, err)
		}
		pd, err := checkPattern(m.Dataset)
		if err != nil {
			return nil, fmt.Errorf("mapping %d: dataset %v", i, err)
		}
		vm := &vmap{
			v:    toDims(selection.Hyperslab{Start: m.Virtual.Start, Stride: m.Virtual.Stride, Count: m.Virtual.Count, Block: m.Virtual.Block}),
			src:  toDims(selection.Hyperslab{Start: m.Source.Start, Stride: m.Source.Stride, Count: m.Source.Count, Block: m.Source.Block}),
			file: m.File, dset: m.Dataset, printf: pf || pd,
		}
		vm.u, vm.us = unlimDim(vm.v), unlimDim(vm.src)
		for d, x := range vm.v {
			if x.count == Unlimited {
				if maxShape[d] != Unlimited {
					return nil, fmt.Errorf("mapping %d: unlimited along dimension %d, whose max shape is %d", i, d, maxShape[d])
				}
				continue
			}
			if maxShape[d] != Unlimited && x.end() > maxShape[d] {
				return nil, fmt.Errorf("mapping %d: virtual selection reaches %d along dimension %d, max shape is %d", i, x.end(), d, maxShape[d])
			}
		}
		switch {
		case vm.printf && vm.u < 0:
			return nil, fmt.Errorf("mapping %d: %%b names need a virtual selection unlimited along one dimension", i)
		case vm.printf && vm.us >= 0:
			return nil, fmt.Errorf("mapping %d: with %%b names the source selection is bounded (one block's elements)", i)
		case !vm.printf && (vm.u < 0) != (vm.us < 0):
			return nil, fmt.Errorf("mapping %d: element counts differ: one selection is unlimited, the other is not", i)
		}
		v := vm.v
		if vm.printf {
			v = clone(vm.v)
			v[vm.u].count = 1
			vm.blockShape = v
			vm.printfFound = make(map[uint64]bool)
		}
		var paired bool
		if vm.pair, vm.spair, paired = pairDims(v, vm.src); !paired {
			nv, ns := prodSizes(v), prodSizes(vm.src)
			if nv != ns {
				return nil, fmt.Errorf("mapping %d: virtual selection has %d elements, source selection %d", i, nv, ns)
			}
			return nil, fmt.Errorf("mapping %d: virtual and source selections differ in shape beyond dimensions of one element (not supported)", i)
		}
		if !vm.printf && vm.u >= 0 && vm.pair[vm.u] != vm.us {
			return nil, fmt.Errorf("mapping %d: the unlimited dimensions of the virtual and source selections do not correspond", i)
		}
		out[i] = vm
	}
	// No element of the virtual dataset may have two sources.
	if i, j, ok := findOverlap(out); ok {
		return nil, fmt.Errorf("mappings %d and %d overlap in the virtual dataset", i, j)
	}
	return out, nil
}

// findOverlap returns two mappings whose virtual selections overlap. Only
// pairs whose hulls meet along the dimension that separates the hulls
// best are compared (a sweep over that dimension), so a list of boxes
// side by side costs n log n, not n².
func findOverlap(ms []*vmap) (int, int, bool) {
	if len(ms) < 2 {
		return 0, 0, false
	}
	order := make([]int, len(ms))
	best, bestPairs := 0, -1
	for d := range ms[0].v {
		if pairs := sweep(ms, d, order, nil); bestPairs < 0 || pairs < bestPairs {
			best, bestPairs = d, pairs
		}
	}
	var bi, bj int
	found := false
	sweep(ms, best, order, func(i, j int) bool {
		if overlaps(ms[i].v, ms[j].v) {
			bi, bj, found = min(i, j), max(i, j), true
			return false
		}
		return true
	})
	return bi, bj, found
}

// sweep visits the pairs of mappings whose hulls meet along dimension d
// (while visit returns true) and returns how many it visited; with visit
// nil it only counts them.
func sweep(ms []*vmap, d int, order []int, visit func(i, j int) bool) int {
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ms[a].v[d].start, ms[b].v[d].start) })
	var active []int
	pairs := 0
	for _, i := range order {
		lo := ms[i].v[d].start
		keep := active[:0]
		for _, j := range active {
			if ms[j].v[d].end() > lo {
				keep = append(keep, j)
			}
		}
		active = keep
		for _, j := range active {
			pairs++
			if visit != nil && !visit(j, i) {
				return pairs
			}
		}
		active = append(active, i)
	}
	return pairs
}

func prodSizes(ds []dim1) uint64 {
	n := uint64(1)
	for _, x := range ds {
		s := x.size()
		if s == Unlimited {
			return Unlimited
		}
		n = mulSat(n, s)
	}
	return n
}

func overlaps(a, b []dim1) bool {
	for d := range a {
		if !overlap1(a[d], b[d]) {
			return false
		}
	}
	return true
}

// virtualLayout is a virtual dataset's storage: no chunks, a mapping list
// (the header's LayoutParams) and the extent it last evaluated.
//
// Concurrency: maps is replaced only by adopt, under the dataset's
// exclusive hold; evalMu serializes extent evaluations (which update the
// printf mappings' found blocks); reads take a snapshot of the extent
// (s.mu.shape) and the mapping list under s.mu.
type virtualLayout struct {
	s      *dsState
	evalMu sync.Mutex
	maps   []*vmap // guarded by s.mu
	// evalErr is the last extent evaluation's failure, nil after a
	// success: every read then evaluates again first (evalExtent).
	evalErr atomic.Pointer[error]
}

func newVirtualLayout(s *dsState, params []byte) (*virtualLayout, error) {
	maps, err := decodeVirtualMaps(params, s.maxShape)
	if err != nil {
		return nil, err
	}
	return &virtualLayout{s: s, maps: maps}, nil
}

func decodeVirtualMaps(params []byte, maxShape []uint64) ([]*vmap, error) {
	ms, err := format.DecodeVirtualParams(params)
	if err != nil {
		return nil, classify(err)
	}
	maps, err := prepareMappings(ms, maxShape)
	if err != nil {
		return nil, fmt.Errorf("%w: virtual mappings: %v", ErrCorrupt, err)
	}
	return maps, nil
}

func (l *virtualLayout) mappings() []*vmap {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.maps
}

// CreateVirtualDataset creates a virtual dataset; it is durable after the
// next Flush, like any dataset. path (inside g, as CreateDataset takes
// it) obeys the name rule (ValidateName) and missing parent groups are
// created, as CreateDataset does. Every
// mapping is checked first (ErrInvalid): ranks, limits, element counts,
// source names, that no two virtual selections overlap, that every source
// that exists now has the dataset's element type and the rank of its
// source selection, that this File can locate the source files of
// unlimited mappings, whose sources give the extent, and that the extent
// they give fits a dataset. A failed call leaves the file as it was.
func (g *Group) CreateVirtualDataset(ctx context.Context, path string, spec VirtualSpec) (*Dataset, error) {
	f := g.f
	if err := f.writeCheck(ctx); err != nil {
		return nil, err
	}
	name, err := g.newPath(path)
	if err != nil {
		return nil, err
	}
	if !spec.Type.Valid() {
		return nil, fmt.Errorf("%w: element type %v", ErrInvalid, spec.Type)
	}
	r := len(spec.Shape)
	if r == 0 || r > MaxRank {
		return nil, fmt.Errorf("%w: rank %d (1..%d)", ErrInvalid, r, MaxRank)
	}
	if spec.MaxShape == nil {
		spec.MaxShape = spec.Shape
	}
	if len(spec.MaxShape) != r {
		return nil, fmt.Errorf("%w: shape and max shape have different ranks", ErrInvalid)
	}
	shape := make([]uint64, r)
	for d := range shape {
		if spec.MaxShape[d] != Unlimited {
			if spec.Shape[d] > spec.MaxShape[d] {
				return nil, fmt.Errorf("%w: shape %v exceeds max shape %v", ErrInvalid, spec.Shape, spec.MaxShape)
			}
			shape[d] = spec.Shape[d]
		}
	}
	if len(spec.Fill) != 0 && len(spec.Fill) != spec.Type.Size() {
		return nil, fmt.Errorf("%w: fill value has %d bytes, element has %d", ErrInvalid, len(spec.Fill), spec.Type.Size())
	}
	ms := make([]format.VirtualMapping, len(spec.Mappings))
	for i, m := range spec.Mappings {
		ms[i] = format.VirtualMapping{Virtual: fromSel(m.Virtual), File: m.File, Dataset: m.Dataset, Source: fromSel(m.Source)}
	}
	maps, err := prepareMappings(ms, spec.MaxShape)
	if err == nil {
		err = checkNewMappings(maps)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: virtual dataset %q: %v", ErrInvalid, name, err)
	}
	params := format.EncodeVirtualParams(ms)
	if len(params) > format.MaxPartBytes {
		return nil, fmt.Errorf("%w: virtual dataset %q: mapping list of %d bytes (at most %d)", ErrInvalid, name, len(params), format.MaxPartBytes)
	}
	hdr := format.DatasetHeader{
		Name: name, Shape: shape, MaxShape: clone(spec.MaxShape),
		Chunk: ones(r), Layout: layoutVirtual, LayoutParams: params, Fill: clone(spec.Fill),
		Filters: filter.EncodeSpecs(nil),
		// No reservation in the cache: the chunks read are the sources'.
		MinCacheBytes: -1,
		// The id is not known yet; any valid one checks the rest, and
		// evaluates the extent before the dataset exists.
		ID: 1,
	}
	headerType(&hdr, spec.Type)
	if err := hdr.Validate(); err != nil {
		return nil, classify(err)
	}
	// Sources that exist now must fit: their type and rank. The extent
	// of an unlimited mapping is its sources', evaluated before the
	// dataset exists; a source this File cannot even locate, and one that
	// fails to open, fail the creation here, before anything changed.
	for _, m := range maps {
		if m.u >= 0 {
			if _, _, err := f.sourceLocation(m.file); err != nil {
				return nil, fmt.Errorf("virtual dataset %q: its extent follows source file %q: %w", name, m.file, err)
			}
		}
		if m.printf {
			continue // one source per block, appearing later
		}
		if err := f.checkSource(ctx, name, spec.Type, m, m.file, m.dset); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	err = f.checkNewLocked(name, true)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s, err := f.newState(hdr)
	if err != nil {
		return nil, err
	}
	if l, ok := asLayout[*virtualLayout](s); ok {
		if err := l.evalExtent(ctx); err != nil {
			return nil, err
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return nil, ErrClosed
	}
	if err := f.checkNewLocked(name, true); err != nil {
		return nil, err // made meanwhile
	}
	s.id = f.mu.nextID
	ds, err := s.acquire()
	if err != nil {
		return nil, err
	}
	f.mu.nextID++
	s.dirty.Store(true)
	f.addParentsLocked(name)
	f.mu.open[name] = s
	f.mu.catalog[name] = s.catalogEntry()
	return ds, nil
}

// checkNewMappings checks what a mapping list must obey to be created,
// beyond what every stored one obeys (prepareMappings), so that older
// files keep opening: source names that a file system or a dataset can
// hold, whatever block number a %b takes, and selections whose elements
// a dataset can count.
func checkNewMappings(ms []*vmap) error {
	for i, m := range ms {
		if err := checkSourceName(m.file, format.MaxVirtualFileBytes, true); err != nil {
			return fmt.Errorf("mapping %d: source file name: %v", i, err)
		}
		if err := checkSourceName(m.dset, format.MaxNameBytes, false); err != nil {
			return fmt.Errorf("mapping %d: source dataset name: %v", i, err)
		}
		for _, sel := range []struct {
			what string
			ds   []dim1
		}{{"virtual", m.v}, {"source", m.src}} {
			if blockElems(sel.ds) > math.MaxInt64 {
				return fmt.Errorf("mapping %d: %s selection of more than 2^63-1 elements", i, sel.what)
			}
		}
	}
	return nil
}

// maxBlockDigits is how many bytes %b may expand to (2^64-1).
const maxBlockDigits = 20

// checkSourceName checks a source file or dataset name as its longest
// expansion: no NUL or other control character (no file or dataset can
// be named so: opening it fails, and HDF5 cuts the name at NUL), at most
// limit bytes, and for a file at most MaxNameComponentBytes per
// component, the usual file-system limit on one name.
func checkSourceName(name string, limit int, file bool) error {
	worst := func(s string) int {
		n := len(s)
		for i := 0; i+1 < len(s); i++ {
			if s[i] == '%' {
				if s[i+1] == 'b' {
					n += maxBlockDigits - 2
				}
				i++
			}
		}
		return n
	}
	if n := worst(name); n > limit {
		return fmt.Errorf("%q: up to %d bytes (at most %d)", name, n, limit)
	}
	for i := 0; i < len(name); i++ {
		if b := name[i]; b < 0x20 || b == 0x7f {
			return fmt.Errorf("%q: control character %#02x", name, b)
		}
	}
	if file {
		for c := range strings.SplitSeq(name, "/") {
			if n := worst(c); n > MaxNameComponentBytes {
				return fmt.Errorf("%q: a component of up to %d bytes (at most %d)", name, n, MaxNameComponentBytes)
			}
		}
	}
	return nil
}

// checkSource opens a mapping's source, if it exists, and checks it.
func (f *File) checkSource(ctx context.Context, name string, typ Type, m *vmap, file, dset string) error {
	_, self, err := f.sourceLocation(file)
	if err != nil {
		// A name this File cannot resolve (a relative name on a File
		// opened on a driver) is resolved by whoever reads it.
		return nil
	}
	if self && strings.TrimPrefix(dset, "/") == name {
		return fmt.Errorf("%w: virtual dataset %q maps itself (source %s:%s)", ErrInvalid, name, cmp.Or(file, "."), dset)
	}
	src, release, err := f.virt.acquire(ctx, f, file, dset)
	if err != nil {
		return err
	}
	if src == nil {
		return nil
	}
	defer release()
	if err := checkSourceFits(name, typ, m, file, src); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// notVirtual refuses a virtual source where an extent is evaluated: its
// own extent is not (openDataset), and a read that reaches it would be
// refused anyway.
func notVirtual(name, file string, src *Dataset) error {
	if src.s.store.kind() == Virtual {
		return fmt.Errorf("%w: virtual dataset %q: source %s:%s is itself virtual", ErrInvalid, name, file, src.Path())
	}
	return nil
}

// checkSourceFits checks a source dataset against its mapping: the
// element type (never reinterpreted), the rank, and that it is not itself
// virtual.
func checkSourceFits(name string, typ Type, m *vmap, file string, src *Dataset) error {
	switch {
	case src.s.store.kind() == Virtual:
		return fmt.Errorf("virtual dataset %q: source %s:%s is itself virtual", name, file, src.Path())
	case src.Type() != typ:
		return fmt.Errorf("virtual dataset %q: source %s:%s has type %v, the virtual dataset %v", name, file, src.Path(), src.Type(), typ)
	case len(src.s.maxShape) != len(m.src):
		return fmt.Errorf("virtual dataset %q: source %s:%s has rank %d, its selection %d", name, file, src.Path(), len(src.s.maxShape), len(m.src))
	}
	return nil
}

// virtualOpened evaluates a virtual dataset's extent on open.
func (d *Dataset) virtualOpened(ctx context.Context) error {
	l, ok := asLayout[*virtualLayout](d.s)
	if !ok {
		return nil
	}
	return l.evalExtent(ctx)
}

// evalExtent sets the dataset's extent from its mappings and their
// sources (VirtualOptions.View).
//
// A failure is kept: every read of the dataset evaluates again first,
// and fails as a fresh open would while the evaluation does. A cancelled
// evaluation changes nothing.
func (l *virtualLayout) evalExtent(ctx context.Context) error {
	l.evalMu.Lock()
	defer l.evalMu.Unlock()
	err := l.evalLocked(ctx)
	switch {
	case err == nil:
		l.evalErr.Store(nil)
	case ctx.Err() == nil:
		l.evalErr.Store(&err)
	}
	return err
}

func (l *virtualLayout) evalLocked(ctx context.Context) error {
	s := l.s
	f := s.f
	maps := l.mappings()
	view := f.vopts.View
	shape := s.shape()
	for d := range shape {
		if s.maxShape[d] != Unlimited {
			continue
		}
		var base uint64
		combined, any := uint64(0), false
		for _, m := range maps {
			if m.u != d {
				if e := m.v[d].end(); e != Unlimited {
					base = max(base, e)
				}
				continue
			}
			e, err := l.mappingExtent(ctx, m, view)
			if err != nil {
				return err
			}
			switch {
			case !any:
				combined, any = e, true
			case view == FirstMissing:
				combined = min(combined, e)
			default:
				combined = max(combined, e)
			}
		}
		shape[d] = max(base, combined)
	}
	if err := fitExtent(s.name, shape); err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.shape = shape
	s.mu.Unlock()
	return nil
}

// mappingExtent is how far an unlimited mapping reaches along its
// unlimited dimension.
func (l *virtualLayout) mappingExtent(ctx context.Context, m *vmap, view VirtualView) (uint64, error) {
	f := l.s.f
	trail := view == FirstMissing
	if !m.printf {
		src, release, err := f.virt.acquire(ctx, f, m.file, m.dset)
		if err != nil {
			return 0, l.sourceErr(m.file, m.dset, err)
		}
		var n uint64
		if src != nil {
			if err := notVirtual(l.s.name, m.file, src); err != nil {
				release()
				return 0, err
			}
			if sh := src.Shape(); len(sh) == len(m.src) {
				n = slicesBelow(m.src[m.us], sh[m.us])
			}
			release()
		}
		return clipExtent(m.v[m.u], n, trail), nil
	}
	// One source per block: block k is there when its source dataset
	// exists. Blocks found stay found (a writer never removes its file),
	// except the last: a newest block's source deleted or moved away (a
	// creator that died, cleaned up) ends the extent where a fresh open
	// ends it. Looking at every found block again would open every
	// source file at every evaluation.
	probe := func(k uint64) (bool, error) {
		src, release, err := f.virt.acquire(ctx, f, expand(m.file, k), expand(m.dset, k))
		if err != nil {
			return false, l.sourceErr(expand(m.file, k), expand(m.dset, k), err)
		}
		if src == nil {
			return false, nil
		}
		err = notVirtual(l.s.name, expand(m.file, k), src)
		release()
		return err == nil, err
	}
	for len(m.printfFound) > 0 {
		top := uint64(0)
		for k := range m.printfFound {
			top = max(top, k)
		}
		ok, err := probe(top)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		delete(m.printfFound, top)
	}
	exists := func(k uint64) (bool, error) {
		if m.printfFound[k] {
			return true, nil
		}
		ok, err := probe(k)
		if ok {
			m.printfFound[k] = true
		}
		return ok, err
	}
	var k, found uint64
	gap := 0
	for ; ; k++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ok, err := exists(k)
		if err != nil {
			return 0, err
		}
		if ok {
			found, gap = k+1, 0
			continue
		}
		if trail || gap >= f.vopts.PrintfGap {
			break
		}
		gap++
	}
	if trail {
		found = k
	}
	return clipExtent(m.v[m.u], mulSat(found, m.v[m.u].block), trail), nil
}

func (l *virtualLayout) sourceErr(file, dset string, err error) error {
	if file == "" {
		file = "."
	}
	return fmt.Errorf("virtual dataset %q: source %s:%s: %w", l.s.name, file, dset, err)
}

// refreshVirtual is the virtual half of File.Refresh: every source file
// the File's virtual datasets opened, then their extents. A virtual
// dataset whose extent cannot be evaluated fails its own reads until an
// evaluation succeeds (evalExtent); the Refresh and the other virtual
// datasets go on.
func (f *File) refreshVirtual(ctx context.Context) error {
	f.mu.Lock()
	var ls []*virtualLayout
	for _, s := range f.mu.open {
		if l, ok := asLayout[*virtualLayout](s); ok {
			ls = append(ls, l)
		}
	}
	f.mu.Unlock()
	if len(ls) == 0 {
		return nil
	}
	f.virt.refresh(ctx, f)
	for _, l := range ls {
		_ = l.evalExtent(ctx)
	}
	return ctx.Err()
}

// vtask is one source read of a virtual read: the part of the request one
// mapping (one block of a printf mapping) maps to one source dataset.
type vtask struct {
	m          *vmap
	file, dset string
	base       uint64 // element offset in the request buffer of the virtual dimensions of one element
	dims       []vsrcDim
}

// vsrcDim is one source dimension of a task: a fixed index (a dimension
// of one element) or runs along a request dimension of stride qstride.
type vsrcDim struct {
	fixed   bool
	coord   uint64
	qstride uint64
	runs    []vrun
}

// read is Dataset.read for a virtual dataset.
func (l *virtualLayout) read(ctx context.Context, sel Selection, buf []byte) error {
	s := l.s
	if l.evalErr.Load() != nil {
		// The last evaluation failed: the extent is unknown until one
		// succeeds, as a fresh open would find out.
		if err := l.evalExtent(ctx); err != nil {
			return err
		}
	}
	ext := s.shape()
	if err := sel.hyper().Validate(ext); err != nil {
		return classify(err)
	}
	n := sel.hyper().NumElements()
	if uint64(len(buf)) != n*uint64(s.elemSize) {
		return fmt.Errorf("%w: buffer has %d bytes, selection needs %d", ErrInvalid, len(buf), n*uint64(s.elemSize))
	}
	if n == 0 {
		return nil
	}
	// Everything no source provides is the fill value.
	selection.FillChunk(buf, s.elemSize, s.fill)
	tasks, err := l.plan(ctx, sel.hyper())
	if err != nil || len(tasks) == 0 {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(2, runtime.GOMAXPROCS(0)))
	for _, t := range tasks {
		g.Go(func() error { return l.run(gctx, t, buf) })
	}
	return g.Wait()
}

// plan splits a request by mapping. Its work follows what is read: a
// printf mapping's blocks are found from the request's own blocks along
// the unlimited dimension, never by walking the blocks between them.
func (l *virtualLayout) plan(ctx context.Context, h selection.Hyperslab) ([]*vtask, error) {
	req := toDims(h)
	r := len(req)
	qstride := make([]uint64, r)
	st := uint64(1)
	for d := r - 1; d >= 0; d-- {
		qstride[d] = st
		st *= req[d].size()
	}
	var tasks []*vtask
	for _, m := range l.mappings() {
		if !m.printf {
			if t := l.task(m, req, qstride, m.v, m.file, m.dset); t != nil {
				tasks = append(tasks, t)
			}
			continue
		}
		// The blocks k of the unlimited dimension that each block of the
		// request meets: [k0, k1), blocks already planned skipped (the
		// request's blocks come in increasing order).
		u, vu, q := m.u, m.v[m.u], req[m.u]
		next := uint64(0)
		for qi := uint64(0); qi < q.count; qi++ {
			if qi%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			lo := q.start + qi*q.stride
			hi := lo + q.block
			if hi <= vu.start {
				continue
			}
			k0 := uint64(0)
			if lo >= vu.start+vu.block {
				k0 = (lo-vu.start-vu.block)/vu.stride + 1
			}
			k1 := ceilDiv(hi-vu.start, vu.stride)
			for k := max(k0, next); k < k1; k++ {
				virtualPlanBlocks.Add(1)
				if (k-k0)%1024 == 1023 {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
				}
				v := clone(m.blockShape)
				v[u].start = vu.start + k*vu.stride
				if t := l.task(m, req, qstride, v, expand(m.file, k), expand(m.dset, k)); t != nil {
					tasks = append(tasks, t)
				}
			}
			next = max(next, k1)
		}
	}
	return tasks, nil
}

// virtualPlanBlocks counts the printf blocks plan visits (tests).
var virtualPlanBlocks atomic.Int64

// task is the part of request req that mapping m (with virtual selection
// v) covers, or nil.
func (l *virtualLayout) task(m *vmap, req []dim1, qstride []uint64, v []dim1, file, dset string) *vtask {
	t := &vtask{m: m, file: file, dset: dset, dims: make([]vsrcDim, len(m.src))}
	for d := range v {
		sd := m.pair[d]
		if sd < 0 {
			// One element along d: the request must hold it.
			runs := mapRuns(req[d], v[d], dim1{0, 1, 1, 1}, nil)
			if len(runs) == 0 {
				return nil
			}
			t.base += runs[0].q * qstride[d]
			continue
		}
		runs := mapRuns(req[d], v[d], m.src[sd], nil)
		if len(runs) == 0 {
			return nil
		}
		t.dims[sd] = vsrcDim{qstride: qstride[d], runs: runs}
	}
	for sd := range m.src {
		if m.spair[sd] < 0 {
			t.dims[sd] = vsrcDim{fixed: true, coord: m.src[sd].start}
		}
	}
	return t
}

// run reads one task's source and copies it into buf.
func (l *virtualLayout) run(ctx context.Context, t *vtask, buf []byte) error {
	s := l.s
	src, release, err := s.f.virt.acquire(ctx, s.f, t.file, t.dset)
	if err != nil {
		return l.sourceErr(t.file, t.dset, err)
	}
	if src == nil {
		return nil // missing: fill
	}
	defer release()
	if err := checkSourceFits(s.name, s.typ, t.m, t.file, src); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ext := src.Shape()
	// Clip to the source's extent: beyond it, fill.
	dims := make([]vsrcDim, len(t.dims))
	for sd, x := range t.dims {
		if x.fixed {
			if x.coord >= ext[sd] {
				return nil
			}
			dims[sd] = x
			continue
		}
		var runs []vrun
		for _, r := range x.runs {
			if r.src >= ext[sd] {
				continue
			}
			r.n = min(r.n, ext[sd]-r.src)
			runs = append(runs, r)
		}
		if len(runs) == 0 {
			return nil
		}
		dims[sd] = vsrcDim{qstride: x.qstride, runs: runs}
	}
	return l.readPart(ctx, src, t, dims, buf)
}

// readPart reads the box the runs of dims span from src into a scratch
// buffer and copies the runs into buf. A box much larger than what the
// runs need is cut along a dimension with several runs first.
func (l *virtualLayout) readPart(ctx context.Context, src *Dataset, t *vtask, dims []vsrcDim, buf []byte) error {
	r := len(dims)
	lo, cnt := make([]uint64, r), make([]uint64, r)
	need, box := uint64(1), uint64(1)
	split := -1
	for sd, x := range dims {
		if x.fixed {
			lo[sd], cnt[sd] = x.coord, 1
			continue
		}
		a, b, n := x.runs[0].src, x.runs[0].src, uint64(0)
		for _, rr := range x.runs {
			a, b = min(a, rr.src), max(b, rr.src+rr.n)
			n += rr.n
		}
		lo[sd], cnt[sd] = a, b-a
		need *= n
		box = mulSat(box, b-a) // the runs' span may be far larger than the request
		if len(x.runs) > 1 && (split < 0 || len(x.runs) > len(dims[split].runs)) {
			split = sd
		}
	}
	if split >= 0 && box > 2*need+4096 {
		for _, rr := range dims[split].runs {
			sub := clone(dims)
			sub[split] = vsrcDim{qstride: dims[split].qstride, runs: []vrun{rr}}
			if err := l.readPart(ctx, src, t, sub, buf); err != nil {
				return err
			}
		}
		return nil
	}
	es := uint64(l.s.elemSize)
	tstride := make([]uint64, r)
	st := uint64(1)
	for sd := r - 1; sd >= 0; sd-- {
		tstride[sd] = st
		st *= cnt[sd]
	}
	if k, ok := contiguousFrom(dims, tstride); ok && tstride[k]*es >= virtualDirectMin {
		return l.readBlocks(ctx, src, t, dims, lo, cnt, tstride, k, buf)
	}
	tmp := make([]byte, box*es)
	if err := src.Read(ctx, Box(lo, cnt), tmp); err != nil {
		return l.sourceErr(t.file, t.dset, err)
	}
	// Copy run by run; the innermost source dimension's runs are
	// contiguous in tmp and, when the request's innermost dimension is
	// theirs, in buf.
	var walk func(sd int, q, to uint64)
	walk = func(sd int, q, to uint64) {
		if sd == r {
			copy(buf[q*es:(q+1)*es], tmp[to*es:(to+1)*es])
			return
		}
		x := dims[sd]
		if x.fixed {
			walk(sd+1, q, to)
			return
		}
		last := sd == r-1 || allFixed(dims[sd+1:])
		for _, rr := range x.runs {
			qq, tt := q+rr.q*x.qstride, to+(rr.src-lo[sd])*tstride[sd]
			if last && x.qstride == 1 && tstride[sd] == 1 {
				copy(buf[qq*es:(qq+rr.n)*es], tmp[tt*es:(tt+rr.n)*es])
				continue
			}
			for i := uint64(0); i < rr.n; i++ {
				walk(sd+1, qq+i*x.qstride, tt+i*tstride[sd])
			}
		}
	}
	walk(0, t.base, 0)
	return nil
}

func allFixed(ds []vsrcDim) bool {
	for _, x := range ds {
		if !x.fixed {
			return false
		}
	}
	return true
}

// The storage interface: a virtual dataset stores nothing in its file
// but its header, and keeps no chunks (it implements storage, not
// chunkedStorage).

func (l *virtualLayout) kind() LayoutKind { return Virtual }

func (l *virtualLayout) chunkIndex() (*lazyIndex, bool) { return nil, false }

func (l *virtualLayout) commit(context.Context) (root, params []byte, err error) {
	return nil, nil, nil
}

func (l *virtualLayout) checkAdopt(hdr format.DatasetHeader) error {
	_, err := decodeVirtualMaps(hdr.LayoutParams, hdr.MaxShape)
	return err
}

func (l *virtualLayout) adopt(hdr format.DatasetHeader) error {
	maps, err := decodeVirtualMaps(hdr.LayoutParams, hdr.MaxShape)
	if err != nil {
		return err
	}
	l.s.mu.Lock()
	l.maps = maps
	l.s.layoutParams = hdr.LayoutParams
	l.s.mu.Unlock()
	return nil
}

func (l *virtualLayout) usage(context.Context) (Storage, error) { return Storage{}, nil }

func (l *virtualLayout) chunkExtents(context.Context) ([]ChunkExtent, error) { return nil, nil }

func (l *virtualLayout) liveExtents(_ context.Context, live []alloc.Extent) ([]alloc.Extent, error) {
	return live, nil
}

func (l *virtualLayout) checkStored(context.Context, string, *checkRun) error { return nil }

// virtualDirectMin is the smallest block readBlocks reads straight into
// the caller's buffer: below it, the cost of a source read per block
// (admission, lookup, a request of its own) would outweigh the copy
// through a scratch buffer it saves. A variable for the tests, which run
// the reference model with every block read straight.
var virtualDirectMin uint64 = 64 << 10

// virtualBlockReads counts readBlocks calls (tests).
var virtualBlockReads atomic.Int64

// contiguousFrom returns the outermost source dimension k (not fixed)
// below which the source box and its place in the caller's buffer have
// the same layout: every dimension after k that is not fixed has one run,
// whose stride in the request equals its stride in the box. One index
// along k (with every index of the dimensions before it) is then one
// contiguous block of tstride[k] elements in both.
func contiguousFrom(dims []vsrcDim, tstride []uint64) (int, bool) {
	k := -1
	for sd := len(dims) - 1; sd >= 0; sd-- {
		x := dims[sd]
		if x.fixed {
			continue
		}
		k = sd
		if len(x.runs) != 1 || x.qstride != tstride[sd] {
			break
		}
	}
	return k, k >= 0
}

// readBlocks reads the task's runs straight into buf, one source read per
// block of dimension k (contiguousFrom), or per run of k when the run's
// indices are consecutive in buf too: no scratch buffer, no copy. Used for
// large blocks, such as whole frames of a round-robin mapping.
func (l *virtualLayout) readBlocks(ctx context.Context, src *Dataset, t *vtask, dims []vsrcDim, lo, cnt, tstride []uint64, k int, buf []byte) error {
	virtualBlockReads.Add(1)
	es := l.s.elemSize
	at, n := clone(lo), clone(cnt)
	// Where the block starts in buf beyond its index along k: the
	// request ordinal of each inner dimension's one run.
	var inner uint64
	for _, x := range dims[k+1:] {
		if !x.fixed {
			inner += x.runs[0].q * x.qstride
		}
	}
	var walk func(sd int, q uint64) error
	walk = func(sd int, q uint64) error {
		x := dims[sd]
		if x.fixed {
			at[sd], n[sd] = x.coord, 1
			return walk(sd+1, q)
		}
		for _, rr := range x.runs {
			qq := q + rr.q*x.qstride
			if sd == k {
				block := tstride[k]
				read := func(from, count, q uint64) error {
					at[k], n[k] = from, count
					q += inner
					b := buf[q*uint64(es) : (q+count*block)*uint64(es)]
					if err := src.Read(ctx, Box(at, n), b); err != nil {
						return l.sourceErr(t.file, t.dset, err)
					}
					return nil
				}
				if x.qstride == block {
					if err := read(rr.src, rr.n, qq); err != nil {
						return err
					}
					continue
				}
				for i := range rr.n {
					if err := read(rr.src+i, 1, qq+i*x.qstride); err != nil {
						return err
					}
				}
				continue
			}
			for i := range rr.n {
				at[sd], n[sd] = rr.src+i, 1
				if err := walk(sd+1, qq+i*x.qstride); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(0, t.base)
}
