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
