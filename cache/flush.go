package cache

import (
	"context"
	"errors"
)

// flushDatasets writes every chunk of dss that is dirty when it starts
// (SCC design §3.3, §3.8), then syncs their files when sync is set.
//
// Concurrency: a flusher pins each entry (so it cannot be evicted) and
// takes its flushMu with TryLock, so that two flushers never write the same
// chunk at once. Entries another flusher holds, and entries being loaded or
// evicted, are handled afterwards, one at a time, holding nothing else, so
// flushers cannot deadlock on each other. Writes that race with the flush
// bump the entry's version and keep it dirty (writeBack).
func (c *Cache) flushDatasets(ctx context.Context, dss []*Dataset, sync bool) error {
	var snap []*entry
	c.mu.Lock()
	for _, d := range dss {
		for e := d.members; e != nil; e = e.mnext {
			if e.dirty.Load() {
				snap = append(snap, e)
			}
		}
	}
	c.mu.Unlock()

	var batch, deferred []*entry
	var waits []chan struct{}
	for _, e := range snap {
		ok, ch := e.pin()
		if !ok {
			if ch != nil {
				waits = append(waits, ch)
				deferred = append(deferred, e)
			}
			continue
		}
		if !e.flushMu.TryLock() {
			c.unpin(e)
			deferred = append(deferred, e)
			continue
		}
		if !e.dirty.Load() {
			e.flushMu.Unlock()
			c.unpin(e)
			continue
		}
		batch = append(batch, e)
	}
	err := c.writeBackRounds(ctx, batch)
	for _, e := range batch {
		e.flushMu.Unlock()
	}
	// Written entries stay pinned until the sync: if it fails they are
	// marked dirty again, and meanwhile nobody may evict them as clean.
	written := batch
	defer func() {
		for _, e := range written {
			c.unpin(e)
		}
	}()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Join(append(errs, ctx.Err())...)
		}
	}
	// Second batch: entries that were busy but are free now are encoded
	// in parallel and written together, like the first batch (taking
	// flushMu with TryLock only, so this still waits for nothing).
	var again, rest []*entry
	for _, e := range deferred {
		ok, _ := e.pin()
		if !ok {
			rest = append(rest, e) // dead (skipped below) or still settling
			continue
		}
		if !e.flushMu.TryLock() {
			c.unpin(e)
			rest = append(rest, e)
			continue
		}
		if !e.dirty.Load() {
			e.flushMu.Unlock()
			c.unpin(e)
			continue
		}
		again = append(again, e)
	}
	if len(again) > 0 {
		if err := c.writeBackRounds(ctx, again); err != nil {
			errs = append(errs, err)
		}
		for _, e := range again {
			e.flushMu.Unlock()
		}
		written = append(written, again...)
	}
	// One at a time: an entry another flusher or an evictor still holds.
	// If it is gone, its eviction wrote it; if it is still dirty, write it
	// now.
	for _, e := range rest {
		for {
			ok, ch := e.pin()
			if !ok {
				if ch == nil {
					break // dead: removed, so it was written (or dropped by SetExtent)
				}
				select {
				case <-ch:
					continue
				case <-ctx.Done():
					return errors.Join(append(errs, ctx.Err())...)
				}
			}
			e.flushMu.Lock()
			if e.dirty.Load() {
				if err := c.writeBack(ctx, []*entry{e}, false); err != nil {
					errs = append(errs, err)
				}
			}
			e.flushMu.Unlock()
			written = append(written, e)
			break
		}
	}
	if sync {
		seen := map[*File]bool{}
		for _, d := range dss {
			if seen[d.file] {
				continue
			}
			seen[d.file] = true
			c.st.syncs.Add(1)
			if err := d.file.drv.Sync(); err != nil {
				errs = append(errs, err)
				for _, e := range written {
					if e.ds.file == d.file {
						c.redirty(e)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Flush writes the dataset's dirty chunks and syncs its file; with evict it
// then drops every chunk of the dataset that is not in use (SCC internal API
// H5SC_flush_dset).
func (d *Dataset) Flush(ctx context.Context, evict bool) error {
	c := d.c
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	if err := c.flushDatasets(ctx, []*Dataset{d}, true); err != nil {
		return err
	}
	if evict {
		c.dropAll(d)
	}
	return nil
}

// redirty marks a pinned entry dirty again after its write could not be
// made durable.
func (c *Cache) redirty(e *entry) {
	e.latch.Lock()
	if !e.dirty.Swap(true) {
		c.dirtyBytes.Add(e.size.Load())
	}
	e.latch.Unlock()
}
