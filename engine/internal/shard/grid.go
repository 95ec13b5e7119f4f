// Package shard is the codec of sharded chunks (FORMAT.md "Sharded
// chunk"): a chunk stored as inner chunks, each run through the dataset's
// filter pipeline and checksummed alone, followed by an index of their
// places with its own checksum. A reader can then take the index and the
// inner chunks a selection touches without the rest, and the inner chunks
// of a whole chunk decode (and encode) on as many cores as there are.
//
// The stored form follows Zarr v3's sharding_indexed codec with its index
// at the end (ZarrV3 "sharding"): inner chunks in C order of the inner
// grid, then one entry per inner chunk (16 bytes, or 20 with the frame's
// checksum: Codec.FrameSums), then a checksum of the entries. An inner chunk's bytes are its filtered image and a 4-byte
// trailer, so the filtered image of an inner chunk is a Zarr inner chunk
// of the same codecs as it is, and a Zarr shard is made by rewriting the
// index alone.
package shard

import (
	"fmt"
	"math/bits"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/internal/memcopy"
)

// Grid is the division of a chunk into inner chunks: the inner chunk shape
// divides the chunk shape along every dimension, so every inner chunk has
// the same size and none is cut by the chunk's edge.
type Grid struct {
	chunk, inner []uint64
	counts       []uint64 // inner chunks along each dimension
	elemSize     int
	n            int // inner chunks in all
	innerBytes   int // decoded size of one inner chunk
	// rowBytes is one run of an inner chunk's last dimension; an inner
	// chunk is rows runs spread over the chunk buffer.
	rowBytes, rows int
	// contiguous: every dimension but the first spans the chunk, so an
	// inner chunk is one run of the chunk buffer.
	contiguous bool
	// rowOff, when not nil, is the offset of each row of an inner chunk
	// from its first byte in the chunk buffer, the same for every inner
	// chunk: the copies in and out of a chunk buffer (every inner chunk of
	// every whole-chunk decode and encode) then run as a plain loop over
	// it instead of a walk calling a function per row.
	rowOff []int
	// streams: the rows are whole 64-byte steps, on an architecture with
	// memcopy's row copies: Insert may write a large chunk's
	// rows with non-temporal stores (insertStreamed), Extract gathers
	// rows in one call.
	streams bool
}

// maxRowTable bounds rowOff (8 bytes a row); inner chunks of more rows
// are walked.
const maxRowTable = 1 << 16

// MaxInner bounds the number of inner chunks of one chunk: the index is
// 16 or 20 bytes per inner chunk (EntrySize, EntrySizeSums), at most 20
// MiB, and must stay small beside the data.
const MaxInner = 1 << 20

// NewGrid checks that inner divides chunk and returns their grid. An
// error wraps format.ErrInvalid.
func NewGrid(chunk, inner []uint64, elemSize int) (*Grid, error) {
	r := len(chunk)
	if r == 0 || len(inner) != r || elemSize <= 0 {
		return nil, fmt.Errorf("%w: shard: inner chunk %v for chunk %v", format.ErrInvalid, inner, chunk)
	}
	g := &Grid{chunk: clone(chunk), inner: clone(inner), counts: make([]uint64, r), elemSize: elemSize, n: 1, contiguous: true}
	elems := uint64(1)
	for d := range r {
		if inner[d] == 0 || chunk[d] == 0 || chunk[d]%inner[d] != 0 {
			return nil, fmt.Errorf("%w: shard: inner chunk %v does not divide chunk %v", format.ErrInvalid, inner, chunk)
		}
		g.counts[d] = chunk[d] / inner[d]
		hi, lo := bits.Mul64(uint64(g.n), g.counts[d])
		if hi != 0 || lo > MaxInner {
			return nil, fmt.Errorf("%w: shard: chunk %v holds more than %d inner chunks of %v", format.ErrInvalid, chunk, MaxInner, inner)
		}
		g.n = int(lo)
		hi, elems = bits.Mul64(elems, inner[d])
		if hi != 0 || elems > format.MaxChunkBytes {
			return nil, fmt.Errorf("%w: shard: inner chunk %v too large", format.ErrInvalid, inner)
		}
		if d > 0 && inner[d] != chunk[d] {
			g.contiguous = false
		}
	}
	if elems*uint64(elemSize) > format.MaxChunkBytes {
		return nil, fmt.Errorf("%w: shard: inner chunk %v too large", format.ErrInvalid, inner)
	}
	g.innerBytes = int(elems) * elemSize
	g.rowBytes = int(inner[r-1]) * elemSize
	g.rows = g.innerBytes / g.rowBytes
	if !g.contiguous && g.rows <= maxRowTable {
		g.rowOff = make([]int, 0, g.rows)
		g.walk(0, func(c, _ int) { g.rowOff = append(g.rowOff, c) })
	}
	g.streams = memcopy.HaveStream && g.rowOff != nil && g.rowBytes%64 == 0
	return g, nil
}

func clone(v []uint64) []uint64 { return append([]uint64(nil), v...) }

// N is the number of inner chunks.
func (g *Grid) N() int { return g.n }

// Inner is the inner chunk shape.
func (g *Grid) Inner() []uint64 { return g.inner }

// Counts is the number of inner chunks along each dimension.
func (g *Grid) Counts() []uint64 { return g.counts }

// InnerBytes is the decoded size of one inner chunk.
func (g *Grid) InnerBytes() int { return g.innerBytes }

// Coord returns the inner grid coordinates of inner chunk i (C order).
func (g *Grid) Coord(i int) []uint64 {
	q := make([]uint64, len(g.counts))
	x := uint64(i)
	for d := len(q) - 1; d >= 0; d-- {
		q[d] = x % g.counts[d]
		x /= g.counts[d]
	}
	return q
}

// Linear is the index of the inner chunk at inner grid coordinates q.
func (g *Grid) Linear(q []uint64) int {
	i := uint64(0)
	for d, x := range q {
		i = i*g.counts[d] + x
	}
	return int(i)
}

// origin is the byte offset in the chunk buffer of inner chunk i's first
// element.
func (g *Grid) origin(i int) int {
	q := g.Coord(i)
	off, stride := uint64(0), uint64(g.elemSize)
	for d := len(q) - 1; d >= 0; d-- {
		off += q[d] * g.inner[d] * stride
		stride *= g.chunk[d]
	}
	return int(off)
}

// walk calls fn with the offset in the chunk buffer and in the inner
// chunk of each row of inner chunk i.
func (g *Grid) walk(i int, fn func(chunkOff, innerOff int)) {
	base := g.origin(i)
	if g.contiguous {
		fn(base, 0)
		return
	}
	r := len(g.chunk)
	// Byte strides of the chunk buffer along each dimension, and the
	// position within the inner chunk along the row dimensions; the
	// offset follows the position by carries, without recomputing it.
	var strideBuf, idxBuf [8]int
	stride, idx := strideBuf[:0], idxBuf[:0]
	if r > len(strideBuf) {
		stride, idx = make([]int, 0, r), make([]int, 0, r)
	}
	stride, idx = stride[:r], idx[:r]
	s := g.elemSize
	for d := r - 1; d >= 0; d-- {
		stride[d] = s
		s *= int(g.chunk[d])
		idx[d] = 0
	}
	off := base
	for row := 0; row < g.rows; row++ {
		fn(off, row*g.rowBytes)
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			off += stride[d]
			if idx[d] < int(g.inner[d]) {
				break
			}
			off -= idx[d] * stride[d]
			idx[d] = 0
		}
	}
}

// Extract copies inner chunk i of the chunk buffer chunk into dst
// (InnerBytes long), in the inner chunk's C order.
func (g *Grid) Extract(dst, chunk []byte, i int) {
	if g.contiguous {
		o := g.origin(i)
		copy(dst[:g.innerBytes], chunk[o:o+g.innerBytes])
		return
	}
	if g.rowOff != nil {
		c, rb := chunk[g.origin(i):], g.rowBytes
		dst = dst[:g.innerBytes]
		if g.streams && memcopy.GatherRows(dst, c, g.rowOff, rb) {
			// Rows of whole 64-byte steps: one call for all of them
			// rather than a copy per row (an encode gathers every inner
			// chunk of the chunk so).
			return
		}
		for _, o := range g.rowOff {
			copy(dst[:rb], c[o:o+rb])
			dst = dst[rb:]
		}
		return
	}
	g.walk(i, func(c, in int) { copy(dst[in:in+g.rowBytes], chunk[c:c+g.rowBytes]) })
}

// Insert copies src, inner chunk i in its C order, into the chunk buffer.
func (g *Grid) Insert(chunk, src []byte, i int) {
	if g.insertStreamed(chunk, src, i) {
		return
	}
	if g.contiguous {
		o := g.origin(i)
		copy(chunk[o:o+g.innerBytes], src[:g.innerBytes])
		return
	}
	if g.rowOff != nil {
		c, rb := chunk[g.origin(i):], g.rowBytes
		src = src[:g.innerBytes]
		for _, o := range g.rowOff {
			copy(c[o:o+rb], src[:rb])
			src = src[rb:]
		}
		return
	}
	g.walk(i, func(c, in int) { copy(chunk[c:c+g.rowBytes], src[in:in+g.rowBytes]) })
}

// InsertRange copies b, bytes [off, off+len(b)) of inner chunk i in its C
// order, into their places in the chunk buffer: a streamed decode's piece,
// which may begin and end inside a row.
func (g *Grid) InsertRange(chunk, b []byte, i, off int) {
	base, rb := g.origin(i), g.rowBytes
	for len(b) > 0 {
		r, p := off/rb, off%rb
		n := min(rb-p, len(b))
		o := base + g.rowAt(r) + p
		copy(chunk[o:o+n], b[:n])
		b, off = b[n:], off+n
	}
}

// rowAt is the offset of an inner chunk's row r (C order) from its first
// byte in the chunk buffer.
func (g *Grid) rowAt(r int) int {
	if g.rowOff != nil {
		return g.rowOff[r]
	}
	last := len(g.chunk) - 1
	off, stride := 0, g.elemSize*int(g.chunk[last])
	for d := last - 1; d >= 0; d-- {
		off += r % int(g.inner[d]) * stride
		r /= int(g.inner[d])
		stride *= int(g.chunk[d])
	}
	return off
}

// insertStreamFrom is the smallest chunk buffer whose inner chunks Insert
// writes with non-temporal stores.
//
// Why: an inner chunk's rows are short runs strided through the chunk (a
// 64³ uint16 inner chunk of a 256³ chunk: 4,096 rows of 128 bytes, 512
// bytes apart), and ordinary stores read every line of them from memory
// before writing it (a chunk this large does not stay in the caches), so
// the copy into place cost a whole-chunk decode as much as a third of the
// codec's own time. Stores that bypass the caches write whole lines
// without reading them: BenchmarkGridInsert's streamed copy runs about 4x
// as fast as the ordinary one, and the decode of the Zarr benchmark's
// chunk (BenchmarkShardDecodeZarr) spends its time in the codec. Below
// this size the chunk may well stay in the caches for whoever reads it
// next, which stores around them would spoil.
const insertStreamFrom = 8 << 20

// CopyRows copies len(off) rows of rb bytes, one after the other in src,
// to dst[off[k]:]: an inner chunk decoded whole, into its strided place in
// a caller's buffer. As Insert, it writes a large buffer (insertStreamFrom
// or more) with non-temporal stores when the architecture has them and
// the rows take them (whole 64-byte steps, 16-byte aligned); else it
// copies row by row. A row outside dst panics, as copy would.
func CopyRows(dst, src []byte, off []int, rb int) {
	src = src[:len(off)*rb]
	if len(dst) >= insertStreamFrom && memcopy.StreamRows(dst, src, off, rb) {
		return
	}
	for k, o := range off {
		copy(dst[o:o+rb], src[k*rb:(k+1)*rb])
	}
}

// insertStreamed is Insert with non-temporal stores, for a large chunk
// buffer whose rows can take them (16-byte aligned, in runs of 64
// bytes); false when it did nothing.
func (g *Grid) insertStreamed(chunk, src []byte, i int) bool {
	if !g.streams || len(chunk) < insertStreamFrom || len(chunk) < g.n*g.innerBytes {
		return false
	}
	return memcopy.StreamRows(chunk[g.origin(i):], src, g.rowOff, g.rowBytes)
}

// InPlace returns inner chunk i's bytes of the chunk buffer when they are
// one run of it (a decoder can then write there directly).
func (g *Grid) InPlace(chunk []byte, i int) ([]byte, bool) {
	if !g.contiguous {
		return nil, false
	}
	o := g.origin(i)
	return chunk[o : o+g.innerBytes : o+g.innerBytes], true
}

// Fill sets inner chunk i of the chunk buffer to the fill value (one
// element; nil means zeros).
func (g *Grid) Fill(chunk []byte, i int, fill []byte) {
	if g.contiguous {
		o := g.origin(i)
		fillBytes(chunk[o:o+g.innerBytes], fill)
		return
	}
	g.walk(i, func(c, _ int) { fillBytes(chunk[c:c+g.rowBytes], fill) })
}

// IsFill reports whether inner chunk i of the chunk buffer holds the fill
// value everywhere.
func (g *Grid) IsFill(chunk []byte, i int, fill []byte) bool {
	all := true
	if g.contiguous {
		o := g.origin(i)
		return isFill(chunk[o:o+g.innerBytes], fill)
	}
	g.walk(i, func(c, _ int) { all = all && isFill(chunk[c:c+g.rowBytes], fill) })
	return all
}

func fillBytes(b, fill []byte) {
	if allZero(fill) {
		clear(b)
		return
	}
	for i := 0; i < len(b); i += len(fill) {
		copy(b[i:], fill)
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func isFill(b, fill []byte) bool {
	if allZero(fill) {
		// Eight bytes at a time: this runs over every byte a write
		// stores.
		for len(b) >= 8 {
			if le.Uint64(b) != 0 {
				return false
			}
			b = b[8:]
		}
		return allZero(b)
	}
	for i := 0; i+len(fill) <= len(b); i += len(fill) {
		for j, c := range fill {
			if b[i+j] != c {
				return false
			}
		}
	}
	return true
}

// Touched returns, in increasing order, the inner chunks a box of the
// chunk meets: lo and hi are the box's first and last (inclusive) element
// along each dimension, in chunk coordinates.
func (g *Grid) Touched(lo, hi []uint64) []int {
	r := len(g.chunk)
	qlo, qhi := make([]uint64, r), make([]uint64, r)
	for d := range r {
		qlo[d], qhi[d] = lo[d]/g.inner[d], min(hi[d], g.chunk[d]-1)/g.inner[d]
	}
	var out []int
	q := clone(qlo)
	for {
		out = append(out, g.Linear(q))
		d := r - 1
		for ; d >= 0; d-- {
			if q[d]++; q[d] <= qhi[d] {
				break
			}
			q[d] = qlo[d]
		}
		if d < 0 {
			return out
		}
	}
}
