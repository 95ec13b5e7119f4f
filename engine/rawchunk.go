package engine

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/format"
	"github.com/scc-dev/scc/serialize"
)

// Raw chunk I/O: a chunk's stored, encoded image moved without running the
// filter pipeline — seed 002's direct chunk read and write
// (H5SC_direct_chunk_read/write), which the cache implements as
// cache.Dataset.DirectRead and DirectWrite. Export and import tools use it
// to copy encoded chunks between scc and formats whose filters match
// (HDF5's shuffle, for instance) without a decode and re-encode.
//
// What crosses the API is the filtered image alone (FORMAT.md §9 without
// the frame's CRC32C trailer) and the filter mask (bit i set: filter i of
// the dataset's pipeline was skipped). The engine owns the frame: a read
// checks the trailer against the index's record and the image's checksum
// before handing the image out; a write adds the trailer itself.
//
// Coherence with the shared cache: the cached copy of a chunk wins over the
// stored one. ReadChunkRaw writes a dirty cached copy back first (so the
// image returned is what Read would return); WriteChunkRaw drops any cached
// copy, dirty or clean, before it stores the new image, so the next Read
// decodes what was written. Both hold the chunk's region in the serializer
// like a Read or Write of that chunk (a write exclusively), so they are
// ordered against overlapping requests and SetExtent in receipt order.
//
// Durability is the same as Write's: a raw write is durable after the next
// successful File.Flush.

// RawChunk is one chunk's encoded image as the dataset's filter pipeline
// made it.
type RawChunk struct {
	// Image is the filtered image: what the pipeline's encoder produced,
	// without the container's CRC32C trailer. For an unfiltered dataset it
	// is the chunk's elements, packed little-endian in C order, and always
	// the whole chunk (edge chunks included: elements outside the extent
	// hold the fill value).
	Image []byte
	// Mask has bit i set when filter i of the pipeline was skipped because
	// it did not shrink the chunk (an optional compressor, as in HDF5).
	Mask uint32
}

// ChunkGrid returns the number of chunks along each dimension at the
// current extent (a partial edge chunk counts as one). Chunk coordinates
// given to ReadChunkRaw and WriteChunkRaw are below it.
func (d *Dataset) ChunkGrid() []uint64 {
	shape := d.s.shape()
	g := make([]uint64, len(shape))
	for i := range shape {
		g[i] = ceilDiv(shape[i], d.s.chunk[i])
	}
	return g
}

// ChunkBytes returns the decoded size of one chunk in bytes (the product of
// the chunk shape and the element size).
func (d *Dataset) ChunkBytes() int { return int(d.s.chunkBytes) }

// ReadChunkRaw returns the stored image of the chunk at chunk coordinates
// coord (element offset divided by the chunk shape). ok is false when the
// chunk is not stored (it reads as the fill value); a dirty cached copy is
// written back first, so a chunk written but not yet flushed is returned as
// it stands. The returned Image is a new slice owned by the caller.
//
// Errors: ErrOutOfRange for a coordinate outside the current chunk grid,
// ErrInvalid for a wrong rank, ErrCorrupt when the stored frame fails its
// checksum or is not the one the index names, ErrIO from the driver.
// Unlike Read, it does not refresh a read-only file that fell behind its
// writer: the caller sees ErrCorrupt and may Refresh and retry.
func (d *Dataset) ReadChunkRaw(ctx context.Context, coord []uint64) (c RawChunk, ok bool, err error) {
	if err := d.check(false); err != nil {
		return RawChunk{}, false, err
	}
	s := d.s
	h, err := s.rawHold(ctx, coord, false)
	if err != nil {
		return RawChunk{}, false, err
	}
	defer h.Release()
	cds, err := s.hotDataset()
	if err != nil {
		return RawChunk{}, false, err
	}
	frame, loc, err := cds.DirectRead(ctx, cache.Coord(coord))
	if err != nil {
		return RawChunk{}, false, classify(err)
	}
	if !loc.Exists() {
		return RawChunk{}, false, nil
	}
	if format.Trailer(frame) != loc.Sum {
		return RawChunk{}, false, fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, coord, s.name, loc.Addr)
	}
	img, err := format.VerifyChunk(frame)
	if err != nil {
		return RawChunk{}, false, fmt.Errorf("chunk %v of %q: %w", coord, s.name, classify(err))
	}
	return RawChunk{Image: img, Mask: loc.Mask}, true, nil
}

// WriteChunkRaw stores c as the chunk at chunk coordinates coord, replacing
// any stored or cached version. c must be an image this dataset's pipeline
// could have produced for one whole chunk: WriteChunkRaw decodes it once
// (without keeping the result) and refuses, with ErrInvalid, an image that
// does not decode to exactly ChunkBytes bytes under the pipeline and mask —
// so a raw write never stores a chunk that later reads fail on. The decode
// is the whole cost beyond the write itself; no encode runs. It proves the
// image is well formed, not that it holds the intended elements: a
// deflate stream has no checksum of its own, so one damaged in a way that
// still decodes to the right length goes unnoticed. Checking the source's
// own checksum (HDF5's Adler-32, say) is the caller's job.
//
// c.Image is not retained. Errors: ErrReadOnly, ErrOutOfRange (coordinate
// outside the current chunk grid), ErrInvalid (rank, bad image or mask),
// ErrIO; on error the chunk is as it was.
func (d *Dataset) WriteChunkRaw(ctx context.Context, coord []uint64, c RawChunk) error {
	return d.WriteChunkRawChecked(ctx, coord, c, nil)
}

// WriteChunkRawChecked is WriteChunkRaw with the caller's own check of the
// content: check is called with the decoded chunk (ChunkBytes bytes,
// read-only, valid only during the call) from the decode that verifies the
// image, before anything is stored. An error from check refuses the write
// with ErrInvalid (check's error as text). Import tools use it to verify the
// source format's checksum (HDF5's Adler-32) without decoding twice.
func (d *Dataset) WriteChunkRawChecked(ctx context.Context, coord []uint64, c RawChunk, check func(chunk []byte) error) error {
	if err := d.check(true); err != nil {
		return err
	}
	s := d.s
	if err := s.verifyRaw(c, check); err != nil {
		return fmt.Errorf("chunk %v of %q: %w", coord, s.name, err)
	}
	h, err := s.rawHold(ctx, coord, true)
	if err != nil {
		return err
	}
	defer h.Release()
	cds, err := s.hotDataset()
	if err != nil {
		return err
	}
	// The frame is the image and its trailer in one pooled buffer:
	// DirectWrite writes it before it returns and keeps no reference.
	buf := cache.GetBuf(len(c.Image) + format.ChunkFrameOverhead)
	frame := format.AppendChunkChecksum(append(buf[:0], c.Image...))
	err = cds.DirectWrite(ctx, cache.Coord(coord), cache.Encoded{Image: frame, Mask: c.Mask, Sum: format.Trailer(frame)})
	cache.PutBuf(buf)
	if err != nil {
		return classify(err)
	}
	s.dirty.Store(true)
	return nil
}

// DecodeChunk runs c back through the dataset's pipeline and returns the
// chunk's elements (ChunkBytes bytes, little-endian, C order). An image that
// does not decode returns ErrCorrupt.
func (d *Dataset) DecodeChunk(c RawChunk) ([]byte, error) {
	if d.s.unfiltered {
		if c.Mask != 0 || int64(len(c.Image)) != d.s.chunkBytes {
			return nil, fmt.Errorf("%w: unfiltered image of %d bytes (mask %#x), want %d", ErrCorrupt, len(c.Image), c.Mask, d.s.chunkBytes)
		}
		return clone(c.Image), nil
	}
	out, err := d.s.pipeline.Decode(c.Image, c.Mask, int(d.s.chunkBytes))
	return out, classify(err)
}

// EncodeChunk runs one whole chunk's elements (ChunkBytes bytes) through
// the dataset's pipeline, producing what WriteChunkRaw accepts.
func (d *Dataset) EncodeChunk(chunk []byte) (RawChunk, error) {
	if int64(len(chunk)) != d.s.chunkBytes {
		return RawChunk{}, fmt.Errorf("%w: chunk of %d bytes, want %d", ErrInvalid, len(chunk), d.s.chunkBytes)
	}
	if d.s.unfiltered {
		return RawChunk{Image: clone(chunk)}, nil
	}
	img, mask, err := d.s.pipeline.Encode(chunk)
	if err != nil {
		return RawChunk{}, classify(err)
	}
	return RawChunk{Image: img, Mask: mask}, nil
}

// verifyRaw checks that c decodes to one whole chunk. The caller's bytes
// are bad input, not damage on disk: the error is ErrInvalid, with the
// decoder's reason as text only (so ErrCorrupt stays out of the chain).
func (s *dsState) verifyRaw(c RawChunk, check func([]byte) error) error {
	if int64(len(c.Image))+format.ChunkFrameOverhead > s.layout.maxStored() {
		return fmt.Errorf("%w: image of %d bytes exceeds the largest stored chunk %d", ErrInvalid, len(c.Image), s.layout.maxStored()-format.ChunkFrameOverhead)
	}
	if s.unfiltered {
		if c.Mask != 0 || int64(len(c.Image)) != s.chunkBytes {
			return fmt.Errorf("%w: unfiltered image of %d bytes (mask %#x), want %d bytes, mask 0", ErrInvalid, len(c.Image), c.Mask, s.chunkBytes)
		}
		return runCheck(check, c.Image)
	}
	if check == nil && s.onlyShuffles() {
		// Shuffle is a permutation: an image of exactly the chunk's size
		// with no filter skipped always decodes, so the decode would prove
		// nothing the length does not.
		if c.Mask != 0 || int64(len(c.Image)) != s.chunkBytes {
			return fmt.Errorf("%w: shuffled image of %d bytes (mask %#x), want %d bytes, mask 0", ErrInvalid, len(c.Image), c.Mask, s.chunkBytes)
		}
		return nil
	}
	dst := cache.GetBuf(int(s.chunkBytes))
	defer cache.PutBuf(dst)
	out, err := s.pipeline.DecodeTo(dst[:0], c.Image, c.Mask, int(s.chunkBytes))
	if err != nil {
		return fmt.Errorf("%w: image does not decode: %v", ErrInvalid, err)
	}
	return runCheck(check, out)
}

// onlyShuffles reports whether every filter of the pipeline is a shuffle.
func (s *dsState) onlyShuffles() bool {
	for _, sp := range s.pipeline.Specs() {
		if sp.ID != filter.Shuffle {
			return false
		}
	}
	return true
}

func runCheck(check func([]byte) error, chunk []byte) error {
	if check == nil {
		return nil
	}
	if err := check(chunk); err != nil {
		return fmt.Errorf("%w: refused by the caller's check: %v", ErrInvalid, err)
	}
	return nil
}

// rawHold validates coord against the current extent and holds its chunk
// in the serializer, so the extent cannot change until the hold is
// released (SetExtent acquires the dataset exclusively).
func (s *dsState) rawHold(ctx context.Context, coord []uint64, write bool) (serialize.Hold, error) {
	r := len(s.chunk)
	if len(coord) != r {
		return serialize.Hold{}, fmt.Errorf("%w: chunk coordinate %v has rank %d, dataset has %d", ErrInvalid, coord, len(coord), r)
	}
	reg := serialize.Region{Dataset: s.id, Lo: make([]uint64, r), Hi: make([]uint64, r)}
	for i, c := range coord {
		hi, carry := bits.Add64(c, 1, 0)
		if carry != 0 {
			return serialize.Hold{}, fmt.Errorf("%w: chunk coordinate %v", ErrOutOfRange, coord)
		}
		reg.Lo[i], reg.Hi[i] = c, hi
	}
	h, err := s.f.ser.AcquireHold(ctx, serialize.Request{Regions: []serialize.Region{reg}, Write: write})
	if err != nil {
		return serialize.Hold{}, classify(err)
	}
	// Under the hold the extent is stable (see io.go).
	shape := s.shape()
	for i, c := range coord {
		if c >= ceilDiv(shape[i], s.chunk[i]) {
			h.Release()
			return serialize.Hold{}, fmt.Errorf("%w: chunk coordinate %v outside the chunk grid of extent %v", ErrOutOfRange, coord, shape)
		}
	}
	return h, nil
}

// Spec returns the filter's identity and level in engine/filter's terms,
// for tools that map a pipeline onto another format's filters.
func (f Filter) Spec() filter.Spec { return f.spec }
