package engine

import (
	"context"

	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
)

// storage is a dataset's layout as the engine drives it around the data
// path: commit, Refresh, Check, Delete and space accounting. Every layout
// implements it in full, and a dataset holds exactly one (dsState.store),
// so nothing outside a layout asks which layout a dataset has, except to
// reach a layout's own calls through asLayout, and to refuse a call on
// the layouts that do not serve it through needLayouts.
//
// The layouts whose elements are chunks the shared cache holds (dense,
// sparse, variable-length, contiguous) implement chunkedStorage besides
// (chunkedstorage.go), reached through dsState.chunks. A virtual dataset
// keeps no chunks: its elements are its sources', and it implements this
// interface only.
type storage interface {
	// kind is the layout as the API names it.
	kind() LayoutKind
	// chunkIndex is the dataset's chunk index, if the layout keeps one
	// (a contiguous dataset keeps one extent, a virtual one nothing).
	chunkIndex() (*lazyIndex, bool)

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
	_ storage = (*virtualLayout)(nil)
)
