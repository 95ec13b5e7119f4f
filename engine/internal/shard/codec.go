package shard

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/scc-dev/scc/pool"
)

// A sharded chunk's stored image (FORMAT.md "Sharded chunk"):
//
//	inner chunk frames   each: filtered image, u32 trailer (Codec.InnerKey)
//	index                N entries of EntrySize bytes, inner chunks in C order
//	u32 trailer          the chunk checksum of the index bytes at the chunk's
//	                     coordinates: the chunk frame's trailer, which the
//	                     chunk index entry records
//
// An entry is u64 offset of the frame from the image's first byte, u32 the
// frame's size (trailer included), u32 the filter mask of its image, and,
// in the form with frame sums (Codec.FrameSums, LayoutParams version 2),
// u32 the frame's own trailer. An inner chunk that holds only the fill
// value is stored as no frame, its entry all ones in the offset and zeros
// in the rest.
//
// The frame sums make the index's checksum, the chunk's trailer, cover
// every frame's content: without them two versions of a chunk whose inner
// frames have the same sizes (always, unfiltered) share a trailer, and a
// reader that fell behind its writer could not tell that the writer reused
// the place it reads.

// EntrySize is the size of one index entry without frame sums (the
// portable form's, and the stored one of datasets of LayoutParams
// version 1); EntrySizeSums with them.
const (
	EntrySize     = 16
	EntrySizeSums = 20
)

// emptyOff marks an inner chunk without a frame.
const emptyOff = ^uint64(0)

var le = binary.LittleEndian

// Entry is one inner chunk's place in the image.
type Entry struct {
	Off  uint64
	Size uint32
	Mask uint32
	// Sum is the frame's trailer, recorded in the index with frame sums
	// (0 for an empty entry, and in the form without them).
	Sum uint32
}

// Empty reports whether the inner chunk has no frame (it reads as fill).
func (e Entry) Empty() bool { return e.Off == emptyOff }

// EmptyEntry is the entry of an inner chunk without a frame.
var EmptyEntry = Entry{Off: emptyOff}

// AppendIndex appends the index entries es to b, with their frame sums
// when sums is set.
func AppendIndex(b []byte, es []Entry, sums bool) []byte {
	for _, e := range es {
		b = le.AppendUint64(b, e.Off)
		b = le.AppendUint32(b, e.Size)
		b = le.AppendUint32(b, e.Mask)
		if sums {
			b = le.AppendUint32(b, e.Sum)
		}
	}
	return b
}

func entrySize(sums bool) int {
	if sums {
		return EntrySizeSums
	}
	return EntrySize
}

// DecodeIndex decodes the n entries in b (with frame sums when sums is
// set) and checks them before anyone
// trusts them: every frame lies inside [0, dataEnd) (the bytes before the
// index), is at least a trailer long and at most maxFrame, frames do not
// overlap, masks name no filter beyond maxMask's bits, and an empty entry
// is the canonical one. The error wraps format.ErrCorrupt. It allocates
// only the n entries the caller's grid gives, whatever b claims.
func DecodeIndex(b []byte, n int, sums bool, dataEnd uint64, maxFrame uint64, maxMask uint32) ([]Entry, error) {
	es := entrySize(sums)
	if n < 0 || n > MaxInner || len(b) != n*es {
		return nil, corrupt("index of %d bytes for %d inner chunks", len(b), n)
	}
	out := make([]Entry, n)
	used := 0
	for i := range out {
		p := b[i*es:]
		e := Entry{Off: le.Uint64(p), Size: le.Uint32(p[8:]), Mask: le.Uint32(p[12:])}
		if sums {
			e.Sum = le.Uint32(p[16:])
		}
		switch {
		case e.Off == emptyOff:
			if e.Size != 0 || e.Mask != 0 || e.Sum != 0 {
				return nil, corrupt("inner chunk %d: empty entry with size %d, mask %#x, sum %#x", i, e.Size, e.Mask, e.Sum)
			}
		case uint64(e.Size) < format.ChunkFrameOverhead || uint64(e.Size) > maxFrame:
			return nil, corrupt("inner chunk %d: frame of %d bytes (%d..%d)", i, e.Size, format.ChunkFrameOverhead, maxFrame)
		case e.Off > dataEnd || uint64(e.Size) > dataEnd-e.Off:
			return nil, corrupt("inner chunk %d: frame [%d, +%d) outside the %d bytes before the index", i, e.Off, e.Size, dataEnd)
		case e.Mask&^maxMask != 0:
			return nil, corrupt("inner chunk %d: filter mask %#x names filters beyond %#x", i, e.Mask, maxMask)
		default:
			used++
		}
		out[i] = e
	}
	order := make([]Entry, 0, used)
	for _, e := range out {
		if !e.Empty() {
			order = append(order, e)
		}
	}
	slices.SortFunc(order, func(a, b Entry) int {
		switch {
		case a.Off < b.Off:
			return -1
		case a.Off > b.Off:
			return 1
		}
		return 0
	})
	for k := 1; k < len(order); k++ {
		if p := order[k-1]; p.Off+uint64(p.Size) > order[k].Off {
			return nil, corrupt("inner chunks overlap at offset %d", order[k].Off)
		}
	}
	return out, nil
}

func corrupt(f string, args ...any) error {
	return fmt.Errorf("%w: sharded chunk: %s", format.ErrCorrupt, fmt.Sprintf(f, args...))
}

// Codec encodes and decodes the sharded chunks of one dataset.
type Codec struct {
	Grid *Grid
	// Pipe is the dataset's filter pipeline, run on every inner chunk
	// alone; nil (or no filters) stores inner chunks as they are.
	Pipe *filter.Pipeline
	// Sum is the dataset's chunk checksum rule: the index's trailer is
	// the chunk's, an inner chunk's is bound to InnerKey.
	Sum format.ChunkSum
	// Fill is one element of the fill value; nil means zeros.
	Fill []byte
	// FrameSums stores each inner frame's trailer in its index entry
	// (LayoutParams version 2), so that the chunk's trailer covers the
	// frames' contents; a frame read is checked against its entry's.
	FrameSums bool
	// Decoded counts the inner chunks decoded (DecodeInner calls): what a
	// read cost, for statistics and tests.
	Decoded atomic.Int64
	// Encoded counts the inner chunks run through the pipeline by an
	// encode (those taken as stored, and empty ones, not).
	Encoded atomic.Int64
	// Scratch is the decoded bytes the codec's decodes hold beside their
	// destinations at this moment (Decode says how many).
	Scratch atomic.Int64
	// onDecode and onEncode, when set (by tests), run at the start of
	// every inner chunk's decode and encode.
	onDecode, onEncode func(i int)
	// stream, when from is set (by tests), replaces streamFrom and
	// streamPiece.
	stream struct{ from, piece int }
}

func (c *Codec) unfiltered() bool { return c.Pipe == nil || len(c.Pipe.Specs()) == 0 }

// MaxFrame bounds one inner chunk's frame.
func (c *Codec) MaxFrame() int {
	n := c.Grid.innerBytes
	if !c.unfiltered() {
		n = c.Pipe.MaxEncoded(n)
	}
	return n + format.ChunkFrameOverhead
}

// IndexSize is the size of the index with its trailer.
func (c *Codec) IndexSize() int { return c.Grid.n*entrySize(c.FrameSums) + format.ChunkFrameOverhead }

// portableIndex is the size of the portable form's index (no frame sums,
// no trailer).
func (c *Codec) portableIndex() int { return c.Grid.n * EntrySize }

// PortableSize is the size of the portable form of a stored image of
// stored bytes (0 for one too short to hold an index).
func (c *Codec) PortableSize(stored int64) int64 {
	return max(0, stored-int64(c.IndexSize())) + int64(c.portableIndex())
}

// MaxPortable bounds a sharded chunk's portable form.
func (c *Codec) MaxPortable() int64 {
	return int64(c.Grid.n)*int64(c.MaxFrame()) + int64(c.portableIndex())
}

// MaxStored bounds a sharded chunk's stored image.
func (c *Codec) MaxStored() int64 { return int64(c.Grid.n)*int64(c.MaxFrame()) + int64(c.IndexSize()) }

// maxMask is the widest filter mask the pipeline can record.
func (c *Codec) maxMask() uint32 {
	if c.unfiltered() {
		return 0
	}
	return uint32(uint64(1)<<len(c.Pipe.Specs()) - 1)
}

// InnerKey is the coordinates an inner chunk's trailer is bound to: the
// chunk's, then the inner chunk's number. One longer than any chunk's, so
// an inner frame never passes for a chunk, nor for another inner chunk.
func InnerKey(coord []uint64, i int) []uint64 {
	k := make([]uint64, len(coord)+1)
	copy(k, coord)
	k[len(coord)] = uint64(i)
	return k
}

// Tasks runs fn(i) for every i in [0, n) and returns the first error.
// The calling goroutine takes the items one at a time, in order, and so
// do up to Workers helpers it offers p's queue (nil p: the caller runs them
// all). An item goes to whoever is free next, so one slow inner chunk
// holds up no other and the last of a chunk's inner chunks are shared
// among every core, whereas fixed batches left a core idle at the end of
// each chunk. Tasks may be called from a task of p: helpers are offered
// without blocking (a full queue means the workers have work enough, and
// the caller runs the rest itself), and the caller waits only for
// helpers already running, never for one still queued (that one finds
// nothing left and does nothing), so nested use cannot deadlock.
func Tasks(ctx context.Context, p *pool.Pool, n int, fn func(i int) error) error {
	if p == nil || n <= 1 {
		for i := range n {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	t := &tasks{ctx: ctx, n: int64(n), fn: fn}
	t.idle.L = &t.mu
	for range min(n-1, p.Options().Workers) {
		if _, err := p.TrySubmit(t.help); err != nil {
			break // full or closed: the caller runs what no helper takes
		}
	}
	t.run()
	t.mu.Lock()
	t.closed = true
	for t.active > 0 {
		t.idle.Wait()
	}
	t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	return nil
}

// tasks is one Tasks call: the next item to claim and who is working.
type tasks struct {
	ctx  context.Context
	n    int64
	fn   func(i int) error
	next atomic.Int64

	mu     sync.Mutex
	idle   sync.Cond // signalled when active drops to 0
	active int       // helpers running
	closed bool      // the caller is done: a helper starting now does nothing
	err    error     // first error, under mu
}

// run claims and runs items until none is left or one failed.
func (t *tasks) run() {
	defer func() {
		if r := recover(); r != nil {
			t.fail(fmt.Errorf("%w: %v", pool.ErrPanic, r))
		}
	}()
	for {
		i := t.next.Add(1) - 1
		if i >= t.n {
			return
		}
		if err := t.ctx.Err(); err != nil {
			t.fail(err)
			return
		}
		if err := t.fn(int(i)); err != nil {
			t.fail(err)
			return
		}
	}
}

// help is a helper's task on the pool.
func (t *tasks) help() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.active++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.active--; t.active == 0 {
			t.idle.Broadcast()
		}
		t.mu.Unlock()
	}()
	t.run()
	return nil
}

// fail records the first error and stops the claims.
func (t *tasks) fail(err error) {
	t.next.Store(t.n)
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

// Encode returns the stored image of the chunk at coord whose decoded
// bytes (C order of the whole chunk) are chunk. The inner chunks are
// encoded on p's workers (nil: on the calling goroutine). The image is a
// pooled buffer (internal/bufpool) starting at its first byte, owned by
// the caller; it never aliases chunk.
func (c *Codec) Encode(ctx context.Context, p *pool.Pool, coord []uint64, chunk []byte) ([]byte, error) {
	return c.EncodeReusing(ctx, p, coord, chunk, nil)
}

// Reuse is what an encode may take from the chunk's stored image instead
// of encoding again: the image (checked: its index is Es), and which
// inner chunks changed since it was decoded. An inner chunk that did not
// change is copied as it is stored, its frame verified first (a frame
// that fails is encoded from the chunk instead).
type Reuse struct {
	Image   []byte
	Es      []Entry
	Changed func(i int) bool
}

func (c *Codec) verifies(coord []uint64, i int, e Entry, frame []byte) bool {
	_, err := c.verifyFrame(coord, i, e, frame)
	return err == nil
}

// verifyFrame verifies inner chunk i's frame (entry e) and returns its
// image: its trailer at the inner chunk's coordinates and, with frame
// sums, the trailer the index records, so a frame of another version of
// the chunk than the index's is corruption even where the sizes agree.
// The error names no inner chunk.
func (c *Codec) verifyFrame(coord []uint64, i int, e Entry, frame []byte) ([]byte, error) {
	if c.FrameSums && format.Trailer(frame) != e.Sum {
		return nil, corrupt("frame's checksum %#x is not the %#x its index entry records", format.Trailer(frame), e.Sum)
	}
	return c.Sum.VerifyFrame(InnerKey(coord, i), frame)
}

// EncodeReusing is Encode taking the inner chunks that did not change from
// r (nil: none), so that a write of part of a large chunk encodes only the
// inner chunks it touched.
func (c *Codec) EncodeReusing(ctx context.Context, p *pool.Pool, coord []uint64, chunk []byte, r *Reuse) ([]byte, error) {
	g := c.Grid
	mf := c.MaxFrame()
	buf := bufpool.Get(g.n*mf + c.IndexSize())
	es := make([]Entry, g.n)
	err := Tasks(ctx, p, g.n, func(i int) error {
		slot := buf[i*mf : i*mf : (i+1)*mf]
		if r != nil && !r.Changed(i) {
			if e := r.Es[i]; e.Empty() {
				es[i] = EmptyEntry
				return nil
			} else if frame := r.Image[e.Off : e.Off+uint64(e.Size)]; c.verifies(coord, i, e, frame) {
				es[i] = Entry{Off: uint64(i * mf), Size: e.Size, Mask: e.Mask, Sum: format.Trailer(frame)}
				copy(slot[:e.Size], frame)
				return nil
			}
		}
		// Gathered first and checked for the fill value after, in one
		// run: a check of the strided rows in place would read them a
		// second time.
		src, ok := g.InPlace(chunk, i)
		if !ok {
			tmp := bufpool.Get(g.innerBytes)[:g.innerBytes]
			defer bufpool.Put(tmp)
			g.Extract(tmp, chunk, i)
			src = tmp
		}
		if isFill(src, c.Fill) {
			es[i] = EmptyEntry
			return nil
		}
		c.Encoded.Add(1)
		if c.onEncode != nil {
			c.onEncode(i)
		}
		var img []byte
		var mask uint32
		if c.unfiltered() {
			img = append(slot, src...)
		} else {
			var err error
			if img, mask, err = c.Pipe.EncodeTo(slot, src); err != nil {
				return fmt.Errorf("inner chunk %v: %w", g.Coord(i), err)
			}
			if len(img) > 0 && &img[0] != &buf[i*mf] {
				img = append(slot, img...) // not encoded in place (cannot happen with room enough)
			}
		}
		img = c.Sum.AppendFrame(InnerKey(coord, i), img)
		es[i] = Entry{Off: uint64(i * mf), Size: uint32(len(img)), Mask: mask, Sum: format.Trailer(img)}
		return nil
	})
	if err != nil {
		bufpool.Put(buf)
		return nil, err
	}
	// Close the gaps between the slots, in order: every frame moves
	// towards the start, so none overwrites one not yet moved.
	end := uint64(0)
	for i, e := range es {
		if e.Empty() {
			continue
		}
		copy(buf[end:], buf[e.Off:e.Off+uint64(e.Size)])
		es[i].Off = end
		end += uint64(e.Size)
	}
	if !c.FrameSums {
		for i := range es {
			es[i].Sum = 0
		}
	}
	img := AppendIndex(buf[:end], es, c.FrameSums)
	img = c.Sum.AppendFrame(coord, img[end:])
	return buf[:int(end)+len(img)], nil
}

// OpenIndex checks and decodes the index of the chunk at coord from the
// image's last IndexSize bytes (tail) and the image's size. The error
// wraps format.ErrCorrupt.
func (c *Codec) OpenIndex(coord []uint64, tail []byte, size int64) ([]Entry, error) {
	n := c.IndexSize()
	if len(tail) != n || size < int64(n) {
		return nil, corrupt("image of %d bytes for an index of %d", size, n)
	}
	idx, err := c.Sum.VerifyFrame(coord, tail)
	if err != nil {
		return nil, corrupt("index: %v", err)
	}
	return DecodeIndex(idx, c.Grid.n, c.FrameSums, uint64(size)-uint64(n), uint64(c.MaxFrame()), c.maxMask())
}

// DecodeInner verifies inner chunk i's frame (the chunk at coord) and
// decodes it into dst, InnerBytes long, in the inner chunk's C order. The
// error names the inner chunk and wraps format.ErrCorrupt for damage
// (filter.ErrCorrupt from the pipeline).
func (c *Codec) DecodeInner(coord []uint64, i int, e Entry, frame, dst []byte) error {
	g := c.Grid
	c.Decoded.Add(1)
	if c.onDecode != nil {
		c.onDecode(i)
	}
	img, err := c.verifyFrame(coord, i, e, frame)
	if err != nil {
		return fmt.Errorf("inner chunk %v: %w", g.Coord(i), err)
	}
	if c.unfiltered() {
		if len(img) != g.innerBytes || e.Mask != 0 {
			return fmt.Errorf("inner chunk %v: %w", g.Coord(i), corrupt("unfiltered frame of %d bytes, want %d", len(img), g.innerBytes))
		}
		copy(dst, img)
		return nil
	}
	out, err := c.Pipe.DecodeVerifiedTo(dst[:0:g.innerBytes], img, e.Mask, g.innerBytes)
	if err != nil {
		return fmt.Errorf("inner chunk %v: %w", g.Coord(i), err)
	}
	if len(out) != g.innerBytes {
		return fmt.Errorf("inner chunk %v: %w", g.Coord(i), corrupt("decoded %d bytes, want %d", len(out), g.innerBytes))
	}
	if &out[0] != &dst[0] {
		copy(dst, out)
	}
	return nil
}

// InnerImage verifies inner chunk i's frame (the chunk at coord, entry e)
// and returns its filtered image, a subslice of frame: what raw access to
// one inner chunk hands out. The error names the inner chunk and wraps
// format.ErrCorrupt.
func (c *Codec) InnerImage(coord []uint64, i int, e Entry, frame []byte) ([]byte, error) {
	g := c.Grid
	if uint64(len(frame)) != uint64(e.Size) {
		return nil, fmt.Errorf("inner chunk %v: %w", g.Coord(i), corrupt("frame of %d bytes, entry says %d", len(frame), e.Size))
	}
	img, err := c.verifyFrame(coord, i, e, frame)
	if err != nil {
		return nil, fmt.Errorf("inner chunk %v: %w", g.Coord(i), err)
	}
	if c.unfiltered() && (len(img) != g.innerBytes || e.Mask != 0) {
		return nil, fmt.Errorf("inner chunk %v: %w", g.Coord(i), corrupt("unfiltered frame of %d bytes, want %d", len(img), g.innerBytes))
	}
	return img, nil
}

// DecodeTo decodes inner chunk i of the image (the chunk at coord, whose
// index es is) into its place in the chunk buffer chunk; an empty one
// becomes the fill value.
func (c *Codec) DecodeTo(coord []uint64, es []Entry, image []byte, i int, chunk []byte) error {
	g, e := c.Grid, es[i]
	if e.Empty() {
		g.Fill(chunk, i, c.Fill)
		return nil
	}
	return c.DecodeFrameTo(coord, i, e, image[e.Off:e.Off+uint64(e.Size)], chunk)
}

// DecodeFrameTo decodes inner chunk i, whose entry is e and frame frame,
// into its place in the chunk buffer chunk.
func (c *Codec) DecodeFrameTo(coord []uint64, i int, e Entry, frame, chunk []byte) error {
	g := c.Grid
	if dst, ok := g.InPlace(chunk, i); ok {
		return c.DecodeInner(coord, i, e, frame, dst)
	}
	from, piece := c.streaming()
	if g.innerBytes >= from && !c.unfiltered() && len(frame) >= format.ChunkFrameOverhead &&
		c.Pipe.StreamsVerified(frame[:len(frame)-format.ChunkFrameOverhead], e.Mask) {
		return c.decodeStreamed(coord, i, e, frame, chunk, piece)
	}
	tmp := c.scratch()
	defer c.unscratch(tmp)
	if err := c.DecodeInner(coord, i, e, frame, tmp); err != nil {
		return err
	}
	g.Insert(chunk, tmp, i)
	return nil
}

// A large inner chunk (streamFrom bytes or more) that is not one run of
// the chunk is decoded a piece of streamPiece bytes at a time, each piece
// copied into its rows while it is in the core's cache: its decoder holds
// the piece and the frame's window (libzstd's, at most 8 MiB,
// filter.StreamWindow), not the inner chunk, so the scratch of a
// whole-chunk decode stays small whatever the inner chunk shape. Smaller
// inner chunks are decoded whole into a scratch buffer (which stays in the
// core's cache), which costs less than the stream's extra copy out of the
// decoder's window (BenchmarkShardDecodeZarr's comment).
const (
	streamFrom  = 4 << 20
	streamPiece = 128 << 10
)

// streaming returns the smallest inner chunk decoded as a stream and the
// piece it is decoded through (tests set smaller ones).
func (c *Codec) streaming() (from, piece int) {
	if c.stream.from > 0 {
		return c.stream.from, c.stream.piece
	}
	return streamFrom, streamPiece
}

// decodeStreamed is DecodeInner of a large inner chunk, streamed into its
// place in the chunk buffer through a piece buffer.
func (c *Codec) decodeStreamed(coord []uint64, i int, e Entry, frame, chunk []byte, piece int) error {
	g := c.Grid
	c.Decoded.Add(1)
	c.Scratch.Add(int64(piece))
	buf := bufpool.GetFull(piece)
	defer func() {
		bufpool.Put(buf)
		c.Scratch.Add(-int64(piece))
	}()
	if c.onDecode != nil {
		c.onDecode(i)
	}
	img, err := c.verifyFrame(coord, i, e, frame)
	if err != nil {
		return fmt.Errorf("inner chunk %v: %w", g.Coord(i), err)
	}
	err = c.Pipe.DecodeVerifiedStream(img, e.Mask, g.innerBytes, buf[:piece], func(off int, b []byte) {
		g.InsertRange(chunk, b, i, off)
	})
	if err != nil {
		return fmt.Errorf("inner chunk %v: %w", g.Coord(i), err)
	}
	return nil
}

// scratch returns a buffer of one inner chunk for a decode whose inner
// chunk is not one run of the chunk; unscratch gives it back. Scratch
// counts the bytes held.
func (c *Codec) scratch() []byte {
	n := c.Grid.innerBytes
	c.Scratch.Add(int64(n))
	return bufpool.GetFull(n)[:n] // its full capacity, or Put would drop it
}

func (c *Codec) unscratch(b []byte) {
	c.Scratch.Add(-int64(len(b)))
	bufpool.Put(b)
}

// Decode decodes the stored image of the chunk at coord into chunk (the
// whole chunk's bytes, C order), its inner chunks on p's workers (nil: on
// the calling goroutine).
//
// An inner chunk whose bytes are not one run of the chunk is decoded into
// a buffer of one inner chunk, which stays in the decoding core's cache,
// and copied into place from there (Grid.Insert: with stores that bypass
// the caches when the chunk is large); an inner chunk of streamFrom bytes
// or more is streamed into place through a piece of streamPiece bytes
// instead. Each decoder holds one such buffer at a time and no more: the
// scratch of a whole-chunk decode (Scratch) is at most one inner chunk
// under 4 MiB, or one 128 KiB piece, per core, however large the chunk,
// where a buffer of neighbouring inner chunks per core held up to 2 MiB
// each outside the cache's memory budget.
func (c *Codec) Decode(ctx context.Context, p *pool.Pool, coord []uint64, image, chunk []byte) error {
	n := c.IndexSize()
	if len(image) < n {
		return corrupt("image of %d bytes for an index of %d", len(image), n)
	}
	es, err := c.OpenIndex(coord, image[len(image)-n:], int64(len(image)))
	if err != nil {
		return err
	}
	return Tasks(ctx, p, c.Grid.n, func(i int) error { return c.DecodeTo(coord, es, image, i, chunk) })
}

// The portable form of a sharded chunk is what the raw chunk calls move
// between datasets and files: the stored image without its trailer, each
// inner frame's trailer the plain CRC32C of its image (the unkeyed rule,
// which names no dataset and no place; a Zarr inner chunk whose last codec
// is crc32c), and the index in its form without frame sums, which the
// frames' CRC32C trailers make redundant there. The frames keep their
// stored places, which come before the index in both forms.

var unkeyed format.ChunkSum

// Export returns the portable form of the stored image of the chunk at
// coord, after verifying its index and every inner frame. The result is a
// new slice; image is not changed.
func (c *Codec) Export(coord []uint64, image []byte) ([]byte, error) {
	n := c.IndexSize()
	if len(image) < n {
		return nil, corrupt("image of %d bytes for an index of %d", len(image), n)
	}
	es, err := c.OpenIndex(coord, image[len(image)-n:], int64(len(image)))
	if err != nil {
		return nil, err
	}
	end := len(image) - n
	out := make([]byte, end, end+c.portableIndex())
	copy(out, image[:end])
	for i, e := range es {
		if e.Empty() {
			continue
		}
		frame := out[e.Off : e.Off+uint64(e.Size)]
		img, err := c.verifyFrame(coord, i, e, frame)
		if err != nil {
			return nil, fmt.Errorf("inner chunk %v: %w", c.Grid.Coord(i), err)
		}
		le.PutUint32(frame[len(img):], unkeyed.Sum(nil, img))
	}
	return AppendIndex(out, es, false), nil
}

// Import returns the stored image of the chunk at coord whose portable
// form is data, after checking its index and every inner frame's CRC32C,
// with the entries of its index. The image is a pooled buffer
// (internal/bufpool); data is not changed. The error wraps
// format.ErrCorrupt.
func (c *Codec) Import(coord []uint64, data []byte) ([]byte, []Entry, error) {
	n := c.portableIndex()
	if len(data) < n || int64(len(data)) > c.MaxPortable() {
		return nil, nil, corrupt("portable chunk of %d bytes (index %d, at most %d)", len(data), n, c.MaxPortable())
	}
	end := len(data) - n
	es, err := DecodeIndex(data[end:], c.Grid.n, false, uint64(end), uint64(c.MaxFrame()), c.maxMask())
	if err != nil {
		return nil, nil, err
	}
	buf := bufpool.Get(end + c.IndexSize())[:end]
	copy(buf, data[:end])
	for i, e := range es {
		if e.Empty() {
			continue
		}
		frame := buf[e.Off : e.Off+uint64(e.Size)]
		img, err := unkeyed.VerifyFrame(nil, frame)
		if err != nil {
			bufpool.Put(buf)
			return nil, nil, fmt.Errorf("inner chunk %v: %w", c.Grid.Coord(i), err)
		}
		sum := c.Sum.Sum(InnerKey(coord, i), img)
		le.PutUint32(frame[len(img):], sum)
		if c.FrameSums {
			es[i].Sum = sum
		}
	}
	idx := AppendIndex(buf, es, c.FrameSums)
	idx = c.Sum.AppendFrame(coord, idx[end:])
	return buf[:end+len(idx)], es, nil
}
