package cache

import (
	"context"
	"fmt"
	"runtime"

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

func whollyOutside(coord Coord, cd, dims []uint64) bool {
	for j := range coord {
		if coord[j]*cd[j] >= dims[j] {
			return true
		}
	}
	return false
}

// SetExtent tells the cache the dataset's extent changed from oldDims to
// newDims (seed 002 H5SC_set_extent_notify and "H5Dset_extent()"). The
// caller has drained the dataset's I/O (seed 000 §5.2).
//
// Split of work with the layout: the cache handles the chunks it holds —
// cached chunks wholly outside the new extent are dropped without being
// written and Layout.Delete'd if they exist on disk — and the chunks the
// shrink cuts through, cached or not: those that exist (in cache or on
// disk) are loaded if needed, Layout.Trim'd, and marked dirty if changed.
// Uncached chunks wholly outside the new extent are the layout's job (the
// engine prunes its index). Keys do not depend on the extent (key.go), so
// unlike seed 000 §3.4 nothing is re-keyed.
func (d *Dataset) SetExtent(ctx context.Context, oldDims, newDims []uint64) error {
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
	// Growth (no dimension shrinks) leaves every chunk inside the extent
	// and cuts through none: nothing to drop or trim, so skip the scan of
	// the dataset's cached chunks (appending workloads call SetExtent once
	// per frame).
	shrinks := false
	for j := range newDims {
		if newDims[j] < oldDims[j] {
			shrinks = true
			break
		}
	}
	if !shrinks {
		return nil
	}
	// 1. Cached chunks wholly outside: drop, and delete what is stored.
	c.extentScans.Add(1)
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
	l := d.lay().l
	for _, e := range outside {
		ok, err := acquireEvict(ctx, e)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		locs := make([]Location, 1)
		err = l.Lookup(ctx, []Coord{e.coord}, locs)
		if err == nil && locs[0].Exists() {
			err = l.Delete(ctx, e.coord, locs[0])
			d.relocs.Add(1)
		}
		if err != nil {
			c.settleBack(e)
			return fmt.Errorf("cache: set extent: %w", err)
		}
		c.st.evictions.Add(1)
		c.remove([]*entry{e})
	}

	// 2. Chunks the shrink cuts through: coordinate b = new/cd along a cut
	// dimension, inside the kept extent along the others.
	seen := map[chunkKey]bool{}
	var batch []Request
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.do(ctx, op{kind: opTrim, dims: append([]uint64(nil), newDims...)}, batch)
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
				batch = append(batch, Request{Dataset: d, Coord: append(Coord(nil), cur...)})
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

// DirectRead returns the chunk's stored image without decoding (seed 002
// H5SC_direct_chunk_read); a dirty cached copy is flushed first.
// Location.Size == 0 means the chunk is not stored.
func (d *Dataset) DirectRead(ctx context.Context, coord Coord) ([]byte, Location, error) {
	c := d.c
	if err := c.begin(); err != nil {
		return nil, Location{}, err
	}
	defer c.end()
	if !d.registered.Load() {
		return nil, Location{}, ErrNotRegistered
	}
	if len(coord) != len(d.lay().dims) {
		return nil, Location{}, fmt.Errorf("%w: coordinate rank", ErrInvalid)
	}
	key := makeKey(d.serial, coord)
	for {
		e, ok := c.chunks.Load(key)
		if !ok {
			break
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
				return nil, Location{}, ctx.Err()
			}
		}
		var err error
		e.flushMu.Lock()
		if e.dirty.Load() {
			err = c.writeBack(ctx, []*entry{e}, false)
		}
		e.flushMu.Unlock()
		c.unpin(e)
		if err != nil {
			return nil, Location{}, err
		}
		break
	}
	locs := make([]Location, 1)
	if err := d.lay().l.Lookup(ctx, []Coord{coord}, locs); err != nil {
		return nil, Location{}, err
	}
	loc := locs[0]
	if !loc.Exists() {
		return nil, loc, nil
	}
	if loc.Size > maxStored(loc.SizeHint) {
		return nil, loc, fmt.Errorf("%w: stored size %d", ErrInvalid, loc.Size)
	}
	buf := make([]byte, loc.Size)
	c.st.vectorReads.Add(1)
	c.st.vectorReadBytes.Add(loc.Size)
	if err := d.file.drv.ReadV([]vfd.Extent{{Off: loc.Addr, Buf: buf}}); err != nil {
		return nil, loc, err
	}
	return buf, loc, nil
}

// DirectWrite stores a raw encoded image for the chunk (seed 002
// H5SC_direct_chunk_write): any cached copy is dropped first, then the
// image is inserted into the layout's index and written.
func (d *Dataset) DirectWrite(ctx context.Context, coord Coord, enc Encoded) error {
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
	coord = append(Coord(nil), coord...)
	key := makeKey(d.serial, coord)
	// Own the key with a placeholder so no load races with the write.
	ph := &entry{key: key, coord: coord, ds: d}
	ph.initLoading()
	for {
		old, loaded := c.chunks.LoadOrStore(key, ph)
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
	locs := make([]Location, 1)
	l := d.lay().l
	if err := l.Lookup(ctx, []Coord{coord}, locs); err != nil {
		return err
	}
	ins := []Insertion{{Coord: coord, Old: locs[0], Size: int64(len(enc.Image)), Mask: enc.Mask, Sum: enc.Sum}}
	if err := l.Insert(ctx, ins); err != nil {
		return err
	}
	var werr error
	if len(enc.Image) > 0 {
		c.st.vectorWrites.Add(1)
		c.st.vectorWriteBytes.Add(int64(len(enc.Image)))
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
	c.st.bytesFlushed.Add(int64(len(enc.Image)))
	c.st.chunksFlushed.Add(1)
	return nil
}
