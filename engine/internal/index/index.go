// Package index holds scc's on-disk chunk indexes: the maps from a chunk's
// scaled coordinates to where its encoded image is stored (offset, stored
// size, filter mask).
//
// Three kinds exist, chosen by the dataset's shape as HDF5 chooses them:
//
//   - ExtensibleArray: exactly one unlimited dimension (EA index).
//   - FixedArray: no unlimited dimension; one flat, paged array.
//   - General: more than one unlimited dimension.
//
// Every index keeps its blocks copy-on-write: a block the last committed
// state references is never overwritten; Flush writes changed blocks to new
// space obtained from the Store and returns the new root, which the
// container records in the dataset header and commits with the superblock.
//
// An Index is safe for concurrent use by many goroutines (the shared chunk
// cache looks chunks up and inserts them from many goroutines at once).
// Lookups of blocks already in memory share a read lock; a block is read
// from the store on first touch, once however many goroutines want it, and
// then kept. Flush encodes under the index's write lock but writes its
// blocks without it, so lookups of a dataset never wait for its commit's
// I/O; mutations (Put, Delete, Resize) wait for the Flush to finish.
//
// FORMAT-index.md gives the byte layout of every block and root record.
package index

import (
	"context"
	"errors"
)

// Kind names an index kind; its value is stored in the dataset header.
type Kind uint8

const (
	KindGeneral         Kind = 1
	KindFixedArray      Kind = 2
	KindExtensibleArray Kind = 3
)

// String returns the kind's name as scctl shows it.
func (k Kind) String() string {
	switch k {
	case KindGeneral:
		return "general"
	case KindFixedArray:
		return "fixed-array"
	case KindExtensibleArray:
		return "extensible-array"
	}
	return "unknown"
}

// Entry says where one chunk is stored. Size 0 means absent.
type Entry struct {
	Addr uint64
	Size uint64
	Mask uint32
	// Sum is the stored chunk frame's checksum trailer (format.ChunkSum):
	// the index records it so that a reader can tell the chunk it meant
	// from another valid one at a reused address (FORMAT.md "Parents
	// verify their children").
	Sum uint32
}

// Exists reports whether the entry names a stored chunk.
func (e Entry) Exists() bool { return e.Size != 0 }

// Geometry is what an index needs to know of its dataset: the chunk grid
// (number of chunks along each dimension for the current extent) and the
// maximum grid (Unlimited along unlimited dimensions).
type Geometry struct {
	Grid    []uint64
	MaxGrid []uint64
}

// Unlimited marks an unlimited dimension in Geometry.MaxGrid.
const Unlimited = ^uint64(0)

// Store is what an index needs from the container.
//
// Alloc returns space that the last committed state does not reference, and
// Free hands space back; the container reuses freed space only after the
// next commit, so a crash always finds the committed blocks intact.
type Store interface {
	ReadAt(ctx context.Context, p []byte, off int64) error
	WriteAt(ctx context.Context, p []byte, off int64) error
	Alloc(size int64) (int64, error)
	Free(off, size int64)
}

// SumReader is an optional Store method for stores that may hold blocks
// in memory (a cache image's prefetched entries, Cache image RFC): ReadSum reads
// the block at off whose parent records checksum sum. The store may serve
// it from memory only when its copy has exactly that checksum; the index
// verifies the block against sum either way.
type SumReader interface {
	ReadSum(ctx context.Context, p []byte, off int64, sum uint32) error
}

// readPtr reads the block p names into b (len(b) == p.size), through
// SumReader when the store offers it.
func readPtr(ctx context.Context, s Store, b []byte, p ptr) error {
	if sr, ok := s.(SumReader); ok {
		return sr.ReadSum(ctx, b, int64(p.addr), p.crc)
	}
	return s.ReadAt(ctx, b, int64(p.addr))
}

// Index maps chunk coordinates to entries.
type Index interface {
	Kind() Kind
	// Get returns the entry for coord (Size 0 if absent).
	Get(ctx context.Context, coord []uint64) (Entry, error)
	// Put records e for coord and returns the entry it replaced.
	Put(ctx context.Context, coord []uint64, e Entry) (old Entry, err error)
	// Delete removes coord and returns the entry it held.
	Delete(ctx context.Context, coord []uint64) (old Entry, err error)
	// Resize tells the index the grid changed (SetExtent). Entries outside
	// the new grid are removed and passed to removed, so the caller can free
	// their chunk space.
	Resize(ctx context.Context, g Geometry, removed func(coord []uint64, e Entry)) error
	// Range calls fn for every stored entry until fn returns false, in
	// linear (array kinds) or C (General) order. fn runs without the
	// index's lock and may call the index; entries changed during Range may
	// or may not be seen.
	Range(ctx context.Context, fn func(coord []uint64, e Entry) bool) error
	// Len reports the number of stored entries.
	Len() int
	// Flush writes every changed block copy-on-write through the store and
	// returns the root record to keep in the dataset header.
	Flush(ctx context.Context) (root []byte, err error)
	// Extents calls fn for every block the index occupies in the file (for
	// the consistency checker and the allocator's rebuild on open): the
	// blocks of the state the last Flush (or Open) produced, including those
	// the next Flush will free. It may read blocks that name others.
	Extents(ctx context.Context, fn func(off, size int64) error) error
	// MemBytes reports the bytes of index blocks held in memory, measured
	// as their encoded sizes, so the container can count them inside the
	// shared cache's budget. It costs O(block slots), not
	// O(entries), and takes the index's read lock.
	MemBytes() int64
	// DropClean lets go of the leaf blocks (data blocks, pages, leaves)
	// held in memory that equal their block on disk, so that the memory
	// the index costs can be given back under pressure; a later lookup
	// reads such a block again, as on first touch. Blocks changed since
	// the last Flush, and the blocks above the leaves, stay. It waits for
	// a Flush in progress and takes the index's lock briefly.
	DropClean()
}

var (
	// ErrCorrupt wraps every decoding failure of an index block.
	ErrCorrupt = errors.New("index: corrupt block")
	// ErrOutOfRange is returned for a coordinate outside the geometry.
	ErrOutOfRange = errors.New("index: coordinate out of range")
)
