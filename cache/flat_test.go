package cache

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flatLayout is a fakeLayout that is a layout.FlatScatterer, counting
// which of its scatters a read runs.
type flatLayout struct {
	*fakeLayout
	flats, scatters atomic.Int64
}

func (l *flatLayout) Scatter(ch layout.Chunk, p layout.Piece) error {
	l.scatters.Add(1)
	return l.fakeLayout.Scatter(ch, p)
}

func (l *flatLayout) FlatBytes(ch layout.Chunk) []byte { return ch.(*fakeChunk).b }

func (l *flatLayout) ScatterFlat(b []byte, p layout.Piece) error {
	l.flats.Add(1)
	fp := p.(*fakePiece)
	copy(fp.buf, b[fp.off:fp.off+fp.n])
	return nil
}

// condFlatLayout condenses a chunk into a new buffer and wipes the old
// one, so that a hit still reading the old buffer returns zeros.
type condFlatLayout struct{ *flatLayout }

func (condFlatLayout) Condense(_ layout.Coord, ch layout.Chunk) layout.Chunk {
	fc := ch.(*fakeChunk)
	nc := &fakeChunk{b: append([]byte(nil), fc.b...)}
	clear(fc.b)
	return nc
}

// TestFlatScatterHit: a read hit on a chunk of a layout.FlatScatterer
// copies through ScatterFlat out of the buffer whose address the entry
// keeps on its first line (never loading the chunk's header, which is a
// cache miss per hit when many chunks are resident); the entry follows
// the chunk when Condense replaces it, and forgets it at eviction.
func TestFlatScatterHit(t *testing.T) {
	const chunk = 32
	e := newEnv(t, Config{QuiescentBytes: 4 * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1})
	fl := newFakeLayout(&e.alloc, chunk)
	fl.slack = chunk // each new chunk holds twice its payload: Condense gives half back
	l := condFlatLayout{&flatLayout{fakeLayout: fl}}
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{})
	require.NoError(t, err)
	require.NoError(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(chunk, 1), 0), fullReq(d, fl, pattern(chunk, 2), 1)}))

	ent, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
	require.True(t, ok)
	assert.Equal(t, unsafe.Pointer(unsafe.SliceData(ent.chunk.(*fakeChunk).b)), ent.flat, "the entry keeps its chunk's buffer")
	assert.EqualValues(t, chunk, ent.flatLen)

	got := make([]byte, chunk)
	require.NoError(t, e.c.Read(bg, []Request{fullReq(d, fl, got, 0)}))
	assert.Equal(t, pattern(chunk, 1), got)
	assert.EqualValues(t, 1, l.flats.Load(), "ScatterFlat calls")
	assert.Zero(t, l.scatters.Load(), "Scatter calls")

	// A third chunk fits once the first two are condensed into new
	// buffers; the old ones are wiped.
	require.NoError(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(chunk, 3), 2)}))
	require.Zero(t, e.c.Stats().Evictions, "evicted instead of condensing")
	for i := byte(0); i < 3; i++ {
		clear(got)
		require.NoError(t, e.c.Read(bg, []Request{fullReq(d, fl, got, uint64(i))}))
		assert.Equal(t, pattern(chunk, i+1), got, "chunk %d after condensing", i)
	}
	assert.Equal(t, unsafe.Pointer(unsafe.SliceData(ent.chunk.(*fakeChunk).b)), ent.flat, "the entry follows the condensed chunk")

	// Eviction drops the buffer with the chunk.
	require.NoError(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(chunk, 4), 3), fullReq(d, fl, pattern(chunk, 5), 4)}))
	require.NoError(t, e.f.Flush(bg))
	require.NoError(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(chunk, 6), 5), fullReq(d, fl, pattern(chunk, 7), 6)}))
	require.Equal(t, stateDead, ent.state(), "chunk 0 evicted")
	assert.Nil(t, ent.flat, "an evicted entry keeps no buffer")
	assert.Zero(t, ent.flatLen)
}

// TestNoFlatScatterer: a layout that is no layout.FlatScatterer is read
// through Scatter as before.
func TestNoFlatScatterer(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 64 << 20})
	d, l := e.dataset(1, -1, 64)
	require.NoError(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 9), 0)}))
	ent, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
	require.True(t, ok)
	assert.Nil(t, ent.flat)
	got := make([]byte, 64)
	require.NoError(t, e.c.Read(bg, []Request{fullReq(d, l, got, 0)}))
	assert.Equal(t, pattern(64, 9), got)
}
