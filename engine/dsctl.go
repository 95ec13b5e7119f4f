package engine

import (
	"context"
	"errors"
	"fmt"
)

// DatasetOptions are a dataset's access options, chosen at open (the SCC
// internal API's dataset access properties) rather than stored. The zero
// value keeps what the dataset was created with.
//
// Options belong to the dataset, not to one handle: every handle of a
// dataset shares its cache registration, so an open with options sets them
// for all its handles, replacing what an earlier open set, until the last
// handle closes; the next open starts from the stored values again. A
// virtual dataset has no registration of its own (its reads go through its
// sources'), so the options change nothing for it.
type DatasetOptions struct {
	// CacheMinBytes is the dataset's minimum reservation in the shared
	// cache: 0 keeps the value stored at creation (DatasetSpec
	// CacheMinBytes), -1 means none, a positive value is bytes.
	CacheMinBytes int64
	// Prefetch turns the cache's prefetcher on or off for this dataset.
	// PrefetchOn needs a cache configured with cache.Config.Prefetch.
	Prefetch PrefetchMode
}

// PrefetchMode is DatasetOptions.Prefetch.
type PrefetchMode uint8

const (
	// PrefetchDefault follows the cache's Config.Prefetch.
	PrefetchDefault PrefetchMode = iota
	// PrefetchOff never prefetches this dataset's chunks.
	PrefetchOff
	// PrefetchOn prefetches ahead of this dataset's sequential reads.
	PrefetchOn
)

// Validate reports options no dataset can take (ErrInvalid).
func (o DatasetOptions) Validate() error {
	if o.CacheMinBytes < -1 {
		return fmt.Errorf("%w: CacheMinBytes %d", ErrInvalid, o.CacheMinBytes)
	}
	if o.Prefetch > PrefetchOn {
		return fmt.Errorf("%w: Prefetch mode %d", ErrInvalid, o.Prefetch)
	}
	return nil
}

// applyOptions sets o on the dataset's cache registration. The checks come
// first, so a refused option changes nothing. A virtual dataset has no
// registration (its reads go through its sources'): o changes nothing.
func (s *dsState) applyOptions(o DatasetOptions) error {
	cds, err := s.cacheDataset()
	if errors.Is(err, errNoChunks) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.Prefetch != PrefetchDefault {
		if err := cds.SetPrefetch(o.Prefetch == PrefetchOn); err != nil {
			return classify(err)
		}
	}
	if o.CacheMinBytes != 0 {
		if err := cds.SetMinBytes(o.CacheMinBytes); err != nil {
			return classify(err)
		}
	}
	return nil
}

// Flush makes the dataset's acknowledged writes durable: when it returns
// nil they survive a crash. It writes back the dataset's dirty chunks and
// commits the file, as File.Flush does, but without writing back the
// other datasets' dirty chunks. The commit still carries everything else
// the file holds at that moment: every dataset's chunks already written
// back (by eviction or an earlier write-back), extents, attributes,
// creations and the file's attributes. On a read-only file it does
// nothing.
func (d *Dataset) Flush(ctx context.Context) error {
	if err := d.check(false); err != nil {
		return err
	}
	if d.s.f.readOnly {
		return nil
	}
	return classify(d.s.f.commit(ctx, d.s))
}

// Evict writes back the dataset's dirty chunks, then drops its chunks from
// the shared cache, freeing the memory for other datasets; chunks in use by
// a request at that moment stay. It does not commit: the written chunks
// are durable after the next Flush, like any write-back. A virtual
// dataset keeps no chunks of its own: Evict does nothing.
func (d *Dataset) Evict(ctx context.Context) error {
	if err := d.check(false); err != nil {
		return err
	}
	s := d.s
	if _, err := s.chunks(); err != nil {
		return nil // a virtual dataset: nothing of it in the cache
	}
	s.mu.Lock()
	cds, vcds := s.mu.cds, s.mu.vcds
	s.mu.Unlock()
	if cds == nil {
		return ErrClosed
	}
	if err := cds.Flush(ctx, true); err != nil {
		return classify(err)
	}
	if vcds != nil {
		// A sparse dataset's selection view holds decoded copies only
		// (never dirty): dropping it writes nothing.
		if err := vcds.Flush(ctx, true); err != nil {
			return classify(err)
		}
	}
	return nil
}

// writeBack writes the dirty chunks a commit must carry: the whole file's,
// or only one dataset's (File.commit).
func (f *File) writeBack(ctx context.Context, only *dsState) error {
	if only == nil {
		return f.cfile.Flush(ctx)
	}
	cds, err := only.cacheDataset()
	if errors.Is(err, errNoChunks) {
		return nil // a virtual dataset: nothing to write back
	}
	if err != nil {
		return err
	}
	return cds.Flush(ctx, false)
}
