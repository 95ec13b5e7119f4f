package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/serialize"
)

// SharedChunk is a chunk's encoded bytes as ReadChunkRawStored returns
// them, held in the shared chunk cache for every reader of that chunk
// (ReadChunkRawShared). Data is read-only and valid until Release.
type SharedChunk struct {
	Data []byte
	StoredChunk
	img *cache.StoredImage
}

// Release gives the chunk's bytes back to the cache; Data must not be used
// after. Releasing a zero SharedChunk does nothing.
func (c SharedChunk) Release() { c.img.Release() }

// ReadChunkRawShared is ReadChunkRawStored for readers that hand the bytes
// on without keeping them (a server answering many clients): the stored
// frame is held in the shared chunk cache, charged to its budget, so
// concurrent and repeated reads of one chunk share one read of the file
// and one buffer, and the memory of all of them is bounded by the cache's
// limit (a read waits for room when held chunks fill it). The frame's
// checksum is verified once, when it is read. The bytes are those of the
// version the chunk index names at the time of the call (a rewritten
// chunk is read anew). Release the result when done with Data.
//
// Sharded chunks are returned in their portable form, made for each call
// (as ReadChunkRaw does) and not shared.
func (d *Dataset) ReadChunkRawShared(ctx context.Context, coords []uint64) (SharedChunk, error) {
	if err := d.checkRaw(false, "ReadChunkRawShared"); err != nil {
		return SharedChunk{}, err
	}
	if d.s.shards() != nil {
		data, sc, err := d.readRawFollowing(ctx, coords, "ReadChunkRawShared")
		return SharedChunk{Data: data, StoredChunk: sc}, err
	}
	// The first try outside follow: the closure follow takes is an
	// allocation every request would pay, and only a follower's read
	// that found damage needs follow's retries after a refresh (which
	// try again from the start).
	out, err := d.readChunkShared(ctx, coords)
	if err == nil || !d.s.f.readOnly || !errors.Is(err, ErrCorrupt) {
		return out, err
	}
	err = d.s.f.follow(ctx, func() (err error) {
		out, err = d.readChunkShared(ctx, coords)
		return err
	})
	return out, err
}

func (d *Dataset) readChunkShared(ctx context.Context, coords []uint64) (SharedChunk, error) {
	s := d.s
	reg, err := s.chunkRegion(coords)
	if err != nil {
		return SharedChunk{}, err
	}
	release, err := s.f.ser.Acquire(ctx, serialize.Request{Regions: []serialize.Region{reg}})
	if err != nil {
		return SharedChunk{}, classify(err)
	}
	defer release()
	if err := s.gone(); err != nil {
		return SharedChunk{}, err
	}
	cds, err := s.cacheDataset()
	if err != nil {
		return SharedChunk{}, err
	}
	// reg.Lo is the serializer's copy of coords, which nothing changes.
	img, loc, err := cds.ReadStored(ctx, layout.Coord(reg.Lo), func(loc layout.Location, frame []byte) error {
		return s.verifyStored(reg.Lo, loc, frame)
	})
	if err != nil {
		return SharedChunk{}, classify(err)
	}
	if !loc.Exists() {
		return SharedChunk{}, fmt.Errorf("%w: chunk %v of %q is not stored", ErrNotFound, coords, s.name)
	}
	frame := img.Bytes()
	n := len(frame) - format.ChunkFrameOverhead
	data := frame[:n:n]
	return SharedChunk{
		Data:        data,
		StoredChunk: StoredChunk{Coords: reg.Lo, Size: uint64(n), FilterMask: loc.Mask, Addr: uint64(loc.Addr), Sum: loc.Sum},
		img:         img,
	}, nil
}

// verifyStored checks a stored frame read for the chunk at coords as
// readChunkRaw does: the frame is the one the index names, its checksum
// holds, and an unfiltered chunk has the chunk's size.
func (s *dsState) verifyStored(coords []uint64, loc layout.Location, frame []byte) error {
	if format.Trailer(frame) != loc.Sum {
		return fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, coords, s.name, loc.Addr)
	}
	img, err := s.csum.VerifyFrame(coords, frame)
	if err != nil {
		return fmt.Errorf("chunk %v of %q: %w", coords, s.name, classify(err))
	}
	if s.unfiltered && (int64(len(img)) != s.chunkBytes || loc.Mask != 0) {
		return fmt.Errorf("%w: chunk %v of %q: unfiltered image of %d bytes (mask %#x), want %d", ErrCorrupt, coords, s.name, len(img), loc.Mask, s.chunkBytes)
	}
	return nil
}
