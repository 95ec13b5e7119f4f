package engine

import "github.com/scc-dev/scc/cache/layout"

// chunkedStorage is the storage of a layout whose elements are chunks the
// shared cache holds: the layout.Layout the cache calls for them, and what
// the engine asks of the layout about its chunks. Dense, sparse and
// variable-length datasets keep their chunks in a chunk index and share
// that part (indexedStorage); a contiguous dataset keeps one extent, its
// one chunk, and no index.
//
// A dataset's chunked storage is reached through dsState.chunks, which
// refuses a virtual dataset: it keeps no chunks and is not registered with
// the cache, its reads going to its sources' registrations.
type chunkedStorage interface {
	storage
	layout.Layout
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
	// checkExtent refuses an extent the layout cannot take (SetExtent).
	checkExtent(dims []uint64) error
}

var (
	_ chunkedStorage = (*denseLayout)(nil)
	_ chunkedStorage = (*sparseLayout)(nil)
	_ chunkedStorage = (*vlenLayout)(nil)
	_ chunkedStorage = (*contigLayout)(nil)
)
