package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
)

// Single writer, many readers (EA index §VII, §XVIII).
//
// A writer commits copy-on-write: chunks, index blocks (children before
// parents: data block, super block, index block), the dataset header and the
// catalog all go to new space, then a sync, then the superblock, then a
// sync. A reader that opened the file read-only — another process, or
// another File in this one — therefore always sees the consistent state of
// the superblock it read, for as long as the writer has not reused that
// state's space. Space is reused only after a later commit, so a reader
// that falls behind may read a block that now holds something else: its
// checksum fails. The reader then checks whether a newer superblock exists;
// if so it refreshes and retries, otherwise the damage is real and the
// error stands.

// refreshRetries bounds how often a read or a refresh chases a writer that
// keeps reusing the space it is reading; past it the caller gets ErrStale.
const refreshRetries = 32

// Refresh makes a read-only File see the writer's latest commit: new
// datasets, new extents, new chunks. Datasets whose header changed drop
// their cached chunks. On a writable File it does nothing.
//
// A block that fails its checksum while the writer has committed again
// since the superblock this refresh read is a race, not damage: Refresh
// starts over from the newer superblock. If the writer keeps winning that
// race refreshRetries times, Refresh returns ErrStale (retry later); it
// returns ErrCorrupt only when the superblock it read is still the newest,
// that is, when the committed state itself is damaged.
//
// The File's open virtual datasets then refresh their source files and
// evaluate their extents again (on a writable File too: the sources have
// writers of their own), so that they read what a fresh open would: a
// source file deleted, moved, replaced or not yet created, a source
// dataset deleted or moved. A source that fails fails the reads of the
// virtual datasets that need it, not the Refresh.
func (f *File) Refresh(ctx context.Context) error {
	if err := f.refreshFile(ctx); err != nil {
		return err
	}
	return f.refreshVirtual(ctx)
}

func (f *File) refreshFile(ctx context.Context) error {
	if err := f.checkOpen(); err != nil {
		return err
	}
	if !f.readOnly {
		return nil
	}
	if f.path != "" {
		// Create puts a new file at the path (a new inode), which this
		// File, holding the old one, would never see: it says so, as it
		// does for a file rewritten in place (a new file id). A path
		// with nothing at it is left alone: the file was deleted, and
		// what this File reads is still the file it opened.
		if cur, ok := f.fileInfo(); ok {
			if fi, err := os.Stat(f.path); err == nil && !os.SameFile(fi, cur) {
				return fmt.Errorf("%w: the file was replaced (another file is at %s)", ErrCorrupt, f.path)
			}
		}
	}
	var err error
	for try := 0; try < refreshRetries; try++ {
		var gen uint64
		if gen, err = f.refreshOnce(ctx); err == nil || !errors.Is(err, ErrCorrupt) {
			return classify(err)
		}
		if cur, rerr := readSuperblock(f.drv); rerr != nil {
			return rerr
		} else if cur.Generation == gen {
			return err // no race: the committed state is damaged
		}
		backoff(ctx, try)
	}
	return fmt.Errorf("%w: refresh: %v", ErrStale, err)
}

// follow runs op, one read-side call of a dataset of f, the way every
// read-side call runs on a read-only File: a block that fails its checksum
// while the writer has committed since is most likely space the writer
// reused under this File, not damage, so follow refreshes and runs op
// again; past refreshRetries it returns ErrStale. Every layout's reads
// (Read, ReadVlen, DefinedElements, ReadDefined, the raw chunk and storage
// queries) go through it, so none of them reports ErrCorrupt for an intact
// file that one of them would have answered. op must leave no partial
// result behind when it fails: it runs again from the start.
//
// The race is judged against the generation op ran at, taken before it
// starts, not the File's generation when it failed: another goroutine's
// Refresh may have moved the File on meanwhile, and the superblock on disk
// is then no newer than the File although it is newer than what op read.
func (f *File) follow(ctx context.Context, op func() error) error {
	gen := f.Generation()
	return f.followAfter(ctx, gen, op(), op)
}

// followAfter is follow for a caller that ran op's first try itself,
// at generation gen, with result err: Dataset.Read, whose resident reads
// then cost no closure and no frame of follow's. It runs the retries
// follow would.
func (f *File) followAfter(ctx context.Context, gen uint64, err error, op func() error) error {
	if err == nil {
		return nil
	}
	for try := 0; ; try++ {
		if try > 0 {
			gen = f.Generation()
			err = op()
		}
		if h := testHookFollowFailed.Load(); h != nil && err != nil {
			(*h)()
		}
		if try > 0 && errors.Is(err, ErrOutOfRange) {
			// The call got past its range checks on the first try and
			// failed on reused space; the refresh since adopted a
			// smaller extent. The caller asked for something that was
			// there: not its mistake, but a state that moved on (%v
			// keeps ErrOutOfRange out of the chain).
			return fmt.Errorf("%w: the extent shrank under the read while it followed the writer: %v", ErrStale, err)
		}
		if !f.readOnly || !errors.Is(err, ErrCorrupt) || !f.newerOnDisk(gen) {
			return err
		}
		if try == refreshRetries {
			// Still racing the writer: say so, and not as damage (%v
			// keeps ErrCorrupt out of the chain).
			return fmt.Errorf("%w: read: %v", ErrStale, err)
		}
		// The File's own state only: op may be a virtual dataset's
		// extent evaluation, which Refresh's virtual half would wait for.
		if rerr := f.refreshFile(ctx); rerr != nil {
			return rerr
		}
		backoff(ctx, try)
	}
}

// backoff yields a little more on each retry, so a reader chasing a writer
// lets the writer finish its commit.
func backoff(ctx context.Context, try int) {
	if try < 2 {
		return
	}
	t := time.NewTimer(time.Duration(min(try, 10)) * 100 * time.Microsecond)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
}

// refreshOnce adopts the newest superblock; it returns the generation it
// read, so that Refresh can tell a race from damage.
func (f *File) refreshOnce(ctx context.Context) (uint64, error) {
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	sb, err := readSuperblock(f.drv)
	if err != nil {
		return 0, err
	}
	return sb.Generation, f.adoptLocked(ctx, sb)
}

// adoptLocked switches the File to the committed state sb names. Caller
// holds commitMu.
func (f *File) adoptLocked(ctx context.Context, sb format.Superblock) error {
	// The file's identity first: a file created anew at the path (or
	// rewritten in place) starts again at a low generation, and would
	// otherwise pass for an older state below, the File following its
	// old contents without a word.
	if sb.FileID != f.sb.Load().FileID {
		return fmt.Errorf("%w: the file was replaced (file id changed)", ErrCorrupt)
	}
	// Never backwards: a slot torn by the writer's superblock write
	// decodes as invalid, and PickSuperblock then returns the other,
	// older slot. Adopting it would put the reader on a state whose space
	// the writer may already reuse.
	if sb.Generation <= f.sb.Load().Generation {
		return nil
	}
	cat, parts, attrs, err := readCatalog(f.drv, sb)
	if err != nil {
		return err
	}
	// Read every changed header of an open dataset before changing
	// anything, so a stale block aborts the refresh cleanly.
	type change struct {
		s     *dsState
		e     format.CatalogEntry
		hdr   format.DatasetHeader
		attrs *attrSet
	}
	var changes []change
	f.mu.Lock()
	// By ID, not name: a dataset the writer moved keeps its ID, and its
	// open handles follow it.
	open := make(map[uint64]*dsState, len(f.mu.open))
	for _, s := range f.mu.open {
		open[s.id] = s
	}
	f.mu.Unlock()
	if h := testHookAdoptListed.Load(); h != nil {
		(*h)()
	}
	for _, e := range cat {
		s, ok := open[e.ID]
		if !ok {
			continue
		}
		// A new header may land where an old one was freed, and an
		// equal checksum does not prove an equal header: the header's
		// CRC32C is blind to its IndexRoot, which ends with its own
		// CRC32C (a CRC over a record that carries its own CRC of the same
		// polynomial does not depend on that record's content). So a
		// header at the same address, of the same size and checksum, is
		// read and compared; only a different address, size or checksum
		// proves a change without reading.
		cur := s.catalogEntry()
		hdr, err := readHeader(f.drv, e, sb.EOF)
		if err != nil {
			return err
		}
		if cur == e && bytes.Equal(format.EncodeDatasetHeader(hdr), s.headerImage()) {
			continue
		}
		if hdr.ID != s.id || hdr.Name != e.Name || !equal(hdr.Chunk, s.chunk) {
			return fmt.Errorf("%w: dataset %q changed identity", ErrCorrupt, e.Name)
		}
		// Everything a header can fail on is checked here too, so that
		// no dataset switches to the new state unless all of them can.
		attrs, err := decodeAttrs(hdr.Attrs)
		if err != nil {
			return fmt.Errorf("dataset %q: %w", hdr.Name, err)
		}
		if err := s.store.checkAdopt(hdr); err != nil {
			return fmt.Errorf("dataset %q: %w", hdr.Name, err)
		}
		changes = append(changes, change{s, e, hdr, attrs})
	}
	// The headers are sb's only if the writer had not committed again
	// when they were read: a header it wrote two commits later at the
	// address of one of sb's, changed only in its index root, passes the
	// checksum sb's catalog names (see above), and adopting it would put
	// a later generation's index under sb's. The writer writes the next
	// superblock before it reuses any of sb's space, so a superblock
	// still at sb's generation proves every header read so far. Otherwise
	// this is the race Refresh retries from the newer superblock.
	if len(changes) > 0 {
		if cur, err := readSuperblock(f.drv); err != nil {
			return err
		} else if cur.Generation > sb.Generation {
			return fmt.Errorf("%w: the writer committed generation %d while the headers of generation %d were read", ErrCorrupt, cur.Generation, sb.Generation)
		}
	}
	for _, g := range parts.Groups {
		if _, err := decodeAttrs(g.Attrs); err != nil {
			return fmt.Errorf("group %q: %w", g.Path, err)
		}
	}
	for _, c := range changes {
		if err := c.s.adopt(ctx, c.e, c.hdr, c.attrs); err != nil {
			return err
		}
	}
	f.mu.Lock()
	// The catalog is replaced whole, so that a name the writer deleted or
	// moved away goes; an open dataset missing from it was deleted.
	f.mu.catalog = make(map[string]format.CatalogEntry, len(cat))
	ids := make(map[uint64]string, len(cat))
	for _, e := range cat {
		f.mu.catalog[e.Name] = e
		ids[e.ID] = e.Name
	}
	for n, s := range f.mu.open {
		p, ok := ids[s.id]
		switch {
		case !ok:
			s.deleted.Store(true)
			delete(f.mu.open, n)
		case p != n:
			delete(f.mu.open, n)
			s.setPath(p)
		}
	}
	for _, s := range open {
		if p, ok := ids[s.id]; ok && f.mu.open[p] == nil {
			f.mu.open[p] = s
		}
	}
	gerr := f.setGroupsLocked(cat, parts)
	f.mu.nextID = sb.NextDatasetID
	f.mu.Unlock()
	if gerr != nil {
		return gerr
	}
	f.attrs.set.Store(attrs)
	// A cache image's prefetched entries describe the generation it was
	// written for. A header among them could pass for a newer header at
	// the same address (the checksum is blind to its IndexRoot, see
	// above), so they go with the state they belong to.
	f.cfile.DropPrefetched()
	f.sb.Store(&sb)
	return nil
}

// adopt switches a dataset of a read-only file to a newer committed header.
// Its I/O is drained first (the extent lock and the serializer), and every
// chunk the cache holds for it is dropped: the writer may have rewritten
// any of them.
//
// This is the one rule every layout's cached state obeys, whatever a
// chunk is in memory (a dense chunk, a contiguous piece, a sparse chunk's
// runs and values, a variable-length chunk's heap): a chunk the cache
// holds was loaded through the committed state the dataset held then, and
// the state changes only here, with the chunks of the old one dropped.
// What a layout keeps outside its chunks is either that state itself (the
// index, reset here; a contiguous extent and its piece checksums, from
// the new header) or keyed by the stored version it was read from (a
// sparse dataset's selection view), which, like a chunk frame, is verified
// against the checksum the index names and never names another version.
//
// The old chunks go twice: once before anything changes, so that a failure
// (ctx ended) leaves the dataset as it was, and once after the switch,
// without ctx, for chunks background work loaded or held meanwhile
// (cache.Dataset.Invalidate).
func (s *dsState) adopt(ctx context.Context, e format.CatalogEntry, hdr format.DatasetHeader, attrs *attrSet) error {
	release, err := s.f.ser.AcquireExclusive(ctx, s.id)
	if err != nil {
		return classify(err)
	}
	defer release()
	s.extent.Lock()
	defer s.extent.Unlock()
	if err := s.invalidate(ctx); err != nil {
		return err
	}
	if err := s.store.adopt(hdr); err != nil {
		return err // checked by adoptLocked (checkAdopt): cannot happen
	}
	s.mu.Lock()
	s.mu.shape = clone(hdr.Shape)
	s.mu.headerAddr, s.mu.headerSize, s.mu.headerSum = e.HeaderAddr, e.HeaderSize, e.HeaderSum
	s.mu.header = format.EncodeDatasetHeader(hdr)
	s.mu.Unlock()
	s.attrs.set.Store(attrs)
	if err := s.invalidate(context.WithoutCancel(ctx)); err != nil {
		// Chunks of the old state may still be cached: forget the header,
		// so that the next Refresh adopts again and drops them.
		s.mu.Lock()
		s.mu.header = nil
		s.mu.Unlock()
		return err
	}
	return nil
}

// invalidate drops every chunk the cache holds for the dataset, whether a
// handle has it registered or it is detached: cache.Dataset.Unregister
// keeps the chunks of a dataset whose last handle closed, for a warm
// reopen, and a reopen would find them. A read-only file has no dirty
// chunks, so this does no I/O.
func (s *dsState) invalidate(ctx context.Context) error {
	cs, err := s.chunks()
	if err != nil {
		return nil // a virtual dataset: nothing cached
	}
	s.mu.Lock()
	for s.mu.refs == 0 && s.mu.closing != nil {
		// The last handle's Close is still unregistering the dataset; the
		// cache refuses a second registration of its id until then (as
		// acquire waits).
		ch := s.mu.closing
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	if cds := s.mu.cds; cds != nil {
		s.mu.Unlock()
		return classify(cds.Invalidate(ctx))
	}
	// Detached: registered for the drop and released again, holding s.mu
	// so that an acquire cannot register the dataset meanwhile.
	defer s.mu.Unlock()
	cds, err := s.f.cfile.RegisterDataset(s.id, cs, cache.DatasetOptions{MinBytes: s.minCache})
	if err != nil {
		return classify(err)
	}
	err = cds.Invalidate(ctx)
	if uerr := cds.Unregister(ctx); err == nil {
		err = uerr
	}
	return classify(err)
}

// Refresh is File.Refresh for the dataset's file: afterwards Shape reports
// the writer's latest committed extent.
func (d *Dataset) Refresh(ctx context.Context) error {
	if d.closed.Load() {
		return ErrClosed
	}
	return d.s.f.Refresh(ctx)
}

// newerOnDisk reports whether a read-only file's writer has committed a
// generation after gen.
func (f *File) newerOnDisk(gen uint64) bool {
	sb, err := readSuperblock(f.drv)
	if err != nil {
		return false
	}
	return sb.Generation > gen
}

// testHookAdoptListed and testHookOpenLoaded, when set (tests only), run
// after a Refresh listed the open datasets it adopts and after
// OpenDataset loaded a state it has not installed yet:
// TestOpenDuringRefresh interleaves the two there.
var (
	testHookAdoptListed atomic.Pointer[func()]
	testHookOpenLoaded  atomic.Pointer[func()]
)

// testHookFollowFailed, when set (tests only), runs after a read-side call
// failed, before follow decides whether to retry it:
// TestFollowRetryAfterOtherRefresh refreshes the File from there.
var testHookFollowFailed atomic.Pointer[func()]

// testHookWroteBack, when set (tests only), runs in a commit after the
// dirty chunks were written back and before any header is written.
var testHookWroteBack atomic.Pointer[func()]

// testHookShrinkPrepared, when set (tests only), runs in SetExtent after
// the cache prepared a shrink and the index was cut, before the cache
// applies the shrink.
var testHookShrinkPrepared atomic.Pointer[func()]

// headerImage returns the canonical encoding of the header the state holds.
func (s *dsState) headerImage() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.header
}
