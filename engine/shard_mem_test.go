package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShardKeptIndexesCharged: the chunk indexes a sharded dataset keeps
// for its part reads are charged to the shared cache's budget as
// metadata, so that the cache's resident total sees them, under many
// datasets read at once while the file's metadata shedder drops them; the
// shedder lets them go and the file's close uncharges what is left.
func TestShardKeptIndexesCharged(t *testing.T) {
	ctx := context.Background()
	const nds = 8
	dims := []uint64{256, 256}
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	data := make([]byte, 256*256*2)
	for i := range data {
		data[i] = byte(i / 3)
	}
	for k := range nds {
		ds, err := f.CreateDataset(ctx, fmt.Sprint("d", k), DatasetSpec{Type: Uint16, Shape: dims, Chunk: []uint64{64, 64}, InnerChunk: []uint64{8, 8}, Filters: []Filter{Zstd(1)}})
		require.NoError(t, err)
		require.NoError(t, ds.Write(ctx, All(dims), data))
	}
	require.NoError(t, f.Close(ctx))

	f = tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 64 << 20}})
	c := f.Cache()
	dss := make([]*Dataset, nds)
	for k := range dss {
		var err error
		dss[k], err = f.OpenDataset(ctx, fmt.Sprint("d", k), nil)
		require.NoError(t, err)
	}
	// charged is what the file's datasets hold of the cache's metadata.
	charged := func() (idx, kept int64) {
		for _, ds := range dss {
			idx += ds.s.idx.chargedBytes()
			kept += shardOf(t, ds).keptBytes()
		}
		return idx, kept
	}
	// One element of every chunk of every dataset, many readers at once:
	// each is a part read, which keeps its chunk's index.
	readAll := func(shed bool) {
		var wg sync.WaitGroup
		for k, ds := range dss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]byte, 2)
				for r := uint64(0); r < 256; r += 64 {
					for col := uint64(0); col < 256; col += 64 {
						p := []uint64{r + uint64(k), col + 9}
						if !assert.NoError(t, ds.Read(ctx, Box(p, []uint64{1, 1}), got)) {
							return
						}
						i := (p[0]*256 + p[1]) * 2
						assert.Equal(t, data[i:i+2], got)
					}
				}
			}()
		}
		if shed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					f.shedIndexes()
				}
			}()
		}
		wg.Wait()
	}
	readAll(true)
	readAll(false)
	idx, kept := charged()
	// 16 chunks of 64 inner chunks (16 bytes an entry) per dataset.
	require.GreaterOrEqual(t, kept, int64(nds*16*64*16))
	assert.Equal(t, idx+kept, c.Stats().MetadataBytes, "metadata charged is the chunk indexes and the kept shard indexes")
	assert.LessOrEqual(t, c.Stats().ResidentBytes, c.Stats().ActiveLimit)

	f.shedIndexes()
	idx, kept = charged()
	assert.Zero(t, kept, "the shedder drops the kept indexes")
	assert.Equal(t, idx, c.Stats().MetadataBytes)

	readAll(false)
	require.NoError(t, f.Close(ctx))
	assert.Zero(t, c.Stats().MetadataBytes, "metadata left charged after Close")
}

// TestShardReadInnerChunkRaw: raw access to one inner chunk returns its
// pipeline output and mask (decoding to the inner chunk's values), reads
// only that inner chunk and the index, sees a write not yet flushed, and
// refuses an unfilled inner chunk (ErrNotFound), coordinates outside the
// chunk (ErrInvalid) or the extent (ErrOutOfRange) and a dataset that is
// not sharded.
func TestShardReadInnerChunkRaw(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	cnt := vfd.NewCounting(mem)
	f, ds, data := shardFile(t, mem, nil, []Filter{Shuffle(), Zstd(1)})
	require.NoError(t, f.Close(ctx))
	f = tOpen(t, cnt, &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20}})
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	pipe := ds.s.pipeline
	const innerBytes = 16 * 16 * 2
	// At most the inner chunk's frame and the index, read twice (once to
	// keep it, once beside the frame); a dirty chunk's write-back reads
	// what it copies as stored.
	check := func(c, q []uint64, want []byte, clean bool) {
		t.Helper()
		before := cnt.Snapshot()
		raw, mask, err := ds.ReadInnerChunkRaw(ctx, c, q)
		require.NoError(t, err, "chunk %v inner %v", c, q)
		if clean {
			assert.LessOrEqual(t, cnt.Snapshot().Sub(before).BytesRead(), int64(len(raw)+4+2*shardOf(t, ds).codec.IndexSize()), "chunk %v inner %v: more than the inner chunk and the index read", c, q)
		}
		got, err := pipe.Decode(raw, mask, innerBytes)
		require.NoError(t, err)
		assert.Equal(t, want, got, "chunk %v inner %v", c, q)
	}
	for c0 := range uint64(2) {
		for c1 := range uint64(2) {
			for q0 := range uint64(4) {
				for q1 := range uint64(4) {
					c, q := []uint64{c0, c1}, []uint64{q0, q1}
					if c0 == 0 && c1 == 0 && q0 == 0 && q1 == 0 {
						_, _, err := ds.ReadInnerChunkRaw(ctx, c, q)
						assert.ErrorIs(t, err, ErrNotFound, "the unfilled inner chunk")
						continue
					}
					check(c, q, shardBox(data, []uint64{c0*64 + q0*16, c1*64 + q1*16}, []uint64{16, 16}), true)
				}
			}
		}
	}

	// A write the cache holds dirty is written back first.
	vals := make([]byte, innerBytes)
	for i := range vals {
		vals[i] = byte(i * 5)
	}
	require.NoError(t, ds.Write(ctx, Box([]uint64{64 + 32, 16}, []uint64{16, 16}), vals))
	check([]uint64{1, 0}, []uint64{2, 1}, vals, false)
	require.NoError(t, ds.Write(ctx, Box([]uint64{0, 0}, []uint64{16, 16}), vals))
	check([]uint64{0, 0}, []uint64{0, 0}, vals, false)

	for _, tc := range []struct {
		c, q []uint64
		want error
	}{
		{[]uint64{0, 0}, []uint64{4, 0}, ErrInvalid},
		{[]uint64{0, 0}, []uint64{0, 4}, ErrInvalid},
		{[]uint64{0, 0}, []uint64{0}, ErrInvalid},
		{[]uint64{2, 0}, []uint64{0, 0}, ErrOutOfRange},
		{[]uint64{0}, []uint64{0, 0}, ErrInvalid},
	} {
		_, _, err := ds.ReadInnerChunkRaw(ctx, tc.c, tc.q)
		assert.ErrorIs(t, err, tc.want, "chunk %v inner %v", tc.c, tc.q)
	}
	plain, err := f.CreateDataset(ctx, "plain", DatasetSpec{Type: Uint16, Shape: []uint64{8}, Chunk: []uint64{4}})
	require.NoError(t, err)
	_, _, err = plain.ReadInnerChunkRaw(ctx, []uint64{0}, []uint64{0})
	assert.ErrorIs(t, err, ErrInvalid, "a dataset that is not sharded")
}

// TestShardBoxReservesInnerScratch: a one-call read of large sharded
// chunks that the cache does not keep reserves what their decodes hold,
// a few inner chunks each (scatterHold), not a chunk per decoding chunk:
// the cache's peak stays under one chunk while every chunk is scattered
// into the box.
func TestShardBoxReservesInnerScratch(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	dims := []uint64{4096, 2048}
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: dims, Chunk: []uint64{2048, 1024},
		InnerChunk: []uint64{128, 1024}, Filters: []Filter{Zstd(1)}})
	require.NoError(t, err)
	data := make([]byte, 4096*2048*2)
	for i := range data {
		data[i] = byte(i/7 + i/4096)
	}
	require.NoError(t, ds.Write(ctx, All(dims), data))
	require.NoError(t, f.Close(ctx))

	cc, err := cache.New(cache.Config{AdmitOnReread: true, Workers: 2})
	require.NoError(t, err)
	defer cc.Close()
	f = tOpen(t, mem, &Options{ReadOnly: true, Cache: cc})
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	before := shardScatterDecodes.Load()
	// A box that is not the chunks' own rows: each chunk scatters.
	got := make([]byte, 4096*2000*2)
	require.NoError(t, ds.Read(ctx, Box([]uint64{0, 0}, []uint64{4096, 2000}), got))
	assert.Equal(t, int64(4), shardScatterDecodes.Load()-before, "every chunk scattered into the box")
	for r := range 4096 {
		if !assert.Equal(t, data[r*4096:r*4096+4000], got[r*4000:(r+1)*4000], "row %d", r) {
			break
		}
	}
	const chunk = 2048 * 1024 * 2
	assert.Less(t, cc.Stats().PeakChunkBytes, int64(chunk), "peak of the cache's chunk bytes")
}
