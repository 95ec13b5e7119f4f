package cache

import (
	"context"
)

// This file is the layout callback interface of SCC internal API ("Layout
// Callbacks"), in Go form. The cache never looks inside a chunk: it knows a
// chunk only through these callbacks and the sizes they report, so that any
// layout that cuts a dataset into (hyper)rectangular chunks stored apart in
// the file can use it. The engine's layouts: dense chunked, sparse and
// variable-length (structured, multi-section chunks) and contiguous (one
// extent cut into pieces of whole rows, engine/contig.go).
//
// The SCC internal API's callbacks, each with where it lives here and which of the
// engine's layouts implement it (dense = dense chunked, engine/layout.go;
// sparse, engine/sparse.go, with its selection view; vlen,
// engine/vlen.go; contig = contiguous, engine/contig.go; the direct paths
// for part of a chunk are in engine/directpart.go):
//
//   layout query          → Layout.ChunkDims: all.
//   lookup                → Layout.Lookup: all.
//   decode                → Layout.Decode: all.
//   decode_defined_values → a second registered dataset of a sparse
//                           dataset, the selection view, whose Lookup
//                           locates only the frame header and selection
//                           section of a stored chunk and whose Decode
//                           decodes only them (SCC requirements §2.1 item 6): the
//                           cache loads and keeps selections without the
//                           values, in the same budget; its coordinates
//                           name the stored version, so a kept selection
//                           is never stale. Not needed by dense, contig and
//                           vlen, where every element is defined.
//   new_chunk             → Layout.NewChunk: all.
//   condense              → optional Condenser: sparse and vlen, whose
//                           chunks grow and shrink (slack, heap
//                           defragmentation; engine/condense.go). Dense and
//                           contig chunks have a fixed size.
//   encode                → Layout.Encode (never modifies the chunk): all.
//   evict                 → optional Evicter: dense and contig give their
//                           pooled buffers back; sparse and vlen hold plain
//                           Go memory.
//   encode_in_place       → not part of the interface: Encode writes the
//                           image into a pooled buffer the cache owns
//                           (Encoded.Pooled) and Evict recycles the chunk's
//                           buffer, so an in-place variant saves nothing.
//   insert                → Layout.Insert (allocate) + Layout.Publish
//                           (index): all but the read-only selection view.
//   selection_read,       → one pair here, because the file layer has vector
//   vector_read             I/O only (vfd.Driver.ReadV): the layout names
//                           the bytes, the cache reads every chunk of a
//                           request that goes directly with one vector read
//                           per file (direct.go), in shares on the worker
//                           pool when large. Whole chunks: optional
//                           DirectReader (the stored bytes are the caller's
//                           bytes, read straight into the caller's buffer):
//                           dense unfiltered chunks, contig pieces. Part of
//                           a chunk: optional PartReader (directpart.go;
//                           blocks that each carry a checksum, read into
//                           pooled buffers, verified, served): contig (the
//                           whole piece, whose checksum covers it), sparse
//                           (the frame; the selection view reads the header
//                           and selection section alone), vlen (the frame).
//                           Dense chunks: whole only (see below).
//   selection_write,      → optional DirectWriter, whole chunks only: dense
//   vector_write            unfiltered chunks and contig pieces go from the
//                           caller's buffer to newly allocated space
//                           (directwrite.go; contig: the working extent);
//                           optional DirectEncoder: dense filtered chunks
//                           are encoded from the caller's buffer
//                           (directwrite_encode.go). Part
//                           of a chunk never goes directly: every layout's
//                           checksum covers a whole chunk frame, section or
//                           piece, so a partial write is a read-modify-write
//                           of it, and writing that at its place would
//                           overwrite the committed copy (DESIGN.md "No data
//                           loss"); written elsewhere it is what the cached
//                           path already does. The SCC internal API's other use of them,
//                           filling elements a shrink left out of bounds, is
//                           Trim.
//   scatter_mem           → Layout.Scatter; fill of absent chunks →
//                           Layout.ScatterFill: all.
//   gather_mem            → Layout.Gather: all but the selection view.
//   fill                  → NewChunk(fill) for new chunks, ScatterFill for
//                           absent ones, Trim after a shrink: all.
//   defined_values        → Scatter of a "defined" piece (below): sparse (and
//                           its selection view).
//   erase_values          → user erase: Gather of an "erase" piece (sparse);
//                           set extent: Layout.Trim (dense, sparse and vlen
//                           reset or undefine the elements outside the new
//                           extent; contig extents do not change).
//   evict_values          → not part of the interface: with selections kept
//                           by their own dataset (decode_defined_values), a
//                           chunk need not shed its values to keep its
//                           selection; evicting it whole is enough.
//   delete_chunk          → not a callback: a shrink prunes the layout's
//                           index itself (the engine's SetExtent, through
//                           its index's Resize, space freed copy-on-write)
//                           and the cache drops the cached chunks wholly
//                           outside (Dataset.SetExtent); a chunk emptied by
//                           erasing encodes to an empty image, which its
//                           layout's Publish turns into a deletion (sparse).
//
// The operations SCC internal API gives layouts of structured chunks are carried
// by the Piece instead of by more callbacks: a Piece is the layout's own
// value, so a layout can make a request mean "read values", "define"
// (write), "erase values" or "report defined values", and its Scatter and
// Gather do what the piece says. The cache's rules stay those of a read
// (Scatter, shared) and a write (Gather, exclusive, chunk re-sized and
// dirtied afterwards).
//
// When chunks go directly: a read of a whole chunk that is not resident
// whenever the layout offers the caller's bytes (DirectTarget); a read of
// part of a chunk when the chunk is not resident and larger than
// Config.BypassBytes (the chunks the cached path would load, serve and
// drop at once, or keep only by evicting others); a write of a whole one
// when the chunk is not resident and either larger than BypassBytes or
// too large for what is left under the quiescent limit (a full cache
// would keep it only by evicting others; directWorthIt).
// Other chunks above BypassBytes are loaded, served and dropped at once
// (the fallback SCC internal API names for "Skip Cache"). A resident copy, clean
// or dirty, always serves the request.
//
// Dense chunks are read and written directly only whole. A dense chunk's
// stored frame carries one CRC32C over the whole image (FORMAT.md chunk
// frame), which a partial read cannot verify. Per-block checksums were
// weighed and left out: they would need a new chunk frame version (a
// table of block sums beside the trailer, checked by Decode, Check, the
// raw chunk API and the direct paths) for a case the layouts already
// cover: a dense chunk is the unit its writer chose, read whole (as HDF5
// does) and, when larger than the cache and wanted whole, straight into
// the caller's buffer; an unfiltered array read in small parts belongs in
// smaller chunks or in the contiguous layout, whose ~64 KiB pieces are
// exactly such checksummed blocks. A partial read of a dense chunk larger
// than the cache therefore loads it, serves the part and drops it.

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
// Concurrency: the cache calls Lookup, Insert, Publish and ScatterFill from
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

// BorrowingEncoder is implemented by layouts whose disk image of a chunk
// can be the chunk's own memory (an unfiltered dense chunk and a checksum
// trailer written into its buffer's spare capacity): write-back then sends
// the chunk's bytes to the file without copying them into an image first.
//
// The cache calls EncodeBorrowed only to write the image back, never to
// keep it (the pre-encoder and prefetch use Encode). It holds the chunk's
// latch shared from the call until the vector write that carries the image
// has returned, through Layout.Insert of the write-back round, so no
// Gather or Trim can change the bytes while they are written; writers of
// that chunk wait meanwhile, as they wait for any Encode. An image with
// Pooled set is taken to be a copy (the layout may fall back to Encode)
// and releases the latch at once; one without is taken to alias the chunk.
type BorrowingEncoder interface {
	EncodeBorrowed(coord Coord, chunk Chunk) (Encoded, error)
}

// The interfaces below are the optional paths around the cache: a layout
// that implements one lets the cache read or write its chunks without
// making them resident, or checksum them by pieces. Each path is
// described in the file named in its doc.

// DirectReader is implemented by layouts whose stored images can be read
// straight into the caller's buffer (the path: direct.go).
type DirectReader interface {
	// DirectTarget returns, for a read piece and the chunk's location,
	// the caller's bytes the chunk's stored bytes map onto exactly (the
	// piece selects the whole chunk, contiguous in the caller's buffer, and
	// the image is the chunk without filters) and the length of the
	// trailer stored after them; ok false means "not directly".
	DirectTarget(loc Location, p Piece) (dst []byte, trailer int, ok bool)
	// VerifyDirect checks the bytes read into dst and the trailer against
	// each other and against loc, returning an error wrapping the layout's
	// corruption sentinel on a mismatch. dst's contents are then undefined.
	VerifyDirect(coord Coord, loc Location, dst, trailer []byte) error
}

// DirectSummer is implemented by DirectReaders whose check of the bytes
// read is a checksum that can be computed by pieces and combined, so that
// a split read (splitread.go) sums each piece on the goroutine that read
// it.
type DirectSummer interface {
	DirectReader
	// SumDirect returns the checksum of b, a piece of a chunk's bytes.
	SumDirect(b []byte) uint32
	// CombineDirect returns the checksum of a||b from the checksums of a
	// and b and b's length.
	CombineDirect(sa, sb uint32, nb int64) uint32
	// VerifyDirectSum is VerifyDirect given sum, the checksum of all of
	// dst computed by pieces: it checks the trailer and sum against loc.
	VerifyDirectSum(coord Coord, loc Location, sum uint32, dst, trailer []byte) error
}

// Block is a byte range of a chunk's stored image, from Location.Addr.
type Block struct{ Off, Len int64 }

// PartReader is implemented by layouts whose stored chunks can be read
// and verified in part (the path: directpart.go).
type PartReader interface {
	// PartBlocks returns the blocks of the stored image at loc that
	// serve pieces (every request of the read that falls in the chunk),
	// each of which the layout can verify on its own; ok false means
	// "not in part" and the cached path serves the read. Blocks lie
	// inside [0, loc.Size) and do not overlap.
	PartBlocks(coord Coord, loc Location, pieces []Piece) (blocks []Block, ok bool)
	// ReadPart verifies each block read (bufs[i] holds blocks[i]) against
	// its own checksum and serves the pieces from them as Scatter would.
	// A mismatch is an error wrapping the layout's corruption sentinel;
	// the caller's bytes of the pieces are then undefined. ReadPart owns
	// bufs (from internal/bufpool) and may give them back with bufpool.Put.
	ReadPart(coord Coord, loc Location, pieces []Piece, blocks []Block, bufs [][]byte) error
}

// DirectWriter is implemented by layouts whose stored image of a chunk can
// be the caller's bytes themselves, framed by small side buffers (the
// path: directwrite.go).
type DirectWriter interface {
	// DirectSource returns the caller's bytes that are the chunk's
	// unfiltered contents for a piece that selects the whole chunk (they
	// are contiguous in the caller's buffer); ok false means "not
	// directly". It must not copy: the bytes are written as they are.
	DirectSource(coord Coord, p Piece) (src []byte, ok bool)
	// DirectFrame returns the frame around src: head is written before it
	// and tail after it (either may be empty), sum is what Encode would
	// have reported as Encoded.Sum for the same frame. The image stored is
	// head+src+tail with filter mask 0.
	DirectFrame(coord Coord, src []byte) (head, tail []byte, sum uint32)
}

// SummedDecoder is implemented by layouts whose Decode verifies a checksum
// that can be computed by pieces (DirectSummer's SumDirect and
// CombineDirect) over a prefix of the stored image.
type SummedDecoder interface {
	DirectSummer
	// SummedLen returns how many leading bytes of the stored image at loc
	// its checksum covers, or -1 when this image cannot be decoded from a
	// sum (Decode is used).
	SummedLen(loc Location) int64
	// DecodeSummed is Decode given sum, the checksum of
	// image[:SummedLen(loc)] computed by pieces while it was read: it
	// checks sum where Decode would compute it. It owns image as Decode
	// does.
	DecodeSummed(coord Coord, loc Location, image []byte, sum uint32) (Chunk, error)
}
