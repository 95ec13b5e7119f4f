package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/shard"
	"github.com/scc-dev/scc/vfd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardOf returns a sharded dataset's state (shard.go).
func shardOf(t testing.TB, ds *Dataset) *shardState {
	l, ok := asLayout[*shardLayout](ds.s)
	require.True(t, ok, "dataset %q is not sharded", ds.Path())
	return l.sh
}

// TestShardRoundTrip runs random selections of every shape (strided,
// partial inner chunks, edge chunks, unwritten inner chunks that read as
// the fill value) over sharded datasets against a model, through the
// cached path and through part reads (every chunk above BypassBytes), then
// reopens the file and checks it.
func TestShardRoundTrip(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	for _, pname := range []string{"none", "shuffle+zstd", "deflate"} {
		for _, bypass := range []int64{-1, 1} {
			for _, typ := range []Type{Uint8, Int16, Float64} {
				t.Run(fmt.Sprintf("%s/bypass%d/%v", pname, bypass, typ), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(typ), uint64(bypass+2)))
					mem := vfd.NewMem()
					opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 10, BypassBytes: bypass}}
					f := tCreate(t, mem, opts)
					dims := []uint64{37, 29}
					var fill []byte
					if typ.Size() > 1 {
						fill = bytes.Repeat([]byte{0xA5}, typ.Size())
					}
					ds, err := f.CreateDataset(ctx, "d", DatasetSpec{
						Type: typ, Shape: dims, MaxShape: []uint64{Unlimited, 40},
						Chunk: []uint64{16, 12}, InnerChunk: []uint64{4, 6}, Filters: pipelines[pname], Fill: fill,
					})
					require.NoError(t, err)
					assert.Equal(t, []uint64{4, 6}, ds.InnerChunk())
					ref := newRef(dims, typ.Size(), fill)
					for i := 0; i < 40; i++ {
						sel := randomSelection(rng, dims)
						n := int(sel.NumElements()) * typ.Size()
						buf := compressibleBytes(rng, n)
						require.NoError(t, ds.Write(ctx, sel, buf))
						ref.write(sel, buf)
						rsel := randomSelection(rng, dims)
						got := make([]byte, int(rsel.NumElements())*typ.Size())
						require.NoError(t, ds.Read(ctx, rsel, got))
						require.True(t, bytes.Equal(got, ref.read(rsel)), "step %d: read differs from model", i)
						if i%10 == 5 {
							require.NoError(t, f.Flush(ctx))
							require.NoError(t, ds.Evict(ctx))
						}
					}
					ref.verify(t, ds)
					require.NoError(t, f.Close(ctx))

					f = tOpen(t, mem, opts)
					ds, err = f.OpenDataset(ctx, "d", nil)
					require.NoError(t, err)
					assert.Equal(t, []uint64{4, 6}, ds.InnerChunk())
					ref.verify(t, ds)
					for i := 0; i < 20; i++ {
						rsel := randomSelection(rng, dims)
						got := make([]byte, int(rsel.NumElements())*typ.Size())
						require.NoError(t, ds.Read(ctx, rsel, got))
						require.True(t, bytes.Equal(got, ref.read(rsel)), "reopened read %d differs from model", i)
					}
					_, err = Check(ctx, "", &Options{Driver: mem})
					require.NoError(t, err)
					require.NoError(t, f.Close(ctx))
				})
			}
		}
	}
}

// shardFile makes a file with one sharded uint16 dataset of 2x2 chunks of
// 64x64 in inner chunks of 16x16, written whole with compressible data
// except inner chunk [0 0] of chunk [0 0] (left at the fill value),
// flushed, and its contents.
func shardFile(t *testing.T, mem *vfd.Mem, opts *Options, filters []Filter, o ...tOpt) (*File, *Dataset, []byte) {
	ctx := context.Background()
	f := tCreate(t, mem, opts, o...)
	dims := []uint64{128, 128}
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: dims, Chunk: []uint64{64, 64}, InnerChunk: []uint64{16, 16}, Filters: filters})
	require.NoError(t, err)
	data := make([]byte, 128*128*2)
	for i := range data {
		if r, c := i/256, i%256/2; r >= 16 || c >= 16 {
			data[i] = byte(i / 7)
		}
	}
	require.NoError(t, ds.Write(ctx, All(dims), data))
	require.NoError(t, f.Flush(ctx))
	return f, ds, data
}

// shardBox is the bytes of box (start, count) of a 128x128 uint16 array.
func shardBox(data []byte, start, count []uint64) []byte {
	var out []byte
	for r := start[0]; r < start[0]+count[0]; r++ {
		out = append(out, data[(r*128+start[1])*2:(r*128+start[1]+count[1])*2]...)
	}
	return out
}

// TestShardPartReadDecodesTouched: a read of a few elements of a chunk
// the cache does not keep decodes only the inner chunks it touches, and
// the empty inner chunk none.
func TestShardPartReadDecodesTouched(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f, ds, data := shardFile(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20, BypassBytes: 1 << 10}}, []Filter{Zstd(1)})
	defer f.Close(ctx)
	sh := shardOf(t, ds)
	require.NoError(t, ds.Evict(ctx))
	for _, tc := range []struct {
		start, count []uint64
		decodes      int64
	}{
		{[]uint64{20, 20}, []uint64{2, 2}, 1},   // inside inner chunk [1 1] of chunk [0 0]
		{[]uint64{30, 20}, []uint64{4, 2}, 2},   // across two inner chunks
		{[]uint64{3, 3}, []uint64{2, 2}, 0},     // the empty inner chunk: fill, nothing decoded
		{[]uint64{60, 60}, []uint64{8, 8}, 4},   // the corner of four chunks, one inner chunk each
		{[]uint64{0, 64}, []uint64{64, 64}, 16}, // a whole chunk: all its inner chunks
	} {
		before := sh.codec.Decoded.Load()
		got := make([]byte, tc.count[0]*tc.count[1]*2)
		require.NoError(t, ds.Read(ctx, Box(tc.start, tc.count), got))
		assert.Equal(t, shardBox(data, tc.start, tc.count), got, "box %v+%v", tc.start, tc.count)
		assert.Equal(t, tc.decodes, sh.codec.Decoded.Load()-before, "inner chunks decoded for box %v+%v", tc.start, tc.count)
	}
}

// TestShardPartReadDefaultCache: with a cache large enough to hold the
// chunks (the default bypass, far above a chunk's size), a small read of
// a chunk that is not resident still reads and decodes only the inner
// chunks it touches, each time: loading the chunk would decode all of it.
func TestShardPartReadDefaultCache(t *testing.T) {
	ctx := context.Background()
	f, ds, data := shardFile(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 256 << 20}}, []Filter{Zstd(1)})
	defer f.Close(ctx)
	sh := shardOf(t, ds)
	require.NoError(t, ds.Evict(ctx))
	for range 3 {
		before := sh.codec.Decoded.Load()
		got := make([]byte, 2*2*2)
		require.NoError(t, ds.Read(ctx, Box([]uint64{20, 20}, []uint64{2, 2}), got))
		assert.Equal(t, shardBox(data, []uint64{20, 20}, []uint64{2, 2}), got)
		assert.Equal(t, int64(1), sh.codec.Decoded.Load()-before, "one inner chunk decoded")
	}
	// A whole chunk still goes the whole chunk's way.
	before := sh.codec.Decoded.Load()
	got := make([]byte, 64*64*2)
	require.NoError(t, ds.Read(ctx, Box([]uint64{0, 64}, []uint64{64, 64}), got))
	assert.Equal(t, shardBox(data, []uint64{0, 64}, []uint64{64, 64}), got)
	assert.Equal(t, int64(16), sh.codec.Decoded.Load()-before)
}

// TestShardPartReadIntoCaller: a read of exactly one inner chunk into a
// buffer of its shape decodes it straight into the caller's bytes (no
// chunk buffer, no copy), one across inner chunks goes through an inner
// chunk's buffer, and a part read's own bookkeeping (kept index, touched
// inner chunks, blocks) stays a few small allocations.
func TestShardPartReadIntoCaller(t *testing.T) {
	ctx := context.Background()
	f, ds, data := shardFile(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 256 << 20}}, []Filter{Zstd(1)})
	defer f.Close(ctx)
	require.NoError(t, ds.Evict(ctx))
	for _, tc := range []struct {
		start, count []uint64
		direct       int64
	}{
		{[]uint64{16, 32}, []uint64{16, 16}, 1}, // inner chunk [1 2] of chunk [0 0]
		{[]uint64{80, 96}, []uint64{16, 16}, 1}, // inner chunk [1 2] of chunk [1 1]
		{[]uint64{16, 24}, []uint64{16, 16}, 0}, // across two inner chunks
		{[]uint64{16, 32}, []uint64{8, 16}, 0},  // half of one
		{[]uint64{0, 0}, []uint64{16, 16}, 0},   // the empty one: fill
	} {
		before := shardInnerDirect.Load()
		got := make([]byte, tc.count[0]*tc.count[1]*2)
		require.NoError(t, ds.Read(ctx, Box(tc.start, tc.count), got))
		assert.Equal(t, shardBox(data, tc.start, tc.count), got, "box %v+%v", tc.start, tc.count)
		assert.Equal(t, tc.direct, shardInnerDirect.Load()-before, "inner chunks decoded into the caller's buffer, box %v+%v", tc.start, tc.count)
	}
	got := make([]byte, 16*16*2)
	sel := Box([]uint64{16, 32}, []uint64{16, 16})
	allocs := testing.AllocsPerRun(20, func() {
		if err := ds.Read(ctx, sel, got); err != nil {
			t.Fatal(err)
		}
	})
	// 36 when the index was decoded again on every read, the frames
	// mapped by offset and the touched inner chunks listed by sets.
	assert.LessOrEqual(t, allocs, 28.0, "allocations of one inner chunk's read")
}

// TestShardBoxScatters: a read of whole chunks that the cache does not
// keep, whose rows interleave in the caller's buffer (a box of several
// chunks), decodes each chunk's inner chunks straight into their places
// in the caller's buffer, on the cache's workers, with the empty inner
// chunk read as the fill value, and never a whole chunk's buffer.
func TestShardBoxScatters(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{AdmitOnReread: true}}
	f, _, data := shardFile(t, mem, opts, []Filter{Shuffle(), Zstd(1)})
	require.NoError(t, f.Close(ctx))
	f = tOpen(t, mem, opts)
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	sh := shardOf(t, ds)
	before, decoded, rows := shardScatterDecodes.Load(), sh.codec.Decoded.Load(), shardInnerRows.Load()
	got := make([]byte, len(data))
	require.NoError(t, ds.Read(ctx, All([]uint64{128, 128}), got))
	assert.True(t, bytes.Equal(data, got), "values of the whole array")
	assert.Equal(t, int64(4), shardScatterDecodes.Load()-before, "chunks decoded into the pieces")
	assert.Equal(t, int64(4*16-1), sh.codec.Decoded.Load()-decoded, "inner chunks decoded (one is empty)")
	assert.Equal(t, int64(4*16-1), shardInnerRows.Load()-rows, "inner chunks copied into the box by rows")
	// A strided selection over every inner chunk of every chunk.
	sel := Hyperslab([]uint64{1, 0}, []uint64{3, 5}, []uint64{42, 26}, nil)
	got = make([]byte, 42*26*2)
	rows = shardInnerRows.Load()
	require.NoError(t, ds.Read(ctx, sel, got))
	assert.Equal(t, rows, shardInnerRows.Load(), "a strided selection takes no inner chunk whole")
	want := make([]byte, 0, len(got))
	for r := uint64(1); r < 1+3*42; r += 3 {
		for c := uint64(0); c < 5*26; c += 5 {
			want = append(want, data[(r*128+c)*2:(r*128+c)*2+2]...)
		}
	}
	assert.True(t, bytes.Equal(want, got), "values of the strided selection")
}

// TestShardBoxRowsLarge: a box of whole chunks into a buffer large enough
// for its inner chunks' rows to be written around the caches
// (shard.CopyRows) reads the same values, from every worker at once.
func TestShardBoxRowsLarge(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{AdmitOnReread: true}}
	f := tCreate(t, mem, opts)
	dims := []uint64{1024, 4096}
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: dims, Chunk: []uint64{512, 2048}, InnerChunk: []uint64{64, 32}, Filters: []Filter{Zstd(1)}})
	require.NoError(t, err)
	data := make([]byte, 1024*4096*2)
	for i := range data {
		data[i] = byte(i/3 + i/8191)
	}
	require.NoError(t, ds.Write(ctx, All(dims), data))
	require.NoError(t, f.Close(ctx))
	f = tOpen(t, mem, opts)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	rows := shardInnerRows.Load()
	got := make([]byte, len(data))
	require.NoError(t, ds.Read(ctx, All(dims), got))
	assert.True(t, bytes.Equal(data, got), "values of the whole array")
	assert.Equal(t, int64(4*(512/64)*(2048/32)), shardInnerRows.Load()-rows, "inner chunks copied into the box by rows")
}

// TestShardPartialWriteEncodesTouched: a write of part of a stored
// sharded chunk encodes, at write-back, only the inner chunks it touched;
// the others are copied as stored, and everything reads back (and checks)
// as written, in this file and reopened.
func TestShardPartialWriteEncodesTouched(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20}}
	f, ds, data := shardFile(t, mem, opts, []Filter{Shuffle(), Zstd(1)})
	sh := shardOf(t, ds)
	require.NoError(t, ds.Evict(ctx))
	put := func(start, count []uint64, v byte) {
		b := bytes.Repeat([]byte{v}, int(count[0]*count[1]*2))
		require.NoError(t, ds.Write(ctx, Box(start, count), b))
		for r := start[0]; r < start[0]+count[0]; r++ {
			copy(data[(r*128+start[1])*2:], b[:count[1]*2])
		}
	}
	for _, tc := range []struct {
		name    string
		write   func()
		encoded int64
	}{
		{"one inner chunk", func() { put([]uint64{20, 20}, []uint64{2, 2}, 0x11) }, 1},
		{"two inner chunks of one chunk, two of another", func() {
			put([]uint64{70, 8}, []uint64{1, 16}, 0x22)
			put([]uint64{100, 120}, []uint64{16, 4}, 0x33)
		}, 4},
		{"the empty inner chunk", func() { put([]uint64{3, 3}, []uint64{1, 1}, 0x44) }, 1},
	} {
		tc.write()
		before := sh.codec.Encoded.Load()
		require.NoError(t, f.Flush(ctx))
		assert.Equal(t, tc.encoded, sh.codec.Encoded.Load()-before, "%s: inner chunks encoded", tc.name)
		require.NoError(t, ds.Evict(ctx))
		got := make([]byte, len(data))
		require.NoError(t, ds.Read(ctx, All([]uint64{128, 128}), got))
		require.True(t, bytes.Equal(data, got), "%s: values read back", tc.name)
	}
	require.NoError(t, f.Close(ctx))
	_, err := Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	f = tOpen(t, mem, opts)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	got := make([]byte, len(data))
	require.NoError(t, ds.Read(ctx, All([]uint64{128, 128}), got))
	assert.True(t, bytes.Equal(data, got), "values reopened")
}

// TestShardDamagedInner: a damaged inner chunk is ErrCorrupt naming it
// (reads of the chunk's other inner chunks still succeed), and Check
// reports it.
func TestShardDamagedInner(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20, BypassBytes: 1 << 10}}
	f, ds, data := shardFile(t, mem, opts, []Filter{Zstd(1)}, noCheck("damaged on purpose"))
	sh := shardOf(t, ds)
	ext, err := ds.ChunkExtents(ctx)
	require.NoError(t, err)
	require.NoError(t, f.Close(ctx))
	// Damage inner chunk [1 2] of chunk [0 0]: its frame, from the index.
	var off int64 = -1
	for _, e := range ext {
		if e.Coord[0] == 0 && e.Coord[1] == 0 {
			img := mem.Bytes()[e.Off : e.Off+e.Size]
			tail := img[len(img)-sh.codec.IndexSize():]
			ent := tail[(1*4+2)*shard.EntrySizeSums:]
			off = e.Off + int64(binary.LittleEndian.Uint64(ent)) + 5
		}
	}
	require.GreaterOrEqual(t, off, int64(0))
	b := []byte{0}
	_, err = mem.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x10
	_, err = mem.WriteAt(b, off)
	require.NoError(t, err)

	f = tOpen(t, mem, opts, noCheck("damaged on purpose"))
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	got := make([]byte, 64*64*2)
	err = ds.Read(ctx, Box([]uint64{0, 0}, []uint64{64, 64}), got)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "inner chunk [1 2]")
	// The other inner chunks of the chunk read.
	small := make([]byte, 16*16*2)
	require.NoError(t, ds.Read(ctx, Box([]uint64{16, 16}, []uint64{16, 16}), small))
	assert.Equal(t, shardBox(data, []uint64{16, 16}, []uint64{16, 16}), small)
	err = ds.Read(ctx, Box([]uint64{16, 32}, []uint64{1, 1}), small[:2])
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "inner chunk [1 2]")
	// Raw access to the damaged inner chunk names it; its neighbours read.
	_, _, err = ds.ReadInnerChunkRaw(ctx, []uint64{0, 0}, []uint64{1, 2})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "inner chunk [1 2]")
	_, _, err = ds.ReadInnerChunkRaw(ctx, []uint64{0, 0}, []uint64{1, 1})
	require.NoError(t, err)

	rep, err := Check(ctx, "", &Options{Driver: mem})
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotNil(t, rep)
	assert.Contains(t, fmt.Sprint(rep.Problems), "inner chunk [1 2]")
}

// TestShardRawChunks: raw chunk access moves whole sharded chunks between
// datasets whose checksums are keyed differently, DecodeChunk and
// EncodeChunk agree with them, and bytes that are not a sharded chunk are
// refused.
func TestShardRawChunks(t *testing.T) {
	ctx := context.Background()
	src, dst := vfd.NewMem(), vfd.NewMem()
	f, ds, data := shardFile(t, src, nil, []Filter{Shuffle(), Zstd(1)})
	defer f.Close(ctx)
	g := tCreate(t, dst, nil)
	defer g.Close(ctx)
	out, err := g.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: []uint64{128, 128}, Chunk: []uint64{64, 64}, InnerChunk: []uint64{16, 16}, Filters: []Filter{Shuffle(), Zstd(1)}})
	require.NoError(t, err)
	for _, c := range [][]uint64{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
		raw, mask, err := ds.ReadChunkRaw(ctx, c)
		require.NoError(t, err)
		assert.Zero(t, mask)
		st, err := ds.StatChunkRaw(ctx, c)
		require.NoError(t, err)
		assert.Equal(t, uint64(len(raw)), st.Size)
		dec, err := ds.DecodeChunk(raw, mask)
		require.NoError(t, err)
		assert.Equal(t, shardBox(data, []uint64{c[0] * 64, c[1] * 64}, []uint64{64, 64}), dec)
		if c[1] == 1 {
			// Re-encoded by hand: what WriteChunkRaw takes too.
			raw, _, err = out.EncodeChunk(dec)
			require.NoError(t, err)
		}
		require.NoError(t, out.WriteChunkRaw(ctx, c, raw, 0))
	}
	got := make([]byte, len(data))
	require.NoError(t, out.Read(ctx, All([]uint64{128, 128}), got))
	assert.Equal(t, data, got)

	raw, _, err := ds.ReadChunkRaw(ctx, []uint64{0, 0})
	require.NoError(t, err)
	raw[3] ^= 1
	assert.ErrorIs(t, out.WriteChunkRaw(ctx, []uint64{0, 0}, raw, 0), ErrInvalid)
	assert.ErrorIs(t, out.WriteChunkRaw(ctx, []uint64{0, 0}, raw[:20], 0), ErrInvalid)
	raw[3] ^= 1
	assert.ErrorIs(t, out.WriteChunkRaw(ctx, []uint64{0, 0}, raw, 1), ErrInvalid)
	_, err = ds.DecodeChunk(raw[:len(raw)-1], 0)
	assert.ErrorIs(t, err, ErrCorrupt)
	require.NoError(t, out.Read(ctx, All([]uint64{128, 128}), got))
	assert.Equal(t, data, got, "refused writes change nothing")
}

// shardCrashWorkload is crashWorkload over sharded datasets: writes of
// parts of inner chunks, whole chunks, unwritten inner chunks, extent
// changes that cut inner chunks, flushes and a close.
var shardCrashWorkload = defineWorkload(99, &Options{CacheConfig: cache.Config{QuiescentBytes: 6 << 10}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"ea": {Type: Uint16, Shape: []uint64{6, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{4, 10}, InnerChunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"fa": {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, InnerChunk: []uint64{2, 2}, Fill: []byte{1, 2, 3, 4}},
	}
	return steps(
		func() error { return w.create(specs, "ea", "fa") },
		func() error { return w.writeRandom(6) },
		w.flush,
		func() error { return w.writeRandom(6) },
		func() error { return w.setExtent("ea", []uint64{3, 10}) },
		w.flush,
		func() error { return w.setExtent("ea", []uint64{9, 10}) },
		func() error { return w.writeRandom(6) },
	)
})

// TestCrashAtEveryWriteSharded is TestCrashAtEveryWrite over sharded
// datasets.
func TestCrashAtEveryWriteSharded(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, shardCrashWorkload, 1)
}

// TestFaultAtEveryOperationSharded is TestFaultAtEveryOperation over
// sharded datasets.
func TestFaultAtEveryOperationSharded(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, shardCrashWorkload, 2)
}

// TestShardStoredChunkSize: a sharded chunk's StoredChunk.Size, from the
// chunk index (Chunks, StatChunkRaw) or from the read, is the length of
// the portable form ReadChunkRaw returns, whose index entries are shorter
// than the stored ones.
func TestShardStoredChunkSize(t *testing.T) {
	ctx := context.Background()
	for _, filters := range [][]Filter{nil, {Zstd(1)}} {
		f, ds, _ := shardFile(t, vfd.NewMem(), nil, filters)
		listed, err := storedChunks(ctx, ds)
		require.NoError(t, err)
		require.NotEmpty(t, listed)
		for _, sc := range listed {
			data, read, err := ds.ReadChunkRawStored(ctx, sc.Coords)
			require.NoError(t, err)
			assert.EqualValues(t, len(data), sc.Size, "chunk %v listed", sc.Coords)
			assert.EqualValues(t, len(data), read.Size, "chunk %v read", sc.Coords)
			stat, err := ds.StatChunkRaw(ctx, sc.Coords)
			require.NoError(t, err)
			assert.EqualValues(t, len(data), stat.Size, "chunk %v stat", sc.Coords)
		}
		require.NoError(t, f.Close(ctx))
	}
}
