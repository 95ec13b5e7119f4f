package engine

import (
	"context"
	"fmt"
)

// Helpers around the raw chunk API (rawchunk.go) for importers and
// exporters that need more than a byte copy: the chunk grid and size, the
// pipeline run by hand (DecodeChunk, EncodeChunk), and a raw write that
// also runs the caller's check of the content on the decode that verifies
// it (WriteChunkRawChecked), so a source format's own checksum is checked
// without decoding the chunk twice.

// ChunkGrid returns the number of chunks along each dimension at the
// current extent (a partial edge chunk counts as one): the bound of the
// chunk coordinates ReadChunkRaw and WriteChunkRaw take. Every layout
// answers it for its Chunk shape (a contiguous dataset's pieces).
func (d *Dataset) ChunkGrid() []uint64 {
	shape := d.s.shape()
	g := make([]uint64, len(shape))
	for i := range shape {
		g[i] = ceilDiv(shape[i], d.s.chunk[i])
	}
	return g
}

// ChunkBytes returns the decoded size of one chunk in bytes (the product of
// the chunk shape and the element size). Every layout answers it; for a
// variable-length dataset it is that product too, not what the chunk's
// sequences take.
func (d *Dataset) ChunkBytes() int { return int(d.s.chunkBytes) }

// DecodeChunk runs an encoded chunk (as ReadChunkRaw returns it) back
// through the dataset's pipeline and returns the chunk's elements
// (ChunkBytes bytes, little-endian, C order). Bytes that do not decode
// return ErrCorrupt; a dataset that is not chunked, ErrInvalid.
func (d *Dataset) DecodeChunk(data []byte, filterMask uint32) ([]byte, error) {
	if err := d.rawLayout("DecodeChunk"); err != nil {
		return nil, err
	}
	if sh := d.s.shards(); sh != nil {
		return sh.decodePortable(data, filterMask)
	}
	if d.s.unfiltered {
		if filterMask != 0 || int64(len(data)) != d.s.chunkBytes {
			return nil, fmt.Errorf("%w: unfiltered chunk of %d bytes (mask %#x), want %d", ErrCorrupt, len(data), filterMask, d.s.chunkBytes)
		}
		return clone(data), nil
	}
	out, err := d.s.pipeline.Decode(data, filterMask, int(d.s.chunkBytes))
	return out, classify(err)
}

// EncodeChunk runs one whole chunk's elements (ChunkBytes bytes) through the
// dataset's pipeline, producing what WriteChunkRaw takes (ErrInvalid on a
// dataset that is not chunked).
func (d *Dataset) EncodeChunk(chunk []byte) (data []byte, filterMask uint32, err error) {
	if err := d.rawLayout("EncodeChunk"); err != nil {
		return nil, 0, err
	}
	if int64(len(chunk)) != d.s.chunkBytes {
		return nil, 0, fmt.Errorf("%w: chunk of %d bytes, want %d", ErrInvalid, len(chunk), d.s.chunkBytes)
	}
	if sh := d.s.shards(); sh != nil {
		data, err = sh.encodePortable(chunk)
		return data, 0, err
	}
	if d.s.unfiltered {
		return clone(chunk), 0, nil
	}
	data, filterMask, err = d.s.pipeline.Encode(chunk)
	return data, filterMask, classify(err)
}

// WriteChunkRawChecked is WriteChunkRaw with the caller's own check of the
// content: check is called with the decoded chunk (ChunkBytes bytes,
// read-only, valid only during the call) from the one decode that verifies
// data, before anything is stored. An error from check refuses the write
// with ErrInvalid (check's error as text); nothing changes. Everything
// WriteChunkRaw verifies is verified too (the bytes decode to exactly one
// chunk; an edge chunk's elements outside the extent hold the fill value).
func (d *Dataset) WriteChunkRawChecked(ctx context.Context, coords []uint64, data []byte, filterMask uint32, check func(chunk []byte) error) error {
	if err := d.checkRaw(true, "WriteChunkRawChecked"); err != nil {
		return err
	}
	return d.writeRaw(ctx, coords, data, filterMask, rawWrite{check: check})
}
