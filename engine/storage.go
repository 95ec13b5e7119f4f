package engine

import (
	"context"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
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
