package engine

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/scc-dev/scc/serialize"
)

// Raw chunk access: a chunk's encoded bytes (the filter pipeline's output,
// without the chunk frame's checksum) read and written without decoding
// and re-encoding, for exporters and importers that copy chunks between
// formats whose codecs match (SCC internal API "direct chunk read/write"; the
// cache's DirectRead and DirectWrite do the cache half).
//
// Coherence with the cache: a raw read or write holds the chunk's box in
// the serializer like a Read or Write of that box, so it is ordered with
// every overlapping request. A raw read writes a dirty cached copy back
// first and then reads what is stored; a raw write drops any cached copy
// and stores the new bytes, which the next Flush commits like any write.

// StoredChunk describes one chunk that exists in the file.
type StoredChunk struct {
	Coords     []uint64 // chunk coordinates (element index / chunk shape)
	Size       uint64   // encoded bytes, as ReadChunkRaw returns them
	FilterMask uint32   // bit i set: filter i was skipped for this chunk
	// Addr and Sum are where the chunk is stored and the checksum the
	// chunk index records for its stored frame (in format v5 keyed by
	// the dataset and the coordinates too): a rewrite of the chunk
	// changes them, so together with Size they name one stored version
	// of it, as an HTTP validator or a copier's change check needs,
	// without hashing the bytes again.
	Addr uint64
	Sum  uint32
}

// Chunks yields the dataset's stored chunks in C order of their
// coordinates. When the iteration starts, dirty chunks in the cache are
// written back, so that every chunk written before it is listed, and the
// list is taken from the chunk index; chunks never written (or deleted by
// a shrink) are absent and read as the fill value. An error is yielded
// once, and ends the iteration:
//
//	for c, err := range ds.Chunks(ctx) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(c.Coords, c.Size)
//	}
func (d *Dataset) Chunks(ctx context.Context) iter.Seq2[StoredChunk, error] {
	return func(yield func(StoredChunk, error) bool) {
		var out []StoredChunk
		err := d.checkRaw(false, "Chunks")
		if err == nil {
			err = d.s.f.follow(ctx, func() (err error) {
				out, err = d.storedChunks(ctx)
				return err
			})
		}
		if err != nil {
			yield(StoredChunk{}, err)
			return
		}
		for _, c := range out {
			if !yield(c, nil) {
				return
			}
		}
	}
}

func (d *Dataset) storedChunks(ctx context.Context) ([]StoredChunk, error) {
	s := d.s
	if !s.f.readOnly {
		cds, err := s.cacheDataset()
		if err != nil {
			return nil, err
		}
		if err := cds.Flush(ctx, false); err != nil {
			return nil, classify(err)
		}
	}
	s.extent.RLock()
	defer s.extent.RUnlock()
	x, err := s.idx.get(ctx)
	if err != nil {
		return nil, classify(err)
	}
	sh := s.shards()
	var out []StoredChunk
	err = x.Range(ctx, func(c []uint64, e index.Entry) bool {
		size := e.Size
		if sh != nil {
			size = uint64(sh.codec.PortableSize(int64(size)))
		} else if size >= format.ChunkFrameOverhead {
			size -= format.ChunkFrameOverhead
		}
		out = append(out, StoredChunk{Coords: clone(c), Size: size, FilterMask: e.Mask, Addr: e.Addr, Sum: e.Sum})
		return true
	})
	s.idx.account(x)
	if err != nil {
		return nil, classify(err)
	}
	slices.SortFunc(out, func(a, b StoredChunk) int { return slices.Compare(a.Coords, b.Coords) })
	return out, nil
}

// chunkRegion checks coords against the current chunk grid and returns the
// chunk's box for the serializer.
func (s *dsState) chunkRegion(coords []uint64) (serialize.Region, error) {
	if len(coords) != len(s.chunk) {
		return serialize.Region{}, fmt.Errorf("%w: dataset %q: chunk coordinates %v have rank %d, dataset has %d", ErrInvalid, s.path(), coords, len(coords), len(s.chunk))
	}
	shape := s.shape()
	for i, c := range coords {
		if c >= ceilDiv(shape[i], s.chunk[i]) {
			return serialize.Region{}, fmt.Errorf("%w: dataset %q: chunk %v outside the extent %v (chunk %v)", ErrOutOfRange, s.path(), coords, shape, s.chunk)
		}
	}
	hi := make([]uint64, len(coords))
	for i, c := range coords {
		hi[i] = c + 1
	}
	return serialize.Region{Dataset: s.id, Lo: clone(coords), Hi: hi}, nil
}

// ReadChunkRaw returns the chunk's encoded bytes and filter mask, its
// checksum verified (ErrCorrupt otherwise); ErrNotFound if the chunk is not
// stored (it reads as the fill value). A dirty cached copy is written back
// first, so the bytes are those of the latest write.
func (d *Dataset) ReadChunkRaw(ctx context.Context, coords []uint64) (data []byte, filterMask uint32, err error) {
	data, sc, err := d.readRawFollowing(ctx, coords, "ReadChunkRaw")
	return data, sc.FilterMask, err
}

// ReadChunkRawStored is ReadChunkRaw that also describes the chunk read
// as Chunks yields it: its size, filter mask, address and the
// index's checksum of the stored frame (a version of the chunk, for a
// validator that costs no hashing).
func (d *Dataset) ReadChunkRawStored(ctx context.Context, coords []uint64) (data []byte, chunk StoredChunk, err error) {
	return d.readRawFollowing(ctx, coords, "ReadChunkRawStored")
}

func (d *Dataset) readRawFollowing(ctx context.Context, coords []uint64, call string) (data []byte, sc StoredChunk, err error) {
	if err := d.checkRaw(false, call); err != nil {
		return nil, StoredChunk{}, err
	}
	err = d.s.f.follow(ctx, func() (err error) {
		data, sc, err = d.readChunkRaw(ctx, coords)
		return err
	})
	return data, sc, err
}

func (d *Dataset) readChunkRaw(ctx context.Context, coords []uint64) (data []byte, sc StoredChunk, err error) {
	s := d.s
	reg, err := s.chunkRegion(coords)
	if err != nil {
		return nil, sc, err
	}
	release, err := s.f.ser.Acquire(ctx, serialize.Request{Regions: []serialize.Region{reg}})
	if err != nil {
		return nil, sc, classify(err)
	}
	defer release()
	if err := s.gone(); err != nil {
		return nil, sc, err
	}
	cds, err := s.cacheDataset()
	if err != nil {
		return nil, sc, err
	}
	image, loc, err := cds.DirectRead(ctx, layout.Coord(coords))
	if err != nil {
		return nil, sc, classify(err)
	}
	if !loc.Exists() {
		return nil, sc, fmt.Errorf("%w: chunk %v of %q is not stored", ErrNotFound, coords, s.name)
	}
	if format.Trailer(image) != loc.Sum {
		return nil, sc, fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, coords, s.name, loc.Addr)
	}
	if sh := s.shards(); sh != nil {
		data, err := sh.export(coords, image)
		sc = StoredChunk{Coords: clone(coords), Size: uint64(len(data)), Addr: uint64(loc.Addr), Sum: loc.Sum}
		return data, sc, err
	}
	img, err := s.csum.VerifyFrame(coords, image)
	if err != nil {
		return nil, sc, fmt.Errorf("chunk %v of %q: %w", coords, s.name, classify(err))
	}
	if s.unfiltered && (int64(len(img)) != s.chunkBytes || loc.Mask != 0) {
		return nil, sc, fmt.Errorf("%w: chunk %v of %q: unfiltered image of %d bytes (mask %#x), want %d", ErrCorrupt, coords, s.name, len(img), loc.Mask, s.chunkBytes)
	}
	sc = StoredChunk{Coords: clone(coords), Size: uint64(len(img)), FilterMask: loc.Mask, Addr: uint64(loc.Addr), Sum: loc.Sum}
	return img[:len(img):len(img)], sc, nil
}

// StatChunkRaw describes the stored chunk at coords as ReadChunkRawStored
// would, from the chunk index alone, without reading the chunk: what a
// reader that holds a version of the chunk needs to tell whether it is
// still the stored one. ErrNotFound if the chunk is not stored. In a
// writable File a dirty cached copy is written back first (its bytes are
// then read, as ReadChunkRaw does), so the description is of the latest
// write; a read-only File has none.
func (d *Dataset) StatChunkRaw(ctx context.Context, coords []uint64) (chunk StoredChunk, err error) {
	if err := d.checkRaw(false, "StatChunkRaw"); err != nil {
		return StoredChunk{}, err
	}
	if !d.s.f.readOnly {
		_, chunk, err = d.readRawFollowing(ctx, coords, "StatChunkRaw")
		return chunk, err
	}
	err = d.s.f.follow(ctx, func() (err error) {
		chunk, err = d.statChunkRaw(ctx, coords)
		return err
	})
	return chunk, err
}

func (d *Dataset) statChunkRaw(ctx context.Context, coords []uint64) (StoredChunk, error) {
	s := d.s
	cs, err := s.chunks()
	if err != nil {
		return StoredChunk{}, err
	}
	reg, err := s.chunkRegion(coords)
	if err != nil {
		return StoredChunk{}, err
	}
	release, err := s.f.ser.Acquire(ctx, serialize.Request{Regions: []serialize.Region{reg}})
	if err != nil {
		return StoredChunk{}, classify(err)
	}
	defer release()
	if err := s.gone(); err != nil {
		return StoredChunk{}, err
	}
	// The chunk's hold orders the lookup with SetExtent and a refresh's
	// adopt, as for every data read (no extent lock).
	x, err := s.idx.get(ctx)
	if err != nil {
		return StoredChunk{}, classify(err)
	}
	e, err := x.Get(ctx, coords)
	s.idx.account(x)
	switch {
	case err != nil:
		return StoredChunk{}, classify(err)
	case !e.Exists():
		return StoredChunk{}, fmt.Errorf("%w: chunk %v of %q is not stored", ErrNotFound, coords, s.name)
	case !entryFits(e, cs.maxStored()) || e.Size < format.ChunkFrameOverhead:
		return StoredChunk{}, fmt.Errorf("%w: chunk %v index entry (addr %d, size %d)", ErrCorrupt, coords, e.Addr, e.Size)
	}
	size := e.Size - format.ChunkFrameOverhead
	if sh := s.shards(); sh != nil {
		size = uint64(sh.codec.PortableSize(int64(e.Size)))
	}
	return StoredChunk{Coords: clone(coords), Size: size, FilterMask: e.Mask, Addr: e.Addr, Sum: e.Sum}, nil
}

// WriteChunkRaw stores data, the filter pipeline's output for the whole
// chunk with filterMask naming the skipped filters, as the chunk at coords,
// replacing any stored or cached version; durable after the next Flush.
//
// The bytes are verified before anything changes: they must decode through
// the pipeline to exactly one chunk, and the chunk's elements outside the
// current extent (an edge chunk's padding) must hold the fill value, the
// engine's invariant for stored chunks; otherwise ErrInvalid and nothing
// is stored. data is not retained.
func (d *Dataset) WriteChunkRaw(ctx context.Context, coords []uint64, data []byte, filterMask uint32) error {
	if err := d.checkRaw(true, "WriteChunkRaw"); err != nil {
		return err
	}
	return d.writeRaw(ctx, coords, data, filterMask, rawWrite{})
}

// rawWrite is what sets one raw chunk write apart on the one path they
// all take (writeRaw).
type rawWrite struct {
	// check is the caller's check of the decoded chunk
	// (WriteChunkRawChecked), run on the decode that verifies the bytes.
	check func(chunk []byte) error
	// undecoded stores the bytes without decoding them: the caller has
	// checked what a later decode relies on (WriteChunkRawZlib). Only a
	// chunk wholly inside the extent may be stored so, since only a
	// decode can check an edge chunk's padding.
	undecoded bool
}

// writeRaw is every raw chunk write, after its entry point's checks of
// the dataset (checkRaw) and of its own arguments. The bytes are verified
// before the chunk's box is held, so a refused write waits for nobody.
// Under the hold the extent is fixed (SetExtent holds the dataset
// exclusively), but it may have changed before, so the coordinates and
// the padding (for an undecoded write: that the chunk is no edge chunk)
// are checked there. The frame goes to the cache's DirectWrite, which
// drops any cached copy and writes the frame before it returns.
func (d *Dataset) writeRaw(ctx context.Context, coords []uint64, data []byte, filterMask uint32, w rawWrite) error {
	s := d.s
	cs, err := s.chunks()
	if err != nil {
		return err
	}
	if _, err := s.chunkRegion(coords); err != nil {
		return err
	}
	if bound := cs.maxStored(); int64(len(data))+format.ChunkFrameOverhead > bound {
		return fmt.Errorf("%w: encoded chunk of %d bytes exceeds the stored bound %d", ErrInvalid, len(data), bound-format.ChunkFrameOverhead)
	}
	decoded := data  // verified by decoding: the chunk's elements
	var image []byte // the stored frame, when not data and its trailer
	sh := s.shards()
	switch {
	case sh != nil:
		var err error
		if image, decoded, err = sh.importRaw(coords, data, filterMask, !w.undecoded); err != nil {
			return err
		}
		defer bufpool.Put(image)
		defer bufpool.Put(decoded)
	case w.undecoded:
		decoded = nil
	case s.unfiltered:
		if int64(len(data)) != s.chunkBytes || filterMask != 0 {
			return fmt.Errorf("%w: unfiltered chunk of %d bytes (mask %#x), want %d bytes and mask 0", ErrInvalid, len(data), filterMask, s.chunkBytes)
		}
	default:
		dst := bufpool.Get(int(s.chunkBytes))
		defer bufpool.Put(dst)
		var err error
		if decoded, err = s.pipeline.DecodeTo(dst[:0], data, filterMask, int(s.chunkBytes)); err != nil {
			return fmt.Errorf("%w: encoded chunk does not decode through the pipeline: %v", ErrInvalid, err)
		}
		if int64(len(decoded)) != s.chunkBytes {
			return fmt.Errorf("%w: encoded chunk decodes to %d bytes, want %d", ErrInvalid, len(decoded), s.chunkBytes)
		}
	}
	if w.check != nil {
		if err := w.check(decoded); err != nil {
			return fmt.Errorf("%w: chunk %v of %q refused by the caller's check: %v", ErrInvalid, coords, s.name, err)
		}
	}
	reg, err := s.chunkRegion(coords)
	if err != nil {
		return err
	}
	release, err := s.f.ser.Acquire(ctx, serialize.Request{Regions: []serialize.Region{reg}, Write: true})
	if err != nil {
		return classify(err)
	}
	defer release()
	if err := s.gone(); err != nil {
		return err
	}
	if _, err := s.chunkRegion(coords); err != nil {
		return err
	}
	switch {
	case w.undecoded && s.isEdge(coords):
		return fmt.Errorf("%w: chunk %v became an edge chunk (the extent changed during the write)", ErrInvalid, coords)
	case !w.undecoded && !s.paddingIsFill(coords, decoded):
		return fmt.Errorf("%w: chunk %v: elements outside the extent %v are not the fill value", ErrInvalid, coords, s.shape())
	}
	cds, err := s.cacheDataset()
	if err != nil {
		return err
	}
	// The frame is the bytes and their trailer in one pooled buffer:
	// DirectWrite writes it before it returns and keeps no reference.
	if image != nil {
		err = cds.DirectWrite(ctx, layout.Coord(clone(coords)), layout.Encoded{Image: image, Sum: format.Trailer(image)})
		return classify(err)
	}
	buf := bufpool.Get(len(data) + format.ChunkFrameOverhead)
	frame := s.csum.AppendFrame(coords, append(buf[:0], data...))
	err = cds.DirectWrite(ctx, layout.Coord(clone(coords)), layout.Encoded{Image: frame, Mask: filterMask, Sum: format.Trailer(frame)})
	bufpool.Put(buf)
	return classify(err)
}

// paddingIsFill reports whether the elements of the decoded chunk at
// coords that lie outside the current extent hold the fill value: it trims
// a copy to the extent (selection.Trim, as a shrink does) and compares.
func (s *dsState) paddingIsFill(coords []uint64, decoded []byte) bool {
	if !s.isEdge(coords) {
		return true
	}
	shape := s.shape()
	trimmed := slices.Clone(decoded)
	selection.Trim(trimmed, coords, s.chunk, shape, s.elemSize, s.fill)
	return string(trimmed) == string(decoded)
}

// isEdge reports whether the chunk at coords reaches past the current
// extent in some dimension.
func (s *dsState) isEdge(coords []uint64) bool {
	shape := s.shape()
	for i, c := range coords {
		if (c+1)*s.chunk[i] > shape[i] {
			return true
		}
	}
	return false
}

// Stage describes a pipeline stage for code that interprets raw chunks
// (exporters mapping the pipeline onto another format's codecs): its name,
// one of "shuffle", "deflate" (raw DEFLATE, RFC 1951, no zlib or gzip
// wrapper), "zlib" (DEFLATE in the zlib framing, RFC 1950: what HDF5's
// deflate filter and numcodecs' Zlib store), "zstd" (one frame), "lz4" (u32 little-endian decoded length,
// then one LZ4 block) and "crc32c" (the input, then its CRC32C
// little-endian), and its level (0 for stages without one).
func (f Filter) Stage() (name string, level int) {
	switch f.spec.ID {
	case filter.Shuffle:
		return "shuffle", 0
	case filter.Deflate:
		return "deflate", int(f.spec.Level)
	case filter.Zlib:
		return "zlib", int(f.spec.Level)
	case filter.Zstd:
		return "zstd", int(f.spec.Level)
	case filter.LZ4:
		return "lz4", 0
	case filter.CRC32C:
		return "crc32c", 0
	}
	return f.spec.String(), int(f.spec.Level)
}

// rawLayout is where every raw chunk entry point (call names it) asks
// whether the dataset's layout has raw chunks, before it touches anything
// a layout keeps (the dense layout's stored bound, its index, its
// pipeline). Only a chunked dataset has: a sparse or variable-length
// chunk is a structured chunk of several sections, not one pipeline
// image, and a contiguous dataset has no chunks at all; they refuse the
// raw chunk calls (needLayouts) and are read with Read or ReadVlen.
func (d *Dataset) rawLayout(call string) error {
	return needLayouts(d.s, call, Chunked)
}

// checkRaw is check for the raw chunk API (see rawLayout).
func (d *Dataset) checkRaw(write bool, call string) error {
	if err := d.check(write); err != nil {
		return err
	}
	return d.rawLayout(call)
}
