package engine

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/scc-dev/scc/serialize"
)

// ReadInnerChunkRaw returns the encoded bytes and filter mask of one inner
// chunk of a sharded chunk (DatasetSpec.InnerChunk): inner is its place in
// the chunk's grid of inner chunks (each coordinate below the chunk shape
// divided by the inner chunk shape), and the bytes are the dataset's
// pipeline output for that inner chunk alone, its checksum verified
// (ErrCorrupt naming the inner chunk otherwise), as ReadChunkRaw returns a
// chunk's. Only the inner chunk and the chunk's index are read: a bridge
// that moves inner chunks one at a time (a Zarr v2 chunk, a Zarr v3 inner
// chunk) pays for the one it moves. ErrNotFound if the chunk is not stored
// or the inner chunk holds only the fill value (it is stored as no bytes);
// ErrInvalid for a dataset that is not sharded or inner coordinates
// outside the chunk; ErrOutOfRange for a chunk outside the extent. A
// dirty cached copy of the chunk is written back first.
func (d *Dataset) ReadInnerChunkRaw(ctx context.Context, chunk, inner []uint64) (data []byte, filterMask uint32, err error) {
	if err := d.checkRaw(false, "ReadInnerChunkRaw"); err != nil {
		return nil, 0, err
	}
	sh := d.s.shards()
	if sh == nil {
		return nil, 0, fmt.Errorf("%w: ReadInnerChunkRaw on dataset %q, whose chunks are not sharded", ErrInvalid, d.s.path())
	}
	g := sh.codec.Grid
	counts := g.Counts()
	if len(inner) != len(counts) {
		return nil, 0, fmt.Errorf("%w: dataset %q: inner chunk coordinates %v have rank %d, dataset has %d", ErrInvalid, d.s.path(), inner, len(inner), len(counts))
	}
	for k, q := range inner {
		if q >= counts[k] {
			return nil, 0, fmt.Errorf("%w: dataset %q: inner chunk %v outside the chunk's grid %v", ErrInvalid, d.s.path(), inner, counts)
		}
	}
	err = d.s.f.follow(ctx, func() (err error) {
		data, filterMask, err = sh.readInnerRaw(ctx, chunk, g.Linear(inner))
		return err
	})
	return data, filterMask, err
}

// readInnerRaw is ReadInnerChunkRaw of inner chunk i of the chunk at
// coords, under the chunk's hold.
func (sh *shardState) readInnerRaw(ctx context.Context, coords []uint64, i int) ([]byte, uint32, error) {
	s := sh.s
	reg, err := s.chunkRegion(coords)
	if err != nil {
		return nil, 0, err
	}
	release, err := s.f.ser.Acquire(ctx, serialize.Request{Regions: []serialize.Region{reg}})
	if err != nil {
		return nil, 0, classify(err)
	}
	defer release()
	if err := s.gone(); err != nil {
		return nil, 0, err
	}
	cds, err := s.cacheDataset()
	if err != nil {
		return nil, 0, err
	}
	coord := layout.Coord(coords)
	loc, err := cds.DirectLocate(ctx, coord)
	if err != nil {
		return nil, 0, classify(err)
	}
	if !loc.Exists() {
		return nil, 0, fmt.Errorf("%w: chunk %v of %q is not stored", ErrNotFound, coords, s.name)
	}
	if loc.Size > sh.codec.MaxStored() {
		return nil, 0, fmt.Errorf("%w: chunk %v of %q: stored size %d above the sharded chunk's bound %d", ErrCorrupt, coords, s.name, loc.Size, sh.codec.MaxStored())
	}
	es, err := sh.index(coord, loc)
	if err != nil {
		return nil, 0, err
	}
	e := es[i]
	if e.Empty() {
		return nil, 0, fmt.Errorf("%w: inner chunk %v of chunk %v of %q is not stored (it reads as the fill value)", ErrNotFound, sh.codec.Grid.Coord(i), coords, s.name)
	}
	// The index's bytes are read again beside the frame: their checksum,
	// the chunk index's, proves a kept index is this version's, so the
	// frame's place is not space a writer has reused since.
	n := int64(sh.codec.IndexSize())
	tail := bufpool.GetFull(int(n))
	defer bufpool.Put(tail)
	if err := readFull(s.f.drv, tail, loc.Addr+loc.Size-n); err != nil {
		return nil, 0, classify(err)
	}
	if format.Trailer(tail) != loc.Sum {
		return nil, 0, sh.stale(coord, loc)
	}
	frame := make([]byte, e.Size)
	if err := readFull(s.f.drv, frame, loc.Addr+int64(e.Off)); err != nil {
		return nil, 0, classify(err)
	}
	img, err := sh.codec.InnerImage(coords, i, e, frame)
	if err != nil {
		return nil, 0, sh.errName(coords, err)
	}
	return img, e.Mask, nil
}
