// Package engine is scc's public API: files holding chunked n-dimensional
// datasets whose raw-data I/O runs through one shared chunk cache.
//
// A File is a single container (FORMAT.md) on a vfd.Driver. Its datasets are
// read and written with hyperslab selections; chunks go through the cache
// (package cache) by way of the dense layout's callbacks (SCC internal API), and are
// indexed on disk by a chunk index (package engine/internal/index).
//
// Durability: Flush (and Close) write every dirty chunk to new space, write
// the changed indexes, dataset headers and the catalog copy-on-write, sync,
// and then commit a new superblock into the other of two slots and sync
// again. A crash at any point leaves the last committed state readable.
//
// Files, Datasets and the Cache are safe for concurrent use by many
// goroutines.
package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/resource"
	"github.com/scc-dev/scc/serialize"
	"github.com/scc-dev/scc/vfd"
	"github.com/scc-dev/scc/vfd/s3"
)

// Options configure a File. The zero value is valid.
type Options struct {
	// Cache is the shared chunk cache the file's datasets use; several files
	// may share one. Nil gives the file a private cache built from
	// CacheConfig and closed with the file.
	Cache *cache.Cache
	// CacheConfig configures the private cache when Cache is nil.
	CacheConfig cache.Config
	// ReadOnly opens the file for reading only: no lock is taken, so readers
	// may follow a writer in another process (File.Refresh).
	ReadOnly bool
	// NoSync skips every fsync (the commit's and the cache's write-back),
	// as bbolt's DB.NoSync does: for scratch files and benchmarks only. A
	// Flush that returns nil then promises nothing about crashes: the
	// operating system may write the new superblock before the blocks it
	// names, so a crash can leave a file that does not open. It also turns
	// off the write-behind of a file Create or Open opens
	// (vfd.File.SetWriteBehind), which only serves a later fsync. Default
	// false.
	NoSync bool
	// Image configures the cache image written at Close (Cache image RFC;
	// image.go). The zero value writes none; an open uses an image the
	// file has whatever this says.
	Image ImageOptions
	// Virtual configures how the file's virtual datasets reach their
	// sources (virtual.go): the extent view, the source files kept open,
	// how source names resolve and open.
	Virtual VirtualOptions

	// Driver, when set, is the storage the file lives on (any vfd.Driver:
	// a vfd.File, vfd.Mem, a fault-injecting wrapper ...); the path given
	// to Open or Create then only names the file (in messages, and to
	// resolve relative virtual sources) and may be "". The driver stays
	// the caller's: Close does not close it.
	Driver vfd.Driver
	// FollowInterval is the longest File.Follow waits between two looks
	// at the file. Zero: 10 ms for a local file (or memory), 500 ms for
	// other drivers (an object store, where a look is a request).
	FollowInterval time.Duration

	// S3 configures the object-store driver of an s3:// path (endpoint,
	// region, credentials, retries: vfd/s3.Options; its ReadOnly and
	// Create are set from the call). Nil takes everything from the URL's
	// query and the AWS_* environment. Source files of the file's
	// virtual datasets named by s3:// URLs open with it too.
	S3 *s3.Options
}

// File is an open scc container. It is its root group: the Group calls
// (CreateDataset, OpenDataset, CreateGroup, Members, Delete, Move, the
// attributes ...) on a File act on the root, as h5py's File is its root
// Group.
type File struct {
	*Group

	drv      vfd.Driver
	ownDrv   bool
	cache    *cache.Cache
	ownCache bool
	cfile    *cache.File
	readOnly bool
	noSync   bool // Options.NoSync
	// ser orders the requests on the file's datasets (SCC design §5.2).
	ser *serialize.Serializer
	// admit is the cache's admission control, shared by every file of the
	// cache (admit.go).
	admit *resource.Admitter
	space *space // nil when read-only

	// attrs are the file's attributes (attr.go), the catalog's Attrs part.
	attrs attrHolder

	// commitMu serializes commits (Flush, Close) and a read-only file's
	// Refresh. Lock order: the table after File.
	commitMu sync.Mutex
	// flushes lets concurrent File.Flush calls share a commit (Flush).
	flushes struct {
		asked   atomic.Uint64 // Flush calls so far: each takes the next number
		covered uint64        // under commitMu: every Flush numbered up to this is durable
	}
	// sb is the last committed superblock, an immutable snapshot replaced
	// (under commitMu) by each commit or refresh, so that readers such as
	// OpenDataset and Generation never wait behind a commit's syncs.
	sb atomic.Pointer[format.Superblock]

	// closed is set once by Close (under mu, so that CreateDataset and
	// OpenDataset, which check it under mu, never race a Close).
	closed atomic.Bool

	// img is the cache image's state (image.go).
	img imageState

	// failed is set when a sync failed, whoever asked for it (a commit, or
	// the cache writing chunks back): the OS may have dropped written
	// pages, so no later commit may claim durability (see Flush and
	// syncLatch).
	failed atomic.Pointer[error]

	// path is the file's path when Create or Open opened it (relative
	// virtual sources resolve against its directory); vopts and virt are
	// the virtual datasets' options and source files (virtual.go).
	path   string
	vopts  VirtualOptions
	s3opts *s3.Options
	virt   virtualSources

	// followInterval is Options.FollowInterval or its default.
	followInterval time.Duration

	// indexShedBytes counts the bytes of changed index blocks writeIndexes
	// wrote and let go (tests).
	indexShedBytes atomic.Int64

	// mu guards its fields (the catalog, open datasets, groups); short,
	// never held across I/O. Lock order: the table after File.
	mu struct {
		sync.Mutex
		nextID uint64
		// catalog holds every dataset of the file by name: committed ones
		// from the last superblock plus ones created since.
		catalog map[string]format.CatalogEntry
		// open holds the datasets loaded since the open, by name.
		open map[string]*dsState
		// groups are the file's groups other than the root, by path;
		// explicit says the catalog lists them (group.go).
		groups   map[string]*groupState
		explicit bool
	}
}

// Lock order of the engine, outermost first; this is its one statement,
// and the declarations of the locks below refer to it. A goroutine holding
// one of these takes only locks below it:
//
//	serializer (serialize.Acquire / AcquireExclusive on a dataset)
//	  File.commitMu                (commits; a read-only file's Refresh)
//	    dsState.extent             (shared: commit's writeHeader and
//	                                finishTrims, Storage; exclusive:
//	                                SetExtent, Refresh's adopt)
//	      File.mu, dsState.mu      (short; never held across I/O)
//	      index locks              (engine/internal/index, the loader's
//	                                writers lock: writers, then the
//	                                index's lock, then flight)
//	      cache locks              (package cache, at Cache.mu)
//
// Refresh (read-only files only) takes commitMu and then the serializer of
// each changed dataset; SetExtent (writable files only) never takes
// commitMu, so the two orders never meet on one File. Shedding index
// memory writes changed blocks only under commitMu.TryLock, keeping a
// commit's order (commitMu, then an index's writers lock; shedIndexes).
// Attribute sets (attrHolder.mu), the image state and its journal, the
// virtual datasets' source files (virtualSources) and each layout's own
// state have locks of their own, documented where they are declared.

// noWriteBehind turns the driver's write-behind off for a file that is
// never synced (Options.NoSync): the hint only makes the device write
// pages of a scratch file that may be deleted before they need to be.
// A synced file keeps vfd.DefaultWriteBehind, so that its Flush's fsync
// finds most of the file written already.
func noWriteBehind(drv *vfd.File, opts *Options) {
	if opts != nil && opts.NoSync {
		drv.SetWriteBehind(0)
	}
}

// openLocal opens the local file at path; see Options.ReadOnly.
func openLocal(ctx context.Context, path string, opts *Options) (*File, error) {
	if err := checkRegular(path, false); err != nil {
		return nil, err
	}
	if testHookOpenChecked != nil {
		testHookOpenChecked(path)
	}
	// Non-blocking, and checked again once open: the path may have
	// become a FIFO since checkRegular looked (a source replaced under a
	// follower), and opening a FIFO to read blocks until a writer comes.
	// On a regular file the flag changes nothing.
	flag := os.O_RDWR | syscall.O_NONBLOCK
	if opts != nil && opts.ReadOnly {
		flag = os.O_RDONLY | syscall.O_NONBLOCK
	}
	drv, err := vfd.Open(path, flag, 0)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
		case errors.Is(err, ErrLocked):
			return nil, fmt.Errorf("%w (it is open for writing elsewhere: another process, or another File in this one); "+
				"a read-only open (Options.ReadOnly) can read it meanwhile, following that writer's commits", err)
		}
		return nil, classify(err)
	}
	if fi, err := drv.Stat(); err != nil || !fi.Mode().IsRegular() {
		drv.Close()
		if err != nil {
			return nil, classify(err)
		}
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrInvalid, path, fi.Mode().Type())
	}
	noWriteBehind(drv, opts)
	f, err := openDriver(ctx, drv, opts)
	if err != nil {
		drv.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.ownDrv = true
	f.path = path
	return f, nil
}

// testHookOpenChecked, when set (tests only), runs in openLocal after
// checkRegular passed, before the open.
var testHookOpenChecked func(path string)

// checkRegular refuses paths that are not regular files (a directory, a
// FIFO that would block the open, a device) with ErrInvalid before
// anything opens them. A missing path is ErrNotFound unless create is set.
func checkRegular(path string, create bool) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		if fi.IsDir() {
			if what := describeDir(path); what != "" {
				return fmt.Errorf("%w: %s is a directory: %s", ErrInvalid, path, what)
			}
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file (%s)", ErrInvalid, path, fi.Mode().Type())
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		if create {
			return nil
		}
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	default:
		return classify(err)
	}
}

// createDriver creates a new, empty container on drv, which must be empty.
// The driver stays the caller's: Close does not close it.
func createDriver(ctx context.Context, drv vfd.Driver, opts *Options) (*File, error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: no driver", ErrInvalid)
	}
	if opts == nil {
		opts = &Options{}
	}
	if opts.ReadOnly {
		return nil, fmt.Errorf("%w: cannot create a read-only file", ErrInvalid)
	}
	if n, err := drv.Size(); err != nil {
		return nil, classify(err)
	} else if n != 0 {
		return nil, fmt.Errorf("%w: driver is not empty (%d bytes)", ErrExists, n)
	}
	f, err := newFile(drv, opts)
	if err != nil {
		return nil, err
	}
	f.space = newSpace(alloc.New(format.DataStart, format.DataStart))
	sb := &format.Superblock{EOF: format.DataStart}
	if _, err := rand.Read(sb.FileID[:]); err != nil {
		f.release()
		return nil, err
	}
	f.sb.Store(sb)
	f.mu.nextID = 1
	f.mu.explicit = true
	// The first commit writes an empty catalog and superblock generation 1,
	// so the file opens even if nothing else is ever written.
	if err := f.commit(ctx, nil); err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

// openDriver opens the container on drv; ctx bounds the walk of the
// committed indexes a writable open makes. The driver stays the caller's.
func openDriver(ctx context.Context, drv vfd.Driver, opts *Options) (*File, error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: no driver", ErrInvalid)
	}
	if opts == nil {
		opts = &Options{}
	}
	if err := opts.Image.Validate(); err != nil {
		return nil, err
	}
	// The superblock and the cache image it records, read before the
	// cache exists so that the image's sizing state can configure it.
	p, err := preload(ctx, drv, imageLimit(opts))
	if err != nil {
		return nil, openFailed(drv, err)
	}
	defer p.release()
	opts, sizing := p.sizingOptions(opts)
	f, err := newFile(drv, opts)
	if err != nil {
		return nil, err
	}
	if err := f.load(ctx, p, sizing); err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

func newFile(drv vfd.Driver, opts *Options) (*File, error) {
	if err := opts.Image.Validate(); err != nil {
		return nil, err
	}
	f := &File{readOnly: opts.ReadOnly, noSync: opts.NoSync, cache: opts.Cache, ser: serialize.New(), vopts: opts.Virtual, s3opts: opts.S3}
	f.Group = &Group{f: f}
	f.followInterval = followIntervalOf(opts, drv)
	f.img.opts = opts.Image
	f.drv = &syncLatch{Driver: drv, f: f}
	if f.cache == nil {
		c, err := cache.New(opts.CacheConfig)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		f.cache, f.ownCache = c, true
	}
	admit, err := admitterOf(f.cache)
	if err != nil {
		if f.ownCache {
			f.cache.Close()
		}
		return nil, err
	}
	f.admit = admit
	cf, err := f.cache.RegisterFile(f.drv)
	if err != nil {
		if f.ownCache {
			f.cache.Close()
		}
		return nil, classify(err)
	}
	f.cfile = cf
	f.mu.catalog = make(map[string]format.CatalogEntry)
	f.mu.open = make(map[string]*dsState)
	f.mu.groups = make(map[string]*groupState)
	// Last: a cache shared with busy files may call the shedder at once,
	// and it reads the maps above.
	cf.SetMetadataShedder(f.shedIndexes)
	return f, nil
}

// load takes the superblock, cache image and catalog preload read, makes
// the image's prefetched entries and, for a writable file, rebuilds the
// free-space map from the committed state's live extents.
func (f *File) load(ctx context.Context, p *preloaded, sizing bool) error {
	sb, cat := p.sb, p.cat
	f.journalPut(format.ImageCatalog, sb.CatalogAddr, p.catBuf)
	f.useImage(p, sizing)
	f.attrs.set.Store(p.attrs)
	f.sb.Store(&sb)
	f.mu.nextID = sb.NextDatasetID
	for _, e := range cat {
		f.mu.catalog[e.Name] = e
	}
	// The groups part, which the preload's decode left aside.
	_, parts, err := format.DecodeCatalogParts(p.catBuf)
	if err == nil {
		f.mu.Lock()
		err = f.setGroupsLocked(cat, parts)
		f.mu.Unlock()
	}
	if err != nil {
		return classify(err)
	}
	if f.readOnly {
		return nil
	}
	// A cache image's free-space map is not trusted for this (checkWalked).
	// The walk reads every header and index block, from the image where
	// it holds them, and the closing image keeps them all: the next
	// writable open walks again.
	live, err := f.liveExtents(ctx)
	if err != nil {
		return err
	}
	f.checkWalked(live)
	if r, ok := f.liveImage(); ok {
		live = append(live, alloc.Extent{Off: int64(r.Addr), Size: int64(r.Size)})
	}
	a, err := alloc.Rebuild(format.DataStart, int64(sb.EOF), live)
	if err != nil {
		// The committed metadata references space twice or outside the
		// file: the file is damaged.
		return fmt.Errorf("%w: free-space rebuild: %w", ErrCorrupt, err)
	}
	f.space = newSpace(a)
	return nil
}

// readSuperblock reads both slots and returns the one that holds the
// committed state (format.PickSuperblock: the valid slot with the highest
// generation, slot parity and file identity checked).
//
// Only a checksum decides that a slot is not the committed state: an I/O
// error reading either slot fails the call, because the slot it hides may
// hold the newest generation, and falling back on the older one would
// silently undo an acknowledged commit once a writer commits over it.
func readSuperblock(drv vfd.Driver) (format.Superblock, error) {
	a := make([]byte, format.SlotSize)
	b := make([]byte, format.SlotSize)
	for _, slot := range []struct {
		buf []byte
		off int64
	}{{a, format.SlotA}, {b, format.SlotB}} {
		// A short file leaves a slot (partly) zero, which fails its
		// checksum: that is the end of the file, not an I/O error.
		if _, err := drv.ReadAt(slot.buf, slot.off); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return format.Superblock{}, fmt.Errorf("reading superblock slot at %d: %w", slot.off, classify(err))
		}
	}
	sb, err := format.PickSuperblock(a, b)
	if err != nil {
		if allZero(a) && allZero(b) {
			// Neither slot was ever written: a file being created (or
			// whose creation stopped before its first commit), not a
			// damaged one.
			err = fmt.Errorf("%w: %w", err, errUnborn)
		}
		return sb, fmt.Errorf("superblock: %w", classify(err))
	}
	return sb, nil
}

// errUnborn marks (under ErrCorrupt) a file with no superblock written
// yet: empty, or cut short by a creator that has not committed. A
// virtual dataset reads such a source as a missing one.
var errUnborn = errors.New("no superblock written yet")

// readCatalog reads the catalog the superblock names and the file
// attributes it carries.
func readCatalog(drv vfd.Driver, sb format.Superblock) ([]format.CatalogEntry, format.CatalogParts, *attrSet, error) {
	var parts format.CatalogParts
	buf, err := readBlock(drv, sb.CatalogAddr, sb.CatalogSize, sb.EOF)
	if err != nil {
		return nil, parts, nil, fmt.Errorf("catalog: %w", err)
	}
	if format.Trailer(buf) != sb.CatalogSum {
		return nil, parts, nil, fmt.Errorf("%w: catalog at %d is not the one the superblock names", ErrCorrupt, sb.CatalogAddr)
	}
	cat, parts, err := format.DecodeCatalogParts(buf)
	if err != nil {
		return nil, parts, nil, classify(err)
	}
	attrs, err := decodeAttrs(parts.Attrs)
	if err != nil {
		return nil, parts, nil, fmt.Errorf("file attributes: %w", err)
	}
	return cat, parts, attrs, nil
}

// readBlock reads a metadata block that must lie inside [DataStart, eof).
func readBlock(drv vfd.Driver, addr, size, eof uint64) ([]byte, error) {
	if addr < format.DataStart || size == 0 || size > maxMetaBlock || addr+size < addr || addr+size > eof {
		return nil, fmt.Errorf("%w: block [%d,+%d) outside the file's space (eof %d)", ErrCorrupt, addr, size, eof)
	}
	buf := make([]byte, size)
	if err := readFull(drv, buf, int64(addr)); err != nil {
		return nil, err
	}
	return buf, nil
}

// maxMetaBlock bounds one metadata block read from disk (256 MiB), so a
// damaged address never drives an enormous allocation.
const maxMetaBlock = 256 << 20

// readFull reads len(p) bytes at off; a short file is corruption.
func readFull(drv vfd.Driver, p []byte, off int64) error {
	n, err := drv.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: short read of %d bytes at %d", ErrCorrupt, len(p), off)
	}
	return classify(err)
}

// writeFull writes all of p at off. A driver that reports fewer bytes with
// no error has not written p: that is io.ErrShortWrite, never success.
func (f *File) writeFull(p []byte, off int64) error {
	// vfd.WriteFull: a driver's short count with a nil error is a failure.
	return classify(vfd.WriteFull(f.drv, p, off))
}

// Flush makes every write acknowledged before the call durable: dirty chunks
// are written to new space, then the changed indexes, dataset headers and
// the catalog, then a sync, the other superblock slot, and a sync. When it
// returns nil, a crash from then on loses none of those writes.
//
// After a failed sync the file refuses further commits (the kernel may have
// dropped the pages it failed to write, and a later successful sync would
// not prove otherwise); reopen it to get its last committed state.
//
// Concurrent Flush calls share commits: a Flush that waits while another
// commit runs is answered by the next successful commit that begins after
// it was called (whose snapshot holds every write acknowledged before the
// call), so N goroutines flushing at once cost two commits, not N, each
// with its syncs. A commit that fails answers nobody but its own caller:
// the others commit for themselves.
func (f *File) Flush(ctx context.Context) error {
	if err := f.checkOpen(); err != nil {
		return err
	}
	if f.readOnly {
		return nil
	}
	ticket := f.flushes.asked.Add(1)
	if err := f.drainRetired(ctx); err != nil {
		return err
	}
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	if f.flushes.covered >= ticket && shareFlushes {
		return nil // a commit begun after this call succeeded meanwhile
	}
	begun := f.flushes.asked.Load()
	if err := f.commitLocked(ctx, nil); err != nil {
		return classify(err)
	}
	f.flushes.covered = begun
	return nil
}

// shareFlushes turns the sharing of commits by concurrent Flush calls off
// when false (BenchmarkConcurrentFlush compares).
var shareFlushes = true

// commit writes a new generation of the file. With only nil it first
// writes back every dirty chunk of the file (File.Flush, Close); with only
// set, only that dataset's (Dataset.Flush): the other datasets' headers
// then record the chunks their write-backs already stored, which is a
// state their indexes describe completely, and their dirty chunks wait for
// a later commit.
func (f *File) commit(ctx context.Context, only *dsState) error {
	if err := f.drainRetired(ctx); err != nil {
		return err
	}
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	return f.commitLocked(ctx, only)
}

func (f *File) commitLocked(ctx context.Context, only *dsState) (err error) {
	if p := f.failed.Load(); p != nil {
		return *p
	}
	f.mu.Lock()
	states := make([]*dsState, 0, len(f.mu.open))
	for _, s := range f.mu.open {
		states = append(states, s)
	}
	nextID := f.mu.nextID
	f.mu.Unlock()

	// Shrinks whose edge trims are pending trim before the chunks are
	// written, so that no stored chunk keeps elements outside the extent
	// the commit names (dsState.pendingTrims).
	for _, s := range states {
		s.extent.RLock()
		err := s.finishTrims(ctx)
		s.extent.RUnlock()
		if err != nil {
			return err
		}
	}
	if err := f.writeBack(ctx, only); err != nil {
		return classify(err)
	}
	if h := testHookWroteBack.Load(); h != nil {
		(*h)()
	}
	epoch := f.space.beginCommit()
	defer f.space.endCommit()

	// Headers of datasets that changed, copy-on-write. A failure leaves the
	// datasets marked dirty, so the next commit writes them again.
	for _, s := range states {
		if err := s.writeHeader(ctx); err != nil {
			return err
		}
	}

	f.mu.Lock()
	for _, s := range states {
		f.mu.catalog[s.path()] = s.catalogEntry()
	}
	entries := make([]format.CatalogEntry, 0, len(f.mu.catalog))
	for _, e := range f.mu.catalog {
		// A dataset created after this commit took its snapshot of the
		// open datasets has no header yet: the next commit writes it.
		if e.HeaderSize == 0 {
			continue
		}
		entries = append(entries, e)
	}
	hasGroups, groups := f.groupPartsLocked(entries)
	f.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })

	// The file and group attributes as they are now: a SetAttr racing
	// this commit lands in this one or the next.
	parts := format.CatalogParts{Attrs: f.attrs.load().encoding(), HasGroups: hasGroups, Groups: groups}
	if err := format.ValidateCatalogParts(parts); err != nil {
		// Too many groups, or too many of their attributes, for one part:
		// written, the catalog would not decode. Nothing is committed;
		// deleting groups or attributes lets the next commit through.
		return classify(err)
	}
	cat := format.EncodeCatalogParts(entries, parts)
	catAddr, err := f.space.alloc(int64(len(cat)))
	if err != nil {
		return err
	}
	if err := f.writeFull(cat, catAddr); err != nil {
		f.space.free(catAddr, int64(len(cat)))
		return err
	}
	old := *f.sb.Load()
	// The closing commit's cache image, written before the sync like the
	// rest of the state it describes (image.go).
	imgRec, err := f.imageCommitting(ctx, epoch, old, cat, catAddr, entries)
	if err != nil {
		return err
	}
	if err := f.sync(); err != nil {
		return err
	}
	sb := old
	sb.Image = imgRec
	sb.Generation++
	sb.CatalogAddr, sb.CatalogSize, sb.CatalogSum = uint64(catAddr), uint64(len(cat)), format.Trailer(cat)
	sb.EOF = uint64(f.space.eof())
	sb.NextDatasetID = nextID
	if err := f.writeFull(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation)); err != nil {
		return err
	}
	if err := f.sync(); err != nil {
		return err
	}
	if old.CatalogSize != 0 {
		f.space.free(int64(old.CatalogAddr), int64(old.CatalogSize))
	}
	f.imageCommitted(imgRec, entries, catAddr)
	f.sb.Store(&sb)
	if err := f.space.commit(epoch); err != nil {
		return fmt.Errorf("%w: allocator: %w", ErrCorrupt, err)
	}
	return nil
}

// drainRetired frees the space the contiguous datasets' earlier commits
// retired, once no request that may have looked it up is running
// (contigLayout.drain). It takes the serializer, so it runs before commitMu.
func (f *File) drainRetired(ctx context.Context) error {
	if f.readOnly {
		return nil
	}
	closing := f.closed.Load()
	f.mu.Lock()
	var ls []*contigLayout
	for _, s := range f.mu.open {
		if l, ok := s.store.(*contigLayout); ok {
			ls = append(ls, l)
		}
	}
	f.mu.Unlock()
	for _, l := range ls {
		if err := l.drain(ctx, closing); err != nil {
			return classify(err)
		}
	}
	return nil
}

// sync syncs the driver; a failure is latched by syncLatch.
func (f *File) sync() error {
	return classify(f.drv.Sync())
}

// syncLatch is the driver every part of a File uses, the cache's chunk
// write-back included. A failed Sync, whoever asked for it, latches the
// file's failed error: the kernel may have dropped the pages it could not
// write (Linux does), so a later successful sync proves nothing and no
// later commit may claim durability. Only reopening clears it.
type syncLatch struct {
	vfd.Driver
	f *File
}

// A read-only file never syncs: it has written nothing, and an fsync of its
// descriptor would wait for (and report the errors of) another writer's
// pages. Its Close used to do that through the cache's final Flush: after a
// NoSync writer it waited 40 ms for the writer's 64 MiB, and a writer's EIO
// would have come back as the reader's.
func (d *syncLatch) Sync() error {
	if d.f.noSync || d.f.readOnly {
		return nil
	}
	err := d.Driver.Sync()
	if err != nil {
		err = fmt.Errorf("sync failed, file needs reopening: %w", err)
		d.f.failed.CompareAndSwap(nil, &err)
	}
	return err
}

// Close commits (unless read-only), drops the file's chunks from the cache
// and releases the file. ctx bounds the final commit and the release of
// the file's chunks; when ctx ends first, the commit fails (the file keeps
// its last committed state) and the file is closed all the same. Close is
// idempotent; a commit error is returned, and the file is closed all the
// same.
func (f *File) Close(ctx context.Context) error {
	f.mu.Lock()
	if f.closed.Swap(true) {
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	f.virt.closeAll() // the virtual datasets' source files

	var err error
	if !f.readOnly {
		f.img.closing.Store(true) // this commit writes the cache image, if asked
		err = f.commit(ctx, nil)
	}
	// The chunks must be released whatever ctx says: the file is closing.
	if uerr := f.cfile.Unregister(context.WithoutCancel(ctx)); uerr != nil && err == nil && !f.readOnly {
		err = classify(uerr)
	}
	if rerr := f.release(); err == nil {
		err = rerr
	}
	forgetScratches() // what the Ps' scratches keep may be this file's
	return classify(err)
}

// release frees the file's resources without committing.
func (f *File) release() error {
	var err error
	if f.cfile != nil {
		// The cache refuses to close over a registered file. Here the file
		// is unregistered already, or failed to open (nothing written), or
		// its Unregister failed and the caller gets that error: drop what
		// could not be written, so the cache (shared or ours) can close.
		_ = f.cfile.Discard(context.Background())
	}
	if f.ownCache {
		err = f.cache.Close()
	}
	if f.ownDrv {
		if cerr := f.drv.Close(); err == nil {
			err = cerr
		}
	}
	return classify(err)
}

// checkOpen is on every read and write, so it reads an atomic rather than
// taking f.mu, which every goroutine using the file would share.
func (f *File) checkOpen() error {
	if f.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Cache returns the shared chunk cache the file uses.
func (f *File) Cache() *cache.Cache { return f.cache }

// ReadOnly reports whether the file was opened read-only.
func (f *File) ReadOnly() bool { return f.readOnly }

// Generation reports the generation of the last committed superblock.
func (f *File) Generation() uint64 { return f.sb.Load().Generation }

// chargeIndex counts a difference of a dataset's index memory inside the
// shared cache's budget: index blocks stay in memory, so the
// cache evicts chunks to make room for them. File.Close's cache unregister
// releases whatever the file's indexes still hold.
func (f *File) chargeIndex(delta int64) {
	if f.cfile != nil {
		f.cfile.ChargeMetadata(delta)
	}
}

// shedIndexes is the file's metadata shedder (cache.File.SetMetadataShedder):
// under memory pressure the open datasets' clean index blocks and kept
// shard indexes go, to be read again on next use; then the changed ones are written out and go too
// (writeIndexes). It waits at most for a commit's index flush, which never
// waits for the cache.
func (f *File) shedIndexes() {
	f.mu.Lock()
	states := make([]*dsState, 0, len(f.mu.open))
	for _, s := range f.mu.open {
		states = append(states, s)
	}
	f.mu.Unlock()
	for _, s := range states {
		if x, ok := s.store.chunkIndex(); ok {
			x.dropClean()
		}
		if sh := s.shards(); sh != nil {
			sh.dropKept()
		}
	}
	f.writeIndexes(states)
}

// writeIndexes writes the changed index blocks of states the way a commit's
// index flush does, and then lets them go like clean ones.
//
// Why: a block changed since the last commit cannot simply be dropped (a
// later lookup would read the committed one), so a write burst on a cache
// smaller than its index kept every changed block in memory, past the
// cache's limit. HDF5's metadata cache writes a dirty entry it evicts; here
// the index's own Flush does it, copy-on-write: the blocks go to space the
// last committed state does not reference, and the blocks they replace are
// freed only for reuse after the next commit (index.Store, alloc's
// pending state). A crash before that commit therefore finds the committed
// state whole; the blocks written here are then unreferenced space. The
// dataset stays marked changed (dsState.dirty), so the next commit records
// the index's new root in the header as usual; its index flush finds
// nothing left to write for the blocks written here.
//
// Only when no commit runs: a commit's index flush frees what it replaces
// under the commit's epoch, and a flush racing it from here could free
// blocks that commit is about to name. TryLock, not Lock: the commit in
// progress may itself be waiting for the cache space the caller wants,
// and it writes every changed block anyway. Holding commitMu across the
// writes keeps the lock order of a commit (commitMu, then an index's
// writers lock) and makes a Flush that starts meanwhile wait for them, as
// it would for another commit. Closed, read-only and failed files write
// nothing.
//
// A write that fails leaves the index as it was (index.Index.Flush aborts,
// keeping the blocks changed, and the space it took is free again): nothing
// is lost and the memory stays charged. There is no caller to hand the
// error to; the next commit writes the same blocks and reports what the
// device says then.
func (f *File) writeIndexes(states []*dsState) {
	if f.readOnly || !f.commitMu.TryLock() {
		return
	}
	defer f.commitMu.Unlock()
	if f.closed.Load() || f.failed.Load() != nil {
		return
	}
	ctx := context.Background()
	for _, s := range states {
		x, ok := s.store.chunkIndex()
		if !ok {
			continue
		}
		before := x.chargedBytes()
		if _, err := x.flush(ctx); err == nil {
			x.dropClean()
			if d := before - x.chargedBytes(); d > 0 {
				f.indexShedBytes.Add(d)
			}
		}
	}
}

// datasetNames lists the catalog names of the file's datasets, sorted
// (canonical paths without the leading '/', and older files' flat names).
func (f *File) datasetNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.mu.catalog))
	for n := range f.mu.catalog {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
