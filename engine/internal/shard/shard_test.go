package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/internal/memcopy"
	"github.com/scc-dev/scc/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testCodec(t testing.TB, chunk, inner []uint64, es int, specs []filter.Spec, fill []byte) *Codec {
	g, err := NewGrid(chunk, inner, es)
	require.NoError(t, err)
	c := &Codec{Grid: g, Sum: format.KeyedChunkSum(0x5eed), Fill: fill, FrameSums: true}
	if specs != nil {
		c.Pipe, err = filter.NewPipeline(specs, es)
		require.NoError(t, err)
	}
	return c
}

// chunkData is a chunk whose inner chunks at the listed numbers hold the
// fill value and the others compressible data.
func chunkData(c *Codec, fillInner ...int) []byte {
	g := c.Grid
	b := make([]byte, g.n*g.innerBytes)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.IntN(4))
	}
	for _, i := range fillInner {
		g.Fill(b, i, c.Fill)
	}
	return b
}

func testPool(t testing.TB) *pool.Pool {
	p, err := pool.New(pool.Options{Workers: 4})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

func TestShardRoundTrip(t *testing.T) {
	p := testPool(t)
	zstd := []filter.Spec{{ID: filter.Shuffle}, {ID: filter.Zstd, Level: 1}}
	cases := []struct {
		name         string
		chunk, inner []uint64
		specs        []filter.Spec
		fill         []byte
	}{
		{"strided zstd", []uint64{8, 12, 10}, []uint64{4, 3, 5}, zstd, nil},
		{"contiguous zstd", []uint64{8, 12, 10}, []uint64{2, 12, 10}, zstd, nil},
		{"unfiltered fill", []uint64{6, 6}, []uint64{3, 2}, nil, []byte{7, 0}},
		{"one inner", []uint64{5, 4}, []uint64{5, 4}, zstd, nil},
		{"crc32c", []uint64{16}, []uint64{4}, []filter.Spec{{ID: filter.CRC32C}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testCodec(t, tc.chunk, tc.inner, 2, tc.specs, tc.fill)
			fillInner := []int{1}
			if c.Grid.n == 1 {
				fillInner = nil
			}
			chunk := chunkData(c, fillInner...)
			coord := []uint64{3, 1}
			for _, pl := range []*pool.Pool{nil, p} {
				img, err := c.Encode(context.Background(), pl, coord, chunk)
				require.NoError(t, err)
				require.LessOrEqual(t, int64(len(img)), c.MaxStored())
				es, err := c.OpenIndex(coord, img[len(img)-c.IndexSize():], int64(len(img)))
				require.NoError(t, err)
				if fillInner != nil {
					assert.True(t, es[1].Empty(), "a fill inner chunk takes no space")
				}
				got := make([]byte, len(chunk))
				require.NoError(t, c.Decode(context.Background(), pl, coord, img, got))
				assert.Equal(t, chunk, got)
				// One inner chunk alone.
				for i, e := range es {
					if e.Empty() {
						continue
					}
					one := make([]byte, c.Grid.innerBytes)
					require.NoError(t, c.DecodeInner(coord, i, e, img[e.Off:e.Off+uint64(e.Size)], one))
					want := make([]byte, c.Grid.innerBytes)
					c.Grid.Extract(want, chunk, i)
					assert.Equal(t, want, one)
				}
				// Another chunk's coordinates do not verify.
				assert.ErrorIs(t, c.Decode(context.Background(), pl, []uint64{3, 2}, img, got), format.ErrCorrupt)
			}
		})
	}
}

func TestShardDamagedInner(t *testing.T) {
	c := testCodec(t, []uint64{8, 8}, []uint64{4, 4}, 4, []filter.Spec{{ID: filter.Zstd, Level: 1}}, nil)
	chunk := chunkData(c)
	coord := []uint64{0, 0}
	img, err := c.Encode(context.Background(), nil, coord, chunk)
	require.NoError(t, err)
	es, err := c.OpenIndex(coord, img[len(img)-c.IndexSize():], int64(len(img)))
	require.NoError(t, err)
	img[es[2].Off+3] ^= 0x40
	got := make([]byte, len(chunk))
	err = c.Decode(context.Background(), nil, coord, img, got)
	require.ErrorIs(t, err, format.ErrCorrupt)
	assert.Contains(t, err.Error(), "inner chunk [1 0]")
	for _, i := range []int{0, 1, 3} {
		require.NoError(t, c.DecodeTo(coord, es, img, i, got), "inner chunk %d", i)
	}
	// Swapped inner frames of equal size: each trailer names its place.
	a, b := es[0], es[1]
	if a.Size == b.Size {
		fa := append([]byte(nil), img[a.Off:a.Off+uint64(a.Size)]...)
		copy(img[a.Off:], img[b.Off:b.Off+uint64(b.Size)])
		copy(img[b.Off:], fa)
		assert.ErrorIs(t, c.DecodeTo(coord, es, img, 0, got), format.ErrCorrupt)
	}
}

func TestShardGrid(t *testing.T) {
	_, err := NewGrid([]uint64{8, 8}, []uint64{3, 4}, 1)
	assert.ErrorIs(t, err, format.ErrInvalid, "inner must divide chunk")
	_, err = NewGrid([]uint64{8, 8}, []uint64{4}, 1)
	assert.ErrorIs(t, err, format.ErrInvalid)
	_, err = NewGrid([]uint64{8, 8}, []uint64{0, 4}, 1)
	assert.ErrorIs(t, err, format.ErrInvalid)
	_, err = NewGrid([]uint64{1 << 21, 1}, []uint64{1, 1}, 1)
	assert.ErrorIs(t, err, format.ErrInvalid, "too many inner chunks")
	g, err := NewGrid([]uint64{8, 9}, []uint64{4, 3}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 4, 5}, g.Touched([]uint64{2, 3}, []uint64{5, 8}))
	assert.Equal(t, []int{0}, g.Touched([]uint64{0, 0}, []uint64{0, 0}))
	for i := range g.N() {
		assert.Equal(t, i, g.Linear(g.Coord(i)))
	}
}

func TestShardIndexChecks(t *testing.T) {
	for _, sums := range []bool{false, true} {
		t.Run(fmt.Sprintf("sums=%v", sums), func(t *testing.T) { testShardIndexChecks(t, sums) })
	}
}

func testShardIndexChecks(t *testing.T, sums bool) {
	const n, end, maxFrame = 3, 100, 40
	ok := []Entry{{Off: 0, Size: 30}, EmptyEntry, {Off: 30, Size: 40, Mask: 1}}
	if sums {
		ok[0].Sum, ok[2].Sum = 0xdeadbeef, 7
	}
	got, err := DecodeIndex(AppendIndex(nil, ok, sums), n, sums, end, maxFrame, 1)
	require.NoError(t, err)
	assert.Equal(t, ok, got)
	assert.Len(t, AppendIndex(nil, ok, sums), n*entrySize(sums))
	bad := map[string][]Entry{
		"overlap":        {{Off: 0, Size: 31}, EmptyEntry, {Off: 30, Size: 40}},
		"past the index": {{Off: 0, Size: 30}, EmptyEntry, {Off: 70, Size: 31}},
		"wraps":          {{Off: ^uint64(0) - 5, Size: 30}, EmptyEntry, {Off: 30, Size: 40}},
		"too large":      {{Off: 0, Size: 41}, EmptyEntry, {Off: 50, Size: 4}},
		"no trailer":     {{Off: 0, Size: 3}, EmptyEntry, {Off: 30, Size: 40}},
		"stray mask":     {{Off: 0, Size: 30}, EmptyEntry, {Off: 30, Size: 40, Mask: 2}},
		"empty sized":    {{Off: 0, Size: 30}, {Off: ^uint64(0), Size: 4}, {Off: 30, Size: 40}},
		"same frame":     {{Off: 0, Size: 30}, {Off: 0, Size: 30}, {Off: 30, Size: 40}},
	}
	if sums {
		bad["empty summed"] = []Entry{{Off: 0, Size: 30}, {Off: ^uint64(0), Sum: 1}, {Off: 30, Size: 40}}
	}
	for name, es := range bad {
		_, err := DecodeIndex(AppendIndex(nil, es, sums), n, sums, end, maxFrame, 1)
		assert.ErrorIs(t, err, format.ErrCorrupt, name)
	}
	_, err = DecodeIndex(AppendIndex(nil, ok, sums)[:40], n, sums, end, maxFrame, 1)
	assert.ErrorIs(t, err, format.ErrCorrupt, "short index")
	_, err = DecodeIndex(AppendIndex(nil, ok, !sums), n, sums, end, maxFrame, 1)
	assert.ErrorIs(t, err, format.ErrCorrupt, "the other entry size")
}

// FuzzShardIndex decodes hostile indexes and images: never a panic, and
// every index that passes names frames inside the image that do not
// overlap.
// Both entry forms are tried on every input.
func FuzzShardIndex(f *testing.F) {
	c := testCodec(f, []uint64{8, 8}, []uint64{4, 4}, 2, []filter.Spec{{ID: filter.Zstd, Level: 1}}, nil)
	v1 := &Codec{Grid: c.Grid, Pipe: c.Pipe, Sum: c.Sum}
	chunk := chunkData(c, 3)
	for _, c := range []*Codec{c, v1} {
		img, err := c.Encode(context.Background(), nil, []uint64{1, 1}, chunk)
		require.NoError(f, err)
		f.Add(append([]byte(nil), img...))
	}
	es := []Entry{{Off: 0, Size: 30, Sum: 9}, EmptyEntry, {Off: 30, Size: 40, Sum: 1}, {Off: 10, Size: 30}}
	f.Add(AppendIndex(nil, es, false))
	f.Add(AppendIndex(nil, es, true))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []*Codec{c, v1} {
			if len(b) >= c.IndexSize() {
				got := make([]byte, len(chunk))
				err := c.Decode(context.Background(), nil, []uint64{1, 1}, b, got)
				if err != nil && !errors.Is(err, format.ErrCorrupt) && !errors.Is(err, filter.ErrCorrupt) {
					t.Fatalf("error %v is not corruption", err)
				}
			}
			size := entrySize(c.FrameSums)
			n := len(b) / size
			es, err := DecodeIndex(b[:n*size], n, c.FrameSums, 1000, 200, 1)
			if err != nil {
				require.ErrorIs(t, err, format.ErrCorrupt)
				continue
			}
			used := map[uint64]bool{}
			for _, e := range es {
				if e.Empty() {
					require.Zero(t, e.Sum)
					continue
				}
				require.LessOrEqual(t, e.Off+uint64(e.Size), uint64(1000))
				for x := e.Off; x < e.Off+uint64(e.Size); x++ {
					require.False(t, used[x], "overlap at %d", x)
					used[x] = true
				}
			}
		}
	})
}

func BenchmarkShardDecode(b *testing.B) {
	p := testPool(b)
	c := testCodec(b, []uint64{64, 64, 64}, []uint64{16, 16, 16}, 2, []filter.Spec{{ID: filter.Zstd, Level: 1}}, nil)
	chunk := chunkData(c)
	img, err := c.Encode(context.Background(), nil, []uint64{0, 0, 0}, chunk)
	require.NoError(b, err)
	got := make([]byte, len(chunk))
	for _, pl := range []struct {
		name string
		p    *pool.Pool
	}{{"serial", nil}, {"pool", p}} {
		b.Run(pl.name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				if err := c.Decode(context.Background(), pl.p, []uint64{0, 0, 0}, img, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestShardPortable(t *testing.T) {
	c := testCodec(t, []uint64{8, 8}, []uint64{4, 4}, 2, []filter.Spec{{ID: filter.Zstd, Level: 1}}, nil)
	d := testCodec(t, []uint64{8, 8}, []uint64{4, 4}, 2, []filter.Spec{{ID: filter.Zstd, Level: 1}}, nil)
	d.Sum = format.KeyedChunkSum(99) // another dataset
	chunk := chunkData(c, 2)
	img, err := c.Encode(context.Background(), nil, []uint64{1, 0}, chunk)
	require.NoError(t, err)
	raw, err := c.Export([]uint64{1, 0}, img)
	require.NoError(t, err)
	// The portable index has no frame sums: 4 bytes fewer an entry.
	assert.Len(t, raw, len(img)-format.ChunkFrameOverhead-4*c.Grid.N())
	img2, _, err := d.Import([]uint64{0, 3}, raw)
	require.NoError(t, err)
	got := make([]byte, len(chunk))
	require.NoError(t, d.Decode(context.Background(), nil, []uint64{0, 3}, img2, got))
	assert.Equal(t, chunk, got)
	// A dataset without frame sums has the same portable form, and takes
	// and gives the other's.
	v1 := &Codec{Grid: d.Grid, Pipe: d.Pipe, Sum: format.KeyedChunkSum(7)}
	img3, _, err := v1.Import([]uint64{2, 2}, raw)
	require.NoError(t, err)
	assert.Len(t, img3, len(raw)+format.ChunkFrameOverhead)
	clear(got)
	require.NoError(t, v1.Decode(context.Background(), nil, []uint64{2, 2}, img3, got))
	assert.Equal(t, chunk, got)
	raw3, err := v1.Export([]uint64{2, 2}, img3)
	require.NoError(t, err)
	assert.Equal(t, raw, raw3)
	raw[5] ^= 1
	_, _, err = d.Import([]uint64{0, 3}, raw)
	assert.ErrorIs(t, err, format.ErrCorrupt)
	_, _, err = d.Import([]uint64{0, 3}, raw[:10])
	assert.ErrorIs(t, err, format.ErrCorrupt)
}

// A whole chunk's inner chunks are shared among the caller and the pool's
// workers one at a time, decoding and encoding: while one inner chunk is
// held up, the others all go elsewhere, several at once. (Fixed batches
// of nested group tasks left the held-up chunk's batch-mates waiting
// behind it, and ran on the caller alone when earlier groups' claimed
// tasks still filled the pool's queue.)
func TestShardDecodeSpreadsInnerChunks(t *testing.T) {
	for _, workers := range []int{2, 4} {
		for _, op := range []string{"decode", "encode"} {
			p, err := pool.New(pool.Options{Workers: workers})
			require.NoError(t, err)
			c := testCodec(t, []uint64{16, 16, 16}, []uint64{4, 4, 4}, 2, []filter.Spec{{ID: filter.Zstd, Level: 1}}, nil)
			data := chunkData(c)
			coord := []uint64{1, 2, 3}
			img, err := c.Encode(context.Background(), p, coord, data)
			require.NoError(t, err)
			n := c.Grid.N()
			var running, most, others atomic.Int64
			var released atomic.Bool
			rest := make(chan struct{})
			hook := func(i int) {
				k := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); k > m && !most.CompareAndSwap(m, k); m = most.Load() {
				}
				if i == 0 {
					select {
					case <-rest:
						released.Store(true)
					case <-time.After(time.Minute): // a hang guard, not a timing
					}
					return
				}
				if others.Add(1) == int64(n-1) {
					close(rest)
				}
			}
			if op == "decode" {
				c.onDecode = hook
				out := make([]byte, len(data))
				require.NoError(t, c.Decode(context.Background(), p, coord, img, out))
				assert.Equal(t, data, out, "workers %d", workers)
			} else {
				c.onEncode = hook
				again, err := c.Encode(context.Background(), p, coord, data)
				require.NoError(t, err)
				assert.Equal(t, img, again, "workers %d", workers)
			}
			assert.True(t, released.Load(), "workers %d, %s: every other inner chunk done while the first was held", workers, op)
			assert.GreaterOrEqual(t, most.Load(), int64(2), "workers %d, %s: inner chunks at once", workers, op)
			require.NoError(t, p.Close())
		}
	}
}

// The row table and the walk copy the same bytes in and out of a chunk
// buffer, and inner chunks of more rows than the table holds are walked.
func TestShardGridRowTable(t *testing.T) {
	for _, tc := range []struct {
		chunk, inner []uint64
		table        bool
	}{
		{[]uint64{8, 12, 10}, []uint64{4, 3, 5}, true},
		{[]uint64{6, 6}, []uint64{3, 2}, true},
		{[]uint64{4, 70000, 2}, []uint64{2, 35000, 1}, false},
	} {
		g, err := NewGrid(tc.chunk, tc.inner, 2)
		require.NoError(t, err)
		require.Equal(t, tc.table, g.rowOff != nil, "%v in %v: row table", tc.inner, tc.chunk)
		walked := *g
		walked.rowOff = nil
		r := rand.New(rand.NewPCG(3, 4))
		a, b := make([]byte, g.n*g.innerBytes), make([]byte, g.n*g.innerBytes)
		src := make([]byte, g.innerBytes)
		for i := range g.N() {
			for k := range src {
				src[k] = byte(r.Uint32())
			}
			g.Insert(a, src, i)
			walked.Insert(b, src, i)
		}
		assert.Equal(t, b, a, "%v in %v: Insert", tc.inner, tc.chunk)
		x, y := make([]byte, g.innerBytes), make([]byte, g.innerBytes)
		for i := range g.N() {
			g.Extract(x, a, i)
			walked.Extract(y, a, i)
			require.Equal(t, y, x, "%v in %v: Extract of %d", tc.inner, tc.chunk, i)
		}
	}
}

// A large chunk's inner chunks are written with non-temporal stores where
// the architecture has them, the same bytes as the ordinary copy; a chunk
// buffer that is not 16-byte aligned takes the ordinary copy. Rows of whole
// 64-byte steps are gathered in one call, the same bytes as the walk.
func TestShardGridInsertStreamed(t *testing.T) {
	g, err := NewGrid([]uint64{16, 512, 1024}, []uint64{8, 64, 64}, 1)
	require.NoError(t, err)
	require.GreaterOrEqual(t, g.n*g.innerBytes, insertStreamFrom)
	require.Equal(t, memcopy.HaveStream, g.streams)
	walked := *g
	walked.rowOff, walked.streams = nil, false
	r := rand.New(rand.NewPCG(5, 6))
	n := g.n * g.innerBytes
	want := make([]byte, n)
	backing := make([]byte, n+16)
	for _, shift := range []int{0, 8} {
		got := backing[shift : shift+n]
		src := make([]byte, g.innerBytes)
		for i := range g.N() {
			for k := range src {
				src[k] = byte(r.Uint32())
			}
			assert.Equal(t, memcopy.HaveStream && shift == 0, g.insertStreamed(got, src, i), "inner chunk %d, shift %d", i, shift)
			if shift != 0 {
				g.Insert(got, src, i)
			}
			walked.Insert(want, src, i)
		}
		require.Equal(t, want, got, "shift %d", shift)
	}
	// Extract gathers the rows in one call; the same bytes as the walk.
	x, y := make([]byte, g.innerBytes), make([]byte, g.innerBytes)
	for i := range g.N() {
		g.Extract(x, want, i)
		walked.Extract(y, want, i)
		require.Equal(t, y, x, "Extract of %d", i)
	}
}

// A whole-chunk decode holds one inner chunk's scratch per decoder at a
// time, never a buffer of several (a chunk's worth of inner chunks side by
// side sat outside the cache's memory budget), and none once done, failed
// or not; fill inner chunks among the others, serial and on a pool, give
// the chunk, and a damaged inner chunk fails the decode naming it.
func TestShardDecodeScratch(t *testing.T) {
	const workers = 4
	p := testPool(t)
	for _, tc := range []struct{ chunk, inner []uint64 }{
		{[]uint64{8, 12, 10}, []uint64{4, 3, 2}},
		{[]uint64{6, 8}, []uint64{3, 2}},
		{[]uint64{4, 4, 12}, []uint64{2, 2, 3}},
		{[]uint64{8, 12, 10}, []uint64{2, 12, 10}}, // contiguous: no scratch
	} {
		c := testCodec(t, tc.chunk, tc.inner, 2, []filter.Spec{{ID: filter.Zstd, Level: 1}}, []byte{9, 1})
		g := c.Grid
		last := int(g.counts[len(g.counts)-1])
		chunk := chunkData(c, 0, last-1, g.n-1)
		coord := []uint64{2, 1}
		img, err := c.Encode(context.Background(), nil, coord, chunk)
		require.NoError(t, err)
		var peak atomic.Int64
		c.onDecode = func(int) {
			for s := c.Scratch.Load(); s > peak.Load(); {
				if peak.CompareAndSwap(peak.Load(), s) {
					break
				}
			}
		}
		for _, pl := range []*pool.Pool{nil, p} {
			peak.Store(0)
			decoders := int64(1)
			if pl != nil {
				decoders = workers + 1
			}
			got := make([]byte, len(chunk))
			require.NoError(t, c.Decode(context.Background(), pl, coord, img, got))
			assert.Equal(t, chunk, got, "%v in %v", tc.inner, tc.chunk)
			assert.Zero(t, c.Scratch.Load(), "%v in %v: scratch held after the decode", tc.inner, tc.chunk)
			want := decoders * int64(g.innerBytes)
			if g.contiguous {
				want = 0
			}
			assert.LessOrEqual(t, peak.Load(), want, "%v in %v: scratch of %d decoders", tc.inner, tc.chunk, decoders)
			if !g.contiguous {
				assert.Positive(t, peak.Load(), "%v in %v: the gauge saw the scratch", tc.inner, tc.chunk)
			}
		}
		// A damaged inner chunk (the second's frame) fails the decode.
		es, err := c.OpenIndex(coord, img[len(img)-c.IndexSize():], int64(len(img)))
		require.NoError(t, err)
		bad := append([]byte(nil), img...)
		bad[es[1].Off+1] ^= 0x40
		for _, pl := range []*pool.Pool{nil, p} {
			err = c.Decode(context.Background(), pl, coord, bad, make([]byte, len(chunk)))
			require.ErrorIs(t, err, format.ErrCorrupt)
			assert.Contains(t, err.Error(), fmt.Sprintf("inner chunk %v", g.Coord(1)))
			assert.Zero(t, c.Scratch.Load(), "%v in %v: scratch held after a failed decode", tc.inner, tc.chunk)
		}
	}
}

// A large inner chunk that is not one run of the chunk is streamed into
// its place through a piece buffer: the decode gives the chunk (pieces
// beginning and ending inside rows, inner chunks with and without a row
// table, fill inner chunks among them), holds one piece per decoder and
// never an inner chunk, and a damaged inner chunk fails naming it.
func TestShardDecodeStreamed(t *testing.T) {
	const workers, piece = 4, 999
	p := testPool(t)
	for _, tc := range []struct{ chunk, inner []uint64 }{
		{[]uint64{8, 48, 40}, []uint64{4, 24, 20}},
		{[]uint64{4, 70000, 2}, []uint64{2, 35000, 1}}, // rows beyond the table
	} {
		c := testCodec(t, tc.chunk, tc.inner, 2, []filter.Spec{{ID: filter.Zstd, Level: 1}}, nil)
		g := c.Grid
		require.Greater(t, g.innerBytes, piece)
		c.stream.from, c.stream.piece = 1, piece
		chunk := chunkData(c, 1)
		coord := []uint64{0, 3}
		img, err := c.Encode(context.Background(), nil, coord, chunk)
		require.NoError(t, err)
		es, err := c.OpenIndex(coord, img[len(img)-c.IndexSize():], int64(len(img)))
		require.NoError(t, err)
		// A build whose zstd does not stream (CGO_ENABLED=0) decodes an
		// inner chunk whole.
		held := int64(piece)
		if !c.Pipe.StreamsVerified(img[es[2].Off:es[2].Off+uint64(es[2].Size)-format.ChunkFrameOverhead], es[2].Mask) {
			held = int64(g.innerBytes)
		}
		var peak atomic.Int64
		c.onDecode = func(int) {
			for s := c.Scratch.Load(); s > peak.Load(); {
				if peak.CompareAndSwap(peak.Load(), s) {
					break
				}
			}
		}
		for _, pl := range []*pool.Pool{nil, p} {
			peak.Store(0)
			decoders := int64(1)
			if pl != nil {
				decoders = workers + 1
			}
			got := make([]byte, len(chunk))
			require.NoError(t, c.Decode(context.Background(), pl, coord, img, got))
			assert.Equal(t, chunk, got, "%v in %v", tc.inner, tc.chunk)
			assert.Positive(t, peak.Load(), "%v in %v: the gauge saw the pieces", tc.inner, tc.chunk)
			assert.LessOrEqual(t, peak.Load(), decoders*held, "%v in %v: scratch of %d decoders", tc.inner, tc.chunk, decoders)
			assert.Zero(t, c.Scratch.Load())
		}
		bad := append([]byte(nil), img...)
		bad[es[2].Off+uint64(es[2].Size/2)] ^= 0x40
		err = c.Decode(context.Background(), p, coord, bad, make([]byte, len(chunk)))
		require.ErrorIs(t, err, format.ErrCorrupt)
		assert.Contains(t, err.Error(), fmt.Sprintf("inner chunk %v", g.Coord(2)))
		assert.Zero(t, c.Scratch.Load())
	}
}

// With frame sums, the index's checksum (the chunk's trailer) covers every
// inner frame's content: two versions of a chunk whose frames have the same
// sizes get different trailers, and an index of one version with the
// frames of another is corruption naming the inner chunk, never the other
// version's values. Without them (datasets of LayoutParams version 1) both
// versions share the trailer.
func TestShardTrailerCoversFrames(t *testing.T) {
	coord := []uint64{1, 2}
	for _, specs := range [][]filter.Spec{nil, {{ID: filter.Zstd, Level: 1}}} {
		c := testCodec(t, []uint64{8, 8}, []uint64{4, 4}, 2, specs, []byte{0xff, 0xff})
		v1 := &Codec{Grid: c.Grid, Pipe: c.Pipe, Sum: c.Sum, Fill: c.Fill}
		a := chunkData(c)
		b := append([]byte(nil), a...)
		b[0] ^= 1 // one element of inner chunk 0; the same sizes unfiltered
		for _, sums := range []bool{false, true} {
			cc := v1
			if sums {
				cc = c
			}
			imgA, err := cc.Encode(context.Background(), nil, coord, a)
			require.NoError(t, err)
			imgB, err := cc.Encode(context.Background(), nil, coord, b)
			require.NoError(t, err)
			if len(imgA) != len(imgB) {
				continue // zstd may differ in size: nothing to show
			}
			n := cc.IndexSize()
			if !sums {
				assert.Equal(t, format.Trailer(imgA), format.Trailer(imgB), "specs %v: without frame sums the trailers agree", specs)
				continue
			}
			assert.NotEqual(t, format.Trailer(imgA), format.Trailer(imgB), "specs %v: frame sums set the versions apart", specs)
			// B's frames under A's index: what a reader that fell behind
			// reads where the writer reused A's place.
			mixed := append(append([]byte(nil), imgB[:len(imgB)-n]...), imgA[len(imgA)-n:]...)
			got := make([]byte, len(a))
			err = cc.Decode(context.Background(), nil, coord, mixed, got)
			require.ErrorIs(t, err, format.ErrCorrupt, "specs %v", specs)
			assert.Contains(t, err.Error(), "inner chunk [0 0]")
			es, err := cc.OpenIndex(coord, mixed[len(mixed)-n:], int64(len(mixed)))
			require.NoError(t, err)
			e := es[0]
			_, err = cc.InnerImage(coord, 0, e, mixed[e.Off:e.Off+uint64(e.Size)])
			assert.ErrorIs(t, err, format.ErrCorrupt)
			assert.ErrorIs(t, cc.DecodeInner(coord, 0, e, mixed[e.Off:e.Off+uint64(e.Size)], make([]byte, cc.Grid.InnerBytes())), format.ErrCorrupt)
			_, err = cc.Export(coord, mixed)
			assert.ErrorIs(t, err, format.ErrCorrupt)
			// The other inner chunks stay readable.
			e = es[1]
			assert.NoError(t, cc.DecodeInner(coord, 1, e, mixed[e.Off:e.Off+uint64(e.Size)], make([]byte, cc.Grid.InnerBytes())))
		}
	}
}
