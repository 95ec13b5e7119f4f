package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/scc-dev/scc/internal/bufpool"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/vfd"
)

// Cache image (Cache image RFC; FORMAT.md §20). A writable File opened with
// ImageOptions.Generate writes, in its closing commit, one block holding
// the encoded form of what its cache held: the catalog, the dataset
// headers and chunk index blocks it read or wrote, and the hottest clean
// chunks (bounded by ImageOptions.ChunkBytes), each with its address,
// size, kind, checksum, age and rank, plus the cache's sizing state; the
// new superblock records it. The next open reads the block with one read
// before anything else and turns its entries into prefetched cache entries
// (cache/imageentries.go): a later read of exactly such a block — same
// address, same size, and the checksum its parent records — takes the
// bytes from memory instead of the file, and is verified exactly as a
// read would be. A writable open drops the superblock's record (and frees
// the image's space) at its first commit, as Cache image RFC §2 has it; a
// read-only open uses the image and leaves it.
//
// Trust: an image is used only when its checksum is the one the
// superblock records and it names the superblock's own generation, file
// and catalog checksum. Anything else (space reused since, a writer that
// carried a record forward without writing the image, damage) is a stale
// image: ignored, and the file opens as if it had none. Errors reading it
// are errors of the open, like any other I/O error. Those checks prove the
// image intact, not true: its entries are used only where the state's own
// checksums confirm them, and its free-space map, which they cannot, is
// never used for allocation (checkWalked; FORMAT.md §20 states the threat
// model).
//
// Which blocks are "in the cache": chunk index blocks stay in memory
// once read, but in decoded form. A File that will write an image keeps
// the on-disk bytes of each metadata block it reads or writes (its
// journal, charged to the cache's budget like index memory), as HDF5's
// implementation keeps clean entries' images (Cache image RFC §4.4). A block
// freed by a commit leaves the journal; headers and the catalog are
// chosen by the committed catalog, so an outdated copy never enters an
// image (and could not be used if it did: its checksum would not match).

// ImageOptions configure the cache image (Cache image RFC §3.1,
// H5AC_cache_image_config_t). The zero value writes no image.
type ImageOptions struct {
	// Generate writes a cache image when the file is closed. Ignored on a
	// read-only open (Cache image RFC §3.1: "silently ignoring the file image
	// request in this case"). While the file is open it keeps the on-disk
	// bytes of the metadata blocks it reads or writes (see above), charged
	// to the cache's budget. Default false.
	Generate bool
	// SaveSizing records the cache's sizing state in the image, and an
	// open that finds it there restores it into a private cache whose
	// CacheConfig leaves those fields at their defaults (Cache image RFC
	// save_resize_status). Default false.
	SaveSizing bool
	// MaxAge bounds how many consecutive images an entry may appear in
	// without being requested (Cache image RFC entry_ageout): 1..100; 0, the
	// default, means no bound (the seed's -1); ImageNoCarry (-1) carries no
	// entry that was not requested (the seed's 0).
	MaxAge int
	// ChunkBytes bounds the encoded bytes of hot chunks an image holds.
	// Default 0 means DefaultImageChunkBytes; -1 means no chunks (metadata
	// only).
	ChunkBytes int64
}

const (
	// ImageNoCarry is ImageOptions.MaxAge for "never carry an entry that
	// was not requested".
	ImageNoCarry = -1
	// MaxImageAge is the largest bounded ImageOptions.MaxAge.
	MaxImageAge = 100
	// DefaultImageChunkBytes is ImageOptions.ChunkBytes's default.
	DefaultImageChunkBytes = 16 << 20
)

// Validate reports whether o is usable; the error wraps ErrInvalid.
func (o ImageOptions) Validate() error {
	switch {
	case o.MaxAge < ImageNoCarry || o.MaxAge > MaxImageAge:
		return fmt.Errorf("%w: ImageOptions.MaxAge %d outside [-1, %d]", ErrInvalid, o.MaxAge, MaxImageAge)
	case o.ChunkBytes < -1:
		return fmt.Errorf("%w: ImageOptions.ChunkBytes %d < -1", ErrInvalid, o.ChunkBytes)
	}
	return nil
}

func (o ImageOptions) chunkBytes() int64 {
	switch {
	case o.ChunkBytes == 0:
		return DefaultImageChunkBytes
	case o.ChunkBytes < 0:
		return 0
	}
	return o.ChunkBytes
}

// ImageInfo describes a file's cache image (Cache image RFC §3.2,
// H5Fget_mdc_image_info).
type ImageInfo struct {
	// Exists reports that the last committed superblock records an image,
	// at Addr with Size bytes. A writable open's first commit removes the
	// record, after which Exists is false (as in HDF5, where the image is
	// gone once loaded by a read/write open).
	Exists     bool
	Addr, Size uint64
	// Used reports that this open read the image and made prefetched
	// entries from it (Entries of them, SizingRestored if its sizing
	// state configured the private cache).
	Used           bool
	Entries        int
	SizingRestored bool
	// FreeMap reports that the image carried the free-space map of the
	// state it describes. A writable open never allocates from it: it
	// walks every index as without an image, and an image whose map names
	// space the walk finds referenced is reported in Ignored (see
	// checkWalked).
	FreeMap bool
	// Ignored says why an image the superblock recorded at open was not
	// used (stale, damaged, of an unknown version), or why a writable open
	// dropped one it had used (a free-space map that names referenced
	// space); empty otherwise.
	Ignored string
	// Prefetched counts what became of the prefetched entries.
	Prefetched cache.PrefetchedStats
}

// ImageInfo reports the file's cache image.
func (f *File) ImageInfo() ImageInfo {
	r := f.sb.Load().Image
	f.img.mu.Lock()
	info := f.img.mu.info
	f.img.mu.Unlock()
	info.Exists, info.Addr, info.Size = r.Exists(), r.Addr, r.Size
	if f.cfile != nil {
		info.Prefetched = f.cfile.PrefetchedStats()
	}
	return info
}

// imageState is a File's cache image bookkeeping.
type imageState struct {
	opts ImageOptions // Generate is false on read-only files
	// closing is set by Close before its commit: that commit writes the
	// image.
	closing atomic.Bool

	mu struct {
		sync.Mutex
		info ImageInfo // Used, Entries, SizingRestored, Ignored
		// live is the image whose space the allocator holds as referenced
		// (the valid image found at a writable open); the first commit
		// frees it.
		live format.ImageRecord
		// free is the used image's free-space map with the image's own
		// extent taken out: the free space of the committed state it was
		// written for, as the image claims it (nil when it had none).
		free []alloc.Extent
	}
	// journal keeps the on-disk bytes of metadata blocks read or written,
	// by address, while the file will write an image (see above).
	journal struct {
		sync.Mutex
		m     map[uint64]journalBlock
		bytes int64
	}
}

type journalBlock struct {
	kind uint8
	b    []byte
}

func (f *File) generating() bool { return f.img.opts.Generate && !f.readOnly }

// journalPut records b (not copied: callers never change it) as the block
// at addr.
func (f *File) journalPut(kind uint8, addr uint64, b []byte) {
	if !f.generating() {
		return
	}
	f.img.journal.Lock()
	if f.img.journal.m == nil {
		f.img.journal.m = make(map[uint64]journalBlock)
	}
	d := int64(len(b))
	if old, ok := f.img.journal.m[addr]; ok {
		d -= int64(len(old.b))
	}
	f.img.journal.m[addr] = journalBlock{kind, b}
	f.img.journal.bytes += d
	// Charged under the journal's lock, so that a forget's uncharge never
	// reaches the cache before the put it undoes (the cache's resident
	// total would go below zero). ChargeMetadata never calls back into
	// the engine.
	f.chargeIndex(d)
	f.img.journal.Unlock()
}

// journalForget drops the block at addr (its space was freed).
func (f *File) journalForget(addr uint64) {
	if !f.generating() {
		return
	}
	f.img.journal.Lock()
	old, ok := f.img.journal.m[addr]
	if ok {
		delete(f.img.journal.m, addr)
		f.img.journal.bytes -= int64(len(old.b))
		f.chargeIndex(-int64(len(old.b))) // under the lock, as in journalPut
	}
	f.img.journal.Unlock()
}

// journalGet returns the journal's copy of the block at addr if it has
// size bytes and checksum sum.
func (f *File) journalGet(addr, size uint64, sum uint32) ([]byte, bool) {
	if !f.generating() {
		return nil, false
	}
	f.img.journal.Lock()
	defer f.img.journal.Unlock()
	jb, ok := f.img.journal.m[addr]
	if !ok || uint64(len(jb.b)) != size || format.Trailer(jb.b) != sum {
		return nil, false
	}
	return jb.b, true
}

// preloaded is what an open reads before it builds the File: the
// superblock, the image it records (if that image is valid) and the
// catalog.
type preloaded struct {
	sb      format.Superblock
	img     *format.Image
	ignored string
	buf     []byte // the image's bytes (img aliases them)
	cat     []format.CatalogEntry
	attrs   *attrSet // the file's attributes, from the catalog
	catBuf  []byte   // the catalog block (not aliasing buf)
	free    []alloc.Extent
}

// freeMinus is an image's free-space map as allocator extents, with the
// image's own extent r (placed after the map was taken, from its free
// space or past its EOF) taken out and everything clipped below eof.
// Never nil: an empty map is a file with no free space.
func freeMinus(free []format.FreeExtent, r format.ImageRecord, eof uint64) []alloc.Extent {
	out := make([]alloc.Extent, 0, len(free)+1)
	cut, cutEnd := r.Addr, r.Addr+r.Size
	for _, x := range free {
		lo, hi := x.Off, min(x.Off+x.Size, eof)
		if hi <= lo {
			continue
		}
		if lo < cut && cut < hi { // the part below the image
			out = append(out, alloc.Extent{Off: int64(lo), Size: int64(cut - lo)})
		}
		if lo < cutEnd && cutEnd < hi { // the part above it
			out = append(out, alloc.Extent{Off: int64(cutEnd), Size: int64(hi - cutEnd)})
		}
		if hi <= cut || lo >= cutEnd { // clear of it
			out = append(out, alloc.Extent{Off: int64(lo), Size: int64(hi - lo)})
		}
	}
	return out
}

// freeOverlap describes the first referenced extent of live (any order)
// that the map free (address order, disjoint) calls free, or is "".
func freeOverlap(free, live []alloc.Extent) string {
	for _, x := range live {
		i := sort.Search(len(free), func(i int) bool { return free[i].End() > x.Off })
		if x.Size > 0 && i < len(free) && free[i].Off < x.End() {
			return fmt.Sprintf("free-space map calls %v free, which holds referenced %v", free[i], x)
		}
	}
	return ""
}

// checkWalked compares the used image's free-space map with the extents a
// writable open's walk found referenced. A map that names one is no
// image's work: the rest of the image is dropped (what the walk took from
// it passed its parents' checksums), and the map is reported as the
// reason the image is ignored.
//
// Why a writable open walks although the image carries the map: the map
// is a claim that space is unreferenced, which no checksum can prove (a
// forged image recomputes them all; the superblock's record of the image
// is rewritten with it), and an allocator built from a map that names a
// live block writes over it: the chunks of any dataset the map chose,
// silently, with every later commit succeeding. Checking the map against
// the blocks the open has read (the catalog, the headers) misses every
// dataset it has not, and only a walk of every index knows them all;
// deferring the walk to the first allocation leaves that allocation
// inside a cache write-back or an index flush, where the walk cannot run,
// and every writable open allocates (its first commit drops the
// image's record). So the map is never used for allocation (FORMAT.md
// §20); it describes the state for Check, and the walk reads the headers
// and index blocks the image holds from memory.
func (f *File) checkWalked(live []alloc.Extent) {
	f.img.mu.Lock()
	defer f.img.mu.Unlock()
	if f.img.mu.free == nil || f.img.mu.info.Ignored != "" {
		return
	}
	if msg := freeOverlap(f.img.mu.free, live); msg != "" {
		f.img.mu.info.Ignored = msg
		f.cfile.DropPrefetched()
	}
}

// imageFreeMap is the free-space map of the state the commit prepared as
// epoch makes durable, taken before the image is placed: what the
// allocator knows to be unreferenced by it (alloc.FreeAfter), plus the two
// blocks the commit frees only once its superblock is durable — the
// previous state's catalog and the image the file was opened with.
func (f *File) imageFreeMap(epoch alloc.Epoch, old format.Superblock) []format.FreeExtent {
	exts := f.space.a.FreeAfter(epoch)
	if old.CatalogSize != 0 {
		exts = append(exts, alloc.Extent{Off: int64(old.CatalogAddr), Size: int64(old.CatalogSize)})
	}
	f.img.mu.Lock()
	if r := f.img.mu.live; r.Exists() {
		exts = append(exts, alloc.Extent{Off: int64(r.Addr), Size: int64(r.Size)})
	}
	f.img.mu.Unlock()
	slices.SortFunc(exts, func(a, b alloc.Extent) int { return cmp.Compare(a.Off, b.Off) })
	out := make([]format.FreeExtent, 0, len(exts))
	for _, e := range exts {
		// Touching extents join; overlapping ones cannot occur (the two
		// added blocks are held until this commit is durable), but a
		// union would still be exact if they did.
		if n := len(out); n > 0 && out[n-1].Off+out[n-1].Size >= uint64(e.Off) {
			out[n-1].Size = max(out[n-1].Off+out[n-1].Size, uint64(e.End())) - out[n-1].Off
			continue
		}
		out = append(out, format.FreeExtent{Off: uint64(e.Off), Size: uint64(e.Size)})
	}
	return out
}

// release gives the image's buffer back; p.img is gone with it.
func (p *preloaded) release() {
	if p.buf != nil {
		bufpool.Put(p.buf)
		p.buf, p.img = nil, nil
	}
}

// preload reads the committed superblock, the cache image it records
// (with one read) and the catalog (from the image when it holds it). An
// image larger than limit (the cache's quiescent size) is not read: its
// entries could not all be kept, and a damaged record must not drive a
// large allocation.
//
// A read-only open races its writer: between the superblock and the
// catalog the writer may commit twice and reuse the catalog's space. A
// catalog that fails its check while a newer superblock is on disk is
// that race, not damage: preload starts over from the newer superblock
// (as Refresh does), and after refreshRetries gives ErrStale.
func preload(ctx context.Context, drv vfd.Driver, limit int64) (*preloaded, error) {
	for try := 0; ; try++ {
		p, err := preloadOnce(drv, limit)
		if err != nil {
			return nil, err
		}
		if err = p.loadCatalog(drv); err == nil {
			return p, nil
		}
		p.release()
		if !errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		cur, rerr := readSuperblock(drv)
		switch {
		case rerr != nil:
			return nil, rerr
		case cur.Generation == p.sb.Generation:
			return nil, err // no race: the committed state is damaged
		case try == refreshRetries:
			return nil, fmt.Errorf("%w: open: %v", ErrStale, err)
		}
		backoff(ctx, try)
	}
}

// loadCatalog decodes the catalog the superblock names, taken from the
// image when the image holds exactly that block.
func (p *preloaded) loadCatalog(drv vfd.Driver) error {
	sb := p.sb
	var buf []byte
	if p.img != nil {
		for _, e := range p.img.Entries {
			if e.Kind == format.ImageCatalog && e.Addr == sb.CatalogAddr && uint64(len(e.Data)) == sb.CatalogSize && e.Sum() == sb.CatalogSum {
				buf = append([]byte(nil), e.Data...)
				break
			}
		}
	}
	if buf == nil {
		var err error
		if buf, err = readBlock(drv, sb.CatalogAddr, sb.CatalogSize, sb.EOF); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
	}
	if format.Trailer(buf) != sb.CatalogSum {
		return fmt.Errorf("%w: catalog at %d is not the one the superblock names", ErrCorrupt, sb.CatalogAddr)
	}
	cat, parts, err := format.DecodeCatalogParts(buf)
	if err != nil {
		return classify(err)
	}
	attrs, err := decodeAttrs(parts.Attrs)
	if err != nil {
		return fmt.Errorf("file attributes: %w", err)
	}
	p.cat, p.attrs, p.catBuf = cat, attrs, buf
	return nil
}

// preloadOnce reads the superblock and the image it records.
func preloadOnce(drv vfd.Driver, limit int64) (*preloaded, error) {
	sb, err := readSuperblock(drv)
	if err != nil {
		return nil, err
	}
	p := &preloaded{sb: sb}
	r := sb.Image
	if !r.Exists() {
		return p, nil
	}
	if r.Size > uint64(limit) {
		p.ignored = fmt.Sprintf("image of %d bytes is larger than the cache (%d bytes)", r.Size, limit)
		return p, nil
	}
	// validate (format) bounded Size and placed it below EOF. The buffer
	// is pooled: nothing keeps it past the open (LoadPrefetched copies,
	// release gives it back).
	buf := bufpool.Get(int(r.Size))
	p.buf = buf
	if err := readFull(drv, buf, int64(r.Addr)); err != nil {
		if errors.Is(err, ErrCorrupt) { // the file ends before the image: damage, not ours to trust
			p.ignored = err.Error()
			return p, nil
		}
		return nil, fmt.Errorf("cache image: %w", err)
	}
	if format.Trailer(buf) != r.Sum {
		p.ignored = fmt.Sprintf("the block at %d is not the image the superblock names", r.Addr)
		return p, nil
	}
	img, err := format.DecodeImage(buf)
	switch {
	case err != nil:
		p.ignored = err.Error()
	case img.Generation != sb.Generation || img.FileID != sb.FileID || img.CatalogSum != sb.CatalogSum:
		p.ignored = fmt.Sprintf("stale image (written for generation %d, catalog %08x; the file is at generation %d, catalog %08x)",
			img.Generation, img.CatalogSum, sb.Generation, sb.CatalogSum)
	default:
		p.img = &img
	}
	return p, nil
}

// imageLimit is the cache's quiescent size as opts will make it (the
// cache package's default for a private cache left at zero).
func imageLimit(opts *Options) int64 {
	switch {
	case opts.Cache != nil:
		return opts.Cache.SizingState().QuiescentBytes
	case opts.CacheConfig.QuiescentBytes > 0:
		return opts.CacheConfig.QuiescentBytes
	}
	return defaultCacheBytes
}

// defaultCacheBytes is cache.Config's QuiescentBytes default.
const defaultCacheBytes = 256 << 20

// sizingOptions returns opts with the image's sizing state applied to a
// private cache's configuration, and whether it was.
func (p *preloaded) sizingOptions(opts *Options) (*Options, bool) {
	if p.img == nil || p.img.Sizing == nil || opts.Cache != nil {
		return opts, false
	}
	var st cache.SizingState
	if st.UnmarshalBinary(p.img.Sizing) != nil {
		return opts, false // a version this scc does not know: ignored
	}
	o := *opts
	o.CacheConfig = st.Apply(opts.CacheConfig)
	return &o, o.CacheConfig != opts.CacheConfig
}

// useImage makes the preloaded image's entries prefetched entries of the
// file's cache. Caller: load, before the first block is read.
func (f *File) useImage(p *preloaded, sizing bool) {
	f.img.mu.Lock()
	defer f.img.mu.Unlock()
	f.img.mu.info.Ignored = p.ignored
	if p.img == nil {
		return
	}
	if sizing {
		// The private cache was configured from the image's sizing state
		// (sizingOptions); resume adaptive sizing where it stood. A state
		// the cache refuses leaves it at the restored configuration.
		var st cache.SizingState
		if st.UnmarshalBinary(p.img.Sizing) == nil && st.Restore(f.cache) != nil {
			sizing = false
		}
	}
	if p.img.HasFree {
		p.free = freeMinus(p.img.Free, p.sb.Image, p.sb.EOF)
	}
	n := len(p.img.Entries)
	blocks := make([]cache.PrefetchedBlock, 0, n)
	for _, e := range p.img.Entries {
		if e.Kind == format.ImageCatalog {
			continue // preload took the catalog
		}
		blocks = append(blocks, cache.PrefetchedBlock{Kind: e.Kind, Age: e.Age, Rank: e.Rank, Addr: int64(e.Addr), Sum: e.Sum(), Image: e.Data})
	}
	// The cache takes the image's buffer: the entries alias it.
	f.cfile.LoadPrefetched(blocks, p.buf)
	p.buf, p.img = nil, nil
	f.img.mu.info.Used, f.img.mu.info.Entries, f.img.mu.info.SizingRestored = true, n, sizing
	if p.free != nil {
		f.img.mu.free, f.img.mu.info.FreeMap = p.free, true
	}
	if !f.readOnly {
		f.img.mu.live = p.sb.Image
	}
}

// liveImage lists the valid image's extent among the committed state's
// live extents (a writable open's free-space rebuild), so nothing is
// allocated over it before the first commit drops it. A stale image's
// space is not reserved: its record is dropped all the same, and its
// bytes are never trusted.
func (f *File) liveImage() (format.ImageRecord, bool) {
	f.img.mu.Lock()
	defer f.img.mu.Unlock()
	return f.img.mu.live, f.img.mu.live.Exists()
}

// readMeta reads the metadata block [addr,+size) whose parent records
// checksum sum: from a prefetched image entry, from the journal, or from
// the file. The caller verifies it as it would any block read.
func (f *File) readMeta(kind uint8, addr, size uint64, sum uint32, eof uint64) ([]byte, error) {
	b, _, err := f.readMetaFrom(kind, addr, size, sum, eof)
	return b, err
}

// readMetaFrom is readMeta that also reports whether the block came from
// the file (rather than the cache image or the journal).
func (f *File) readMetaFrom(kind uint8, addr, size uint64, sum uint32, eof uint64) (b []byte, fromFile bool, err error) {
	if addr < format.DataStart || size == 0 || size > maxMetaBlock || addr+size < addr || addr+size > eof {
		return nil, false, fmt.Errorf("%w: block [%d,+%d) outside the file's space (eof %d)", ErrCorrupt, addr, size, eof)
	}
	if b, ok := f.cfile.TakePrefetched(int64(addr), int64(size), sum); ok {
		f.journalPut(kind, addr, b)
		return b, false, nil
	}
	if b, ok := f.journalGet(addr, size, sum); ok {
		return b, false, nil
	}
	b, err = readBlock(f.drv, addr, size, eof)
	if err == nil {
		f.journalPut(kind, addr, b)
	}
	return b, true, err
}

// readHeaderImage is readHeader through readMeta; fromFile reports whether
// the header was read from the file.
func (f *File) readHeaderImage(e format.CatalogEntry, eof uint64) (hdr format.DatasetHeader, fromFile bool, err error) {
	buf, fromFile, err := f.readMetaFrom(format.ImageHeader, e.HeaderAddr, e.HeaderSize, e.HeaderSum, eof)
	if err != nil {
		return format.DatasetHeader{}, fromFile, fmt.Errorf("dataset %q header: %w", e.Name, err)
	}
	if format.Trailer(buf) != e.HeaderSum {
		return format.DatasetHeader{}, fromFile, fmt.Errorf("%w: dataset %q: header at %d is not the one the catalog names", ErrCorrupt, e.Name, e.HeaderAddr)
	}
	hdr, err = format.DecodeDatasetHeader(buf)
	if err != nil {
		return hdr, fromFile, classify(err)
	}
	return hdr, fromFile, nil
}

// blockStore is the chunk indexes' store: indexStore, plus prefetched
// image entries and the journal (index.SumReader).
func (f *File) blockStore() index.Store { return imageStore{indexStore{f}} }

type imageStore struct{ indexStore }

var _ index.SumReader = imageStore{}

func (s imageStore) ReadSum(ctx context.Context, p []byte, off int64, sum uint32) error {
	f := s.f
	if b, ok := f.cfile.TakePrefetched(off, int64(len(p)), sum); ok {
		copy(p, b)
		if f.generating() {
			f.journalPut(format.ImageIndex, uint64(off), b)
		} else {
			bufpool.Put(b)
		}
		return nil
	}
	if b, ok := f.journalGet(uint64(off), uint64(len(p)), sum); ok {
		copy(p, b)
		return nil
	}
	if err := s.indexStore.ReadAt(ctx, p, off); err != nil {
		return err
	}
	if f.generating() {
		f.journalPut(format.ImageIndex, uint64(off), append([]byte(nil), p...))
	}
	return nil
}

func (s imageStore) WriteAt(ctx context.Context, p []byte, off int64) error {
	if err := s.indexStore.WriteAt(ctx, p, off); err != nil {
		return err
	}
	if s.f.generating() {
		s.f.journalPut(format.ImageIndex, uint64(off), append([]byte(nil), p...))
	}
	return nil
}

func (s imageStore) Free(off, size int64) {
	s.indexStore.Free(off, size)
	s.f.journalForget(uint64(off))
}

// buildImage assembles the image the closing commit writes for generation
// gen, whose catalog cat (of entries) is at catAddr. It returns nil when
// there is nothing worth writing.
func (f *File) buildImage(ctx context.Context, gen uint64, cat []byte, catAddr int64, entries []format.CatalogEntry) (*format.Image, error) {
	sb := f.sb.Load()
	img := &format.Image{Generation: gen, FileID: sb.FileID, CatalogSum: format.Trailer(cat)}
	if f.img.opts.SaveSizing {
		b, err := f.cache.SizingState().MarshalBinary()
		if err != nil {
			return nil, err
		}
		img.Sizing = b
	}
	var es []format.ImageEntry
	add := func(kind, age uint8, addr uint64, b []byte) {
		es = append(es, format.ImageEntry{Kind: kind, Age: age, Rank: uint32(len(es)), Addr: addr, Data: b})
	}
	// Metadata first: it is what every open needs, so it ranks hottest.
	add(format.ImageCatalog, 0, uint64(catAddr), cat)
	for _, e := range entries {
		if b, ok := f.journalGet(e.HeaderAddr, e.HeaderSize, e.HeaderSum); ok {
			add(format.ImageHeader, 0, e.HeaderAddr, b)
		}
	}
	f.img.journal.Lock()
	var idx []uint64
	for a, jb := range f.img.journal.m {
		if jb.kind == format.ImageIndex {
			idx = append(idx, a)
		}
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	for _, a := range idx {
		add(format.ImageIndex, 0, a, f.img.journal.m[a].b)
	}
	f.img.journal.Unlock()
	// The hottest clean chunks, in the cache's replacement order.
	if budget := f.img.opts.chunkBytes(); budget > 0 {
		var used int64
		err := f.cfile.HotChunks(ctx, func(h cache.HotChunk) bool {
			// An entry answers only a read whose parent records the
			// entry's checksum, which is its block's trailer
			// (format.ImageEntry.Sum): a chunk whose index records
			// another checksum (a structured frame's header checksum,
			// a contiguous piece's CRC) would only take room.
			if len(h.Image) < 4 || format.Trailer(h.Image) != h.Loc.Sum {
				return true
			}
			if used+int64(len(h.Image)) > budget {
				return true // a smaller, colder one may still fit
			}
			used += int64(len(h.Image))
			add(format.ImageChunk, 0, uint64(h.Loc.Addr), append([]byte(nil), h.Image...))
			return used < budget
		})
		if err != nil {
			return nil, classify(err)
		}
	}
	// Entries never requested since the image they came from, one cycle
	// older (Cache image RFC entry_ageout), coldest of all.
	if max := f.img.opts.MaxAge; max != ImageNoCarry {
		for _, b := range f.cfile.PrefetchedBlocks() {
			age := int(b.Age) + 1
			if max > 0 && age > max {
				continue
			}
			add(b.Kind, uint8(min(age, format.MaxImageAge)), uint64(b.Addr), b.Image)
		}
	}
	img.Entries = es // rank order until writeImage sorts them
	// Over the format's bound: the coldest go.
	for format.ImageSize(*img) > format.MaxImageBytes && len(img.Entries) > 0 {
		img.Entries = img.Entries[:len(img.Entries)-1]
	}
	return img, nil
}

// dedupeImage keeps, of entries whose bytes overlap (a carried entry over
// space reused since), the one ranked hottest, and drops entries beyond
// eof; it returns the rest in address order, the image's order. es is in
// rank order.
func dedupeImage(es []format.ImageEntry, eof uint64) []format.ImageEntry {
	byAddr := make([]int32, len(es)) // positions in es, sorted by address
	for i := range byAddr {
		byAddr[i] = int32(i)
	}
	slices.SortFunc(byAddr, func(a, b int32) int { return cmp.Compare(es[a].Addr, es[b].Addr) })
	drop := make([]bool, len(es))
	prev := int32(-1)
	for _, i := range byAddr {
		e := &es[i]
		if e.Addr < format.DataStart || e.Addr+uint64(len(e.Data)) > eof {
			drop[i] = true
			continue
		}
		if prev >= 0 && e.Addr < es[prev].Addr+uint64(len(es[prev].Data)) {
			// Lower position is hotter (es is in rank order).
			if i < prev {
				drop[prev], prev = true, i
			} else {
				drop[i] = true
			}
			continue
		}
		prev = i
	}
	out := make([]format.ImageEntry, 0, len(es))
	for _, i := range byAddr {
		if !drop[i] {
			out = append(out, es[i])
		}
	}
	return out
}

// writeImage builds, places and writes the closing commit's image; the
// caller records the result in the superblock it is about to write, and
// syncs before that. On error nothing is left allocated.
func (f *File) writeImage(ctx context.Context, epoch alloc.Epoch, old format.Superblock, cat []byte, catAddr int64, entries []format.CatalogEntry) (format.ImageRecord, error) {
	img, err := f.buildImage(ctx, old.Generation+1, cat, catAddr, entries)
	if err != nil || img == nil {
		return format.ImageRecord{}, err
	}
	// The free-space map is taken before the image is placed, so the
	// image's size does not depend on where it goes; an open takes the
	// image's extent out of it (freeMinus). Entries are checked against
	// the EOF before placing too: placing only moves EOF up.
	img.Entries = dedupeImage(img.Entries, uint64(f.space.eof()))
	img.HasFree, img.Free = true, f.imageFreeMap(epoch, old)
	for format.ImageSize(*img) > format.MaxImageBytes && len(img.Entries) > 0 {
		img.Entries = img.Entries[:len(img.Entries)-1] // the coldest go (address order here; rare)
	}
	if err := format.ValidateImage(*img); err != nil {
		return format.ImageRecord{}, fmt.Errorf("%w: cache image: %w", ErrInternal, err)
	}
	size := format.ImageSize(*img)
	addr, err := f.space.alloc(size)
	if err != nil {
		return format.ImageRecord{}, err
	}
	b := format.AppendImage(bufpool.Get(int(size))[:0], *img)
	defer bufpool.Put(b)
	if int64(len(b)) != size {
		f.space.free(addr, size)
		return format.ImageRecord{}, fmt.Errorf("%w: cache image of %d bytes, %d expected", ErrInternal, len(b), size)
	}
	if err := f.writeFull(b, addr); err != nil {
		f.space.free(addr, size)
		return format.ImageRecord{}, err
	}
	return format.ImageRecord{Addr: uint64(addr), Size: uint64(len(b)), Sum: format.Trailer(b)}, nil
}

// imageCommitting is called by a commit, before it syncs, for the record
// its superblock will carry: the closing commit of a File that generates
// an image writes one; every other commit records none (a writable open's
// first commit thereby removes the image it found). epoch is the commit's
// and old the superblock it replaces.
func (f *File) imageCommitting(ctx context.Context, epoch alloc.Epoch, old format.Superblock, cat []byte, catAddr int64, entries []format.CatalogEntry) (format.ImageRecord, error) {
	if !f.generating() || !f.img.closing.Load() {
		return format.ImageRecord{}, nil
	}
	return f.writeImage(ctx, epoch, old, cat, catAddr, entries)
}

// imageCommitted is called once the commit's superblock is durable: the
// image the allocator held for the old state is freed (reusable after the
// next commit, like every block the new state no longer references), and
// the journal forgets headers and catalogs the new catalog does not name.
func (f *File) imageCommitted(rec format.ImageRecord, entries []format.CatalogEntry, catAddr int64) {
	f.img.mu.Lock()
	old := f.img.mu.live
	f.img.mu.live = rec
	f.img.mu.Unlock()
	if old.Exists() && old != rec {
		f.space.free(int64(old.Addr), int64(old.Size))
	}
	if !f.generating() {
		return
	}
	keep := map[uint64]bool{uint64(catAddr): true}
	for _, e := range entries {
		keep[e.HeaderAddr] = true
	}
	var stale []uint64
	f.img.journal.Lock()
	for a, jb := range f.img.journal.m {
		if jb.kind != format.ImageIndex && !keep[a] {
			stale = append(stale, a)
		}
	}
	f.img.journal.Unlock()
	for _, a := range stale {
		f.journalForget(a)
	}
}
