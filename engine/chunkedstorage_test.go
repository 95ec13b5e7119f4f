package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestVirtualKeepsNoChunks: a virtual dataset is not registered with the
// cache, its reads going through its sources' registrations: it reserves
// nothing there, the calls that concern cached chunks (options, Evict,
// Flush's write-back) do nothing on it, and the chunked storage accessor
// refuses it with a typed error naming the dataset and its layout.
func TestVirtualKeepsNoChunks(t *testing.T) {
	ctx := t.Context()
	c, err := cache.New(cache.Config{QuiescentBytes: 8 << 20, MinBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	f := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	all := Box([]uint64{0}, []uint64{8})
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	src, err := f.CreateDataset(ctx, "src", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}})
	require.NoError(t, err)
	require.NoError(t, src.Write(ctx, all, data))
	v, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint8, Shape: []uint64{8},
		Mappings: []VirtualMapping{{Virtual: all, Dataset: "src", Source: all}}})
	require.NoError(t, err)

	_, err = src.s.chunks()
	assert.NoError(t, err)
	_, err = v.s.chunks()
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, errNoChunks)
	assert.ErrorContains(t, err, `"v" is virtual`)

	assert.Equal(t, int64(1<<20), src.CacheStats().MinBytes, "the source's reservation")
	assert.Equal(t, cache.DatasetStats{}, v.CacheStats(), "a virtual dataset's figures in the cache")
	assert.NoError(t, v.Evict(ctx))
	assert.NoError(t, v.Flush(ctx))
	w, err := f.OpenDataset(ctx, "v", &DatasetOptions{CacheMinBytes: 4 << 20, Prefetch: PrefetchOff})
	require.NoError(t, err)
	assert.Equal(t, cache.DatasetStats{}, w.CacheStats(), "after options")
	got := make([]byte, len(data))
	require.NoError(t, w.Read(ctx, all, got))
	assert.Equal(t, data, got)
	require.NoError(t, w.Close(ctx))
	require.NoError(t, v.Close(ctx))
}
