package layout

import "context"

// Coord is a chunk's scaled coordinates: element coordinates divided by the
// chunk dimensions, so adjacent chunks differ by one (SCC internal API "scaled").
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
	// memory (SCC internal API size_hint); the cache uses it to reserve space before
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

// Chunk is a chunk in cache memory format (SCC internal API "Data Formats"). The
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
	// Pooled says Image came from the module's buffer pool
	// (internal/bufpool.Get): the cache owns it and gives it back with
	// bufpool.Put once it is written or dropped.
	Pooled bool
	// Tag is the layout's name for this encode, opaque to the cache,
	// which hands the image back with it once committed (Committer).
	Tag uint64
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
// Which callbacks may run concurrently, and what the cache guarantees
// for one chunk, is in the package documentation.
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
	// Departure from SCC internal API, on purpose: the seed's insert records the new
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
	// (SCC internal API H5Dset_extent: fill or erase the newly out-of-bounds
	// elements). It reports whether anything changed.
	Trim(coord Coord, chunk Chunk, dims []uint64) (bool, error)
}
