package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/scc-dev/scc/serialize"
	"github.com/scc-dev/scc/vfd"
)

// dsState is everything the file knows of one dataset; all Dataset handles
// of that dataset share it.
type dsState struct {
	f *File
	// name is the dataset's path when the state was made; cur is its
	// path now (Move changes it, under File.mu and commitMu), which the
	// catalog and the next header record.
	name string
	cur  atomic.Pointer[string]
	// deleted is set once File.Delete removed the dataset (or a Refresh
	// found it gone): every handle's next call fails with ErrDeleted.
	deleted atomic.Bool
	// appendMu orders the Appends of this process on the dataset (each
	// grows the extent and writes what it grew), append.go.
	appendMu sync.Mutex
	id       uint64
	typ      Type
	space    Space // scalar and null datasets' storage is rank 1 (dataspace.go)
	elemSize int
	chunk    []uint64 // chunk shape in elements
	maxShape []uint64
	fill     []byte // element bytes; nil means zero
	filters  []byte // encoded pipeline, as stored in the header
	minCache int64
	pipeline *filter.Pipeline
	// unfiltered: the pipeline is empty, so a chunk's image is its memory
	// format and encode/decode need no pipeline pass.
	unfiltered bool
	// csum is the rule of the chunk frames' checksums: keyed by the
	// header's chunk key, so that a frame names which chunk of which
	// dataset it is, or the unkeyed CRC32C of datasets written before
	// chunk keys (format.ChunkSum).
	csum format.ChunkSum
	idx  *lazyIndex // nil for a contiguous dataset
	// store is the dataset's layout (storage.go); chunked is the same
	// layout as the cache drives its chunks (chunkedstorage.go), nil for
	// a virtual dataset, and read only through chunks(). code is the
	// header's layout code, layoutParams its LayoutParams part, carried
	// unchanged through header rewrites. admitBytes is what admission
	// counts per chunk of a request (the most a chunk can take in cache).
	store        storage
	chunked      chunkedStorage
	code         uint8
	layoutParams []byte
	admitBytes   int64
	// chunkBytes is the decoded size of one chunk.
	chunkBytes int64
	// attrs are the dataset's attributes (attr.go), the header's Attrs
	// part; a change marks the dataset dirty.
	attrs attrHolder

	// extent orders the readers of a dataset's whole state (shape, index
	// root, dirty flag, pending trims: the commit's writeHeader and
	// finishTrims, Storage) against the changes of SetExtent and Refresh's
	// adopt, which hold it exclusively from their first change to their
	// last. Data I/O does not take it: SetExtent and adopt also hold the
	// dataset exclusively in the serializer, which drains every read and
	// write first (SCC design §5.2; engine/io.go). A commit holds it shared
	// across its index and header writes for this dataset, so a SetExtent
	// waits for that I/O; data I/O does not. Lock order: the table after
	// File (file.go).
	extent sync.RWMutex

	// dirty is set whenever the header or the index changed since the last
	// commit wrote the header.
	dirty atomic.Bool
	// hot is mu.cds for the data path, read without mu (io.go); set under
	// mu by hotDataset, cleared under mu by Close.
	hot atomic.Pointer[cache.Dataset]

	// mu guards its fields; short, never held across I/O. Lock
	// order: the table after File (file.go).
	mu struct {
		sync.Mutex
		shape      []uint64
		headerAddr uint64
		headerSize uint64
		headerSum  uint32
		// header is the canonical encoding of the committed header this
		// state holds (read-only files: the one loaded or last adopted).
		// Refresh compares it, not headerSum, to tell whether a header at
		// the same address changed: see adoptLocked.
		header []byte
		refs   int
		cds    *cache.Dataset // registered while refs > 0; never for a virtual dataset
		vcds   *cache.Dataset // a sparse dataset's selection view, registered with cds
		// pendingTrims are shrinks whose edge-chunk trims could not run
		// (see SetExtent). Until they have, the extent may not grow and no
		// commit may write the header: the stored edge chunks still hold
		// elements outside the extent that a later growth would expose.
		pendingTrims []trimJob
		// closing is closed once the Close that dropped refs to 0 has
		// unregistered the dataset from the cache (acquire waits for it).
		closing chan struct{}
	}
}

// trimJob is the cache half of a shrink from old to new.
type trimJob struct{ old, new []uint64 }

// finishTrims runs the pending trims in order; on error the rest stay
// pending. Trims are idempotent, so running one twice does no harm. Caller
// holds s.extent (shared or exclusive): the extent cannot grow meanwhile.
func (s *dsState) finishTrims(ctx context.Context) error {
	s.mu.Lock()
	jobs := s.mu.pendingTrims
	cds := s.mu.cds
	s.mu.Unlock()
	if len(jobs) == 0 {
		return nil
	}
	if cds == nil {
		return ErrClosed
	}
	for i, j := range jobs {
		if err := cds.SetExtent(ctx, j.old, j.new); err != nil {
			s.mu.Lock()
			s.mu.pendingTrims = jobs[i:]
			s.mu.Unlock()
			return classify(err)
		}
	}
	s.mu.Lock()
	s.mu.pendingTrims = nil
	s.mu.Unlock()
	return nil
}

func (s *dsState) hasPendingTrims() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.pendingTrims) > 0
}

// Dataset is a handle on one dataset of an open File. Handles are safe for
// concurrent use; Close releases this handle only.
type Dataset struct {
	s      *dsState
	closed atomic.Bool
}

// createDataset creates dataset name (the name rule, names.go), and its
// missing parent groups, as HDF5's create-intermediate-groups property
// does, on File and Group calls alike.
func (f *File) createDataset(ctx context.Context, name string, spec DatasetSpec) (*Dataset, error) {
	name, err := newPath(name)
	if err != nil {
		return nil, err
	}
	spec, err = spec.validate()
	if err != nil {
		return nil, err
	}
	specs := make([]filter.Spec, len(spec.Filters))
	for i, fl := range spec.Filters {
		specs[i] = fl.spec
	}
	hdr := format.DatasetHeader{
		Name:          name,
		Shape:         clone(spec.Shape),
		MaxShape:      clone(spec.MaxShape),
		Chunk:         clone(spec.Chunk),
		Layout:        spec.Layout.code(),
		LayoutParams:  spec.layoutParams(),
		Filters:       filter.EncodeSpecs(specs),
		Fill:          clone(spec.Fill),
		MinCacheBytes: spec.CacheMinBytes,
		Space:         uint8(spec.Space),
	}
	headerType(&hdr, spec.Type)
	g := geometry(hdr.Shape, hdr.MaxShape, hdr.Chunk)
	if spec.Layout != Contiguous {
		hdr.IndexKind = uint8(index.ChooseKind(g.MaxGrid))
		hdr.ChunkKey = newChunkKey()
	}
	// The header decoder's limits, enforced on the way in: a header that
	// encodes but does not decode would make the whole file unreadable
	// after the next commit. The id is not known yet; any
	// valid one checks the rest.
	probe := hdr
	probe.ID = 1
	if err := probe.Validate(); err != nil {
		return nil, classify(err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return nil, ErrClosed
	}
	if err := f.checkNewLocked(name, true); err != nil {
		return nil, err
	}
	hdr.ID = f.mu.nextID
	// Created empty and then resized to the extent, so that the index's
	// own capacity (the extensible array's slot count) is checked here and
	// not first by a later SetExtent or write.
	var idx index.Index
	if spec.Layout != Contiguous { // contiguous datasets have no chunk index
		empty := g
		empty.Grid = make([]uint64, len(g.Grid))
		idx, err = index.New(index.Kind(hdr.IndexKind), empty, f.blockStore())
		if err == nil {
			err = idx.Resize(ctx, g, nil)
		}
		if err != nil {
			return nil, classify(err)
		}
	}
	s, err := f.newState(hdr)
	if err != nil {
		return nil, err
	}
	if idx != nil {
		s.idx.set(idx)
	}
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

// openDataset opens dataset name (Group.OpenDataset). The header is read
// without holding the file's mutex, so opens and creates of other datasets
// do not wait for this one's I/O; two concurrent opens of one dataset may
// both read it, and the first to return installs its state. With
// evalVirtual false a virtual
// dataset is opened without evaluating its extent from its sources. The
// virtual layout opens its sources so (srcFile.open): a virtual source is
// refused by every read that reaches it (checkSourceFits), and evaluating
// its extent would open its own sources, and theirs, without end when the
// mappings form a cycle (a virtual dataset naming itself by its file's
// path, or two files naming each other).
func (f *File) openDataset(ctx context.Context, name string, evalVirtual bool) (*Dataset, error) {
	stale := 0
	if _, ok := f.lookupDataset(name); !ok {
		// Paths resolve from the root: "/a/b" names "a/b".
		if p, err := cleanPath(name); err == nil {
			name = p
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f.mu.Lock()
		if f.closed.Load() {
			f.mu.Unlock()
			return nil, ErrClosed
		}
		if s, ok := f.mu.open[name]; ok {
			f.mu.Unlock()
			return s.acquire()
		}
		e, ok := f.mu.catalog[name]
		gen := f.sb.Load().Generation
		f.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: dataset %q", ErrNotFound, name)
		}
		s, err := f.loadState(e)
		if errors.Is(err, ErrStale) && stale < refreshRetries {
			// A read-only File behind its writer, which reused the
			// header's space: catch up and read the catalog again, as
			// Read does; past refreshRetries the caller gets ErrStale.
			if rerr := f.refreshFile(ctx); rerr != nil { // not the virtual sources: see follow
				return nil, rerr
			}
			backoff(ctx, stale)
			stale++
			continue
		}
		if err != nil {
			return nil, err
		}
		if h := testHookOpenLoaded.Load(); h != nil {
			(*h)()
		}
		if ds, done, err := f.install(name, e, gen, s); done {
			if err == nil && evalVirtual {
				if err = ds.virtualOpened(ctx); err != nil {
					_ = ds.Close(ctx)
					return nil, err
				}
			}
			return ds, err
		}
	}
}

// install makes s, loaded from catalog entry e while the File was at
// generation gen, the open state of dataset name, unless someone else
// opened it or a Refresh moved the File meanwhile: then done is false and
// the open starts again from the catalog.
//
// On a read-only File the check and the install run under commitMu, which
// Refresh holds from the moment it lists the open datasets it will adopt
// until it has adopted them: a state installed between the two would
// never be adopted, and would serve generation gen's data under a later
// generation. Requiring gen unchanged, not only an equal catalog entry,
// also refuses a header that a refresh across two commits replaced by one
// at the same address with the same checksum (the checksum is blind to
// the index root, refresh.go).
func (f *File) install(name string, e format.CatalogEntry, gen uint64, s *dsState) (ds *Dataset, done bool, err error) {
	if f.readOnly {
		f.commitMu.Lock()
		defer f.commitMu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed.Load():
		return nil, true, ErrClosed
	case f.mu.open[name] != nil || f.mu.catalog[name] != e || f.readOnly && f.sb.Load().Generation != gen:
		// Someone else opened it, or a refresh changed it while we
		// read: start again from the catalog.
		return nil, false, nil
	}
	// Registering with the cache takes no file lock and does no I/O.
	if ds, err = s.acquire(); err != nil {
		return nil, true, err
	}
	f.mu.open[name] = s
	return ds, true, nil
}

// loadState reads a dataset's committed header; its index opens on first
// use.
//
// On a read-only File a header that passes its checksum still proves
// nothing once the writer has committed since the catalog entry was read:
// the checksum is blind to the header's IndexRoot (refresh.go), so a
// header the writer wrote two commits later at the same address, changed
// only in its index root, passes it, and the reader would follow the newer
// index while it reports the older generation
// (TestSWMRRefreshFollowsReusedHeaders caught one reading a dataset's
// generation-6 contents at generation 4; TestOpenOvertakenHeader builds the
// case). The writer writes superblock G+1 before it reuses any of G's
// space, so a header read while the superblock on disk still says G is G's
// header; past that the open answers ErrStale, which OpenDataset answers by
// refreshing and reading the catalog again. A header taken from the cache
// image needs no such check: the image is of the generation the File
// opened, and Refresh drops it.
func (f *File) loadState(e format.CatalogEntry) (*dsState, error) {
	sb := f.sb.Load()
	hdr, fromFile, err := f.readHeaderImage(e, sb.EOF)
	if err != nil && f.readOnly && errors.Is(err, ErrCorrupt) && f.newerOnDisk(sb.Generation) {
		err = fmt.Errorf("%w: dataset %q: %v", ErrStale, e.Name, err)
	}
	if err == nil && f.readOnly && fromFile { // a cache image's header is of sb's generation (refresh drops it)
		if cur, rerr := readSuperblock(f.drv); rerr != nil {
			err = rerr
		} else if cur.Generation > sb.Generation {
			err = fmt.Errorf("%w: dataset %q: the writer committed generation %d while the header of generation %d was read", ErrStale, e.Name, cur.Generation, sb.Generation)
		}
	}
	if err != nil {
		return nil, classify(err)
	}
	if hdr.Name != e.Name || hdr.ID != e.ID || !knownLayout(hdr.Layout) {
		return nil, fmt.Errorf("%w: dataset header %q does not match its catalog entry", ErrCorrupt, e.Name)
	}
	s, err := f.newState(hdr)
	if err != nil {
		return nil, err
	}
	s.mu.headerAddr, s.mu.headerSize, s.mu.headerSum = e.HeaderAddr, e.HeaderSize, e.HeaderSum
	if f.readOnly {
		s.mu.header = format.EncodeDatasetHeader(hdr)
	}
	return s, nil
}

func (f *File) newState(hdr format.DatasetHeader) (*dsState, error) {
	t := typeOfHeader(hdr)
	if !t.Valid() {
		return nil, fmt.Errorf("%w: element type %d", ErrCorrupt, hdr.Type)
	}
	specs, err := filter.DecodeSpecs(hdr.Filters)
	if err != nil {
		return nil, classify(err)
	}
	pl, err := filter.NewPipeline(specs, t.Size())
	if err != nil {
		return nil, classify(err)
	}
	elems := uint64(1)
	for _, c := range hdr.Chunk {
		elems *= c
	}
	if elems == 0 || elems > maxChunkBytes || elems*uint64(t.Size()) > maxChunkBytes {
		return nil, fmt.Errorf("%w: chunk shape %v", ErrCorrupt, hdr.Chunk)
	}
	s := &dsState{
		f:          f,
		name:       hdr.Name,
		id:         hdr.ID,
		typ:        t,
		space:      Space(hdr.Space),
		elemSize:   t.Size(),
		chunk:      hdr.Chunk,
		maxShape:   hdr.MaxShape,
		filters:    hdr.Filters,
		minCache:   hdr.MinCacheBytes,
		pipeline:   pl,
		unfiltered: len(specs) == 0,
		csum:       format.KeyedChunkSum(hdr.ChunkKey),
		idx:        newLazyIndex(f.blockStore(), index.Kind(hdr.IndexKind), geometry(hdr.Shape, hdr.MaxShape, hdr.Chunk), hdr.IndexRoot, f.chargeIndex),
		chunkBytes: int64(elems) * int64(t.Size()),
	}
	s.setPath(hdr.Name)
	if len(hdr.Fill) != 0 && !allZero(hdr.Fill) {
		s.fill = hdr.Fill
	}
	s.mu.shape = hdr.Shape
	if err := s.setLayout(hdr.Layout, hdr.LayoutParams); err != nil {
		return nil, err
	}
	attrs, err := decodeAttrs(hdr.Attrs)
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", hdr.Name, err)
	}
	s.attrs.set.Store(attrs)
	return s, nil
}

// readHeader reads and decodes the header block a catalog entry names,
// checking it is the very block the entry recorded.
func readHeader(drv vfd.Driver, e format.CatalogEntry, eof uint64) (format.DatasetHeader, error) {
	buf, err := readBlock(drv, e.HeaderAddr, e.HeaderSize, eof)
	if err != nil {
		return format.DatasetHeader{}, fmt.Errorf("dataset %q header: %w", e.Name, err)
	}
	if format.Trailer(buf) != e.HeaderSum {
		return format.DatasetHeader{}, fmt.Errorf("%w: dataset %q: header at %d is not the one the catalog names", ErrCorrupt, e.Name, e.HeaderAddr)
	}
	hdr, err := format.DecodeDatasetHeader(buf)
	if err != nil {
		return hdr, classify(err)
	}
	return hdr, nil
}

// testHookCloseUnregister, when set (tests only), runs in the last
// handle's Close between detaching the dataset's registration and
// unregistering it.
var testHookCloseUnregister atomic.Pointer[func()]

// acquire returns a new handle, registering the dataset with the cache when
// it was not open. Re-registering an id finds its chunks still cached (warm
// reopen, SCC requirements §4.8).
func (s *dsState) acquire() (*Dataset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.mu.refs == 0 && s.mu.closing != nil {
		// The last handle's Close is still unregistering the dataset from
		// the cache, which refuses a second registration of its id until
		// then.
		ch := s.mu.closing
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	if s.mu.refs == 0 {
		if err := s.registerLocked(); err != nil {
			return nil, err
		}
	}
	s.mu.refs++
	return &Dataset{s: s}, nil
}

// registerLocked registers the dataset's chunks with the cache, and the
// views its layout keeps besides. A virtual dataset keeps no chunks and is
// not registered: its reads go to its sources' registrations. Caller holds
// s.mu.
func (s *dsState) registerLocked() error {
	cs, err := s.chunks()
	if err != nil {
		return nil // a virtual dataset: nothing to register
	}
	// A registration a failed Close kept (its write-back failed) is
	// taken over; otherwise the dataset registers. The header's
	// CacheMinBytes has the cache's meaning: 0 the cache's default, -1 no
	// reservation.
	cds, kept := s.mu.cds, s.mu.cds != nil
	if !kept {
		if cds, err = s.f.cfile.RegisterDataset(s.id, cs, cache.DatasetOptions{MinBytes: s.minCache}); err != nil {
			return classify(err)
		}
	}
	if err := cs.registerViews(); err != nil {
		if !kept {
			_ = cds.Unregister(context.Background())
		}
		return err
	}
	s.mu.cds = cds
	return nil
}

// gone reports ErrDeleted once File.Delete removed the dataset. Every
// request checks it right after the serializer admits it: the delete
// holds the dataset exclusively while it marks it and frees its space, so
// a request admitted after that never works on freed space, and one
// admitted before has ended by then.
func (s *dsState) gone() error {
	if s.deleted.Load() {
		return fmt.Errorf("%w: dataset %q", ErrDeleted, s.path())
	}
	return nil
}

// cacheDataset returns the dataset's registration with the cache:
// ErrClosed once its last handle closed, errNoChunks for a virtual
// dataset, which has none.
func (s *dsState) cacheDataset() (*cache.Dataset, error) {
	if _, err := s.chunks(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cds == nil {
		return nil, ErrClosed
	}
	return s.mu.cds, nil
}

func (s *dsState) shape() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.mu.shape)
}

func (s *dsState) catalogEntry() format.CatalogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return format.CatalogEntry{Name: s.path(), ID: s.id, HeaderAddr: s.mu.headerAddr, HeaderSize: s.mu.headerSize, HeaderSum: s.mu.headerSum}
}

// header is the dataset's header with the given shape and index root.
func (s *dsState) header(shape []uint64, root []byte) format.DatasetHeader {
	h := format.DatasetHeader{
		Name: s.path(), ID: s.id,
		Shape: shape, MaxShape: s.maxShape, Chunk: s.chunk,
		Layout: s.code, Filters: s.filters, Fill: s.fill,
		MinCacheBytes: s.minCache, IndexKind: s.indexKind(), IndexRoot: root,
		LayoutParams: s.layoutParams, Attrs: s.attrs.load().encoding(),
		ChunkKey: s.csum.Key(), Space: uint8(s.space),
	}
	headerType(&h, s.typ)
	return h
}

// writeHeader flushes the index and writes a new header if anything changed
// since the last commit. On error the dataset stays dirty.
//
// It holds the extent lock shared, so that the dirty flag, the index root
// and the shape it writes are those of one state: wholly before or wholly
// after any SetExtent (which holds it exclusively from its first change to
// its last). Data I/O holds it shared too, and goes on meanwhile.
func (s *dsState) writeHeader(ctx context.Context) (err error) {
	s.extent.RLock()
	defer s.extent.RUnlock()
	if s.hasPendingTrims() {
		// The commit ran finishTrims before writing chunks back; a shrink
		// since has left new ones (its cache trim failed, say for a
		// reload's I/O). The header may name the new extent only once no
		// stored chunk keeps elements outside it, so the trims finish and
		// their chunks are written back here, under the extent lock that
		// keeps the next shrink out. Their errors are the commit's.
		if err := s.finishTrims(ctx); err != nil {
			return err
		}
		cds, err := s.cacheDataset()
		if err != nil {
			return err
		}
		if err := cds.Flush(ctx, false); err != nil {
			return classify(err)
		}
	}
	if !s.dirty.Swap(false) {
		return nil
	}
	defer func() {
		if err != nil {
			s.dirty.Store(true)
		}
	}()
	root, params, err := s.store.commit(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	hdr := s.header(clone(s.mu.shape), root)
	s.mu.Unlock()
	if params != nil {
		hdr.LayoutParams = params
	}
	b := format.EncodeDatasetHeader(hdr)
	addr, err := s.f.space.alloc(int64(len(b)))
	if err != nil {
		return err
	}
	if err := s.f.writeFull(b, addr); err != nil {
		s.f.space.freeReplaced(addr, int64(len(b)))
		return err
	}
	s.f.journalPut(format.ImageHeader, uint64(addr), b) // image.go
	s.mu.Lock()
	oldAddr, oldSize := s.mu.headerAddr, s.mu.headerSize
	s.mu.headerAddr, s.mu.headerSize, s.mu.headerSum = uint64(addr), uint64(len(b)), format.Trailer(b)
	s.mu.Unlock()
	if oldSize != 0 {
		// Replaced by the header this commit names (space.freeReplaced).
		s.f.space.freeReplaced(int64(oldAddr), int64(oldSize))
	}
	return nil
}

// Path returns the dataset's path from the root ("/a/b"), as Group.Path
// does. A moved dataset's handles follow it (HDF5 semantics): Path is its
// path now.
func (d *Dataset) Path() string { return "/" + d.s.path() }

// Name returns the last component of the dataset's path ("b" for
// "/a/b"), as Group.Name does.
func (d *Dataset) Name() string { return lastComponent(d.s.path()) }

func (s *dsState) path() string { return *s.cur.Load() }

func (s *dsState) setPath(p string) { s.cur.Store(&p) }

// Type returns the element type.
func (d *Dataset) Type() Type { return d.s.typ }

// Shape returns the current extent (empty for a scalar or null dataset).
func (d *Dataset) Shape() []uint64 { return d.s.dims(d.s.shape()) }

// MaxShape returns the maximum extent (Unlimited along growable
// dimensions; empty for a scalar or null dataset).
func (d *Dataset) MaxShape() []uint64 { return d.s.dims(d.s.maxShape) }

// Chunk returns the chunk shape (empty for a scalar or null dataset).
func (d *Dataset) Chunk() []uint64 { return d.s.dims(d.s.chunk) }

// Fill returns the fill value's element bytes (all zero when none was set).
func (d *Dataset) Fill() []byte {
	if d.s.fill == nil {
		return make([]byte, d.s.elemSize)
	}
	return clone(d.s.fill)
}

// Filters returns the filter pipeline.
func (d *Dataset) Filters() []Filter {
	specs := d.s.pipeline.Specs()
	out := make([]Filter, len(specs))
	for i, sp := range specs {
		out[i] = Filter{sp}
	}
	return out
}

// IndexKind names the dataset's chunk index ("extensible-array", ...);
// "none" for a contiguous dataset, which has no index.
func (d *Dataset) IndexKind() string {
	x, ok := d.s.store.chunkIndex()
	if !ok {
		return "none" // contiguous
	}
	return x.kind().String()
}

// Storage describes what a dataset occupies in the file.
type Storage struct {
	Chunks      int    // chunks stored (chunks only in the cache are not counted until written)
	StoredBytes uint64 // their stored (encoded, checksummed) size
	IndexBlocks int    // blocks of the chunk index
	IndexBytes  uint64
}

// Storage describes what the dataset occupies: the stored chunks and the
// index blocks its chunk index names, or, for a contiguous dataset, its
// extent as its pieces and no index.
func (d *Dataset) Storage(ctx context.Context) (st Storage, err error) {
	if d.closed.Load() {
		return Storage{}, ErrClosed
	}
	err = d.s.f.follow(ctx, func() (err error) {
		st, err = d.storage(ctx)
		return err
	})
	return st, err
}

func (d *Dataset) storage(ctx context.Context) (Storage, error) {
	d.s.extent.RLock()
	defer d.s.extent.RUnlock()
	if err := d.s.gone(); err != nil {
		return Storage{}, err
	}
	st, err := d.s.store.usage(ctx)
	// A delete does not wait for this call: what it counted may be space
	// the delete has freed since.
	if gerr := d.s.gone(); gerr != nil {
		return Storage{}, gerr
	}
	return st, err
}

// CacheStats returns the dataset's figures in the shared cache; zero for
// a virtual dataset, which keeps no chunks of its own there.
func (d *Dataset) CacheStats() cache.DatasetStats {
	cds, err := d.s.cacheDataset()
	if err != nil {
		return cache.DatasetStats{}
	}
	return cds.Stats()
}

func (d *Dataset) check(write bool) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if d.s.deleted.Load() {
		return fmt.Errorf("%w: dataset %q", ErrDeleted, d.s.path())
	}
	if err := d.s.f.checkOpen(); err != nil {
		return err
	}
	if write && d.s.f.readOnly {
		return ErrReadOnly
	}
	return nil
}

// Write stores buf into the selected elements. buf holds the selection's
// elements packed in C order, little-endian. The data is durable after the
// next successful File.Flush.
//
// Atomicity is per chunk: a Write that fails or whose ctx is cancelled part
// way has applied, to each chunk it touches, either all of its part of the
// selection or none of it; which chunks were applied is not reported, and
// those that were keep it and are committed by the next Flush like any
// write. A Write inside one chunk that fails has changed nothing, whatever
// failed: writing back another chunk evicted to make room, or the chunk
// itself (one above the bypass threshold is written at once). A Write that
// returns nil applied everything, and overlapping requests see it whole
// (the serializer orders them).
//
// Whole chunks of an unfiltered dataset that are not cached and larger than
// the cache's bypass threshold (cache.Config.BypassBytes, by default a
// quarter of the cache) are written straight from buf to new space in the
// file, with no copy, and not kept in the cache (cache/directwrite.go); as
// for cached chunks, the previous version stays the committed one until
// the next Flush, and a failed write leaves it the visible one too.
//
// A variable-length dataset's elements are not fixed-size values: it
// refuses Write (ErrInvalid); WriteVlen writes them.
func (d *Dataset) Write(ctx context.Context, sel Selection, buf []byte) error {
	if err := d.check(true); err != nil {
		return err
	}
	if d.s.store.kind() == Virtual {
		return errVirtualWrite(d.s.name)
	}
	if err := needLayouts(d.s, "Write", fixedLayouts...); err != nil {
		return err
	}
	sel = d.s.fit(sel)
	return d.deletedDuring(d.write(ctx, sel, buf))
}

// deletedDuring turns the result of a call that raced File.Delete into
// ErrDeleted. The call passed check before the delete and ran after it
// (the delete drains the requests holding the dataset, not those still
// on their way): it worked on a state whose space is free, so a read's
// bytes may be another dataset's and a write's chunks must go too.
func (d *Dataset) deletedDuring(err error) error {
	if !d.s.deleted.Load() {
		return err
	}
	if cds, cerr := d.s.cacheDataset(); cerr == nil {
		_ = cds.Discard(context.Background())
	}
	return fmt.Errorf("%w: dataset %q", ErrDeleted, d.s.path())
}

// Read fills buf with the selected elements; elements never written read as
// the fill value without any I/O.
//
// Whole chunks of an unfiltered dataset that are not cached are read
// straight from the file into buf and their checksums verified there: if
// Read fails (ErrCorrupt, ErrIO, ...), the contents of buf are undefined.
//
// On a read-only file whose writer has committed since, a block that fails
// its checksum is most likely space the writer reused: the read refreshes
// the file and tries again (see refresh.go).
//
// A variable-length dataset refuses Read (ErrInvalid); ReadVlen reads it.
func (d *Dataset) Read(ctx context.Context, sel Selection, buf []byte) error {
	if err := d.check(false); err != nil {
		return err
	}
	if err := needLayouts(d.s, "Read", readLayouts...); err != nil {
		return err
	}
	if d.s.space != SpaceSimple {
		sel = d.s.fit(sel)
	}
	// A read writes every byte of buf; a large buf not yet in memory is
	// mapped in one call per core first, not a fault at a time by the
	// scatter (bufpool.PopulateCold says why and what it costs).
	bufpool.PopulateCold(buf)
	// File.follow, its first try run here (followAfter).
	f := d.s.f
	gen := f.Generation()
	if err := d.read(ctx, &sel, buf); err != nil {
		return d.deletedDuring(f.followAfter(ctx, gen, err, func() error { return d.read(ctx, &sel, buf) }))
	}
	return d.deletedDuring(nil)
}

// read runs one Read (of a layout it serves); see io.go for the path and
// why it takes no lock when it can. The selection is passed by pointer
// and expanded only past the single-chunk read, which reads an inline
// box as it is: on a resident read the copies and the expansion of the
// selection were a third of the call.
func (d *Dataset) read(ctx context.Context, in *Selection, buf []byte) error {
	s := d.s
	sc := getScratch()
	defer sc.put()
	if l, ok := s.store.(*virtualLayout); ok {
		return l.read(ctx, sc.expand(in), buf)
	}
	// A read inside one chunk (ioone.go); a miss there goes straight to
	// the locked path with the request it built.
	var p prepared
	done, err := s.readOne(ctx, in, buf, sc, &p)
	if done {
		return err
	}
	sel := sc.expand(in)
	if len(p.reqs) != 0 {
		sc.regions[0] = sc.oneRegion(s.id, len(s.chunk))
		return s.ioLocked(ctx, sel, buf, false, sc, p)
	}
	sc.regions[0] = s.regionInto(sel, sc)
	if done, p, err = s.ioFast(ctx, sel, buf, sc); done {
		return err
	}
	return s.ioLocked(ctx, sel, buf, false, sc, p)
}

// write runs one Write (of a layout it serves: Write has refused a
// virtual dataset). A write has no lock-free path: it always orders
// itself against overlapping requests (io.go).
func (d *Dataset) write(ctx context.Context, sel Selection, buf []byte) error {
	s := d.s
	sc := getScratch()
	defer sc.put()
	sel = sc.expand(&sel)
	sc.regions[0] = s.regionInto(sel, sc)
	return s.ioLocked(ctx, sel, buf, true, sc, prepared{})
}

// SetExtent changes the dataset's extent within its max shape. Shrinking
// deletes the chunks wholly outside the new extent and resets the elements
// of edge chunks that fall outside it to the fill value, so that growing
// again shows the fill value there.
//
// An error leaves the dataset as it was: every step that can fail (writing
// back dirty chunks, loading the edge chunks, loading the index blocks the
// resize touches) runs before the first change. After the first change the
// shrink is done: if trimming an edge chunk still needs I/O (it was evicted
// after it was prepared, see cache.Dataset.SetExtent) and that I/O fails,
// the trim stays pending like a dirty chunk, and its error surfaces from
// the next Flush or SetExtent, which run it again first.
//
// Every layout takes SetExtent, but a contiguous dataset's extent is
// fixed: its max shape is its shape, and a smaller extent is ErrInvalid.
func (d *Dataset) SetExtent(ctx context.Context, dims []uint64) error {
	if err := d.check(true); err != nil {
		return err
	}
	s := d.s
	if s.space != SpaceSimple {
		return fmt.Errorf("%w: dataset %q is %v: its extent does not change", ErrInvalid, s.path(), s.space)
	}
	if len(dims) != len(s.chunk) {
		return fmt.Errorf("%w: extent %v has rank %d, dataset has %d", ErrInvalid, dims, len(dims), len(s.chunk))
	}
	for i, n := range dims {
		if n > s.maxShape[i] {
			return fmt.Errorf("%w: dataset %q: extent %v exceeds max shape %v", ErrOutOfRange, s.path(), dims, s.maxShape)
		}
	}
	if s.store.kind() == Virtual {
		return errVirtualWrite(s.name) // its extent follows its mappings
	}
	cs, err := s.chunks()
	if err != nil {
		return err
	}
	if err := cs.checkExtent(dims); err != nil {
		return err
	}
	// The header decoder's limits (Unlimited as a current extent, more
	// than 2^63-1 elements), checked before anything changes.
	if err := s.header(dims, nil).Validate(); err != nil {
		return fmt.Errorf("%w: extent %v: %w", ErrInvalid, dims, err)
	}
	release, err := s.f.ser.AcquireExclusive(ctx, s.id)
	if err != nil {
		return classify(err)
	}
	defer release()
	if err := s.gone(); err != nil {
		return err
	}
	s.extent.Lock()
	defer s.extent.Unlock()
	cds, err := s.cacheDataset()
	if err != nil {
		return err
	}
	old := s.shape()
	if equal(old, dims) {
		return nil
	}
	dims = clone(dims)
	// A shrink whose trims are pending must finish before the extent moves
	// again, above all before it grows over the untrimmed elements.
	if err := s.finishTrims(ctx); err != nil {
		return err
	}
	x, err := s.idx.get(ctx)
	if err != nil {
		return classify(err)
	}
	// 1. Everything that can fail, changing nothing.
	if err := cds.PrepareExtent(ctx, old, dims); err != nil {
		return classify(err)
	}
	// 2. The index: Resize loads what it needs before it changes anything.
	g := geometry(dims, s.maxShape, s.chunk)
	err = x.Resize(ctx, g, func(_ []uint64, e index.Entry) {
		s.f.space.free(int64(e.Addr), int64(e.Size))
	})
	s.idx.account(x)
	if err != nil {
		return classify(err)
	}
	// 3. The cache drops what the index no longer holds and trims the
	// edge chunks it prepared; then the shape. The commit's writeHeader
	// waits for the extent lock, so it sees all of this or none of it.
	if h := testHookShrinkPrepared.Load(); h != nil {
		(*h)()
	}
	cerr := cds.SetExtent(ctx, old, dims)
	s.mu.Lock()
	s.mu.shape = dims
	if cerr != nil {
		s.mu.pendingTrims = append(s.mu.pendingTrims, trimJob{old: clone(old), new: dims})
	}
	s.mu.Unlock()
	s.dirty.Store(true)
	return nil
}

// Close releases this handle. When the last handle of a dataset closes, its
// dirty chunks are written (not committed) and its clean chunks stay in the
// cache, so reopening finds them warm. Idempotent.
//
// After the File closed, closing a handle does nothing and returns nil: the
// file's Close already released every dataset. ctx bounds the write of the
// dirty chunks; when it ends first, or the write fails, the error is
// returned, the chunks stay in the cache, dirty, for the file's next Flush,
// and the handle is closed all the same.
func (d *Dataset) Close(ctx context.Context) error {
	if d.closed.Swap(true) {
		return nil
	}
	if d.s.f.closed.Load() {
		return nil
	}
	s := d.s
	s.mu.Lock()
	s.mu.refs--
	var cds *cache.Dataset
	var vcds *cache.Dataset
	if s.mu.refs == 0 {
		cds, s.mu.cds = s.mu.cds, nil
		vcds, s.mu.vcds = s.mu.vcds, nil
		s.hot.Store(nil)
		done := make(chan struct{})
		s.mu.closing = done
		defer func() {
			s.mu.Lock()
			if s.mu.closing == done {
				s.mu.closing = nil
			}
			s.mu.Unlock()
			close(done)
		}()
	}
	s.mu.Unlock()
	if vcds != nil {
		// Read-only: it holds no dirty chunks, so this cannot fail for
		// want of I/O; its selections stay cached for a warm reopen.
		_ = vcds.Unregister(context.Background())
	}
	if cds != nil {
		if h := testHookCloseUnregister.Load(); h != nil {
			(*h)()
		}
		err := cds.Unregister(ctx)
		if err != nil && s.f.closed.Load() {
			return nil // the file's Close released it meanwhile
		}
		if err != nil {
			// The cache keeps the dataset registered, with its dirty
			// chunks, for the file's next Flush; the next handle takes
			// that registration over (acquire) rather than asking for a
			// second one of the same id.
			s.mu.Lock()
			if s.mu.refs == 0 && s.mu.cds == nil {
				s.mu.cds = cds
			}
			s.mu.Unlock()
		}
		return classify(err)
	}
	return nil
}

// region is the box of chunk coordinates a selection touches, for the
// serializer, in fresh slices (regionInto, in io.go, fills a request's
// scratch arrays instead). It is computed before the selection is
// validated, so it saturates instead of overflowing; an invalid selection
// is rejected right after.
func (s *dsState) region(sel Selection) serialize.Region {
	r := len(sel.hyper().Start)
	return s.fillRegion(sel, serialize.Region{Dataset: s.id, Lo: make([]uint64, r), Hi: make([]uint64, r)})
}

// fillRegion computes region into reg, whose Lo and Hi have the
// selection's rank and are zero.
func (s *dsState) fillRegion(sel Selection, reg serialize.Region) serialize.Region {
	h := sel.hyper()
	r := len(h.Start)
	if len(h.Stride) != r || len(h.Count) != r || len(h.Block) != r || r != len(s.chunk) {
		return reg // empty: conflicts with nothing; Validate rejects it
	}
	for d := 0; d < r; d++ {
		if h.Count[d] == 0 || h.Block[d] == 0 {
			clear(reg.Lo)
			clear(reg.Hi)
			return reg
		}
		hi, span := bits.Mul64(h.Count[d]-1, h.Stride[d])
		last, c1 := bits.Add64(h.Start[d], span, 0)
		last, c2 := bits.Add64(last, h.Block[d]-1, 0)
		if hi != 0 || c1 != 0 || c2 != 0 {
			last = ^uint64(0)
		}
		reg.Lo[d] = h.Start[d] / s.chunk[d]
		reg.Hi[d] = last/s.chunk[d] + 1
	}
	return reg
}

// geometry derives the chunk grid of an extent.
func geometry(shape, maxShape, chunk []uint64) index.Geometry {
	g := index.Geometry{Grid: make([]uint64, len(shape)), MaxGrid: make([]uint64, len(shape))}
	for i := range shape {
		g.Grid[i] = ceilDiv(shape[i], chunk[i])
		if maxShape[i] == Unlimited {
			g.MaxGrid[i] = index.Unlimited
		} else {
			g.MaxGrid[i] = ceilDiv(maxShape[i], chunk[i])
		}
	}
	return g
}

func ceilDiv(a, b uint64) uint64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}

func equal(a, b []uint64) bool {
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

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// newChunkKey draws a dataset's chunk key (format.KeyedChunkSum): random,
// so that datasets, and a dataset deleted and created again under the same
// name, do not share one, and kept in the header, so that it survives a
// Move; never 0, which means the unkeyed rule.
func newChunkKey() uint64 {
	for {
		if k := mrand.Uint64(); k != 0 {
			return k
		}
	}
}

// ChunkExtent is where one stored chunk lives in the file.
type ChunkExtent struct {
	Coord     []uint64 // the chunk's scaled coordinates
	Off, Size int64    // its frame's place in the file
}

// ChunkExtents lists the dataset's stored chunks as the chunk index names
// them (chunks only in the cache are not listed until written), for tools
// that inspect or damage files on purpose.
func (d *Dataset) ChunkExtents(ctx context.Context) (out []ChunkExtent, err error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	err = d.s.f.follow(ctx, func() (err error) {
		out, err = d.chunkExtents(ctx)
		return err
	})
	return out, err
}

func (d *Dataset) chunkExtents(ctx context.Context) ([]ChunkExtent, error) {
	d.s.extent.RLock()
	defer d.s.extent.RUnlock()
	if err := d.s.gone(); err != nil {
		return nil, err
	}
	out, err := d.s.store.chunkExtents(ctx)
	// As in storage: the extents listed may be free by now.
	if gerr := d.s.gone(); gerr != nil {
		return nil, gerr
	}
	return out, err
}

// prod64 is the product of dims, saturating at 2^64-1 (dims are
// validated elsewhere; this only has to be large when they are).
func prod64(dims []uint64) uint64 {
	n := uint64(1)
	for _, d := range dims {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return ^uint64(0)
		}
		n = lo
	}
	return n
}
