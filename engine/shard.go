package engine

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/selection"
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
//     cache's worker pool, claimed one at a time by the caller and pool
//     helpers (shard.Tasks), so one large chunk uses every core;
//   - a read of part of a chunk that is not resident (cache/directpart.go,
//     layout.PartFirst) reads the index (kept in a small cache of its
//     own, charged to the shared cache's budget as metadata) and then
//     only the inner chunks the read touches, in one vector read with the
//     index's bytes, which are checked again against the chunk
//     index's checksum, so a stale kept index can never name bytes a
//     writer has reused; each inner chunk is decoded straight into the
//     caller's buffer when the read takes it whole, else into an inner
//     chunk's buffer and scattered from there (serveInner): no chunk
//     buffer is made;
//   - a read of whole chunks the cache does not keep whose rows interleave
//     in the caller's buffer (a box of many chunks) decodes each inner
//     chunk into its places the same way (decodeScatter), an inner chunk
//     the box takes whole copied by a table of its rows' places, as a
//     whole chunk's decode copies it into a chunk (shard.CopyRows);
//   - a write of part of a chunk re-encodes at write-back only the inner
//     chunks written since the stored version the chunk last matched
//     (decoded from or written back as) and copies the others as stored
//     (shardMemo, shardmemo.go);
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
	// rows is the row table of the last caller's buffer shape whose
	// pieces took inner chunks whole (innerRows).
	rows atomic.Pointer[rowTable]
	idx  struct {
		sync.Mutex
		m map[shardKey]keptIndex
		// bytes is the kept indexes' memory, charged to the shared
		// cache's budget as metadata (File.chargeIndex): an index holds
		// up to shard.MaxInner entries, so what a dataset keeps can
		// outgrow the chunks it describes, and the cache's promise that
		// its resident bytes stay under its budget covers it. The
		// file's metadata shedder drops them (dropKept).
		bytes int64
	}
	// lost counts the dataset's Publishes that failed after their images
	// were written (shardLayout.Publish, shardmemo.go).
	lost atomic.Uint64
}

// shardKey names one stored version of a chunk's index: the frame the
// chunk index names (a place holds one chunk's image at a time; the
// coordinates kept beside the entries tell a reused place apart), so a
// lookup allocates nothing.
type shardKey struct {
	addr int64
	sum  uint32
}

// keptIndex is a kept index and the chunk it belongs to.
type keptIndex struct {
	coord []uint64
	es    []shard.Entry
}

// shardIndexCache bounds the indexes kept per dataset (at most MaxInner
// entries each).
const shardIndexCache = 256

// keptIndexOverhead is what a kept index costs beside its entries: its
// map slot, coordinates and slice headers, an estimate that keeps small
// indexes from being charged as free.
const keptIndexOverhead = 96

// size is the memory charged for a kept index.
func (k keptIndex) size() int64 {
	return int64(cap(k.es))*int64(unsafe.Sizeof(shard.Entry{})) + int64(cap(k.coord))*8 + keptIndexOverhead
}

// Shard LayoutParams of a dense dataset (FORMAT.md "Sharded chunk"): u8
// version, then the inner chunk shape, one u64 per dimension. Version 2
// (format version 8) records each inner frame's checksum in its index
// entry (shard.Codec.FrameSums), so a chunk's trailer changes whenever any
// frame's content does; version 1 (formats 6 and 7) does not, and its
// datasets keep it. New datasets are created with version 2.
const (
	shardParamsV1      = 1
	shardParamsVersion = 2
)

func encodeShardParams(inner []uint64) []byte {
	b := []byte{shardParamsVersion}
	for _, v := range inner {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// decodeShardParams returns the inner chunk shape and whether index
// entries carry frame sums.
func decodeShardParams(b []byte, rank int) ([]uint64, bool, error) {
	if len(b) != 1+8*rank || (b[0] != shardParamsV1 && b[0] != shardParamsVersion) {
		return nil, false, fmt.Errorf("%w: sharded chunk parameters of %d bytes (version %d) for rank %d", ErrCorrupt, len(b), b[0], rank)
	}
	inner := make([]uint64, rank)
	for d := range inner {
		inner[d] = binary.LittleEndian.Uint64(b[1+8*d:])
	}
	return inner, b[0] == shardParamsVersion, nil
}

func newShardState(s *dsState, params []byte) (*shardState, error) {
	inner, sums, err := decodeShardParams(params, len(s.chunk))
	if err != nil {
		return nil, err
	}
	g, err := shard.NewGrid(s.chunk, inner, s.elemSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	sh := &shardState{s: s, codec: &shard.Codec{Grid: g, Sum: s.csum, Fill: s.fill, FrameSums: sums}}
	if !s.unfiltered {
		sh.codec.Pipe = s.pipeline
	}
	sh.portable = &shard.Codec{Grid: g, Pipe: sh.codec.Pipe, Fill: s.fill}
	sh.idx.m = make(map[shardKey]keptIndex)
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

// decode is the dense Decode of a sharded chunk. The chunk remembers the
// stored version it came from (shardMemo).
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
	c := &denseChunk{buf: buf}
	c.shard.Store(&shardMemo{loc: loc})
	return c, nil
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

// cachedIndex returns the index of the stored version loc of the chunk,
// if kept.
func (sh *shardState) cachedIndex(coord layout.Coord, loc layout.Location) ([]shard.Entry, bool) {
	sh.idx.Lock()
	defer sh.idx.Unlock()
	kept, ok := sh.idx.m[shardKey{loc.Addr, loc.Sum}]
	if !ok || !slices.Equal(kept.coord, coord) {
		return nil, false
	}
	return kept.es, true
}

func (sh *shardState) keepIndex(coord layout.Coord, loc layout.Location, es []shard.Entry) {
	k := shardKey{loc.Addr, loc.Sum}
	kept := keptIndex{coord: clone([]uint64(coord)), es: es}
	sh.idx.Lock()
	defer sh.idx.Unlock()
	d := kept.size()
	if old, ok := sh.idx.m[k]; ok {
		d -= old.size()
	} else if len(sh.idx.m) >= shardIndexCache {
		for old, v := range sh.idx.m { // any one: map order is random
			delete(sh.idx.m, old)
			d -= v.size()
			break
		}
	}
	sh.idx.m[k] = kept
	sh.chargeKeptLocked(d)
}

// chargeKeptLocked adds d to the kept indexes' bytes and to the cache's
// budget. Under idx's lock, so that the cache receives the differences in
// the order they were taken (an uncharge overtaking its charge would take
// the cache's total below zero); the cache's side never calls back into
// the engine.
func (sh *shardState) chargeKeptLocked(d int64) {
	if d != 0 {
		sh.idx.bytes += d
		sh.s.f.chargeIndex(d)
	}
}

// dropKept lets every kept index go and uncharges it: under memory
// pressure (the file's metadata shedder) and when the dataset goes. A part
// read then reads its chunk's index again.
func (sh *shardState) dropKept() {
	sh.idx.Lock()
	defer sh.idx.Unlock()
	clear(sh.idx.m)
	sh.chargeKeptLocked(-sh.idx.bytes)
}

// keptBytes is the kept indexes' memory charged to the cache.
func (sh *shardState) keptBytes() int64 {
	sh.idx.Lock()
	defer sh.idx.Unlock()
	return sh.idx.bytes
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
	r := len(counts)
	// marks[base[d]+q]: the piece's runs along dimension d meet inner
	// chunk q there; the piece selects the product of the marked ones.
	total := 0
	var baseBuf, qBuf [8]int
	base, q := baseBuf[:0], qBuf[:0]
	if r > len(baseBuf) {
		base, q = make([]int, 0, r), make([]int, 0, r)
	}
	base, q = base[:r], q[:r]
	for d, c := range counts {
		base[d] = total
		total += int(c)
	}
	marks := make([]bool, total)
	var out []int
	for _, p := range pieces {
		runs := p.(*piece).p.Runs
		clear(marks)
		empty := false
		for d, rs := range runs {
			hit := false
			for _, run := range rs {
				if run.Len == 0 {
					continue
				}
				for k := run.Chunk / inner[d]; k <= (run.Chunk+run.Len-1)/inner[d] && k < counts[d]; k++ {
					marks[base[d]+int(k)] = true
					hit = true
				}
			}
			empty = empty || !hit
		}
		if empty {
			continue
		}
		// The marked inner chunks in C order: an odometer over the
		// marks of each dimension.
		for d := range q {
			q[d] = nextMark(marks[base[d]:base[d]+int(counts[d])], 0)
		}
		for {
			i := 0
			for d := range q {
				i = i*int(counts[d]) + q[d]
			}
			out = append(out, i)
			d := r - 1
			for ; d >= 0; d-- {
				m := marks[base[d] : base[d]+int(counts[d])]
				if q[d] = nextMark(m, q[d]+1); q[d] < len(m) {
					break
				}
				q[d] = nextMark(m, 0)
			}
			if d < 0 {
				break
			}
		}
	}
	if len(pieces) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// nextMark is the first k >= from with m[k] set, len(m) if none.
func nextMark(m []bool, from int) int {
	for from < len(m) && !m[from] {
		from++
	}
	return from
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
	blocks := make([]layout.Block, 0, len(touched)+1)
	for _, i := range touched {
		if e := es[i]; !e.Empty() {
			blocks = append(blocks, layout.Block{Off: int64(e.Off), Len: int64(e.Size)})
		}
	}
	slices.SortFunc(blocks, func(a, b layout.Block) int { return int(a.Off - b.Off) })
	n := int64(l.sh.codec.IndexSize())
	return append(blocks, layout.Block{Off: loc.Size - n, Len: n}), true
}

// ReadPart checks the index read and decodes the inner chunks the pieces
// touch, each straight into the caller's buffer when a piece takes it
// whole and in order, else into an inner chunk's buffer whose parts are
// scattered to the pieces at once: no chunk buffer is made, and a decoded
// byte is copied at most once. The index's bytes were read again so that
// their checksum, the chunk index's, proves the kept index is the one of
// this version of the chunk.
func (l *shardLayout) ReadPart(coord layout.Coord, loc layout.Location, pieces []layout.Piece, blocks []layout.Block, bufs [][]byte) error {
	defer func() {
		for _, b := range bufs {
			bufpool.Put(b)
		}
	}()
	sh := l.sh
	tail := bufs[len(bufs)-1]
	es, ok := sh.cachedIndex(coord, loc)
	if !ok || format.Trailer(tail) != loc.Sum {
		var err error
		if es, err = sh.openIndex(coord, loc, tail); err != nil {
			return err
		}
	}
	frames, fbufs := blocks[:len(blocks)-1], bufs[:len(bufs)-1]
	touched := sh.touched(pieces)
	g := sh.codec.Grid
	err := sh.parallel(len(touched), func(k int) error {
		i := touched[k]
		e := es[i]
		if e.Empty() {
			return sh.serveInner(coord, i, e, nil, pieces)
		}
		j, found := slices.BinarySearchFunc(frames, int64(e.Off), func(b layout.Block, off int64) int { return cmp.Compare(b.Off, off) })
		if !found || len(fbufs[j]) != int(e.Size) {
			return fmt.Errorf("%w: inner chunk %v not among the bytes read", ErrCorrupt, g.Coord(i))
		}
		return sh.serveInner(coord, i, e, fbufs[j], pieces)
	})
	if err != nil {
		return sh.errName(coord, err)
	}
	return nil
}

// serveInner decodes inner chunk i (entry e, frame frame) into the
// pieces' places: straight into the caller's buffer when one piece takes
// the inner chunk whole as one run of it, else through a pooled inner
// chunk buffer. An empty inner chunk is the fill value.
func (sh *shardState) serveInner(coord layout.Coord, i int, e shard.Entry, frame []byte, pieces []layout.Piece) error {
	g := sh.codec.Grid
	q := g.Coord(i)
	var subs [4]selection.Piece
	parts := subs[:0]
	var dst []byte
	whole := false
	for _, p := range pieces {
		pc := p.(*piece)
		sub, ok := sh.innerPiece(pc.p, q)
		if !ok {
			parts = append(parts, selection.Piece{})
			continue
		}
		parts = append(parts, sub)
		if len(pieces) == 1 {
			dst, whole = innerRun(pc, &sub, g.Inner(), sh.s.elemSize)
		}
	}
	if e.Empty() {
		for k, p := range pieces {
			if parts[k].Runs != nil {
				pc := p.(*piece)
				selection.FillBuf(pc.buf, pc.bufShape, &parts[k], sh.s.elemSize, sh.codec.Fill)
			}
		}
		return nil
	}
	if whole {
		shardInnerDirect.Add(1)
		return sh.codec.DecodeInner(coord, i, e, frame, dst)
	}
	tmp := bufpool.GetFull(g.InnerBytes())
	defer bufpool.Put(tmp)
	if err := sh.codec.DecodeInner(coord, i, e, frame, tmp); err != nil {
		return err
	}
	if len(pieces) == 1 {
		// One piece takes the inner chunk whole, its rows strided in the
		// caller's buffer (a read of many chunks in one box): copied as
		// a whole chunk's decode copies them (shard.CopyRows), by a
		// table of the rows' places kept for the buffer's shape.
		pc := pieces[0].(*piece)
		if base, off, ok := sh.innerRows(pc, &parts[0]); ok {
			shardInnerRows.Add(1)
			shard.CopyRows(pc.buf[base:], tmp, off, int(g.Inner()[len(g.Inner())-1])*sh.s.elemSize)
			return nil
		}
	}
	for k, p := range pieces {
		if parts[k].Runs != nil {
			pc := p.(*piece)
			selection.Scatter(pc.buf, pc.bufShape, tmp, g.Inner(), &parts[k], sh.s.elemSize)
		}
	}
	return nil
}

// Counters of the ways sharded chunks were read, for tests:
// shardInnerDirect counts inner chunks decoded straight into a caller's
// buffer, shardInnerRows those copied into it by rows (innerRows),
// shardScatterDecodes whole images decoded into the pieces
// (decodeScatter).
var shardInnerDirect, shardInnerRows, shardScatterDecodes atomic.Int64

// innerRows returns, when sub (a piece's part in one inner chunk) takes
// all of the inner chunk, the byte offset in the caller's buffer of its
// first element and the offsets from there of each of its rows (C order),
// the same for every inner chunk the piece takes whole: computed once per
// buffer shape and kept.
func (sh *shardState) innerRows(pc *piece, sub *selection.Piece) (int, []int, bool) {
	inner := sh.codec.Grid.Inner()
	r := len(inner)
	if len(pc.bufShape) != r || len(sub.Runs) != r {
		return 0, nil, false
	}
	var strideBuf [8]int
	stride := strideBuf[:0]
	if r > len(strideBuf) {
		stride = make([]int, 0, r)
	}
	stride = stride[:r]
	s := sh.s.elemSize
	for d := r - 1; d >= 0; d-- {
		stride[d] = s
		s *= int(pc.bufShape[d])
	}
	base := 0
	for d, rs := range sub.Runs {
		if len(rs) != 1 || rs[0].Chunk != 0 || rs[0].Len != inner[d] {
			return 0, nil, false
		}
		base += int(rs[0].Buf) * stride[d]
	}
	if t := sh.rows.Load(); t != nil && slices.Equal(t.stride, stride) {
		return base, t.off, true
	}
	rows := sh.codec.Grid.InnerBytes() / (int(inner[r-1]) * sh.s.elemSize)
	if rows > maxInnerRows {
		return 0, nil, false
	}
	off := make([]int, 0, rows)
	idx := make([]int, r)
	o := 0
	for range rows {
		off = append(off, o)
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			o += stride[d]
			if idx[d] < int(inner[d]) {
				break
			}
			o -= idx[d] * stride[d]
			idx[d] = 0
		}
	}
	sh.rows.Store(&rowTable{stride: slices.Clone(stride), off: off})
	return base, off, true
}

// rowTable is the row offsets of an inner chunk in a caller's buffer of
// the given byte strides (innerRows).
type rowTable struct {
	stride, off []int
}

// maxInnerRows bounds a kept row table (8 bytes a row); inner chunks of
// more rows are scattered the general way.
const maxInnerRows = 1 << 13

// innerPiece is the part of p (runs in chunk coordinates) inside the
// inner chunk at inner grid coordinates q, its runs in the inner chunk's
// coordinates; ok false when p selects nothing there.
func (sh *shardState) innerPiece(p *selection.Piece, q []uint64) (selection.Piece, bool) {
	inner := sh.codec.Grid.Inner()
	n := 0
	for _, rs := range p.Runs {
		n += len(rs)
	}
	backing := make([]selection.Run, 0, n)
	sub := selection.Piece{Runs: make([][]selection.Run, len(p.Runs)), N: 1}
	for d, rs := range p.Runs {
		lo, hi := q[d]*inner[d], (q[d]+1)*inner[d]
		start := len(backing)
		var count uint64
		for _, r := range rs {
			a, b := max(r.Chunk, lo), min(r.Chunk+r.Len, hi)
			if a >= b {
				continue
			}
			backing = append(backing, selection.Run{Chunk: a - lo, Buf: r.Buf + (a - r.Chunk), Len: b - a})
			count += b - a
		}
		if count == 0 {
			return selection.Piece{}, false
		}
		sub.Runs[d] = backing[start:len(backing):len(backing)]
		sub.N *= count
	}
	return sub, true
}

// innerRun returns the caller's bytes of the inner chunk when sub, a
// piece's part in one inner chunk, takes all of it and its elements are
// one run of the caller's buffer in the inner chunk's order (as
// denseLayout.wholeRun asks of a whole chunk).
func innerRun(pc *piece, sub *selection.Piece, inner []uint64, elemSize int) ([]byte, bool) {
	runs, shape := sub.Runs, pc.bufShape
	if len(shape) != len(runs) {
		return nil, false
	}
	off, stride, n := uint64(0), uint64(elemSize), uint64(elemSize)
	after := true // every dimension after d covers the buffer's extent
	for d := len(runs) - 1; d >= 0; d-- {
		if len(runs[d]) != 1 {
			return nil, false
		}
		r := runs[d][0]
		if r.Chunk != 0 || r.Len != inner[d] || (!after && r.Len != 1) {
			return nil, false
		}
		off += r.Buf * stride
		after = after && r.Buf == 0 && r.Len == shape[d]
		stride *= shape[d]
		n *= r.Len
	}
	end := off + n
	if end > uint64(len(pc.buf)) || end < off {
		return nil, false
	}
	return pc.buf[off:end:end], true
}

// decodeScatter is the dense DecodeScatter of a sharded chunk (a
// transient decode: a read the cache does not keep, of a chunk's part or
// of a box whose rows interleave in the caller's buffer): the inner chunks
// the pieces touch decode on every core and go straight into the pieces
// (serveInner), without a chunk buffer.
func (sh *shardState) decodeScatter(coord layout.Coord, loc layout.Location, image []byte, pieces []layout.Piece) (bool, error) {
	if !scatters(pieces) {
		return false, nil
	}
	defer bufpool.Put(image)
	if format.Trailer(image) != loc.Sum {
		return true, sh.stale(coord, loc)
	}
	n := sh.codec.IndexSize()
	if len(image) < n {
		return true, sh.errName(coord, fmt.Errorf("%w: image of %d bytes for an index of %d", ErrCorrupt, len(image), n))
	}
	es, ok := sh.cachedIndex(coord, loc)
	if !ok || int64(len(image)) != loc.Size {
		var err error
		if es, err = sh.codec.OpenIndex(coord, image[len(image)-n:], int64(len(image))); err != nil {
			return true, sh.errName(coord, err)
		}
	}
	shardScatterDecodes.Add(1)
	touched := sh.touched(pieces)
	err := sh.parallel(len(touched), func(k int) error {
		i := touched[k]
		e := es[i]
		var frame []byte
		if !e.Empty() {
			frame = image[e.Off : e.Off+uint64(e.Size)]
		}
		return sh.serveInner(coord, i, e, frame, pieces)
	})
	if err != nil {
		return true, sh.errName(coord, err)
	}
	return true, nil
}

// scatters reports whether decodeScatter takes the pieces.
func scatters(pieces []layout.Piece) bool {
	if !readPieces(pieces, pieceData) {
		return false
	}
	for _, p := range pieces {
		if p.(*piece).rows != nil {
			return false
		}
	}
	return true
}

// scatterHold is a sharded chunk's ScatterHold: decodeScatter decodes its
// inner chunks on the caller and at most the pool's workers at once, each
// into one inner chunk's scratch (serveInner), and never holds the chunk,
// so a one-call read of many large sharded chunks reserves a few inner
// chunks per decoding chunk rather than the chunk.
func (sh *shardState) scatterHold(pieces []layout.Piece) (int64, bool) {
	if !scatters(pieces) {
		return 0, false
	}
	decoders := int64(1)
	if p := sh.pool(); p != nil {
		decoders += int64(p.Options().Workers)
	}
	return decoders * int64(sh.codec.Grid.InnerBytes()), true
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
