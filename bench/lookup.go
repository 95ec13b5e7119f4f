package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// LookupHarness holds N resident chunks of ChunkBytes in an scc cache so
// that the cost of finding a resident chunk and copying it out (a
// cache.Read that hits) can be measured beside a Go cache's Get of the same
// keys (scenario cachemap, module bench/peers).
//
// It talks to package cache directly through a minimal layout, so what is
// measured is the cache's hit path (chunk-table lookup, pin, access
// recording, Scatter), not the engine's selection arithmetic.
//
// Safe for concurrent use: each goroutine takes its own LookupReader.
type LookupHarness struct {
	N, ChunkBytes int
	c             *cache.Cache
	f             *cache.File
	d             *cache.Dataset
}

// NewLookupHarness loads n chunks of chunkBytes into a fresh cache (large
// enough to hold them all) and flushes them, so they are resident and clean.
func NewLookupHarness(ctx context.Context, n, chunkBytes int) (*LookupHarness, error) {
	if n < 1 || chunkBytes < 1 {
		return nil, fmt.Errorf("bench: lookup harness: n %d, chunk bytes %d", n, chunkBytes)
	}
	budget := int64(n)*int64(chunkBytes)*4 + 64<<20
	c, err := cache.New(cache.Config{QuiescentBytes: budget, BypassBytes: -1})
	if err != nil {
		return nil, err
	}
	cf, err := c.RegisterFile(vfd.NewMem())
	if err != nil {
		c.Close()
		return nil, err
	}
	d, err := cf.RegisterDataset(1, &memLayout{chunk: chunkBytes}, cache.DatasetOptions{})
	if err != nil {
		cf.Discard(ctx)
		c.Close()
		return nil, err
	}
	h := &LookupHarness{N: n, ChunkBytes: chunkBytes, c: c, f: cf, d: d}
	reqs := make([]cache.Request, 0, 256)
	for i := 0; i < n; {
		reqs = reqs[:0]
		for ; i < n && len(reqs) < cap(reqs); i++ {
			p := &lookupPiece{src: LookupValue(i, chunkBytes)}
			reqs = append(reqs, cache.Request{Dataset: d, Coord: layout.Coord{uint64(i)}, Full: true, Piece: p})
		}
		if err := c.Write(ctx, reqs); err != nil {
			cf.Discard(ctx)
			c.Close()
			return nil, err
		}
	}
	if err := cf.Flush(ctx); err != nil {
		cf.Discard(ctx)
		c.Close()
		return nil, err
	}
	if st := c.Stats(); st.Chunks < int64(n) {
		cf.Discard(ctx)
		c.Close()
		return nil, fmt.Errorf("bench: lookup harness: only %d of %d chunks resident", st.Chunks, n)
	}
	return h, nil
}

// LookupValue is the content of chunk i: byte j is byte(i+j).
func LookupValue(i, chunkBytes int) []byte {
	b := make([]byte, chunkBytes)
	for j := range b {
		b[j] = byte(i + j)
	}
	return b
}

// Stats returns the cache's snapshot.
func (h *LookupHarness) Stats() cache.Stats { return h.c.Stats() }

// Close releases the cache.
func (h *LookupHarness) Close() error {
	if err := h.f.Discard(context.Background()); err != nil {
		return err
	}
	return h.c.Close()
}

// LookupReader is one goroutine's reusable request.
//
// Everything a Get writes (the coordinate, the destination) lives inside
// the reader, padded off its neighbours: the readers of one benchmark are
// made one after the other, and a coordinate allocated on its own (8
// bytes, from the tiny allocator) shared a cache line with the next
// reader's, so every lookup at 2 or more goroutines wrote a line the
// other core was reading — false sharing in the harness, not in the
// cache, which the peers' getters (a closure over a dst of their own) do
// not have.
type LookupReader struct {
	_     [64]byte
	h     *LookupHarness
	reqs  [1]cache.Request
	coord [1]uint64
	piece lookupPiece
	dst   [64]byte // piece.dst when ChunkBytes fits
	_     [64]byte
}

// Reader returns a reader for one goroutine; dst receives each chunk.
func (h *LookupHarness) Reader() *LookupReader {
	r := &LookupReader{h: h}
	if h.ChunkBytes <= len(r.dst) {
		r.piece.dst = r.dst[:h.ChunkBytes]
	} else {
		r.piece.dst = make([]byte, h.ChunkBytes)
	}
	r.reqs[0] = cache.Request{Dataset: h.d, Coord: r.coord[:], Full: true, Piece: &r.piece}
	return r
}

// Get copies chunk i into the reader's buffer and returns it.
func (r *LookupReader) Get(ctx context.Context, i int) ([]byte, error) {
	r.coord[0] = uint64(i)
	if err := r.h.c.Read(ctx, r.reqs[:]); err != nil {
		return nil, err
	}
	return r.piece.dst, nil
}

// lookupPiece: src for writes, dst for reads; whole chunks only.
type lookupPiece struct{ src, dst []byte }

type memChunk struct{ b []byte }

func (m *memChunk) MemSize() int64 { return int64(len(m.b)) }

var errNoDisk = errors.New("bench: lookup harness chunks are never read from disk")

// memLayout is the smallest Layout: 1-D chunks of bytes, images kept by the
// vfd the cache writes to, space handed out by a bump allocator.
type memLayout struct {
	chunk int
	next  atomic.Int64
}

func (l *memLayout) ChunkDims() []uint64 { return []uint64{uint64(l.chunk)} }

func (l *memLayout) Lookup(_ context.Context, coords []layout.Coord, locs []layout.Location) error {
	for i := range coords {
		locs[i] = layout.Location{SizeHint: int64(l.chunk)}
	}
	return nil
}

func (l *memLayout) NewChunk(layout.Coord, bool) (layout.Chunk, error) {
	return &memChunk{b: make([]byte, l.chunk)}, nil
}

func (l *memLayout) Decode(layout.Coord, layout.Location, []byte) (layout.Chunk, error) {
	return nil, errNoDisk
}

func (l *memLayout) Encode(_ layout.Coord, c layout.Chunk) (layout.Encoded, error) {
	return layout.Encoded{Image: append([]byte(nil), c.(*memChunk).b...)}, nil
}

func (l *memLayout) Insert(_ context.Context, ins []layout.Insertion) error {
	for i := range ins {
		addr := l.next.Add(ins[i].Size) - ins[i].Size
		ins[i].New = layout.Location{Addr: addr, Size: ins[i].Size, Mask: ins[i].Mask, SizeHint: int64(l.chunk)}
	}
	return nil
}

func (l *memLayout) Publish(context.Context, []layout.Insertion, error) error { return nil }

func (l *memLayout) Scatter(c layout.Chunk, p layout.Piece) error {
	return l.ScatterFlat(c.(*memChunk).b, p)
}

// FlatBytes and ScatterFlat make the layout a layout.FlatScatterer, as
// the engine's dense layouts are: a hit copies out of the buffer whose
// address the cache keeps in its entry, as the peers copy out of the
// slice their nodes hold, without loading the chunk's header.
func (l *memLayout) FlatBytes(c layout.Chunk) []byte { return c.(*memChunk).b }

func (l *memLayout) ScatterFlat(b []byte, p layout.Piece) error {
	copy(p.(*lookupPiece).dst, b)
	return nil
}

func (l *memLayout) ScatterFill(p layout.Piece) error {
	clear(p.(*lookupPiece).dst)
	return nil
}

func (l *memLayout) Gather(c layout.Chunk, p layout.Piece) error {
	copy(c.(*memChunk).b, p.(*lookupPiece).src)
	return nil
}

func (l *memLayout) Trim(layout.Coord, layout.Chunk, []uint64) (bool, error) { return false, nil }
