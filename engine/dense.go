package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/internal/bufpool"
)

// denseLayout implements the cache's layout callbacks (SCC internal API) for dense
// chunked datasets. In cache memory a chunk is the uncompressed array of its
// elements in C order (the "legacy chunk" format of SCC internal API's Q&A); on disk
// it is that array run through the filter pipeline, followed by the
// dataset's chunk checksum of the stored bytes (format.ChunkSum).
//
// Concurrency: the index and the allocator synchronize themselves; the
// callbacks keep no other state, so they are safe from any goroutine.
type denseLayout struct {
	indexedStorage
	// sh is the sharded chunk codec (shard.go), nil when chunks are one
	// frame each.
	sh *shardState
}

var (
	_ layout.Layout       = (*denseLayout)(nil)
	_ layout.Evicter      = (*denseLayout)(nil)
	_ layout.DirectReader = (*denseLayout)(nil)
	_ layout.DirectWriter = (*denseLayout)(nil)
)

// denseChunk is a chunk in cache memory format. buf comes from the cache's
// buffer pool (bufpool.Get) and starts at its buffer's first byte, so
// Evict can give it back; MemSize is the whole buffer, which is what it
// costs.
type denseChunk struct {
	buf []byte
	// shard, for a sharded chunk decoded from the file, is what its
	// first write-back may take as stored (shardMemo).
	shard atomic.Pointer[shardMemo]
	// unfilled says buf holds the fill value only inside written
	// (selection.FillOutside), the boxes gathered since a write that
	// did not cover the chunk created it: the rest of buf is whatever a
	// recycled buffer held until filled (denseLayout.ready). Gather,
	// which runs alone on a chunk, adds to written; the callbacks that
	// read the chunk, which may run together, fill it under fillMu.
	unfilled atomic.Bool
	fillMu   sync.Mutex
	written  []uint64
}

// Buffer ownership (internal/bufpool): a chunk's buffer belongs to its cache
// entry from NewChunk or Decode until Evict, which the cache calls only for
// an entry nobody has pinned (no Scatter copying out, no Gather, no Encode
// running). Encode copies or encodes the chunk into its own pooled image,
// which the cache owns (Encoded.Pooled) until it has been written. Decode
// owns the stored image it is given: it keeps it as the chunk or returns it.

func (c *denseChunk) MemSize() int64 { return int64(cap(c.buf)) }

func (l *denseLayout) ChunkDims() []uint64 { return l.s.chunk }

// maxStored bounds a stored chunk image: filters that do not shrink a chunk
// are skipped (the mask records it), so an image is at most the decoded size
// plus small per-filter framing and the checksum.
func (l *denseLayout) maxStored() int64 {
	if l.sh != nil {
		return l.sh.codec.MaxStored()
	}
	return l.s.chunkBytes + 4096 + 64*32
}

func (l *denseLayout) Lookup(ctx context.Context, coords []layout.Coord, locs []layout.Location) error {
	x, err := l.s.idx.get(ctx)
	if err != nil {
		return err
	}
	// Blocks the lookup loaded now count in the cache's budget.
	defer l.s.idx.account(x)
	for i, c := range coords {
		e, err := x.Get(ctx, c)
		if err != nil {
			return classify(err)
		}
		loc := layout.Location{SizeHint: l.memSize()}
		if e.Exists() {
			if !entryFits(e, l.maxStored()) {
				return fmt.Errorf("%w: chunk %v index entry (addr %d, size %d)", ErrCorrupt, []uint64(c), e.Addr, e.Size)
			}
			loc.Addr, loc.Size, loc.Mask, loc.Sum = int64(e.Addr), int64(e.Size), e.Mask, e.Sum
		}
		locs[i] = loc
	}
	return nil
}

// memSize is what one chunk costs in cache memory: its pooled buffer.
func (l *denseLayout) memSize() int64 { return int64(bufpool.Cap(int(l.s.chunkBytes))) }

func (l *denseLayout) NewChunk(_ layout.Coord, fill bool) (layout.Chunk, error) {
	if fill && l.sh == nil && l.s.chunkBytes >= lazyFillMin {
		// Filled when first read or encoded, and then only where the
		// writes meanwhile did not go: writes in parts that cover the
		// chunk (h5perf's quarter-chunk transfers, rows of an image)
		// leave nothing to fill, where a fill now would be a pass over
		// memory they overwrite at once.
		c := &denseChunk{buf: bufpool.GetFull(int(l.s.chunkBytes))}
		c.unfilled.Store(true)
		return c, nil
	}
	if fill {
		chunkFillBytes.Add(l.s.chunkBytes)
	}
	return &denseChunk{buf: newChunkBuf(l.s, fill)}, nil
}

// lazyFillMin is the smallest chunk whose fill is deferred (NewChunk): 16
// pages, below which the deferral's box list and lock are not worth
// setting up (a choice, not a measured crossover).
const lazyFillMin = 64 << 10

// lazyFillBoxes bounds the boxes a chunk remembers while unfilled (written):
// a chunk written in more parts is filled outside them at the next one.
const lazyFillBoxes = 64

// chunkFillBytes counts the bytes of new chunks set to the fill value
// (tests).
var chunkFillBytes atomic.Int64

// ready fills an unfilled chunk (denseChunk.unfilled) outside the boxes
// written since it was created, before anything reads it.
func (l *denseLayout) ready(c *denseChunk) {
	if !c.unfilled.Load() {
		return
	}
	c.fillMu.Lock()
	if c.unfilled.Load() {
		n := selection.FillOutside(c.buf, l.s.chunk, c.written, l.s.elemSize, l.s.fill)
		chunkFillBytes.Add(int64(n))
		c.written = nil
		c.unfilled.Store(false)
	}
	c.fillMu.Unlock()
}

// newChunkBuf returns a pooled buffer for one new chunk of s; with fill,
// holding the fill value (zeros unless s has one), otherwise whatever a
// recycled buffer held.
func newChunkBuf(s *dsState, fill bool) []byte {
	n := int(s.chunkBytes)
	switch {
	case !fill:
		return bufpool.GetFull(n)
	case s.fill == nil:
		return bufpool.GetZeroed(n)
	}
	buf := bufpool.Get(n)
	selection.FillChunk(buf, s.elemSize, s.fill)
	return buf
}

// Evict gives the chunk's buffer back to the pool (layout.Evicter): the
// cache never touches an evicted chunk again.
func (l *denseLayout) Evict(_ layout.Coord, chunk layout.Chunk) {
	if c, ok := chunk.(*denseChunk); ok {
		bufpool.Put(c.buf)
		c.buf = nil
	}
}

func (l *denseLayout) Decode(coord layout.Coord, loc layout.Location, image []byte) (layout.Chunk, error) {
	if l.sh != nil {
		return l.sh.decode(coord, loc, image)
	}
	img, err := l.verifyImage(coord, loc, image)
	if err != nil {
		return nil, err
	}
	return l.decodeVerified(coord, loc, image, img)
}

// verifyImage checks that image is the stored frame the index names at loc
// and returns its verified payload; on error it gives image back to the
// pool.
func (l *denseLayout) verifyImage(coord layout.Coord, loc layout.Location, image []byte) ([]byte, error) {
	if format.Trailer(image) != loc.Sum {
		// Intact or not, these are not the bytes the index names: space a
		// writer reused under a reader that fell behind (see refresh.go).
		bufpool.Put(image)
		return nil, fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, []uint64(coord), l.s.name, loc.Addr)
	}
	img, err := l.s.csum.VerifyFrame(coord, image)
	if err != nil {
		bufpool.Put(image)
		return nil, fmt.Errorf("chunk %v of %q: %w", []uint64(coord), l.s.name, classify(err))
	}
	return img, nil
}

// DecodeTarget lets a read of a whole filtered chunk that the cache would
// not keep be decoded straight into the caller's buffer
// (cache/directdecode.go), under the conditions of DirectTarget's
// contiguous run. Unfiltered chunks go by DirectTarget instead (read, not
// decoded, into the caller's bytes); chunks under directMin stay on the
// cached path, where keeping them is cheap.
func (l *denseLayout) DecodeTarget(_ layout.Location, p layout.Piece) ([]byte, bool) {
	if (l.s.unfiltered && l.sh == nil) || l.s.chunkBytes < directMin {
		return nil, false
	}
	return l.wholeRun(p)
}

// DecodeInto is Decode into dst, the caller's bytes of the whole chunk
// (DecodeTarget): the same checks, and the pipeline writes its output
// there.
func (l *denseLayout) DecodeInto(coord layout.Coord, loc layout.Location, image, dst []byte) error {
	if l.sh != nil {
		return l.sh.decodeInto(coord, loc, image, dst)
	}
	img, err := l.verifyImage(coord, loc, image)
	if err != nil {
		return err
	}
	if int64(len(dst)) != l.s.chunkBytes {
		bufpool.Put(image)
		return fmt.Errorf("%w: chunk %v of %q: direct decode into %d bytes, chunk has %d", cache.ErrInvalid, []uint64(coord), l.s.name, len(dst), l.s.chunkBytes)
	}
	// img passed the frame checksum: a zstd frame checksum would check it again.
	buf, err := l.s.pipeline.DecodeVerifiedTo(dst[:0], img, loc.Mask, len(dst))
	bufpool.Put(image)
	if err != nil {
		return fmt.Errorf("chunk %v of %q: %w", []uint64(coord), l.s.name, classify(err))
	}
	if len(buf) != len(dst) {
		return fmt.Errorf("%w: chunk %v of %q: decoded %d bytes, want %d", ErrCorrupt, []uint64(coord), l.s.name, len(buf), len(dst))
	}
	if &buf[0] != &dst[0] {
		copy(dst, buf) // not decoded in place (cannot happen with cap >= chunkBytes)
	}
	return nil
}

var _ layout.DirectDecoder = (*denseLayout)(nil)

// SummedLen and DecodeSummed let a split load (cache/splitload.go) hand
// Decode the checksum of an unfiltered chunk's bytes, computed by pieces
// on the goroutines that read them, instead of summing the image again:
// the frame checksum covers the image without its trailer.
func (l *denseLayout) SummedLen(loc layout.Location) int64 {
	if !l.s.unfiltered || l.sh != nil || loc.Mask != 0 || loc.Size != l.s.chunkBytes+format.ChunkFrameOverhead {
		return -1
	}
	return l.s.chunkBytes
}

// DecodeSummed is Decode given sum, the plain checksum (the dataset's
// format.ChunkSum Plain) of the image's first SummedLen(loc) bytes: the
// same checks (the trailer is the one the index names, the bytes match it)
// without summing them.
func (l *denseLayout) DecodeSummed(coord layout.Coord, loc layout.Location, image []byte, sum uint32) (layout.Chunk, error) {
	img, err := l.verifySummed(coord, loc, image, sum)
	if err != nil {
		return nil, err
	}
	return l.decodeVerified(coord, loc, image, img)
}

// verifySummed is verifyImage given the checksum of the image's payload
// computed by pieces (DecodeSummed); on error it gives image back to the
// pool.
func (l *denseLayout) verifySummed(coord layout.Coord, loc layout.Location, image []byte, sum uint32) ([]byte, error) {
	n := l.SummedLen(loc)
	if n < 0 || int64(len(image)) != loc.Size {
		// The cache sums only what SummedLen asked for; anything else is
		// a caller's mistake, not the file's.
		bufpool.Put(image)
		return nil, fmt.Errorf("%w: chunk %v of %q: summed decode of a %d-byte image", cache.ErrInvalid, []uint64(coord), l.s.name, len(image))
	}
	if format.Trailer(image) != loc.Sum {
		bufpool.Put(image)
		return nil, fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, []uint64(coord), l.s.name, loc.Addr)
	}
	if sum = l.s.csum.Bind(coord, sum); sum != loc.Sum {
		bufpool.Put(image)
		return nil, fmt.Errorf("%w: chunk %v of %q: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, []uint64(coord), l.s.name, loc.Sum, sum)
	}
	return image[:n:n], nil
}

var _ layout.ScatterDecoder = (*denseLayout)(nil)

// A transient decode streams (DecodeScatter) chunks of at least
// streamFrom bytes through a buffer of streamPiece: smaller chunks stay in
// the core's caches between their decode and their scatter anyway, and
// there the copy out of the decoder's window would cost more than it
// saves. On the Zarr benchmark's 32 MiB chunks scattered into a 256 MiB
// array, one goroutine decoded and scattered 1.11-1.23x as fast streamed
// (engine/filter BenchmarkZstdScatter).
const (
	streamFrom  = 4 << 20
	streamPiece = 128 << 10
)

// DecodeScatter streams a large zstd chunk into the pieces of a transient
// decode (layout.ScatterDecoder): when the image streams
// (filter.Pipeline.StreamsVerified) and every piece is one ScatterRange
// takes.
func (l *denseLayout) DecodeScatter(coord layout.Coord, loc layout.Location, image []byte, pieces []layout.Piece, summed bool, sum uint32) (bool, error) {
	if l.sh != nil {
		if summed { // never (SummedLen): a sharded image's trailer is its index's
			return false, nil
		}
		return l.sh.decodeScatter(coord, loc, image, pieces)
	}
	if _, ok := l.ScatterHold(loc, image, pieces); !ok {
		return false, nil
	}
	var img []byte
	var err error
	if summed {
		img, err = l.verifySummed(coord, loc, image, sum)
	} else {
		img, err = l.verifyImage(coord, loc, image)
	}
	if err != nil {
		return true, err // image given back
	}
	buf := bufpool.GetFull(streamPiece)
	err = l.s.pipeline.DecodeVerifiedStream(img, loc.Mask, int(l.s.chunkBytes), buf, func(off int, b []byte) {
		for _, p := range pieces {
			pc := p.(*piece)
			selection.ScatterRange(pc.buf, pc.bufShape, b, uint64(off), l.s.chunk, pc.p, l.s.elemSize)
		}
	})
	bufpool.Put(buf)
	bufpool.Put(image)
	if err != nil {
		return true, fmt.Errorf("chunk %v of %q: %w", []uint64(coord), l.s.name, classify(err))
	}
	streamedDecodes.Add(1)
	return true, nil
}

// ScatterHold reports whether DecodeScatter streams image into pieces,
// and the memory it holds meanwhile: its piece buffer and the decoder's
// window, or a sharded chunk's inner chunk scratch (scatterHold)
// (layout.ScatterHolder).
func (l *denseLayout) ScatterHold(loc layout.Location, image []byte, pieces []layout.Piece) (int64, bool) {
	if l.sh != nil {
		return l.sh.scatterHold(pieces)
	}
	if l.s.unfiltered || l.s.chunkBytes < streamFrom || len(image) < format.ChunkFrameOverhead {
		return 0, false
	}
	window, ok := l.s.pipeline.StreamWindow(image[:len(image)-format.ChunkFrameOverhead], loc.Mask)
	if !ok {
		return 0, false
	}
	for _, p := range pieces {
		pc := p.(*piece)
		if pc.rows != nil || !selection.CanScatterRange(pc.bufShape, l.s.chunk, pc.p, l.s.elemSize) {
			return 0, false
		}
	}
	return window + streamPiece, true
}

var _ layout.ScatterHolder = (*denseLayout)(nil)

// streamedDecodes counts DecodeScatter's streamed chunks (tests).
var streamedDecodes atomic.Int64

var _ layout.SummedDecoder = (*denseLayout)(nil)

// decodeVerified is Decode after the checksum: img is image's verified
// payload (the image without its trailer).
func (l *denseLayout) decodeVerified(coord layout.Coord, loc layout.Location, image, img []byte) (layout.Chunk, error) {
	if l.s.unfiltered {
		if int64(len(img)) != l.s.chunkBytes || loc.Mask != 0 {
			bufpool.Put(image)
			return nil, fmt.Errorf("%w: chunk %v of %q: unfiltered image of %d bytes (mask %#x), want %d",
				ErrCorrupt, []uint64(coord), l.s.name, len(img), loc.Mask, l.s.chunkBytes)
		}
		if ms := l.memSize(); int64(cap(image)) == ms || ms == l.s.chunkBytes {
			// The image is the chunk: keep the frame's buffer (Decode owns
			// it) instead of copying it. Sliced from its first byte, with
			// the pool's capacity, so Evict can give it back.
			// (A chunk too small to pool keeps the capped image, as
			// before: its MemSize stays the chunk's size.)
			if ms == l.s.chunkBytes {
				return &denseChunk{buf: img}, nil
			}
			return &denseChunk{buf: image[:len(img)]}, nil
		}
		buf := bufpool.GetFull(int(l.s.chunkBytes))
		copy(buf, img)
		bufpool.Put(image)
		return &denseChunk{buf: buf}, nil
	}
	dst := bufpool.GetFull(int(l.s.chunkBytes))
	// img passed the frame checksum: a zstd frame checksum would check it again.
	buf, err := l.s.pipeline.DecodeVerifiedTo(dst[:0], img, loc.Mask, int(l.s.chunkBytes))
	bufpool.Put(image) // decoded (or failed): the image is no longer read
	if err != nil {
		bufpool.Put(dst)
		return nil, fmt.Errorf("chunk %v of %q: %w", []uint64(coord), l.s.name, classify(err))
	}
	if len(buf) > 0 && &buf[0] != &dst[0] {
		bufpool.Put(dst) // not decoded in place (cannot happen with cap >= chunkBytes)
	}
	return &denseChunk{buf: buf}, nil
}

func (l *denseLayout) Encode(coord layout.Coord, chunk layout.Chunk) (layout.Encoded, error) {
	c := chunk.(*denseChunk)
	l.ready(c)
	if l.sh != nil {
		return l.sh.encode(coord, c)
	}
	if l.s.unfiltered {
		// One copy, into a pooled buffer with room for the checksum: the
		// image must not alias the chunk, which may change before it is
		// written.
		img := bufpool.Get(len(c.buf) + format.ChunkFrameOverhead)[:len(c.buf)]
		copy(img, c.buf)
		img = l.s.csum.AppendFrame(coord, img)
		return layout.Encoded{Image: img, Sum: format.Trailer(img), Pooled: true}, nil
	}
	dst := bufpool.Get(l.s.pipeline.MaxEncoded(len(c.buf)) + format.ChunkFrameOverhead)
	img, mask, err := l.s.pipeline.EncodeTo(dst[:0], c.buf)
	if err != nil {
		bufpool.Put(dst)
		return layout.Encoded{}, classify(err)
	}
	img = l.s.csum.AppendFrame(coord, img)
	// The image fills dst from its first byte (EncodeTo with room enough),
	// so the cache can give it back once written.
	pooled := len(img) > 0 && &img[0] == &dst[0]
	if !pooled {
		bufpool.Put(dst) // img is elsewhere (not expected): dst is free
	}
	return layout.Encoded{Image: img, Mask: mask, Sum: format.Trailer(img), Pooled: pooled}, nil
}

// EncodeBorrowed is the write-back's Encode (layout.BorrowingEncoder). An
// unfiltered chunk's image is its own buffer with the checksum trailer
// appended in the buffer's spare capacity (pooled buffers have a tail for
// it, internal/bufpool), so write-back sends the chunk's bytes without the
// copy Encode makes. The trailer bytes lie past len(c.buf): nothing else
// reads or writes them, and only one write-back of a chunk runs at a time.
// Filtered chunks, and buffers without room, are encoded by Encode.
func (l *denseLayout) EncodeBorrowed(coord layout.Coord, chunk layout.Chunk) (layout.Encoded, error) {
	c := chunk.(*denseChunk)
	if !l.s.unfiltered || l.sh != nil || !borrowImages || cap(c.buf)-len(c.buf) < format.ChunkFrameOverhead {
		return l.Encode(coord, chunk)
	}
	l.ready(c)
	img := l.s.csum.AppendFrame(coord, c.buf[:len(c.buf):cap(c.buf)])
	return layout.Encoded{Image: img, Sum: format.Trailer(img)}, nil
}

var _ layout.BorrowingEncoder = (*denseLayout)(nil)

// EncodeBorrowedLate is EncodeBorrowed with the trailer left for
// SealFrame (layout.LateBorrower): a large chunk completed in memory is
// then checksummed while it is written back (cache/latesum.go).
func (l *denseLayout) EncodeBorrowedLate(coord layout.Coord, chunk layout.Chunk) (layout.Encoded, int, bool, error) {
	c := chunk.(*denseChunk)
	if !l.s.unfiltered || l.sh != nil || !borrowImages || cap(c.buf)-len(c.buf) < format.ChunkFrameOverhead {
		enc, err := l.Encode(coord, chunk)
		return enc, 0, false, err
	}
	l.ready(c)
	return layout.Encoded{Image: c.buf[: len(c.buf)+format.ChunkFrameOverhead : cap(c.buf)]}, format.ChunkFrameOverhead, true, nil
}

var _ layout.LateBorrower = (*denseLayout)(nil)

// WrittenBytes lets the cache write an unfiltered chunk back as soon as
// writes in parts have filled it (layout.WriteCounter,
// cache/completed.go): its write-back borrows the chunk's buffer
// (EncodeBorrowed), so it needs no memory of its own.
func (l *denseLayout) WrittenBytes(p layout.Piece) (n, whole int64, ok bool) {
	pc, isPiece := p.(*piece)
	if !l.s.unfiltered || l.sh != nil || !isPiece {
		return 0, 0, false
	}
	return int64(pc.p.N) * int64(l.s.elemSize), l.s.chunkBytes, true
}

var _ layout.WriteCounter = (*denseLayout)(nil)

// borrowImages switches EncodeBorrowed's borrowing on (tests and
// BenchmarkWriteBackBorrowed turn it off for the copying baseline).
var borrowImages = true

// Insert, Publish and Delete are the shared index writes (indexed.go):
// a dense chunk has nothing beside its index, and costs its buffer.
func (l *denseLayout) Insert(_ context.Context, ins []layout.Insertion) error {
	return l.insert(ins, l)
}

func (l *denseLayout) Publish(ctx context.Context, ins []layout.Insertion, writeErr error) error {
	return l.publish(ctx, ins, writeErr, l)
}

func (l *denseLayout) sizeHint(uint32) int64 { return l.memSize() }

func (l *denseLayout) Scatter(chunk layout.Chunk, p layout.Piece) error {
	c := chunk.(*denseChunk)
	l.ready(c)
	return l.ScatterFlat(c.buf, p)
}

// FlatBytes is the chunk's buffer (layout.FlatScatterer): a dense chunk's
// buffer is fixed from NewChunk or Decode to Evict. A chunk whose fill is
// still deferred (denseChunk.unfilled) has none to offer: the cache asks
// once, when it installs the chunk, and a hit on the bytes it returned
// would skip the fill that Scatter makes first. Such a chunk is read
// through Scatter for as long as it stays resident.
func (l *denseLayout) FlatBytes(chunk layout.Chunk) []byte {
	if c, ok := chunk.(*denseChunk); ok && !c.unfilled.Load() {
		return c.buf
	}
	return nil
}

// ScatterFlat is Scatter out of the chunk buffer buf.
func (l *denseLayout) ScatterFlat(buf []byte, p layout.Piece) error {
	pc := p.(*piece)
	if pc.rows != nil {
		pc.rows.scatter(pc.buf, buf)
		return nil
	}
	selection.Scatter(pc.buf, pc.bufShape, buf, l.s.chunk, pc.p, l.s.elemSize)
	return nil
}

var _ layout.FlatScatterer = (*denseLayout)(nil)

func (l *denseLayout) ScatterFill(p layout.Piece) error {
	pc := p.(*piece)
	selection.FillBuf(pc.buf, pc.bufShape, pc.p, l.s.elemSize, l.s.fill)
	return nil
}

func (l *denseLayout) Gather(chunk layout.Chunk, p layout.Piece) error {
	pc := p.(*piece)
	c := chunk.(*denseChunk)
	if m := c.shard.Load(); m != nil {
		m.change(l.sh.touched([]layout.Piece{p}), l.sh.codec.Grid.N())
	}
	if c.unfilled.Load() {
		c.fillMu.Lock()
		// Filled meanwhile (a reader's ready): nothing more to note.
		ok := !c.unfilled.Load() || len(c.written) < lazyFillBoxes*2*len(l.s.chunk)
		if ok && c.unfilled.Load() {
			c.written, ok = selection.AppendBox(c.written, pc.p, len(l.s.chunk))
		}
		c.fillMu.Unlock()
		if !ok {
			l.ready(c) // not a box, or too many: fill the rest now
		}
	}
	selection.Gather(c.buf, l.s.chunk, pc.buf, pc.bufShape, pc.p, l.s.elemSize)
	return nil
}

func (l *denseLayout) Trim(coord layout.Coord, chunk layout.Chunk, dims []uint64) (bool, error) {
	l.ready(chunk.(*denseChunk))
	chunk.(*denseChunk).shard.Store(nil) // every inner chunk may change
	return selection.Trim(chunk.(*denseChunk).buf, coord, l.s.chunk, dims, l.s.elemSize, l.s.fill), nil
}

// directMin is the smallest chunk read directly (see DirectTarget).
const directMin = 64 << 10

// DirectTarget lets a read of a whole unfiltered chunk that is not resident
// go by vector read straight into the caller's buffer (cache/direct.go):
// the piece must select every element of the chunk, and those elements must
// be one contiguous run of the caller's buffer (dimensions after some
// dimension j cover the buffer's full extent, dimensions before it one
// index), which is how whole frames, rows or slabs of chunks land.
//
// Chunks under directMin stay on the cached path: for them a system call
// costs more than the copy it saves, and keeping them is cheap.
func (l *denseLayout) DirectTarget(loc layout.Location, p layout.Piece) ([]byte, int, bool) {
	if !l.s.unfiltered || l.sh != nil || l.s.chunkBytes < directMin || loc.Mask != 0 || loc.Size != l.s.chunkBytes+format.ChunkFrameOverhead {
		return nil, 0, false
	}
	dst, ok := l.wholeRun(p)
	if !ok {
		return nil, 0, false
	}
	return dst, format.ChunkFrameOverhead, true
}

// wholeRun returns the caller's bytes a piece maps onto when it selects
// every element of the chunk and those elements are one contiguous run of
// the caller's buffer (dimensions after some dimension j cover the
// buffer's full extent, dimensions before it one index), in the chunk's
// element order.
func (l *denseLayout) wholeRun(p layout.Piece) ([]byte, bool) {
	pc, ok := p.(*piece)
	if !ok {
		return nil, false
	}
	runs, shape := pc.p.Runs, pc.bufShape
	if len(runs) != len(l.s.chunk) || len(shape) != len(runs) {
		return nil, false
	}
	off, stride := uint64(0), uint64(l.s.elemSize)
	inner := true // every dimension after d covers the buffer's extent
	for d := len(runs) - 1; d >= 0; d-- {
		if len(runs[d]) != 1 {
			return nil, false
		}
		r := runs[d][0]
		if r.Chunk != 0 || r.Len != l.s.chunk[d] {
			return nil, false // not the whole chunk
		}
		if !inner && r.Len != 1 {
			return nil, false // not contiguous in the caller's buffer
		}
		off += r.Buf * stride
		inner = inner && r.Buf == 0 && r.Len == shape[d]
		stride *= shape[d]
	}
	end := off + uint64(l.s.chunkBytes)
	if end > uint64(len(pc.buf)) || end < off {
		return nil, false
	}
	return pc.buf[off:end:end], true
}

// DirectSource lets a write of a whole unfiltered chunk that is not
// resident go from the caller's buffer to the file (cache/directwrite.go,
// which decides when: chunks above the cache's bypass threshold). The
// stored frame is then the caller's bytes followed by DirectFrame's
// checksum trailer: the same bytes Encode would produce, written without
// a copy.
func (l *denseLayout) DirectSource(_ layout.Coord, p layout.Piece) ([]byte, bool) {
	if !l.s.unfiltered || l.sh != nil {
		return nil, false
	}
	return l.wholeRun(p)
}

// DirectFrame returns the chunk frame around src (FORMAT.md "chunk
// frame"): no header, the checksum trailer of src at coord.
func (l *denseLayout) DirectFrame(coord layout.Coord, src []byte) (head, tail []byte, sum uint32) {
	sum = l.s.csum.Sum(coord, src)
	return nil, binary.LittleEndian.AppendUint32(make([]byte, 0, format.ChunkFrameOverhead), sum), sum
}

// DirectFrameLate and SealFrame let the checksum of a large chunk be
// computed while its bytes are written (cache/latesum.go): the frame is
// the same, its trailer filled once the sum is known.
func (l *denseLayout) DirectFrameLate(layout.Coord, []byte) (head, tail []byte) {
	return nil, make([]byte, format.ChunkFrameOverhead)
}

func (l *denseLayout) SealFrame(coord layout.Coord, src, tail []byte) uint32 {
	sum := l.s.csum.Sum(coord, src)
	binary.LittleEndian.PutUint32(tail, sum)
	return sum
}

var _ layout.LateFramer = (*denseLayout)(nil)

// VerifyDirect checks a chunk read directly into the caller's buffer: the
// trailer must be the index's checksum and the checksum of the bytes read.
// On a mismatch the read fails with ErrCorrupt and the caller's buffer holds
// whatever was read (Dataset.Read documents it as undefined).
func (l *denseLayout) VerifyDirect(coord layout.Coord, loc layout.Location, dst, trailer []byte) error {
	if format.Trailer(trailer) != loc.Sum {
		return fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, []uint64(coord), l.s.name, loc.Addr)
	}
	if l.s.csum.Sum(coord, dst) != loc.Sum {
		return fmt.Errorf("%w: chunk %v of %q: checksum mismatch", ErrCorrupt, []uint64(coord), l.s.name)
	}
	return nil
}

// SumDirect, CombineDirect and VerifyDirectSum let a direct read split
// among goroutines (cache/splitread.go) checksum each piece on the
// goroutine that read it: the frame's plain checksum combines
// (format.ChunkSum's Combine), and is bound to the chunk once whole.
func (l *denseLayout) SumDirect(b []byte) uint32 { return l.s.csum.Plain(b) }

func (l *denseLayout) CombineDirect(sa, sb uint32, nb int64) uint32 {
	return l.s.csum.Combine(sa, sb, nb)
}

// VerifyDirectSum is VerifyDirect given the checksum of dst, computed by
// pieces.
func (l *denseLayout) VerifyDirectSum(coord layout.Coord, loc layout.Location, sum uint32, _, trailer []byte) error {
	if format.Trailer(trailer) != loc.Sum {
		return fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, []uint64(coord), l.s.name, loc.Addr)
	}
	if l.s.csum.Bind(coord, sum) != loc.Sum {
		return fmt.Errorf("%w: chunk %v of %q: checksum mismatch", ErrCorrupt, []uint64(coord), l.s.name)
	}
	return nil
}

var _ layout.DirectSummer = (*denseLayout)(nil)

// layoutDense is the header's layout code for dense chunked datasets.
const layoutDense = 1

func (l *denseLayout) kind() LayoutKind { return Chunked }

var _ layout.DirectEncoder = (*denseLayout)(nil)

// EncodeSource lets a write of a whole filtered chunk that the cache would
// not keep be encoded straight from the caller's buffer
// (cache/directwrite_encode.go), under the conditions of DecodeTarget,
// its read-side mirror: the chunk's elements are one contiguous run of the
// caller's buffer. Unfiltered chunks go by DirectSource instead (written
// as they are); chunks under directMin stay on the cached path, where
// keeping them is cheap.
func (l *denseLayout) EncodeSource(_ layout.Coord, p layout.Piece) ([]byte, bool) {
	if (l.s.unfiltered && l.sh == nil) || l.s.chunkBytes < directMin {
		return nil, false
	}
	return l.wholeRun(p)
}

// EncodeFrom is Encode of a chunk whose buffer is src, the caller's bytes
// of the whole chunk (EncodeSource): Encode only reads the chunk, into an
// image of its own (pooled, owned by the cache), so the caller's bytes are
// neither kept nor changed.
func (l *denseLayout) EncodeFrom(coord layout.Coord, src []byte) (layout.Encoded, error) {
	if int64(len(src)) != l.s.chunkBytes {
		return layout.Encoded{}, fmt.Errorf("%w: chunk %v of %q: direct encode of %d bytes, chunk has %d", cache.ErrInvalid, []uint64(coord), l.s.name, len(src), l.s.chunkBytes)
	}
	return l.Encode(coord, &denseChunk{buf: src})
}

// RowTarget lets a read of a whole unfiltered chunk that is not resident,
// whose bytes are not one run of the caller's buffer (DirectTarget), go
// straight into the caller's buffer by rows (cache/directrows.go): the
// piece selects the whole chunk, the chunk's trailing dimensions that
// span the buffer's whole extent fold into one row, and the others are
// walked. The conditions on the chunk are DirectTarget's.
func (l *denseLayout) RowTarget(loc layout.Location, p layout.Piece) (layout.Rows, int, bool) {
	if !l.s.unfiltered || l.sh != nil || l.s.chunkBytes < directMin || loc.Mask != 0 || loc.Size != l.s.chunkBytes+format.ChunkFrameOverhead {
		return layout.Rows{}, 0, false
	}
	pc, ok := p.(*piece)
	if !ok || pc.kind != pieceData {
		return layout.Rows{}, 0, false
	}
	runs, shape, chunk := pc.p.Runs, pc.bufShape, l.s.chunk
	r := len(chunk)
	if r == 0 || len(runs) != r || len(shape) != r {
		return layout.Rows{}, 0, false
	}
	// The buffer's byte stride along each dimension, and the first
	// element's offset; the piece must select the whole chunk.
	stride := make([]uint64, r)
	s := uint64(l.s.elemSize)
	var first uint64
	for d := r - 1; d >= 0; d-- {
		if len(runs[d]) != 1 || runs[d][0].Chunk != 0 || runs[d][0].Len != chunk[d] {
			return layout.Rows{}, 0, false
		}
		stride[d] = s
		first += runs[d][0].Buf * s
		s *= shape[d]
	}
	k := r - 1
	row := chunk[k] * uint64(l.s.elemSize)
	for k > 0 && chunk[k] == shape[k] {
		k--
		row *= chunk[k]
	}
	return layout.Rows{Buf: pc.buf, First: first, Len: row, Count: chunk[:k:k], Step: stride[:k:k]}, format.ChunkFrameOverhead, true
}

// SumRow continues the frame's plain checksum over b (layout.RowReader):
// the checksum of a chunk's rows taken in order is the checksum of its
// bytes (VerifyDirectSum binds it to the chunk).
func (l *denseLayout) SumRow(sum uint32, b []byte) uint32 { return l.s.csum.Update(sum, b) }
