package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// sharedFixture writes a 2-D dataset of n×n chunks of 64×64 int32 with the
// given filters, flushed.
func sharedFixture(t *testing.T, f *File, n uint64, filters []Filter) *Dataset {
	t.Helper()
	ctx := context.Background()
	spec := DatasetSpec{Type: Int32, Shape: []uint64{64 * n, 64 * n}, Chunk: []uint64{64, 64}, Filters: filters}
	ds, err := f.CreateDataset(ctx, "d", spec)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := compressibleBytes(rng, int(64*n*64*n*4))
	require.NoError(t, ds.Write(ctx, Box([]uint64{0, 0}, spec.Shape), buf))
	require.NoError(t, f.Flush(ctx))
	return ds
}

// TestReadChunkRawSharedSameBytes: the shared read returns what
// ReadChunkRawStored returns, for each pipeline; a chunk not stored is
// ErrNotFound, one outside the grid ErrOutOfRange.
func TestReadChunkRawSharedSameBytes(t *testing.T) {
	ctx := context.Background()
	for i, filters := range [][]Filter{nil, {Shuffle(), Zstd(2)}, {Shuffle(), Deflate(4)}, {LZ4(), CRC32C()}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f := tCreate(t, vfd.NewMem(), nil)
			ds := sharedFixture(t, f, 3, filters)
			for c0 := uint64(0); c0 < 3; c0++ {
				for c1 := uint64(0); c1 < 3; c1++ {
					coords := []uint64{c0, c1}
					want, wsc, err := ds.ReadChunkRawStored(ctx, coords)
					require.NoError(t, err)
					for range 2 { // a load, then a hit
						got, err := ds.ReadChunkRawShared(ctx, coords)
						require.NoError(t, err)
						assert.Equal(t, want, got.Data)
						assert.Equal(t, wsc, got.StoredChunk)
						got.Release()
					}
				}
			}
			empty, err := f.CreateDataset(ctx, "e", DatasetSpec{Type: Int32, Shape: []uint64{64}, Chunk: []uint64{8}})
			require.NoError(t, err)
			_, err = empty.ReadChunkRawShared(ctx, []uint64{0})
			assert.ErrorIs(t, err, ErrNotFound)
			_, err = ds.ReadChunkRawShared(ctx, []uint64{3, 0})
			assert.ErrorIs(t, err, ErrOutOfRange)
			require.NoError(t, f.Close(ctx))
			assert.Zero(t, f.cache.StoredStats().Bytes, "images left charged after close")
		})
	}
}

// TestReadChunkRawSharedOneReadPerChunk: many goroutines reading the same
// chunks over and over read each from the file once, with a budget that
// holds them all.
func TestReadChunkRawSharedOneReadPerChunk(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20}})
	ds := sharedFixture(t, f, 4, []Filter{Shuffle(), Zstd(1)})
	before := f.cache.StoredStats()
	reads := f.cache.Stats().VectorReads
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 200 {
				c, err := ds.ReadChunkRawShared(ctx, []uint64{rng.Uint64N(4), rng.Uint64N(4)})
				if !assert.NoError(t, err) {
					return
				}
				c.Release()
			}
		}()
	}
	wg.Wait()
	st := f.cache.StoredStats()
	assert.Equal(t, int64(16), st.Loads-before.Loads, "file reads of 16 chunks")
	assert.Equal(t, int64(32*200-16), st.Hits-before.Hits)
	assert.Equal(t, int64(16), f.cache.Stats().VectorReads-reads)
}

// TestReadChunkRawSharedRewritten: a chunk rewritten (flushed, or dirty in
// the cache) is read anew, never served from the image of its old
// version.
func TestReadChunkRawSharedRewritten(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	ds := sharedFixture(t, f, 2, []Filter{Zstd(1)})
	coords := []uint64{1, 1}
	old, err := ds.ReadChunkRawShared(ctx, coords)
	require.NoError(t, err)
	oldData := append([]byte(nil), old.Data...)
	for i, flush := range []bool{true, false} {
		v := make([]byte, 64*64*4)
		for j := range v {
			v[j] = byte(i + 3)
		}
		require.NoError(t, ds.Write(ctx, Box([]uint64{64, 64}, []uint64{64, 64}), v))
		if flush {
			require.NoError(t, f.Flush(ctx))
		}
		want, wsc, err := ds.ReadChunkRawStored(ctx, coords)
		require.NoError(t, err)
		got, err := ds.ReadChunkRawShared(ctx, coords)
		require.NoError(t, err)
		assert.Equal(t, want, got.Data)
		assert.Equal(t, wsc, got.StoredChunk)
		assert.NotEqual(t, oldData, got.Data)
		dec, err := ds.DecodeChunk(got.Data, got.FilterMask)
		require.NoError(t, err)
		assert.Equal(t, v, dec)
		got.Release()
	}
	// The reference taken before the rewrites still reads its version.
	assert.Equal(t, oldData, old.Data)
	old.Release()
}

// TestReadChunkRawSharedCorrupt: a stored frame whose checksum fails is
// ErrCorrupt for the request, and is not kept for the next.
func TestReadChunkRawSharedCorrupt(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil, noCheck("a stored chunk is damaged on purpose"))
	ds := sharedFixture(t, f, 2, []Filter{Zstd(1)})
	sc, err := ds.StatChunkRaw(ctx, []uint64{0, 1})
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = drv.ReadAt(b, int64(sc.Addr)+2)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = drv.WriteAt(b, int64(sc.Addr)+2)
	require.NoError(t, err)
	for range 2 {
		_, err = ds.ReadChunkRawShared(ctx, []uint64{0, 1})
		assert.ErrorIs(t, err, ErrCorrupt)
	}
	assert.Zero(t, f.cache.StoredStats().Images)
	assert.Zero(t, f.cache.StoredStats().Bytes)
}

// TestReadChunkRawSharedBounded: many readers holding chunks at once, on a
// budget of a few chunks, keep the cache's charged bytes under its active
// limit: a reader waits for room instead of reading into a buffer of its
// own.
func TestReadChunkRawSharedBounded(t *testing.T) {
	ctx := context.Background()
	// Chunks of 16 KiB decoded, stored uncompressed: a budget of 64 KiB
	// (active 128 KiB) holds about 7 pooled images of them.
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 10}})
	ds := sharedFixture(t, f, 8, nil)
	limit := f.cache.Stats().ActiveLimit
	var over atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 50 {
				c, err := ds.ReadChunkRawShared(ctx, []uint64{rng.Uint64N(8), rng.Uint64N(8)})
				if !assert.NoError(t, err) {
					return
				}
				if r := f.cache.Stats().ResidentBytes; r > limit {
					over.Store(r)
				}
				c.Release()
			}
		}()
	}
	wg.Wait()
	st := f.cache.Stats()
	assert.Zero(t, over.Load(), "resident bytes over the active limit %d", limit)
	assert.LessOrEqual(t, st.PeakChunkBytes, limit)
	assert.Positive(t, f.cache.StoredStats().Evicted, "images evicted for room")
	assert.LessOrEqual(t, f.cache.StoredStats().Bytes, limit)
}
