package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/format"
	"github.com/scc-dev/scc/engine/index"
)

// Single writer, many readers (seed 003 §VII, §XVIII).
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
func (f *File) Refresh(ctx context.Context) error {
	if err := f.checkOpen(); err != nil {
		return err
	}
	if !f.readOnly {
		return nil
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
	// Never backwards: a slot torn by the writer's superblock write
	// decodes as invalid, and PickSuperblock then returns the other,
	// older slot. Adopting it would put the reader on a state whose space
	// the writer may already reuse.
	if sb.Generation <= f.sb.Load().Generation {
		return nil
	}
	if sb.FileID != f.sb.Load().FileID {
		return fmt.Errorf("%w: the file was replaced (file id changed)", ErrCorrupt)
	}
	cat, attrs, err := readCatalog(f.drv, sb)
	if err != nil {
		return err
	}
	// Read every changed header of an open dataset before changing
	// anything, so a stale block aborts the refresh cleanly.
	type change struct {
		s   *dsState
		e   format.CatalogEntry
		hdr format.DatasetHeader
	}
	var changes []change
	f.mu.Lock()
	open := make(map[string]*dsState, len(f.mu.open))
	for n, s := range f.mu.open {
		open[n] = s
	}
	f.mu.Unlock()
	for _, e := range cat {
		s, ok := open[e.Name]
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
		if hdr.ID != s.id || hdr.Name != s.name || !equal(hdr.Chunk, s.chunk) {
			return fmt.Errorf("%w: dataset %q changed identity", ErrCorrupt, e.Name)
		}
		changes = append(changes, change{s, e, hdr})
	}
	for _, c := range changes {
		if err := c.s.adopt(ctx, c.e, c.hdr); err != nil {
			return err
		}
	}
	f.mu.Lock()
	for _, e := range cat {
		f.mu.catalog[e.Name] = e
	}
	f.mu.nextID = sb.NextDatasetID
	f.mu.Unlock()
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
// Its I/O is drained first (the extent lock), and its cached chunks are
// dropped: the writer may have rewritten any of them.
func (s *dsState) adopt(ctx context.Context, e format.CatalogEntry, hdr format.DatasetHeader) error {
	attrs, err := decodeAttrs(hdr.Attrs)
	if err != nil {
		return fmt.Errorf("dataset %q: %w", hdr.Name, err)
	}
	release, err := s.f.ser.AcquireExclusive(ctx, s.id)
	if err != nil {
		return classify(err)
	}
	defer release()
	s.extent.Lock()
	defer s.extent.Unlock()
	if cds, err := s.cacheDataset(); err == nil {
		if err := cds.Flush(ctx, true); err != nil {
			return classify(err)
		}
	} else if err := s.dropDetached(ctx); err != nil {
		return err
	}
	if s.contig != nil {
		if err := s.contig.adopt(hdr.LayoutParams); err != nil {
			return err
		}
	} else {
		s.idx.reset(index.Kind(hdr.IndexKind), geometry(hdr.Shape, hdr.MaxShape, hdr.Chunk), hdr.IndexRoot)
	}
	s.mu.Lock()
	s.mu.shape = clone(hdr.Shape)
	s.mu.headerAddr, s.mu.headerSize, s.mu.headerSum = e.HeaderAddr, e.HeaderSize, e.HeaderSum
	s.mu.header = format.EncodeDatasetHeader(hdr)
	s.mu.Unlock()
	s.attrs.set.Store(attrs)
	return nil
}

// dropDetached drops the chunks a dataset with no open handle left cached
// for a warm reopen (cache.Dataset.Unregister keeps them): they belong to
// the state being replaced, and a reopen would otherwise find them. A
// read-only file has no dirty chunks, so this does no I/O; s.mu keeps an
// acquire from registering the dataset meanwhile.
func (s *dsState) dropDetached(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cds != nil {
		return nil
	}
	cds, err := s.f.cfile.RegisterDataset(s.id, s.layout, cache.DatasetOptions{MinBytes: s.minCache})
	if err != nil {
		return classify(err)
	}
	err = cds.Flush(ctx, true)
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

// newerOnDisk reports whether a read-only file's writer has committed since
// this File last read the superblock.
func (f *File) newerOnDisk() bool {
	sb, err := readSuperblock(f.drv)
	if err != nil {
		return false
	}
	return sb.Generation > f.sb.Load().Generation
}

// headerImage returns the canonical encoding of the header the state holds.
func (s *dsState) headerImage() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.header
}
