package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/shard"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/scc-dev/scc/pool"
)

// Sharded chunks (FORMAT.md "Sharded chunk"; DatasetSpec.InnerChunk): a
// dense dataset whose chunks are each stored as inner chunks, filtered and
// checksummed alone, and an index of their places whose checksum is the
// chunk frame's trailer (engine/internal/shard). The chunk stays the unit
// of everything else: the chunk index, commits (a changed chunk is written
// whole, copy-on-write), follower refresh, the cache's entries.
//
// What sharding changes is how a chunk is encoded and read:
//   - a whole chunk (a cache load, a direct decode into the caller's
//     buffer, a write-back) encodes and decodes its inner chunks on the
//     cache's worker pool, so one large chunk uses every core;
//   - a read of part of a chunk the cache would not keep (above
//     Config.BypassBytes, cache/directpart.go) reads the index (kept in a
//     small cache of its own) and then only the inner chunks the read
//     touches, in one vector read with the index's bytes, which are
//     checked again against the chunk index's checksum, so a stale cached
//     index can never name bytes a writer has reused;
//   - an inner chunk that holds only the fill value is stored as no bytes.
//
// A chunk the cache keeps is kept decoded whole, as every dense chunk, so
// its memory is what the cache's budget counts.

// shardState is a sharded dataset's codec and its cache of chunk indexes.
type shardState struct {
	s     *dsState
	codec *shard.Codec
	// portable is the codec of the raw chunk calls' form (the unkeyed
	// rule, shard.Codec.Export).
	portable *shard.Codec
	idx      struct {
		sync.Mutex
		m map[shardKey][]shard.Entry
	}
}

// shardKey names one stored version of a chunk's index: the chunk and
// the frame the chunk index names.
type shardKey struct {
	coord string
	addr  int64
	sum   uint32
}

// shardIndexCache bounds the indexes kept per dataset (at most MaxInner
// entries each, 16 bytes an entry).
const shardIndexCache = 256

// Shard LayoutParams of a dense dataset (FORMAT.md "Sharded chunk"): u8
// version 1, then the inner chunk shape, one u64 per dimension.
const shardParamsVersion = 1

func encodeShardParams(inner []uint64) []byte {
	b := []byte{shardParamsVersion}
	for _, v := range inner {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func decodeShardParams(b []byte, rank int) ([]uint64, error) {
	if len(b) != 1+8*rank || b[0] != shardParamsVersion {
		return nil, fmt.Errorf("%w: sharded chunk parameters of %d bytes (version %d) for rank %d", ErrCorrupt, len(b), b[0], rank)
	}
	inner := make([]uint64, rank)
	for d := range inner {
		inner[d] = binary.LittleEndian.Uint64(b[1+8*d:])
	}
	return inner, nil
}

func newShardState(s *dsState, params []byte) (*shardState, error) {
	inner, err := decodeShardParams(params, len(s.chunk))
	if err != nil {
		return nil, err
	}
	g, err := shard.NewGrid(s.chunk, inner, s.elemSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	sh := &shardState{s: s, codec: &shard.Codec{Grid: g, Sum: s.csum, Fill: s.fill}}
	if !s.unfiltered {
		sh.codec.Pipe = s.pipeline
	}
	sh.portable = &shard.Codec{Grid: g, Pipe: sh.codec.Pipe, Fill: s.fill}
	sh.idx.m = make(map[shardKey][]shard.Entry)
	return sh, nil
}

// validateInner checks DatasetSpec.InnerChunk.
func (s DatasetSpec) validateInner() error {
	if s.InnerChunk == nil {
		return nil
	}
	if s.Layout != Chunked {
		return fmt.Errorf("%w: InnerChunk on a %v dataset", ErrInvalid, s.Layout)
	}
	if _, err := shard.NewGrid(s.Chunk, s.InnerChunk, s.Type.Size()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// InnerChunk returns the inner chunk shape of a dataset whose chunks are
// sharded (DatasetSpec.InnerChunk), nil for any other.
func (d *Dataset) InnerChunk() []uint64 {
	if l, ok := asLayout[*shardLayout](d.s); ok {
		return clone(l.sh.codec.Grid.Inner())
	}
	return nil
}

// pool is the cache's worker pool, nil when the cache runs its work on a
// Runner of the caller's (the inner chunks then run here).
func (sh *shardState) pool() *pool.Pool {
	if c := sh.s.f.cache; c != nil {
		return c.Pool()
	}
	return nil
}

// errName wraps a codec error with the chunk and dataset.
func (sh *shardState) errName(coord []uint64, err error) error {
	return fmt.Errorf("chunk %v of %q: %w", coord, sh.s.name, classify(err))
}

// stale is the error for an image whose trailer is not the one the chunk
// index names (space a writer reused under a reader that fell behind).
func (sh *shardState) stale(coord []uint64, loc layout.Location) error {
	return fmt.Errorf("%w: chunk %v of %q at %d is not the one the index names", ErrCorrupt, coord, sh.s.name, loc.Addr)
}

// decode is the dense Decode of a sharded chunk.
func (sh *shardState) decode(coord layout.Coord, loc layout.Location, image []byte) (layout.Chunk, error) {
	defer bufpool.Put(image)
	if format.Trailer(image) != loc.Sum {
		return nil, sh.stale(coord, loc)
	}
	buf := bufpool.GetFull(int(sh.s.chunkBytes))
	if err := sh.codec.Decode(context.Background(), sh.pool(), coord, image, buf); err != nil {
		bufpool.Put(buf)
		return nil, sh.errName(coord, err)
	}
	return &denseChunk{buf: buf}, nil
}

// decodeInto is the dense DecodeInto of a sharded chunk.
func (sh *shardState) decodeInto(coord layout.Coord, loc layout.Location, image, dst []byte) error {
	defer bufpool.Put(image)
	if format.Trailer(image) != loc.Sum {
		return sh.stale(coord, loc)
	}
	if int64(len(dst)) != sh.s.chunkBytes {
		return fmt.Errorf("%w: chunk %v of %q: direct decode into %d bytes, chunk has %d", ErrInvalid, []uint64(coord), sh.s.name, len(dst), sh.s.chunkBytes)
	}
	if err := sh.codec.Decode(context.Background(), sh.pool(), coord, image, dst); err != nil {
		return sh.errName(coord, err)
	}
	return nil
}

// encode is the dense Encode of a sharded chunk.
func (sh *shardState) encode(coord layout.Coord, buf []byte) (layout.Encoded, error) {
	img, err := sh.codec.Encode(context.Background(), sh.pool(), coord, buf)
	if err != nil {
		return layout.Encoded{}, sh.errName(coord, err)
	}
	return layout.Encoded{Image: img, Sum: format.Trailer(img), Pooled: true}, nil
}

// cachedIndex returns the index of the stored version loc of the chunk,
// if kept.
func (sh *shardState) cachedIndex(coord layout.Coord, loc layout.Location) ([]shard.Entry, bool) {
	k := shardKey{coordKey(coord), loc.Addr, loc.Sum}
	sh.idx.Lock()
	defer sh.idx.Unlock()
	es, ok := sh.idx.m[k]
	return es, ok
}

func (sh *shardState) keepIndex(coord layout.Coord, loc layout.Location, es []shard.Entry) {
	k := shardKey{coordKey(coord), loc.Addr, loc.Sum}
	sh.idx.Lock()
	defer sh.idx.Unlock()
	if len(sh.idx.m) >= shardIndexCache {
		for old := range sh.idx.m { // any one: map order is random
			delete(sh.idx.m, old)
			break
		}
	}
	sh.idx.m[k] = es
}

// index returns the checked index of the stored version loc of the chunk:
// kept, or read from the file.
func (sh *shardState) index(coord layout.Coord, loc layout.Location) ([]shard.Entry, error) {
	if es, ok := sh.cachedIndex(coord, loc); ok {
		return es, nil
	}
	n := int64(sh.codec.IndexSize())
	if loc.Size < n {
		return nil, fmt.Errorf("%w: chunk %v of %q: %d bytes for an index of %d", ErrCorrupt, []uint64(coord), sh.s.name, loc.Size, n)
	}
	tail := bufpool.GetFull(int(n))
	defer bufpool.Put(tail)
	if err := readFull(sh.s.f.drv, tail, loc.Addr+loc.Size-n); err != nil {
		return nil, classify(err)
	}
	return sh.openIndex(coord, loc, tail)
}

// openIndex checks the index bytes read (tail) against loc and keeps it.
func (sh *shardState) openIndex(coord layout.Coord, loc layout.Location, tail []byte) ([]shard.Entry, error) {
	if format.Trailer(tail) != loc.Sum {
		return nil, sh.stale(coord, loc)
	}
	es, err := sh.codec.OpenIndex(coord, tail, loc.Size)
	if err != nil {
		return nil, sh.errName(coord, err)
	}
	sh.keepIndex(coord, loc, es)
	return es, nil
}

// touched returns, in increasing order, the inner chunks the pieces
// select elements of.
func (sh *shardState) touched(pieces []layout.Piece) []int {
	g := sh.codec.Grid
	inner, counts := g.Inner(), g.Counts()
	mark := make([]bool, g.N())
	for _, p := range pieces {
		runs := p.(*piece).p.Runs
		// The inner chunks along each dimension that the piece's runs
		// meet; the piece selects their product.
		sets := make([][]uint64, len(runs))
		for d, rs := range runs {
			seen := make([]bool, counts[d])
			for _, r := range rs {
				if r.Len == 0 {
					continue
				}
				for q := r.Chunk / inner[d]; q <= (r.Chunk+r.Len-1)/inner[d] && q < counts[d]; q++ {
					seen[q] = true
				}
			}
			for q, ok := range seen {
				if ok {
					sets[d] = append(sets[d], uint64(q))
				}
			}
			if len(sets[d]) == 0 {
				sets = nil
				break
			}
		}
		if sets == nil {
			continue
		}
		q := make([]uint64, len(sets))
		pos := make([]int, len(sets))
		for {
			for d := range q {
				q[d] = sets[d][pos[d]]
			}
			mark[g.Linear(q)] = true
			d := len(pos) - 1
			for ; d >= 0; d-- {
				if pos[d]++; pos[d] < len(sets[d]) {
					break
				}
				pos[d] = 0
			}
			if d < 0 {
				break
			}
		}
	}
	var out []int
	for i, ok := range mark {
		if ok {
			out = append(out, i)
		}
	}
	return out
}

// shardLayout is the dense layout of a sharded dataset (its callbacks are
// denseLayout's, which ask l.sh), with the part reads a sharded chunk
// allows.
type shardLayout struct{ *denseLayout }

var (
	_ storage          = (*shardLayout)(nil)
	_ layout.PartFirst = (*shardLayout)(nil)
)

// PartFirst: a part of a chunk that is not resident is read in part
// whatever the chunk's size, so that a read of a few inner chunks of a
// large sharded chunk decodes those and holds no decoded chunk.
func (l *shardLayout) PartFirst() bool { return true }

// PartBlocks reads the frames of the inner chunks the pieces touch and the
// index, whose bytes are checked again on the read (ReadPart).
func (l *shardLayout) PartBlocks(coord layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	if !readPieces(pieces, pieceData) || !loc.Exists() {
		return nil, false
	}
	es, err := l.sh.index(coord, loc)
	if err != nil {
		// The cached path reads the chunk whole and reports what is
		// wrong with it.
		return nil, false
	}
	touched := l.sh.touched(pieces)
	if len(touched) == len(es) {
		// Every inner chunk: the whole chunk's paths read it in one
		// piece and decode it straight into the caller's buffer.
		return nil, false
	}
	var blocks []layout.Block
	for _, i := range touched {
		if e := es[i]; !e.Empty() {
			blocks = append(blocks, layout.Block{Off: int64(e.Off), Len: int64(e.Size)})
		}
	}
	slices.SortFunc(blocks, func(a, b layout.Block) int { return int(a.Off - b.Off) })
	n := int64(l.sh.codec.IndexSize())
	return append(blocks, layout.Block{Off: loc.Size - n, Len: n}), true
}

// ReadPart checks the index read, decodes the inner chunks the pieces
// touch into their places of a chunk buffer, and serves the pieces from
// it.
func (l *shardLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, blocks []layout.Block, bufs [][]byte) error {
	defer func() {
		for _, b := range bufs {
			bufpool.Put(b)
		}
	}()
	sh := l.sh
	es, err := sh.openIndex(coord, loc, bufs[len(bufs)-1])
	if err != nil {
		return err
	}
	frames := make(map[uint64][]byte, len(blocks))
	for k, b := range blocks[:len(blocks)-1] {
		frames[uint64(b.Off)] = bufs[k]
	}
	touched := sh.touched(pieces)
	buf := bufpool.GetFull(int(sh.s.chunkBytes))
	defer bufpool.Put(buf)
	g := sh.codec.Grid
	err = sh.parallel(len(touched), func(k int) error {
		i := touched[k]
		e := es[i]
		if e.Empty() {
			g.Fill(buf, i, sh.codec.Fill)
			return nil
		}
		frame, ok := frames[e.Off]
		if !ok || len(frame) != int(e.Size) {
			return fmt.Errorf("%w: inner chunk %v not among the bytes read", ErrCorrupt, g.Coord(i))
		}
		return sh.codec.DecodeFrameTo(coord, i, e, frame, buf)
	})
	if err != nil {
		return sh.errName(coord, err)
	}
	ch := &denseChunk{buf: buf}
	for _, p := range pieces {
		if err := l.Scatter(ch, p); err != nil {
			return err
		}
	}
	return nil
}

// parallel runs fn over [0, n) on the cache's workers.
func (sh *shardState) parallel(n int, fn func(k int) error) error {
	return shard.Tasks(context.Background(), sh.pool(), n, fn)
}

// shards returns the dataset's sharded chunk codec, nil when its chunks
// are not sharded.
func (s *dsState) shards() *shardState {
	if l, ok := asLayout[*shardLayout](s); ok {
		return l.sh
	}
	return nil
}

// Raw chunk access of a sharded dataset moves whole chunks in their
// portable form (shard.Codec.Export): the stored image without its
// trailer, each inner chunk's trailer its plain CRC32C, so that the bytes
// go from one dataset or file to another, where the keyed checksums
// differ, and inner chunks pass to other formats as they are. The filter
// mask of a raw sharded chunk is 0 (each inner chunk has its own, in the
// index).

// export is ReadChunkRaw's bytes of the stored image of the chunk.
func (sh *shardState) export(coord []uint64, image []byte) ([]byte, error) {
	data, err := sh.codec.Export(coord, image)
	if err != nil {
		return nil, sh.errName(coord, err)
	}
	return data, nil
}

// importRaw checks WriteChunkRaw's bytes of the chunk at coord and returns
// its stored image and, with decode, its decoded elements (both pooled
// buffers). Bytes that are not a sharded chunk of the dataset are
// ErrInvalid.
func (sh *shardState) importRaw(coord []uint64, data []byte, mask uint32, decode bool) (image, decoded []byte, err error) {
	if mask != 0 {
		return nil, nil, fmt.Errorf("%w: sharded chunk with filter mask %#x (inner chunks carry their own)", ErrInvalid, mask)
	}
	image, _, err = sh.codec.Import(coord, data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: not a sharded chunk of %q: %v", ErrInvalid, sh.s.name, err)
	}
	if !decode {
		return image, nil, nil
	}
	decoded = bufpool.GetFull(int(sh.s.chunkBytes))
	if err := sh.codec.Decode(context.Background(), sh.pool(), coord, image, decoded); err != nil {
		bufpool.Put(image)
		bufpool.Put(decoded)
		return nil, nil, fmt.Errorf("%w: sharded chunk does not decode: %v", ErrInvalid, err)
	}
	return image, decoded, nil
}

// decodePortable is DecodeChunk of a sharded chunk's portable form.
func (sh *shardState) decodePortable(data []byte, mask uint32) ([]byte, error) {
	if mask != 0 {
		return nil, fmt.Errorf("%w: sharded chunk with filter mask %#x", ErrCorrupt, mask)
	}
	image, _, err := sh.portable.Import(nil, data)
	if err != nil {
		return nil, classify(err)
	}
	defer bufpool.Put(image)
	out := make([]byte, sh.s.chunkBytes)
	if err := sh.portable.Decode(context.Background(), sh.pool(), nil, image, out); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// encodePortable is EncodeChunk of a sharded dataset: the portable form.
func (sh *shardState) encodePortable(chunk []byte) ([]byte, error) {
	img, err := sh.portable.Encode(context.Background(), sh.pool(), nil, chunk)
	if err != nil {
		return nil, classify(err)
	}
	defer bufpool.Put(img)
	return clone(img[:len(img)-format.ChunkFrameOverhead]), nil
}
