// Package layout is the contract between scc's chunk cache (package
// cache) and a storage layout, as database/sql/driver is to database/sql:
// a user of the cache creates and sizes it (cache.New, cache.Config,
// cache.Stats), while whoever implements a layout (the engine's dense,
// sparse, variable-length and contiguous layouts) implements the
// interfaces here and nothing else of the cache. It is named for what it
// describes rather than "driver", which in scc is a file driver
// (vfd.Driver).
//
// It imports only the standard library: a layout depends on the contract,
// not on the cache's internals, and the cache probes the optional
// interfaces itself (a type assertion on the registered Layout), so a
// layout gains a path by implementing one method set.
//
// This is the layout callback interface of SCC internal API ("Layout
// Callbacks"), in Go form. The cache never looks inside a chunk: it knows a
// chunk only through these callbacks and the sizes they report, so that any
// layout that cuts a dataset into (hyper)rectangular chunks stored apart in
// the file can use it. The engine's layouts: dense chunked, sparse and
// variable-length (structured, multi-section chunks) and contiguous (one
// extent cut into pieces of whole rows, engine/contig.go).
//
// # What the cache guarantees a layout
//
// Concurrency: the cache calls Lookup, Insert, Publish and ScatterFill
// from many goroutines at once; the layout must synchronize its chunk index
// and file-space allocator itself. Decode, NewChunk and Encode run on the
// cache's worker pool, concurrently for different chunks. For one chunk
// the cache serializes the callbacks with the chunk's latch: Gather, Trim
// and Condense run alone (no Scatter, Encode or other Gather at the same
// time); Scatter and Encode may run together (both only read). An
// EncodeBorrowed image keeps the chunk's latch held shared until it is
// written (BorrowingEncoder).
//
// Ordering: the cache never has two Insert/Publish rounds for one chunk in
// flight at once, so publishes for a chunk arrive in the order its versions
// were encoded. Evict is called once, when the chunk is dropped, and the
// cache never touches the chunk again.
//
// Ownership: Decode (and DecodeSummed, DecodeInto) owns the image it is
// given; an Encoded image with Pooled set belongs to the cache, which
// gives it back to the module's buffer pool once written or dropped;
// ReadPart owns its block buffers.
//
// Sizes: the cache charges Chunk.MemSize against its budget and re-reads
// it after every Decode, NewChunk, Gather, Trim and Condense.
//
// Errors: a damaged image is an error wrapping the layout's own corruption
// sentinel, never a panic; the cache returns the layout's errors wrapped,
// so errors.Is finds the sentinel. A panic in a callback run on a worker
// is recovered and reported as cache.ErrPanic.
//
// # The callbacks
//
// The SCC internal API's callbacks, each with where it lives in this
// package and which of the engine's layouts implement it (dense = dense
// chunked, engine/dense.go; sparse, engine/sparse.go, with its selection
// view; vlen, engine/vlen.go; contig = contiguous, engine/contig.go; each
// file holds all of its layout's callbacks, and what the direct paths for
// part of a chunk share is in engine/directpart.go):
//
//	layout query          → Layout.ChunkDims: all.
//	lookup                → Layout.Lookup: all.
//	decode                → Layout.Decode: all.
//	decode_defined_values → a second registered dataset of a sparse
//	                        dataset, the selection view, whose Lookup
//	                        locates only the frame header and selection
//	                        section of a stored chunk and whose Decode
//	                        decodes only them (SCC requirements §2.1 item 6): the
//	                        cache loads and keeps selections without the
//	                        values, in the same budget; its coordinates
//	                        name the stored version, so a kept selection
//	                        is never stale. Not needed by dense, contig and
//	                        vlen, where every element is defined.
//	new_chunk             → Layout.NewChunk: all.
//	condense              → optional Condenser: sparse and vlen, whose
//	                        chunks grow and shrink (slack, heap
//	                        defragmentation; engine/condense.go). Dense and
//	                        contig chunks have a fixed size.
//	encode                → Layout.Encode (never modifies the chunk): all.
//	evict                 → optional Evicter: dense and contig give their
//	                        pooled buffers back; sparse and vlen hold plain
//	                        Go memory.
//	encode_in_place       → not part of the interface: Encode writes the
//	                        image into a pooled buffer the cache owns
//	                        (Encoded.Pooled) and Evict recycles the chunk's
//	                        buffer, so an in-place variant saves nothing.
//	insert                → Layout.Insert (allocate) + Layout.Publish
//	                        (index): all but the read-only selection view.
//	                        Optional Committer: the cache tells the layout
//	                        where a chunk's written image now lives, and
//	                        which encode it was (Encoded.Tag), so that the
//	                        next write-back of the chunk can copy what did
//	                        not change from it: dense sharded chunks
//	                        (engine/shardmemo.go).
//	selection_read,       → one pair here, because the file layer has vector
//	vector_read             I/O only (vfd.Driver.ReadV): the layout names
//	                        the bytes, the cache reads every chunk of a
//	                        request that goes directly with one vector read
//	                        per file (cache/direct.go), in shares on the worker
//	                        pool when large. Whole chunks: optional
//	                        DirectReader (the stored bytes are the caller's
//	                        bytes, read straight into the caller's buffer):
//	                        dense unfiltered chunks, contig pieces. Part of
//	                        a chunk: optional PartReader (cache/directpart.go;
//	                        blocks that each carry a checksum, read into
//	                        pooled buffers, verified, served): contig (the
//	                        whole piece, whose checksum covers it), sparse
//	                        (the frame; the selection view reads the header
//	                        and selection section alone), vlen (the frame).
//	                        Dense chunks: whole only (see below).
//	selection_write,      → optional DirectWriter, whole chunks only: dense
//	vector_write            unfiltered chunks and contig pieces go from the
//	                        caller's buffer to newly allocated space
//	                        (cache/directwrite.go; contig: the working extent);
//	                        optional LateFramer: the checksum of a large
//	                        one is computed on another core while its
//	                        bytes are written (dense, contig);
//	                        optional DirectEncoder: dense filtered chunks
//	                        are encoded from the caller's buffer
//	                        (cache/directwrite_encode.go). Part
//	                        of a chunk never goes directly: every layout's
//	                        checksum covers a whole chunk frame, section or
//	                        piece, so a partial write is a read-modify-write
//	                        of it, and writing that at its place would
//	                        overwrite the committed copy (DESIGN.md "No data
//	                        loss"); written elsewhere it is what the cached
//	                        path already does. The SCC internal API's other use of them,
//	                        filling elements a shrink left out of bounds, is
//	                        Trim.
//	scatter_mem           → Layout.Scatter; fill of absent chunks →
//	                        Layout.ScatterFill: all.
//	gather_mem            → Layout.Gather: all but the selection view.
//	fill                  → NewChunk(fill) for new chunks, ScatterFill for
//	                        absent ones, Trim after a shrink: all.
//	defined_values        → Scatter of a "defined" piece (below): sparse (and
//	                        its selection view).
//	erase_values          → user erase: Gather of an "erase" piece (sparse);
//	                        set extent: Layout.Trim (dense, sparse and vlen
//	                        reset or undefine the elements outside the new
//	                        extent; contig extents do not change).
//	evict_values          → not part of the interface: with selections kept
//	                        by their own dataset (decode_defined_values), a
//	                        chunk need not shed its values to keep its
//	                        selection; evicting it whole is enough.
//	delete_chunk          → not a callback: a shrink prunes the layout's
//	                        index itself (the engine's SetExtent, through
//	                        its index's Resize, space freed copy-on-write)
//	                        and the cache drops the cached chunks wholly
//	                        outside (cache.Dataset.SetExtent); a chunk emptied by
//	                        erasing encodes to an empty image, which its
//	                        layout's Publish turns into a deletion (sparse).
//
// The operations SCC internal API gives layouts of structured chunks are carried
// by the Piece instead of by more callbacks: a Piece is the layout's own
// value, so a layout can make a request mean "read values", "define"
// (write), "erase values" or "report defined values", and its Scatter and
// Gather do what the piece says. The cache's rules stay those of a read
// (Scatter, shared) and a write (Gather, exclusive, chunk re-sized and
// dirtied afterwards).
package layout
