package cache

import (
	"context"
)

// This file is the layout callback interface of seed 002 ("Layout
// Callbacks"), in Go form. The cache never looks inside a chunk: it knows a
// chunk only through these callbacks and the sizes they report, so that any
// layout that cuts a dataset into (hyper)rectangular chunks stored apart in
// the file can use it. The engine's layouts: dense chunked, sparse and
// variable-length (structured, multi-section chunks) and contiguous (one
// extent cut into pieces of whole rows, engine/contig.go).
//
// Seed 002 callback       → here
//   H5SC_layout_query     → Layout.ChunkDims
//   H5SC_chunk_lookup_t   → Layout.Lookup
//   H5SC_new_chunk_t      → Layout.NewChunk
//   H5SC_chunk_decode_t   → Layout.Decode
//   H5SC_chunk_encode_t   → Layout.Encode (never modifies the chunk)
//   H5SC_chunk_insert_t   → Layout.Insert (allocate) + Layout.Publish (index)
//   H5SC_chunk_scatter_mem_t → Layout.Scatter; fill of absent chunks → Layout.ScatterFill
//   H5SC_chunk_gather_mem_t  → Layout.Gather
//   H5SC_chunk_fill_t     → NewChunk(fill) for new chunks, ScatterFill for
//                           absent ones, Trim after a shrink
//   H5SC_chunk_erase_values_t (set extent) → Layout.Trim
//   H5SC_delete_chunk_t   → Layout.Delete (extent); a chunk emptied by
//                           erasing is deleted by its layout's Publish
//   H5SC_chunk_evict_t    → optional Evicter (dense and contiguous
//                           chunks give their pooled buffers back)
//   H5SC_chunk_condense_t → optional Condenser (sparse and variable-length
//                           chunks, which grow and shrink, drop slack and
//                           defragment their heaps; engine/condense.go)
//   direct chunk read/write, whole chunks → optional DirectReader,
//                           DirectWriter (direct.go, directwrite.go):
//                           dense chunks both ways, contiguous pieces
//                           (fixed-size blocks of one extent, each with
//                           its own checksum) read directly
//
// The operations seed 002 gives layouts of structured chunks are carried
// by the Piece instead of by more callbacks: a Piece is the layout's own
// value, so a layout can make a request mean "read values", "define"
// (write), "erase values" or "report defined values", and its Scatter and
// Gather do what the piece says. The cache's rules stay those of a read
// (Scatter, shared) and a write (Gather, exclusive, chunk re-sized and
// dirtied afterwards). The engine's sparse layout (engine/sparse.go) works
// this way:
//
//   H5SC_chunk_defined_values_t → Scatter of a "defined" piece
//   H5SC_chunk_erase_values_t (user erase) → Gather of an "erase" piece;
//                           a chunk left with no defined value encodes to
//                           an empty image, which Publish turns into a
//                           deletion (delete_chunk)
//   H5SC_chunk_decode_defined_values_t → a second registered dataset
//                           whose Lookup locates only the selection
//                           section of a stored chunk and whose Decode
//                           decodes only it (seed 001 §2.1 item 6): the
//                           cache loads and keeps selections without the
//                           values, in the same budget. Its chunk
//                           coordinates name the stored version, so a kept
//                           selection is never stale.
//
// Not part of the interface, and why:
//   - evict_values: with selections kept by their own dataset, a whole
//     chunk need not shed its values to keep its selection; evicting it
//     whole is enough.
//   - encode_in_place: Encode writes the image into a pooled buffer the
//     cache owns (Encoded.Pooled) and the chunk's buffer is recycled on
//     Evict, so an in-place variant would save no allocation.
//   - selection/vector read and write of part of a chunk (reading or
//     writing a piece straight between disk and the caller's buffer):
//     not implemented. A dense chunk's stored frame carries one checksum
//     over the whole image, which a partial direct read could not verify,
//     and a partial direct write would overwrite the only good copy in
//     place (DESIGN.md "No data loss"). Structured chunks checksum each
//     section, so a per-section direct read is verifiable; the selection
//     view above is that read, made through the cache. Whole chunks go
//     directly: a whole unfiltered chunk that is not resident is read
//     into the caller's buffer and verified there (DirectReader), and
//     written from it into newly allocated space with its checksum from a
//     side buffer (DirectWriter). Other chunks larger than
//     Config.BypassBytes skip the cache by being loaded, served and
//     dropped at once (the fallback seed 002 names for "Skip Cache").

// Coord is a chunk's scaled coordinates: element coordinates divided by the
// chunk dimensions, so adjacent chunks differ by one (seed 002 "scaled").
type Coord []uint64

// Location says where a chunk's encoded image lives in the file (the outputs
// of H5SC_chunk_lookup_t).
type Location struct {
	// Addr is the file offset of the stored image. Meaningful only when Size > 0.
	Addr int64
	// Size is the stored (encoded) size in bytes; 0 means the chunk does not
	// exist on disk.
	Size int64
	// Mask is the filter mask stored with the chunk: bit i set means filter i
	// of the pipeline was skipped when the chunk was encoded.
	Mask uint32
	// SizeHint is the number of bytes the decoded chunk will occupy in cache
	// memory (seed 002 size_hint); the cache uses it to reserve space before
	// loading.
	SizeHint int64
	// Sum is the layout's checksum of the stored image, recorded in its
	// chunk index. Opaque to the cache, which carries it from Lookup to
	// Decode so the layout can tell the image it meant from another valid
	// one at a reused address.
	Sum uint32
}

// Exists reports whether the chunk has an image on disk.
func (l Location) Exists() bool { return l.Size > 0 }

// Chunk is a chunk in cache memory format (seed 002 "Data Formats"). The
// cache holds it opaquely and charges MemSize against its budget; MemSize is
// re-read after every Decode, NewChunk, Gather and Trim because a layout may
// grow or shrink its chunks (sparse sections).
type Chunk interface {
	MemSize() int64
}

// Encoded is a chunk in disk format: the bytes written to the file and the
// filter mask recorded in the chunk index.
type Encoded struct {
	Image []byte
	Mask  uint32
	// Sum is the layout's checksum of Image, opaque to the cache, which
	// carries it to Insertion.Sum.
	Sum uint32
	// Pooled says Image came from GetBuf: the cache owns it and gives it
	// back with PutBuf once it is written or dropped (bufpool.go).
	Pooled bool
}

// Insertion is one chunk handed to Layout.Insert and then Layout.Publish:
// Old is where the cache last knew the chunk to live (Size 0 if nowhere),
// Size/Mask describe the new image, and Insert sets New to the place the
// cache must write the image to.
type Insertion struct {
	Coord Coord
	Old   Location
	Size  int64
	Mask  uint32
	Sum   uint32 // Encoded.Sum of the image
	New   Location
}

// Piece is the part of one I/O request that falls in one chunk: the
// selection inside the chunk and where its elements sit in the caller's
// buffer, and what to do there (see above: a layout may give pieces kinds).
// The cache never looks inside; it hands the piece back to Scatter,
// ScatterFill, Gather and the direct paths (DirectReader, DirectWriter).
type Piece any

// Layout is implemented by every storage layout whose chunks go through the
// cache. One Layout value serves one registered dataset.
//
// Concurrency: the cache calls Lookup, Insert, Publish, Delete and ScatterFill from
// many goroutines at once; the layout must synchronize its chunk index and
// file-space allocator itself. Decode, NewChunk and Encode run on the worker
// pool, concurrently for different chunks. For one chunk the cache
// guarantees: Gather and Trim run alone (no Scatter, Encode or other Gather
// at the same time); Scatter and Encode may run together (both only read).
type Layout interface {
	// ChunkDims reports the chunk shape in elements (H5SC_layout_query).
	ChunkDims() []uint64

	// Lookup fills locs[i] with the on-disk location of coords[i]
	// (H5SC_chunk_lookup_t); a chunk stored nowhere gets a zero Size but a
	// valid SizeHint.
	Lookup(ctx context.Context, coords []Coord, locs []Location) error

	// NewChunk creates an in-memory chunk that exists nowhere yet
	// (H5SC_new_chunk_t). With fill set, every element holds the fill value;
	// without, the contents are unspecified because the caller overwrites
	// all of them.
	NewChunk(coord Coord, fill bool) (Chunk, error)

	// Decode turns a stored image into cache memory format
	// (H5SC_chunk_decode_t). It owns image afterwards. A damaged image is an
	// error wrapping the layout's corruption sentinel, never a panic.
	Decode(coord Coord, loc Location, image []byte) (Chunk, error)

	// Encode builds the disk image of chunk (H5SC_chunk_encode_t) without
	// modifying it.
	Encode(coord Coord, chunk Chunk) (Encoded, error)

	// Insert allocates file space for chunks about to be written
	// (H5SC_chunk_insert_t, first half): for each insertion it allocates
	// Size bytes that no committed state references and sets New. It does
	// not yet change the chunk index. The cache then writes all the images
	// itself, so that many chunks go out in one vector write, and calls
	// Publish with the outcome.
	//
	// Departure from seed 002, on purpose: the seed's insert records the new
	// address in the index before the write. Here a commit running
	// concurrently could then make durable an index that points at bytes not
	// yet written; splitting allocate from publish closes that window.
	Insert(ctx context.Context, ins []Insertion) error

	// Publish completes an Insert (H5SC_chunk_insert_t, second half). With
	// writeErr nil the images are on disk (not yet synced): the layout
	// records (New.Addr, Size, Mask) for each Coord in its chunk index and
	// releases the space the index held before. With writeErr set it
	// releases the New space and leaves the index alone. The cache never has
	// two Insert/Publish rounds for one chunk in flight at once, so publishes
	// for a chunk arrive in the order its versions were encoded.
	Publish(ctx context.Context, ins []Insertion, writeErr error) error

	// Scatter copies the piece's elements from chunk to the caller's buffer.
	Scatter(chunk Chunk, piece Piece) error

	// ScatterFill writes the fill value to the piece's elements in the
	// caller's buffer: a read of a chunk that exists nowhere does no I/O.
	ScatterFill(piece Piece) error

	// Gather copies the piece's elements from the caller's buffer into chunk.
	Gather(chunk Chunk, piece Piece) error

	// Trim resets every element of chunk that lies outside dims (the
	// dataset's new extent, in elements) to the fill value, after a shrink
	// (seed 002 H5Dset_extent: fill or erase the newly out-of-bounds
	// elements). It reports whether anything changed.
	Trim(coord Coord, chunk Chunk, dims []uint64) (bool, error)

	// Delete removes the chunk from the on-disk index and releases its space
	// (H5SC_delete_chunk_t): called for chunks that fall wholly outside a
	// shrunk extent.
	Delete(ctx context.Context, coord Coord, loc Location) error
}

// Evicter is implemented by layouts whose chunks hold resources beyond Go
// memory, or that recycle buffers (H5SC_chunk_evict_t). The cache calls
// Evict once when it drops a chunk and never touches the chunk again.
type Evicter interface {
	Evict(coord Coord, chunk Chunk)
}

// Condenser is implemented by layouts whose chunks can give back slack
// memory (H5SC_chunk_condense_t); the cache calls it before it would evict
// for space.
type Condenser interface {
	Condense(coord Coord, chunk Chunk) Chunk
}
