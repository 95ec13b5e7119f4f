package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/vfd"
	"github.com/scc-dev/scc/vfd/s3"
)

// virtualSources are the source files a File's virtual datasets opened:
// kept open, up to VirtualOptions.MaxSourceFiles, least recently used
// closed first; a file a read is using stays open. Their chunks live in
// the virtual file's cache.
//
// A follower reads what a fresh open of its file would read. So each
// Refresh looks at every source file again: one that is gone, replaced
// (another file now at its path) or that fails to refresh is let go and
// opened afresh at the next look, and a source dataset deleted or moved
// away is looked up again by name. A source that fails fails the reads
// that reach it, never the Refresh nor the other sources.
//
// Lock order: mu is a leaf for bookkeeping; opening a file or a dataset
// happens under the entry's own mutex (srcFile.mu), never under mu.
type virtualSources struct {
	mu    sync.Mutex
	tick  uint64
	files map[string]*srcFile
}

// srcFile is one source file, by the name the mappings resolve to.
type srcFile struct {
	name string
	self bool   // the mappings name the File's own file (".", or its path)
	refs int    // guarded by virtualSources.mu
	used uint64 // guarded by virtualSources.mu
	gone bool   // guarded by virtualSources.mu: closed
	// opened is set while the file is open: only open files count
	// against MaxSourceFiles (a missing one holds nothing but the note).
	opened atomic.Bool

	mu      sync.Mutex // guards the fields below; held across opens
	h       *srcOpen   // the current opening; nil until the next look opens it
	missing bool       // the file did not exist at the last look
	nods    map[string]bool
}

// srcOpen is one opening of a source file: the File and the source
// datasets opened in it. A Refresh that lets the file go retires the
// opening; reads still using it finish on it, and the last one closes it.
type srcOpen struct {
	f       *File
	self    bool // f is the virtual datasets' own File, found by identity
	ds      map[string]srcDataset
	stale   []*Dataset // handles replaced by a new look, closed once unused
	users   int
	retired bool
}

// srcDataset is an open source dataset and the path it had when opened:
// a handle whose path changed (moved, by the writer or a Refresh) or that
// was deleted no longer holds what the name names.
type srcDataset struct {
	d    *Dataset
	path string
}

// sourceLocation resolves a mapping's file name; self when it names the
// File's own file.
func (f *File) sourceLocation(file string) (name string, self bool, err error) {
	if file == "" || file == "." {
		return "", true, nil
	}
	if strings.Contains(file, "://") {
		return file, false, nil
	}
	if filepath.IsAbs(file) {
		return file, f.isOwnPath(file), nil
	}
	base := f.vopts.Base
	if base == "" {
		if f.path == "" {
			if f.vopts.Open != nil {
				return file, false, nil
			}
			return "", false, fmt.Errorf("%w: relative source file %q of a file opened on a driver needs VirtualOptions.Base or Open", ErrInvalid, file)
		}
		base = filepath.Dir(f.path)
	}
	if strings.Contains(base, "://") {
		return strings.TrimSuffix(base, "/") + "/" + file, false, nil
	}
	p := filepath.Join(base, file)
	return p, f.isOwnPath(p), nil
}

// isOwnPath reports whether p is the path the File was opened at, so
// that a virtual dataset naming its own file by path reads it as ".":
// opening it again would give a second, nested File following the first,
// and one more each time that one refreshed its own virtual datasets.
// Another spelling of the same file (a link) is found by identity when
// it is opened (srcFile.open).
func (f *File) isOwnPath(p string) bool {
	if f.path == "" {
		return false
	}
	a, b := p, f.path
	if filepath.IsAbs(a) != filepath.IsAbs(b) {
		var err error
		if a, err = filepath.Abs(a); err != nil {
			return false
		}
		if b, err = filepath.Abs(b); err != nil {
			return false
		}
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// acquire returns the source dataset dset of file, opening what is not
// open yet; nil (no error) when the file or the dataset does not exist,
// or the file is not an scc file yet (being created). release must be
// called when the caller is done with a non-nil one.
func (vs *virtualSources) acquire(ctx context.Context, f *File, file, dset string) (*Dataset, func(), error) {
	name, self, err := f.sourceLocation(file)
	if err != nil {
		return nil, nil, err
	}
	vs.mu.Lock()
	if vs.files == nil {
		vs.files = make(map[string]*srcFile)
	}
	key := name
	if self {
		key = "\x00self"
	}
	sf := vs.files[key]
	if sf == nil {
		sf = &srcFile{name: name, self: self, nods: make(map[string]bool)}
		vs.files[key] = sf
	}
	sf.refs++
	vs.tick++
	sf.used = vs.tick
	vs.mu.Unlock()
	ds, h, err := sf.open(ctx, f, dset)
	if ds == nil || err != nil {
		// Released after sf.mu: release may close sf.
		vs.release(f, sf)
		return nil, nil, err
	}
	return ds, func() { sf.done(h); vs.release(f, sf) }, nil
}

// open opens the file (once per opening) and the dataset dset in it;
// nil, nil when either does not exist. The opening returned counts the
// caller as a user until done.
func (sf *srcFile) open(ctx context.Context, f *File, dset string) (*Dataset, *srcOpen, error) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.h == nil && !sf.missing {
		if sf.self {
			sf.h = &srcOpen{f: f, self: true, ds: make(map[string]srcDataset)}
		} else {
			sfile, err := openSource(ctx, f, sf.name)
			switch {
			case errors.Is(err, ErrNotFound), errors.Is(err, errUnborn):
				// A file being created, with no superblock yet, is
				// not a file yet: a missing source until it is.
				sf.missing = true
			case err != nil:
				return nil, nil, err
			case sameFile(sfile, f):
				_ = sfile.Close(ctx)
				sf.h = &srcOpen{f: f, self: true, ds: make(map[string]srcDataset)}
			default:
				sf.h = &srcOpen{f: sfile, ds: make(map[string]srcDataset)}
				sf.opened.Store(true)
			}
		}
	}
	h := sf.h
	if h == nil || sf.nods[dset] {
		return nil, nil, nil
	}
	sd, ok := h.ds[dset]
	if ok && (sd.d.s.deleted.Load() || sd.d.Path() != sd.path) {
		// Deleted or moved away, and perhaps another dataset moved or
		// created at the name since: the name is looked up again.
		delete(h.ds, dset)
		h.stale = append(h.stale, sd.d)
		ok = false
	}
	if !ok {
		d, err := h.f.openDataset(ctx, dset, false)
		switch {
		case errors.Is(err, ErrNotFound):
			// Another file's missing dataset is remembered until
			// Refresh; the File's own catalog is current, and a
			// dataset created in it later is read at once.
			if !h.self {
				sf.nods[dset] = true
			}
			h.closeStale()
			return nil, nil, nil
		case err != nil:
			return nil, nil, err
		}
		sd = srcDataset{d: d, path: d.Path()}
		h.ds[dset] = sd
	}
	h.users++
	return sd.d, h, nil
}

// openSource opens a source file read-only, sharing the virtual file's
// cache.
func openSource(ctx context.Context, f *File, name string) (*File, error) {
	opts := &Options{Cache: f.cache, ReadOnly: true, S3: f.s3opts, Virtual: VirtualOptions{Open: f.vopts.Open, OpenURL: f.vopts.OpenURL}}
	switch {
	case f.vopts.Open != nil:
		return f.vopts.Open(ctx, name, opts)
	case !strings.Contains(name, "://"):
		return Open(ctx, name, opts)
	case f.vopts.OpenURL != nil:
		return f.vopts.OpenURL(ctx, name, opts)
	case s3.IsURL(name):
		return Open(ctx, name, opts)
	}
	return nil, fmt.Errorf("%w: source file %s: a URL this File cannot open (s3:// opens with Options.S3; VirtualOptions.OpenURL opens others)", ErrIO, name)
}

// fileInfo is the identity of the operating-system file under f, if it
// is one.
func (f *File) fileInfo() (os.FileInfo, bool) {
	var drv vfd.Driver = f.drv
	if l, ok := drv.(*syncLatch); ok {
		drv = l.Driver
	}
	vf, ok := drv.(*vfd.File)
	if !ok {
		return nil, false
	}
	fi, err := vf.Stat()
	return fi, err == nil
}

// sameFile reports whether a and b are opens of one operating-system file.
func sameFile(a, b *File) bool {
	x, ok := a.fileInfo()
	if !ok {
		return false
	}
	y, ok := b.fileInfo()
	return ok && os.SameFile(x, y)
}

// replacedOnDisk reports whether the file at the path sfile was opened at
// is no longer the one it has open: deleted, moved away, or replaced (a
// writer that created it again). sfile then follows a file nobody writes
// or will find.
func replacedOnDisk(sfile *File) bool {
	if sfile.path == "" {
		return false
	}
	cur, ok := sfile.fileInfo()
	if !ok {
		return false
	}
	fi, err := os.Stat(sfile.path)
	return err != nil || !os.SameFile(fi, cur)
}

// done ends a use of the opening h: the last use of a retired one closes
// it, and the handles the looks replaced go once nobody reads them.
func (sf *srcFile) done(h *srcOpen) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	h.users--
	if h.users > 0 {
		return
	}
	if h.retired {
		h.close()
		return
	}
	h.closeStale()
}

// retire lets the current opening go: the next look opens the file
// afresh. Caller holds sf.mu.
func (sf *srcFile) retire() {
	h := sf.h
	sf.h = nil
	sf.opened.Store(false)
	if h == nil {
		return
	}
	h.retired = true
	if h.users == 0 {
		h.close()
	}
}

// closeStale closes the handles replaced by a new look, when nobody
// reads through the opening. Caller holds the srcFile's mu.
func (h *srcOpen) closeStale() {
	if h.users > 0 {
		return
	}
	for _, d := range h.stale {
		_ = d.Close(context.Background())
	}
	h.stale = nil
}

// close closes the opening's datasets and, unless it is the File's own,
// its file. Caller holds the srcFile's mu.
func (h *srcOpen) close() {
	for _, sd := range h.ds {
		_ = sd.d.Close(context.Background())
	}
	for _, d := range h.stale {
		_ = d.Close(context.Background())
	}
	h.ds, h.stale = nil, nil
	if !h.self && h.f != nil {
		_ = h.f.Close(context.Background())
	}
	h.f = nil
}

// release drops a reference and closes the least recently used idle
// files beyond the bound.
func (vs *virtualSources) release(f *File, sf *srcFile) {
	limit := f.vopts.MaxSourceFiles
	if limit <= 0 {
		limit = 64
	}
	vs.mu.Lock()
	sf.refs--
	var victims []*srcFile
	for {
		open := 0
		var lru *srcFile
		for _, x := range vs.files {
			if !x.opened.Load() || x.self {
				continue
			}
			open++
			if x.refs == 0 && (lru == nil || x.used < lru.used) {
				lru = x
			}
		}
		if open <= limit {
			break
		}
		if lru == nil {
			break // every file is in use: over the bound until released
		}
		for k, x := range vs.files {
			if x == lru {
				delete(vs.files, k)
			}
		}
		lru.gone = true
		victims = append(victims, lru)
	}
	vs.mu.Unlock()
	for _, v := range victims {
		v.close()
	}
}

// close closes a source file that left the table (nobody holds it, or
// the File is closing).
func (sf *srcFile) close() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if h := sf.h; h != nil {
		sf.h = nil
		sf.opened.Store(false)
		h.retired = true
		h.close()
	}
}

// refresh looks at every source file again (see virtualSources) and
// forgets which files and datasets were missing, so that the next look
// finds those that appeared since.
func (vs *virtualSources) refresh(ctx context.Context, f *File) {
	vs.mu.Lock()
	files := make([]*srcFile, 0, len(vs.files))
	for _, sf := range vs.files {
		sf.refs++ // kept open while refreshed
		files = append(files, sf)
	}
	vs.mu.Unlock()
	for _, sf := range files {
		sf.refresh(ctx, f)
		vs.release(f, sf)
	}
}

// refresh is virtualSources.refresh for one file.
func (sf *srcFile) refresh(ctx context.Context, f *File) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.missing = false
	clear(sf.nods)
	h := sf.h
	if h == nil || h.self {
		return // the File's own state is refreshed by its own Refresh
	}
	if replacedOnDisk(h.f) {
		sf.retire()
		return
	}
	// The source's own state only: its virtual datasets, opened as
	// sources that every read refuses, are not followed (following them
	// would open their sources, and theirs, at every Refresh).
	err := h.f.refreshFile(ctx)
	if err == nil {
		// Cut short under its committed state (truncated): damaged, as
		// a fresh open would find; the cached chunks must not hide it.
		if n, serr := h.f.drv.Size(); serr != nil || uint64(n) < h.f.sb.Load().EOF {
			err = ErrCorrupt
		}
	}
	if err != nil {
		// Replaced under a driver that cannot tell (file id changed),
		// damaged, or a writer outrunning the refresh: the next look
		// opens the file afresh, as a fresh open would, and its error,
		// if any, is the error of the reads that reach this source.
		sf.retire()
	}
}

// closeAll closes every source file (File.Close).
func (vs *virtualSources) closeAll() {
	vs.mu.Lock()
	files := vs.files
	vs.files = nil
	vs.mu.Unlock()
	for _, sf := range files {
		sf.close()
	}
}
