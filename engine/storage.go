package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
)

// storage is a dataset's layout as the engine drives it: the layout.Layout
// the cache calls for its chunks, and what the engine itself asks of the
// layout around them (commit, Refresh, Check, space accounting). Every
// layout implements it, and a dataset holds exactly one (dsState.store),
// so nothing outside a layout asks which layout a dataset has, except to
// reach a layout's own calls through asLayout, and to refuse a call on
// the layouts that do not serve it through needLayouts.
//
// Dense, sparse and variable-length datasets keep their chunks in a chunk
// index and share that part (indexedStorage); a contiguous dataset keeps one
// extent and no index.
type storage interface {
	layout.Layout
	// kind is the layout as the API names it.
	kind() LayoutKind
	// maxStored bounds the stored size of one chunk.
	maxStored() int64
	// admitBytes is what admission counts per chunk of a request: the
	// most a chunk can take in cache (dsState.admitBytes keeps it).
	admitBytes() int64
	// registerViews registers the cache datasets the layout keeps besides
	// its own (a sparse dataset's selection view). Caller holds s.mu.
	registerViews() error
	// checkChunk verifies a decoded chunk's structure beyond what Decode
	// checks, for Check; dims is the dataset's shape.
	checkChunk(coord []uint64, ch layout.Chunk, dims []uint64) error
	// chunkIndex is the dataset's chunk index, if the layout keeps one.
	chunkIndex() (*lazyIndex, bool)
	// checkExtent refuses an extent the layout cannot take (SetExtent).
	checkExtent(dims []uint64) error

	// commit makes the layout's part of the dataset's state durable for a
	// header write and returns that header's IndexRoot and, when they
	// change, its LayoutParams (nil keeps the dataset's own).
	commit(ctx context.Context) (root, params []byte, err error)
	// checkAdopt checks, before any dataset switches, that adopt will take
	// hdr (Refresh).
	checkAdopt(hdr format.DatasetHeader) error
	// adopt switches a read-only dataset's stored state to hdr's.
	adopt(hdr format.DatasetHeader) error

	// usage is Dataset.Storage. Caller holds s.extent shared.
	usage(ctx context.Context) (Storage, error)
	// chunkExtents is Dataset.ChunkExtents. Caller holds s.extent shared.
	chunkExtents(ctx context.Context) ([]ChunkExtent, error)
	// liveExtents appends the extents the committed state references.
	liveExtents(ctx context.Context, live []alloc.Extent) ([]alloc.Extent, error)
	// checkStored verifies the committed stored state for Check,
	// reporting damage through c; it returns only an error that stops
	// the whole Check (the context's).
	checkStored(ctx context.Context, name string, c *checkRun) error
}

var (
	_ storage = (*denseLayout)(nil)
	_ storage = (*sparseLayout)(nil)
	_ storage = (*vlenLayout)(nil)
	_ storage = (*contigLayout)(nil)
)

// errWrongLayout refuses a call that belongs to other layouts than the
// dataset's (ErrInvalid); needLayouts says which call and which layouts.
var errWrongLayout = fmt.Errorf("%w: wrong layout", ErrInvalid)

// fixedLayouts are the layouts whose elements are fixed-size values:
// the ones Read, Write and ReadDefined move.
var fixedLayouts = []LayoutKind{Chunked, Sparse, Contiguous}

// readLayouts are the layouts Read serves: the fixed-size ones and the
// virtual layout, whose elements are its sources'.
var readLayouts = []LayoutKind{Chunked, Sparse, Contiguous, Virtual}

// needLayouts is the one place a call that only some layouts serve (call
// names it, want lists them) is refused on a dataset of another layout.
// A call whose doc gives it a meaning on every layout does not come here.
func needLayouts(s *dsState, call string, want ...LayoutKind) error {
	have := s.store.kind()
	if slices.Contains(want, have) {
		return nil
	}
	names := make([]string, len(want))
	for i, k := range want {
		names[i] = k.String()
	}
	list := names[len(names)-1]
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " or " + list
	}
	return fmt.Errorf("%w: %s needs a %s dataset; %q is %v", errWrongLayout, call, list, s.name, have)
}

// asLayout returns the dataset's layout as L, if it is one.
func asLayout[L storage](s *dsState) (L, bool) {
	l, ok := s.store.(L)
	return l, ok
}

// needLayout is needLayouts for a call of the one layout L, which it
// returns.
func needLayout[L storage](s *dsState, call string) (L, error) {
	l, ok := asLayout[L](s)
	if !ok {
		return l, needLayouts(s, call, l.kind())
	}
	return l, nil
}

// indexedStorage is the part of a layout whose chunks a chunk index names
// (dense, sparse, variable-length): the index is dsState.idx.
type indexedStorage struct{ s *dsState }

// admitBytes: a dense chunk is its decoded size.
func (x indexedStorage) admitBytes() int64 { return x.s.chunkBytes }

// admitBytes: a sparse chunk takes at most one run (12 bytes) and one
// value per element.
func (l *sparseLayout) admitBytes() int64 { return l.memFor(l.elems) }

// admitBytes: the fixed section plus a heap estimate; the heap's real
// size is charged by the cache once loaded.
func (l *vlenLayout) admitBytes() int64 { return l.memFor(1 << 20) }

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
	ix, err := x.s.idx.get(ctx)
	if err != nil {
		return nil, err
	}
	var out []ChunkExtent
	var rerr error
	err = ix.Range(ctx, func(c []uint64, e index.Entry) bool {
		if !entryFits(e, x.s.maxStored()) {
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
		if !entryFits(ie, s.maxStored()) {
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

// contigLayout keeps one extent and no index.

func (l *contigLayout) kind() LayoutKind { return Contiguous }

// maxStored: a contiguous dataset's chunk is a piece of its extent.
func (l *contigLayout) maxStored() int64 { return l.s.chunkBytes }

func (l *contigLayout) admitBytes() int64 { return l.s.chunkBytes }

func (l *contigLayout) registerViews() error { return nil }

func (l *contigLayout) chunkIndex() (*lazyIndex, bool) { return nil, false }

func (l *contigLayout) checkChunk([]uint64, layout.Chunk, []uint64) error { return nil }

func (l *contigLayout) checkExtent(dims []uint64) error {
	if !equal(dims, l.s.shape()) {
		return fmt.Errorf("%w: a contiguous dataset's extent is fixed", ErrInvalid)
	}
	return nil
}

func (l *contigLayout) commit(ctx context.Context) (root, params []byte, err error) {
	params, err = l.commitParams(ctx)
	return nil, params, err
}

func (l *contigLayout) checkAdopt(hdr format.DatasetHeader) error {
	_, err := decodeContigParams(hdr.LayoutParams, l.pieces)
	return err
}

func (l *contigLayout) adopt(hdr format.DatasetHeader) error { return l.adoptParams(hdr.LayoutParams) }

func (l *contigLayout) usage(context.Context) (Storage, error) { return l.storage(), nil }

func (l *contigLayout) chunkExtents(context.Context) ([]ChunkExtent, error) {
	base, size, _ := l.committedExtent()
	if base == 0 {
		return nil, nil
	}
	return []ChunkExtent{{Off: base, Size: size}}, nil // one extent, no chunks
}

func (l *contigLayout) liveExtents(_ context.Context, live []alloc.Extent) ([]alloc.Extent, error) {
	if base, size, _ := l.committedExtent(); base != 0 {
		live = append(live, alloc.Extent{Off: base, Size: size})
	}
	return live, nil
}

func (l *contigLayout) checkStored(_ context.Context, name string, c *checkRun) error {
	base, size, _ := l.committedExtent()
	if base == 0 {
		return nil
	}
	c.add(base, size, "contiguous extent of "+name)
	if err := l.check(); err != nil {
		c.problem("dataset %q: %v", name, err)
		return nil
	}
	c.r.Chunks += int(l.pieces)
	return nil
}

func (l *denseLayout) kind() LayoutKind  { return Chunked }
func (l *sparseLayout) kind() LayoutKind { return Sparse }
func (l *vlenLayout) kind() LayoutKind   { return Vlen }
