package cache

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"

	"github.com/scc-dev/scc/vfd"
)

// Direct reads by rows: a read that covers a whole stored chunk which is
// not resident, of a layout whose stored image is the chunk's bytes plus a
// small trailer (as for DirectReader), but whose bytes are not one run of
// the caller's buffer: the chunk is one box of a larger selection (a read
// of a whole 3-D array cut in cubes), so each of its rows lands in its own
// run of the caller's buffer. Rows of a page or more (rowVecMin) are read
// straight into those runs, by vector reads of consecutive rows (adjacent
// in the file, so the driver makes one preadv of up to its iovec limit of
// them), and the trailer into a side buffer; the checksum is continued
// over the rows in the chunk's order as they are read, and the layout
// checks it against the trailer and the index (VerifyDirectSum). Shorter
// rows are read with the image into a pooled buffer, recycled from chunk
// to chunk, summed there, and copied out once verified. Without this such
// a chunk is loaded: its image read into a new buffer the cache keeps,
// summed, then copied row by row into the caller's buffer.
//
// Each chunk is one task on the workers (a read of several chunks runs on
// every core; one chunk is read on the caller's goroutine). Nothing is
// made resident, as for whole direct reads, and coherence is theirs
// (direct.go): only chunks missing from the table go this way.
//
// A read error fails the read with the driver's error (the engine reports
// it as ErrIO); a checksum that does not match fails it with the layout's
// corruption error. Either way the caller's buffer holds unspecified
// bytes, as for any failed direct read.

// rowCount returns the number of rows of r, and whether r is well formed: the
// layout's answer is checked before the cache writes a byte of Buf, so
// that a mistake of it is an error, never a panic or a write outside the
// chunk's runs.
func rowCount(r *layout.Rows, bytes int64) (int, bool) {
	size := uint64(len(r.Buf))
	if r.Len == 0 || r.Len > size || len(r.Count) != len(r.Step) || bytes <= 0 {
		return 0, false
	}
	n, last := uint64(1), r.First
	for d := range r.Count {
		hi, m := bits.Mul64(n, r.Count[d])
		if r.Count[d] == 0 || hi != 0 || m > uint64(bytes) {
			return 0, false
		}
		n = m
		hi, span := bits.Mul64(r.Count[d]-1, r.Step[d])
		if hi != 0 || span > size || last > size-span {
			return 0, false
		}
		last += span
	}
	if n*r.Len != uint64(bytes) || last > size-r.Len {
		return 0, false
	}
	return int(n), true
}

// rowIter walks the rows of a Rows in order.
type rowIter struct {
	r   *layout.Rows
	off uint64
	idx []uint64
}

func (it *rowIter) init(r *layout.Rows) {
	it.r, it.off, it.idx = r, r.First, make([]uint64, len(r.Count))
}

// next returns the current row and steps to the next one.
func (it *rowIter) next() []byte {
	r := it.r
	b := r.Buf[it.off : it.off+r.Len : it.off+r.Len]
	it.off = stepOdometer(it.idx, r.Count, r.Step, it.off)
	return b
}

// stepOdometer advances idx, an index over count (the last dimension
// fastest), by one and returns off moved by step[d] for every dimension d
// that advanced (back to the start of d for every one that wrapped).
func stepOdometer(idx, count, step []uint64, off uint64) uint64 {
	for d := len(idx) - 1; d >= 0; d-- {
		idx[d]++
		off += step[d]
		if idx[d] < count[d] {
			break
		}
		off -= count[d] * step[d]
		idx[d] = 0
	}
	return off
}

// rowRead is one chunk read by rows.
type rowRead struct {
	g       *group
	rr      layout.RowReader
	rows    layout.Rows
	n       int // rows
	trailer []byte
}

// rowBatch is the most extents one vector read of a row read carries: the
// driver's iovec limit (vfd: IOV_MAX), so that each is one preadv.
const rowBatch = 1024

// planRows returns g's read by rows, or ok false when g does not go that
// way.
func planRows(reqs []Request, g *group) (rowRead, bool) {
	rr, ok := g.d.lay().l.(layout.RowReader)
	if !ok || len(g.reqs) != 1 {
		return rowRead{}, false
	}
	rows, tl, ok := rr.RowTarget(g.loc, reqs[g.reqs[0]].Piece)
	if !ok || tl < 0 || int64(tl) >= g.loc.Size {
		return rowRead{}, false
	}
	n, ok := rowCount(&rows, g.loc.Size-int64(tl))
	if !ok {
		return rowRead{}, false
	}
	return rowRead{g: g, rr: rr, rows: rows, n: n, trailer: make([]byte, tl)}, true
}

// readRows reads the chunks of rs (see above): one task per chunk on the
// workers, or on the caller's goroutine for one chunk.
func (w *workers) readRows(ctx context.Context, rs []rowRead) error {
	switch len(rs) {
	case 0:
		return nil
	case 1:
		return rs[0].read()
	}
	return w.run(ctx, len(rs), func(i int) error { return rs[i].read() })
}

// rowVecMin is the shortest row read by a vector read straight into the
// caller's buffer; shorter rows are read with the chunk's image into a
// pooled buffer and copied out (readBounced). Each row is an iovec
// of its own, and the kernel's cost per iovec, paid on top of the copy,
// is amortized only over rows of a page or more; the bounce buffer is
// recycled from chunk to chunk, so its second pass over the bytes stays
// mostly in the core's cache. Measured on the public Zarr benchmark's
// one-call read of its 2 GiB array (rows of 512 bytes, GOMAXPROCS 2, three
// passes each, twice): 1.30–1.36 s bounced, 1.62–1.93 s with the
// threshold at 512 so that every row was its own iovec (a one-off run with
// the threshold changed, not a benchmark here).
const rowVecMin = 4096

// read reads one chunk by rows, summing each batch of rows once
// read (while its bytes are in this core's cache), then verifies it.
func (x *rowRead) read() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	if x.rows.Len < rowVecMin {
		return x.readBounced()
	}
	g := x.g
	f := g.d.file
	var it rowIter
	it.init(&x.rows)
	exts := make([]vfd.Extent, 0, min(x.n+1, rowBatch))
	off := g.loc.Addr
	var sum uint32
	for done := 0; done < x.n; {
		exts = exts[:0]
		for done < x.n && len(exts) < rowBatch {
			b := it.next()
			exts = append(exts, vfd.Extent{Off: off, Buf: b})
			off += int64(len(b))
			done++
		}
		rows := len(exts)
		// The trailer follows the last row in the file: the same preadv.
		if done == x.n && len(x.trailer) > 0 {
			exts = append(exts, vfd.Extent{Off: off, Buf: x.trailer})
		}
		if err := f.readV(exts); err != nil {
			return fmt.Errorf("cache: reading chunk %v directly by rows: %w", g.coord, err)
		}
		for _, e := range exts[:rows] {
			sum = x.rr.SumRow(sum, e.Buf)
		}
	}
	if err := x.rr.VerifyDirectSum(g.coord, g.loc, sum, nil, x.trailer); err != nil {
		return fmt.Errorf("cache: chunk %v read directly by rows: %w", g.coord, err)
	}
	return nil
}

// readBounced reads one chunk of short rows: its whole image into a
// pooled buffer with one read, the checksum over it, and only once it is
// verified the rows copied out into the caller's buffer.
func (x *rowRead) readBounced() error {
	g := x.g
	img := bufpool.GetFull(int(g.loc.Size))
	defer bufpool.Put(img)
	if err := g.d.file.readV([]vfd.Extent{{Off: g.loc.Addr, Buf: img}}); err != nil {
		return fmt.Errorf("cache: reading chunk %v directly: %w", g.coord, err)
	}
	n := uint64(x.n) * x.rows.Len
	if err := x.rr.VerifyDirectSum(g.coord, g.loc, x.rr.SumRow(0, img[:n]), nil, img[n:]); err != nil {
		return fmt.Errorf("cache: chunk %v read directly by rows: %w", g.coord, err)
	}
	scatterRows(&x.rows, img[:n])
	return nil
}

// scatterRows copies src, the bytes of every row in order (as rowCount
// checked),
// into the rows. The innermost dimension's rows are copied in a tight
// loop and the odometer steps only between its runs, rather than once per
// row: this path takes short rows, many of them (a 256³ chunk of uint16
// is 65536 rows of 512 bytes).
func scatterRows(r *layout.Rows, src []byte) {
	l := r.Len
	if len(r.Count) == 0 {
		copy(r.Buf[r.First:r.First+l], src)
		return
	}
	last := len(r.Count) - 1
	inner, step := r.Count[last], r.Step[last]
	// On the stack up to rank 9; the append grows it past that.
	idx := append(make([]uint64, 0, 8), make([]uint64, last)...)
	base := r.First
	for uint64(len(src)) >= l {
		off := base
		for i := uint64(0); i < inner && uint64(len(src)) >= l; i++ {
			copy(r.Buf[off:off+l:off+l], src[:l])
			src = src[l:]
			off += step
		}
		base = stepOdometer(idx, r.Count[:last], r.Step[:last], base)
	}
}
