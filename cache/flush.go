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
//
// Phases: take a snapshot of the dirty entries (dirtySnapshot); claim and
// write those free now in rounds (claimFree, writeClaimed); wait for the
// ones being loaded or evicted, then claim and write the busy ones that
// are free by then (claimDeferred); write the rest one at a time
// (writeOneByOne); sync the files (syncFiles).
func (c *Cache) flushDatasets(ctx context.Context, dss []*Dataset, sync bool) error {
	snap := c.mu.dirtySnapshot(dss)
	batch, deferred, waits := claimFree(&c.budget, snap)
	var errs []error
	if err := c.writeClaimed(ctx, batch); err != nil {
		errs = append(errs, err)
	}
	// Written entries stay pinned until the sync: if it fails they are
	// marked dirty again, and meanwhile nobody may evict them as clean.
	written := batch
	defer func() {
		for _, e := range written {
			c.budget.unpin(e)
		}
	}()
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
	again, rest := claimDeferred(&c.budget, deferred)
	if len(again) > 0 {
		if err := c.writeClaimed(ctx, again); err != nil {
			errs = append(errs, err)
		}
		written = append(written, again...)
	}
	var err error
	written, errs, err = c.writeOneByOne(ctx, rest, written, errs)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if sync {
		errs = append(errs, syncFiles(dss, written)...)
	}
	return errors.Join(errs...)
}

// dirtySnapshot returns the entries of dss dirty now, under the policy
// lock (which guards the member lists).
func (p *policyLock) dirtySnapshot(dss []*Dataset) []*entry {
	var snap []*entry
	p.Lock()
	for _, d := range dss {
		for e := d.members; e != nil; e = e.mnext {
			if e.dirty.Load() {
				snap = append(snap, e)
			}
		}
	}
	p.Unlock()
	return snap
}

// claimFree pins and takes the flushMu of each entry of snap still dirty
// (batch). An entry being loaded or evicted goes to deferred with the
// channel to wait for (waits), one another flusher holds to deferred; a
// dead or clean entry is dropped. The pins it gives back are released
// on b (budget.unpin).
func claimFree(b *budget, snap []*entry) (batch, deferred []*entry, waits []chan struct{}) {
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
			b.unpin(e)
			deferred = append(deferred, e)
			continue
		}
		if !e.dirty.Load() {
			e.flushMu.Unlock()
			b.unpin(e)
			continue
		}
		batch = append(batch, e)
	}
	return batch, deferred, waits
}

// claimDeferred is claimFree for the entries deferred once: those still
// busy (or dead) go to rest.
func claimDeferred(b *budget, deferred []*entry) (again, rest []*entry) {
	for _, e := range deferred {
		ok, _ := e.pin()
		if !ok {
			rest = append(rest, e) // dead (skipped by writeOneByOne) or still settling
			continue
		}
		if !e.flushMu.TryLock() {
			b.unpin(e)
			rest = append(rest, e)
			continue
		}
		if !e.dirty.Load() {
			e.flushMu.Unlock()
			b.unpin(e)
			continue
		}
		again = append(again, e)
	}
	return again, rest
}

// writeClaimed writes claimed entries (pinned, flushMu held) in rounds
// and releases their flushMu; they stay pinned.
func (c *Cache) writeClaimed(ctx context.Context, es []*entry) error {
	err := c.writeBackRounds(ctx, es)
	for _, e := range es {
		e.flushMu.Unlock()
	}
	return err
}

// writeOneByOne writes, one at a time, the entries another flusher or an
// evictor still held. If one is gone, its eviction wrote it; if it is
// still dirty, it is written now. Each entry it pins is added to written;
// write errors are added to errs; err is the context's error when it ends
// while waiting.
func (c *Cache) writeOneByOne(ctx context.Context, rest, written []*entry, errs []error) (_ []*entry, _ []error, err error) {
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
					return written, errs, ctx.Err()
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
	return written, errs, nil
}

// syncFiles syncs each file of dss once (File.sync).
func syncFiles(dss []*Dataset, written []*entry) []error {
	var errs []error
	seen := map[*File]bool{}
	for _, d := range dss {
		if seen[d.file] {
			continue
		}
		seen[d.file] = true
		if err := d.file.sync(written); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// sync syncs f; if that fails, f's entries among written are marked dirty
// again.
func (f *File) sync(written []*entry) error {
	f.c.stats.syncs.Add(1)
	err := f.drv.Sync()
	if err != nil {
		for _, e := range written {
			if e.ds.file == f {
				f.c.budget.redirty(e)
			}
		}
	}
	return err
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
		c.drop(d, false)
	}
	return nil
}

// redirty marks a pinned entry dirty again after its write could not be
// made durable.
func (b *budget) redirty(e *entry) {
	e.latch.Lock()
	if !e.dirty.Swap(true) {
		b.dirty.Add(e.size.Load())
	}
	e.latch.Unlock()
}
