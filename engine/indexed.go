package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
)

// The chunk index's side of a write-back and of a deletion, shared by every
// layout whose chunks a chunk index names (dense, sparse, variable-length):
// a layout's Insert, Publish and Delete are these with its indexHooks.
//
// Space and index change in an order that keeps every committed state's
// images intact (layout.Layout): Insert only allocates, so a commit running
// meanwhile cannot name bytes not yet written; Publish names the new image
// only once it is written and frees what the index named before through
// freeDropped, which marks the dataset dirty first; a failed write or index
// change frees only the new space, which nothing names.

// indexHooks is what a layout adds to the shared index writes.
type indexHooks interface {
	// sizeHint is what a chunk whose stored image has mask costs in cache
	// memory once decoded (layout.Location.SizeHint).
	sizeHint(mask uint32) int64
	// erases reports whether in's image stands for no chunk at all:
	// Publish then removes the chunk from the index instead of naming the
	// image, and frees both.
	erases(in *layout.Insertion) bool
	// published learns each insertion's outcome once Publish has dealt
	// with it: ok when the index now holds it, false when the write or
	// the index change failed and the index still holds what it held.
	published(in *layout.Insertion, ok bool)
}

var (
	_ indexHooks = (*denseLayout)(nil)
	_ indexHooks = (*sparseLayout)(nil)
	_ indexHooks = (*vlenLayout)(nil)
)

// The hooks a layout that keeps nothing beside its index leaves alone:
// every image is a chunk, and no outcome concerns it.

func (x indexedStorage) erases(*layout.Insertion) bool     { return false }
func (x indexedStorage) published(*layout.Insertion, bool) {}

// insert is the layouts' Insert: new space for every image (all or
// nothing: on a failure the space already taken is given back), with the
// size hint the layout computes from the image's mask field.
func (x indexedStorage) insert(ins []layout.Insertion, h indexHooks) error {
	s := x.s
	for i := range ins {
		off, err := s.f.space.allocFrame(ins[i].Size)
		if err != nil {
			for j := 0; j < i; j++ {
				s.f.space.free(ins[j].New.Addr, ins[j].New.Size)
			}
			return err
		}
		ins[i].New = layout.Location{Addr: off, Size: ins[i].Size, Mask: ins[i].Mask, SizeHint: h.sizeHint(ins[i].Mask), Sum: ins[i].Sum}
	}
	return nil
}

// publish is the layouts' Publish: with writeErr nil it names each new
// image in the index (or, for an image the layout says erases the chunk,
// removes the chunk) and frees what the index named before; an insertion
// whose index change fails has its new space freed and makes the first
// such error the result, while the others go on. With writeErr set, or an
// index that cannot be loaded, it frees every new image's space and
// leaves the index alone.
func (x indexedStorage) publish(ctx context.Context, ins []layout.Insertion, writeErr error, h indexHooks) error {
	s := x.s
	if writeErr != nil {
		x.unpublished(ins, h)
		return nil
	}
	ix, err := s.idx.get(ctx)
	if err != nil {
		x.unpublished(ins, h)
		return err
	}
	defer s.idx.account(ix) // puts may create blocks
	var firstErr error
	for i := range ins {
		in := &ins[i]
		var old index.Entry
		var err error
		if h.erases(in) {
			old, err = ix.Delete(ctx, in.Coord)
			if err == nil {
				s.f.space.free(in.New.Addr, in.New.Size)
			}
		} else {
			old, err = ix.Put(ctx, in.Coord, index.Entry{Addr: uint64(in.New.Addr), Size: uint64(in.New.Size), Mask: in.New.Mask, Sum: in.New.Sum})
		}
		if err != nil {
			s.f.space.free(in.New.Addr, in.New.Size)
			h.published(in, false)
			if firstErr == nil {
				firstErr = classify(err)
			}
			continue
		}
		s.freeDropped(old)
		h.published(in, true)
	}
	s.dirty.Store(true)
	return firstErr
}

// unpublished gives back the new space of insertions that will not be
// published.
func (x indexedStorage) unpublished(ins []layout.Insertion, h indexHooks) {
	for i := range ins {
		x.s.f.space.free(ins[i].New.Addr, ins[i].New.Size)
		h.published(&ins[i], false)
	}
}

// freeDropped frees the stored image an index change of this dataset
// just stopped naming (the old image a Put replaced, or one a Delete
// removed). The dataset is marked dirty first, and that order is what
// keeps the space safe: a commit reads the dirty flag (writeHeader) only
// after its PrepareCommit, so either it sees the flag and writes a header
// whose index no longer names the image, or it read the flag before and
// this free falls inside its preparation, where the allocator keeps the
// space until the next commit. Freed first, the space could be freed
// before a commit's PrepareCommit and reused once that commit was durable,
// while the commit, which saw the dataset clean, still named the image
// through the old header (TestRaceFlushSetExtentDirect: a Flush racing
// direct writes committed a catalog over a chunk its index named;
// TestFreeDroppedBeforeCommit pins the order).
func (s *dsState) freeDropped(e index.Entry) {
	if !e.Exists() {
		return
	}
	s.dirty.Store(true)
	s.f.space.free(int64(e.Addr), int64(e.Size))
	if h := testHookDropped.Load(); h != nil {
		(*h)()
	}
}

// testHookDropped, when set (tests only), runs after freeDropped's free:
// TestFreeDroppedBeforeCommit commits from there.
var testHookDropped atomic.Pointer[func()]

// indexedStorage is the part of a layout whose chunks a chunk index names
// (dense, sparse, variable-length): the index is dsState.idx.
type indexedStorage struct{ s *dsState }

// admitBytes: a dense chunk is its decoded size.
func (x indexedStorage) admitBytes() int64 { return x.s.chunkBytes }

func (x indexedStorage) registerViews() error { return nil }

func (x indexedStorage) chunkIndex() (*lazyIndex, bool) { return x.s.idx, true }

func (x indexedStorage) checkChunk([]uint64, layout.Chunk, []uint64) error { return nil }

func (x indexedStorage) checkExtent([]uint64) error { return nil }

func (x indexedStorage) commit(ctx context.Context) (root, params []byte, err error) {
	root, err = x.s.idx.flush(ctx)
	return root, nil, err
}

func (x indexedStorage) checkAdopt(format.DatasetHeader) error { return nil }

func (x indexedStorage) adopt(hdr format.DatasetHeader) error {
	x.s.idx.reset(index.Kind(hdr.IndexKind), geometry(hdr.Shape, hdr.MaxShape, hdr.Chunk), hdr.IndexRoot)
	return nil
}

func (x indexedStorage) usage(ctx context.Context) (Storage, error) {
	ix, err := x.s.idx.get(ctx)
	if err != nil {
		return Storage{}, err
	}
	var st Storage
	err = ix.Range(ctx, func(_ []uint64, e index.Entry) bool {
		st.Chunks++
		st.StoredBytes += e.Size
		return true
	})
	x.s.idx.account(ix) // Range loads every block
	if err == nil {
		err = ix.Extents(ctx, func(_, size int64) error {
			st.IndexBlocks++
			st.IndexBytes += uint64(size)
			return nil
		})
	}
	return st, classify(err)
}

func (x indexedStorage) chunkExtents(ctx context.Context) ([]ChunkExtent, error) {
	cs, err := x.s.chunks()
	if err != nil {
		return nil, err
	}
	ix, err := x.s.idx.get(ctx)
	if err != nil {
		return nil, err
	}
	var out []ChunkExtent
	var rerr error
	err = ix.Range(ctx, func(c []uint64, e index.Entry) bool {
		if !entryFits(e, cs.maxStored()) {
			rerr = fmt.Errorf("%w: dataset %q chunk %v index entry (addr %d, size %d) outside the file's space", ErrCorrupt, x.s.name, c, e.Addr, e.Size)
			return false
		}
		out = append(out, ChunkExtent{Coord: clone(c), Off: int64(e.Addr), Size: int64(e.Size)})
		return true
	})
	x.s.idx.account(ix)
	if err == nil {
		err = rerr
	}
	return out, classify(err)
}

func (x indexedStorage) liveExtents(ctx context.Context, live []alloc.Extent) ([]alloc.Extent, error) {
	s := x.s
	cs, err := s.chunks()
	if err != nil {
		return nil, err
	}
	ix, err := s.idx.get(ctx)
	if err != nil {
		return nil, err
	}
	err = ix.Extents(ctx, func(off, size int64) error {
		live = append(live, alloc.Extent{Off: off, Size: size})
		return nil
	})
	if err != nil {
		return nil, classify(err)
	}
	var rerr error
	err = ix.Range(ctx, func(coord []uint64, ie index.Entry) bool {
		if !entryFits(ie, cs.maxStored()) {
			rerr = fmt.Errorf("%w: dataset %q chunk %v index entry (addr %d, size %d) outside the file's space", ErrCorrupt, s.name, coord, ie.Addr, ie.Size)
			return false
		}
		live = append(live, alloc.Extent{Off: int64(ie.Addr), Size: int64(ie.Size)})
		return true
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, classify(err)
	}
	return live, nil
}

// checkStored checks the index blocks and every chunk the index names: in
// the file's space, inside the extent's grid, decoding to a chunk the
// layout finds whole.
func (x indexedStorage) checkStored(ctx context.Context, name string, run *checkRun) error {
	s := x.s
	cs, err := s.chunks()
	if err != nil {
		return err
	}
	ix, err := s.idx.get(ctx)
	if err != nil {
		run.problem("dataset %q index: %v", name, err)
		return nil
	}
	err = ix.Extents(ctx, func(off, size int64) error {
		run.r.IndexBlocks++
		run.add(off, size, "index block of "+name)
		return nil
	})
	if err != nil {
		run.problem("dataset %q index: %v", name, err)
		return nil
	}
	type stored struct {
		coord []uint64
		e     index.Entry
	}
	var chunks []stored
	if err := ix.Range(ctx, func(c []uint64, ie index.Entry) bool {
		chunks = append(chunks, stored{clone(c), ie})
		return true
	}); err != nil {
		run.problem("dataset %q index: %v", name, err)
		return nil
	}
	g := geometry(s.shape(), s.maxShape, s.chunk)
	for _, c := range chunks {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Bounds in uint64 first: a size or address of 2^63 or more is
		// negative as an int64 and its end may wrap below the end of file.
		if !entryFits(c.e, cs.maxStored()) || c.e.Addr+c.e.Size > uint64(run.eof) {
			run.problem("dataset %q: chunk %v entry (addr %d, size %d) outside the file's space", name, c.coord, c.e.Addr, c.e.Size)
			continue
		}
		run.add(int64(c.e.Addr), int64(c.e.Size), fmt.Sprintf("chunk %v of %s", c.coord, name))
		for d := range c.coord {
			if c.coord[d] >= g.Grid[d] {
				run.problem("dataset %q: chunk %v lies outside the extent's grid %v", name, c.coord, g.Grid)
				break
			}
		}
		img := make([]byte, c.e.Size)
		if err := readFull(run.drv, img, int64(c.e.Addr)); err != nil {
			run.problem("dataset %q: chunk %v: %v", name, c.coord, err)
			continue
		}
		loc := layout.Location{Addr: int64(c.e.Addr), Size: int64(c.e.Size), Mask: c.e.Mask, Sum: c.e.Sum}
		ch, err := cs.Decode(c.coord, loc, img)
		if err != nil {
			run.problem("dataset %q: chunk %v: %v", name, c.coord, err)
			continue
		}
		if err := cs.checkChunk(c.coord, ch, s.shape()); err != nil {
			run.problem("dataset %q: %v", name, err)
			continue
		}
		run.r.Chunks++
	}
	return nil
}

// entryFits reports whether an existing index entry names a frame a file
// can hold: at most maxStored bytes, from DataStart on, its end
// (Addr+Size, exclusive) at most 2^63-1, the largest offset a driver
// takes (vfd: an extent whose end does not fit an int64 is ErrInvalid,
// which a read would report as the caller's mistake rather than the
// file's). Addresses and sizes are u64 on disk; every bound is taken in
// uint64, since one converted to int64 first turns negative and passes a
// signed bound, and Addr+Size may wrap.
func entryFits(e index.Entry, maxStored int64) bool {
	const maxEnd = 1<<63 - 1
	return e.Size <= uint64(maxStored) && e.Addr >= format.DataStart && e.Addr <= maxEnd && e.Size <= maxEnd-e.Addr
}
