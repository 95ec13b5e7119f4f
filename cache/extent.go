package cache

import (
	"context"
	"fmt"
	"runtime"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// acquireEvict waits until e can be moved to evicting by the caller, who
// then owns its removal. It returns false when e left the table meanwhile.
func acquireEvict(ctx context.Context, e *entry) (bool, error) {
	for {
		if e.tryStartEvict() {
			return true, nil
		}
		st, ch := e.waitInfo()
		switch {
		case st == stateDead:
			return false, nil
		case ch != nil:
			select {
			case <-ch:
			case <-ctx.Done():
				return false, ctx.Err()
			}
		default: // resident but pinned: uses are short
			if err := ctx.Err(); err != nil {
				return false, err
			}
			runtime.Gosched()
		}
	}
}

func whollyOutside(coord layout.Coord, cd, dims []uint64) bool {
	for j := range coord {
		if coord[j]*cd[j] >= dims[j] {
			return true
		}
	}
	return false
}

// Shrinking an extent is two calls, so that an error leaves the dataset as
// it was:
//
//  1. PrepareExtent does every fallible step and changes nothing the
//     dataset shows: it writes back the dataset's dirty chunks (so the
//     chunks wholly outside the new extent hold no data that exists only in
//     memory) and loads the chunks the shrink cuts through.
//  2. The caller shrinks its index (the layout's own pruning of stored
//     chunks wholly outside; engine/internal/index Resize loads before it mutates, so
//     it too fails without change).
//  3. SetExtent drops the cached chunks wholly outside the new extent and
//     trims the chunks it cuts through. Both are memory operations on
//     chunks PrepareExtent made resident; the dataset is drained, so the
//     only way a trim still does I/O is a concurrent request of another
//     dataset evicting a prepared chunk in the window between the calls,
//     when the trim reloads it.
//
// Keys do not depend on the extent (key.go), so unlike SCC design §3.4
// nothing is re-keyed. The caller has drained the dataset's I/O (SCC design
// §5.2) for the whole sequence.

// PrepareExtent is step 1 of a shrink (see above). Growth needs no
// preparation; it returns at once.
func (d *Dataset) PrepareExtent(ctx context.Context, oldDims, newDims []uint64) error {
	return d.onShrink(oldDims, newDims, func() error { return d.prepareShrink(ctx, oldDims, newDims) })
}

func (d *Dataset) prepareShrink(ctx context.Context, oldDims, newDims []uint64) error {
	c := d.c
	// Writing back every dirty chunk of the dataset (not only those
	// outside) keeps this to one well-tested path; shrinks are rare.
	if err := c.writer.flushDatasets(ctx, []*Dataset{d}, false); err != nil {
		return fmt.Errorf("cache: set extent: %w", err)
	}
	return d.edges(oldDims, newDims, func(batch []Request) error {
		return c.do(ctx, op{kind: opLoad}, batch)
	})
}

// SetExtent is step 3 of a shrink (see above): cached chunks wholly outside
// the new extent are dropped without being written (the layout has pruned
// what it stored of them), and the chunks the shrink cuts through are
// Layout.Trim'd and marked dirty if changed. Growth leaves every chunk
// inside the extent and cuts through none, so it returns at once without
// scanning the dataset's chunks (appending workloads call SetExtent once
// per frame). A cancelled ctx does not stop it half way.
func (d *Dataset) SetExtent(ctx context.Context, oldDims, newDims []uint64) error {
	return d.onShrink(oldDims, newDims, func() error { return d.shrink(ctx, oldDims, newDims) })
}

func (d *Dataset) shrink(ctx context.Context, oldDims, newDims []uint64) error {
	c := d.c
	ctx = context.WithoutCancel(ctx)
	cd := d.lay().dims
	c.stats.extentScans.Add(1)
	var outside []*entry
	c.mu.Lock()
	for e := d.members; e != nil; e = e.mnext {
		if whollyOutside(e.coord, cd, newDims) {
			outside = append(outside, e)
		}
	}
	c.mu.Unlock()
	// One at a time: holding an evicting entry while waiting for another
	// could deadlock with a flusher that pins the second and waits for the
	// first to settle.
	for _, e := range outside {
		ok, err := acquireEvict(ctx, e)
		if err != nil {
			return err
		}
		if ok {
			c.stats.evictions.Add(1)
			c.remove([]*entry{e})
		}
	}
	d.relocs.Add(1) // locations looked up before the shrink are stale
	return d.edges(oldDims, newDims, func(batch []Request) error {
		return c.do(ctx, op{kind: opTrim, dims: append([]uint64(nil), newDims...)}, batch)
	})
}

// onShrink validates an extent change and, as a counted request, runs fn
// if the change shrinks any dimension; growth needs nothing from the cache.
func (d *Dataset) onShrink(oldDims, newDims []uint64, fn func() error) error {
	c := d.c
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	if !d.registered.Load() {
		return ErrNotRegistered
	}
	cd := d.lay().dims
	if len(oldDims) != len(cd) || len(newDims) != len(cd) {
		return fmt.Errorf("%w: extent rank %d/%d, chunk rank %d", ErrInvalid, len(oldDims), len(newDims), len(cd))
	}
	for j := range newDims {
		if newDims[j] < oldDims[j] {
			return fn()
		}
	}
	return nil
}

// edges calls fn with batches of requests for the chunks a shrink from
// oldDims to newDims cuts through: coordinate b = new/cd along a cut
// dimension, inside the kept extent along the others.
func (d *Dataset) edges(oldDims, newDims []uint64, fn func([]Request) error) error {
	cd := d.lay().dims
	seen := map[chunkKey]bool{}
	var batch []Request
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := fn(batch)
		batch = batch[:0]
		return err
	}
	rank := len(cd)
	for dim := 0; dim < rank; dim++ {
		if newDims[dim] >= oldDims[dim] || newDims[dim]%cd[dim] == 0 {
			continue
		}
		lo := make([]uint64, rank)
		hi := make([]uint64, rank) // exclusive
		empty := false
		for j := 0; j < rank; j++ {
			if j == dim {
				lo[j] = newDims[j] / cd[j]
				hi[j] = lo[j] + 1
				continue
			}
			m := min(oldDims[j], newDims[j])
			hi[j] = (m + cd[j] - 1) / cd[j]
			if hi[j] == 0 {
				empty = true
			}
		}
		if empty {
			continue
		}
		cur := append([]uint64(nil), lo...)
		for {
			k := makeKey(d.serial, cur)
			if !seen[k] {
				seen[k] = true
				batch = append(batch, Request{Dataset: d, Coord: append(layout.Coord(nil), cur...)})
				if len(batch) >= 4096 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			j := rank - 1
			for ; j >= 0; j-- {
				cur[j]++
				if cur[j] < hi[j] {
					break
				}
				cur[j] = lo[j]
			}
			if j < 0 {
				break
			}
		}
	}
	return flush()
}

// DirectRead returns the chunk's stored image without decoding (SCC internal API
// H5SC_direct_chunk_read); a dirty cached copy is flushed first.
// Location.Size == 0 means the chunk is not stored.
func (d *Dataset) DirectRead(ctx context.Context, coord layout.Coord) ([]byte, layout.Location, error) {
	c := d.c
	if err := c.begin(); err != nil {
		return nil, layout.Location{}, err
	}
	defer c.end()
	if err := d.writeBackOne(ctx, coord); err != nil {
		return nil, layout.Location{}, err
	}
	locs := make([]layout.Location, 1)
	if err := d.lay().l.Lookup(ctx, []layout.Coord{coord}, locs); err != nil {
		return nil, layout.Location{}, err
	}
	loc := locs[0]
	if !loc.Exists() {
		return nil, loc, nil
	}
	if loc.Size > maxStored(loc.SizeHint) {
		return nil, loc, fmt.Errorf("%w: stored size %d", ErrInvalid, loc.Size)
	}
	buf := make([]byte, loc.Size)
	c.stats.vectorReads.Add(1)
	c.stats.vectorReadBytes.Add(loc.Size)
	if err := d.file.drv.ReadV([]vfd.Extent{{Off: loc.Addr, Buf: buf}}); err != nil {
		return nil, loc, err
	}
	return buf, loc, nil
}

// writeBackOne writes the chunk's cached copy back if it is dirty, so that
// what is stored is the latest write, for a read of the stored image.
// Caller is inside begin/end.
func (d *Dataset) writeBackOne(ctx context.Context, coord layout.Coord) error {
	c := d.c
	if !d.registered.Load() {
		return ErrNotRegistered
	}
	if len(coord) != len(d.lay().dims) {
		return fmt.Errorf("%w: coordinate rank", ErrInvalid)
	}
	key := makeKey(d.serial, coord)
	for {
		e, ok := c.chunks.Load(key)
		if !ok {
			return nil
		}
		pinned, ch := e.pin()
		if !pinned {
			if ch == nil {
				runtime.Gosched()
				continue
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var err error
		e.flushMu.Lock()
		if e.dirty.Load() {
			err = c.writer.writeBack(ctx, []*entry{e}, false)
		}
		e.flushMu.Unlock()
		c.budget.unpin(e)
		return err
	}
}

// DirectWrite stores a raw encoded image for the chunk (SCC internal API
// H5SC_direct_chunk_write): any cached copy is dropped first, then the
// image is inserted into the layout's index and written.
func (d *Dataset) DirectWrite(ctx context.Context, coord layout.Coord, enc layout.Encoded) error {
	c := d.c
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	if !d.registered.Load() {
		return ErrNotRegistered
	}
	if len(coord) != len(d.lay().dims) {
		return fmt.Errorf("%w: coordinate rank", ErrInvalid)
	}
	coord = append(layout.Coord(nil), coord...)
	key := makeKey(d.serial, coord)
	// Own the key with a placeholder so no load races with the write.
	ph := &entry{key: key, coord: coord, ds: d}
	ph.initLoading()
	for {
		old, loaded := c.chunks.LoadOrStore(ph)
		if !loaded {
			break
		}
		ok, err := acquireEvict(ctx, old)
		if err != nil {
			return err
		}
		if ok {
			c.remove([]*entry{old})
		}
	}
	d.chunks.Add(1)
	defer c.remove([]*entry{ph})
	locs := make([]layout.Location, 1)
	l := d.lay().l
	if err := l.Lookup(ctx, []layout.Coord{coord}, locs); err != nil {
		return err
	}
	ins := []layout.Insertion{{Coord: coord, Old: locs[0], Size: int64(len(enc.Image)), Mask: enc.Mask, Sum: enc.Sum}}
	if err := l.Insert(ctx, ins); err != nil {
		return err
	}
	var werr error
	if len(enc.Image) > 0 {
		c.stats.vectorWrites.Add(1)
		c.stats.vectorWriteBytes.Add(int64(len(enc.Image)))
		werr = d.file.drv.WriteV([]vfd.Extent{{Off: ins[0].New.Addr, Buf: enc.Image}})
	}
	perr := l.Publish(ctx, ins, werr)
	d.relocs.Add(1)
	if werr != nil {
		return werr
	}
	if perr != nil {
		return perr
	}
	c.stats.bytesFlushed.Add(int64(len(enc.Image)))
	c.stats.chunksFlushed.Add(1)
	return nil
}
