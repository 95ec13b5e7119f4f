package serve

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
)

// sharedFile writes a file of one zstd dataset "z" of n×n chunks of 64×64
// int32 and returns its path and every chunk's stored bytes.
func sharedFile(t *testing.T, n uint64) (string, map[string][]byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared.scc")
	f, err := engine.Create(bg, path, nil)
	require.NoError(t, err)
	spec := engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{64 * n, 64 * n}, Chunk: []uint64{64, 64}, Filters: []engine.Filter{engine.Zstd(1)}}
	ds, err := f.CreateDataset(bg, "z", spec)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 64*n*64*n*4)
	for i := range buf {
		buf[i] = byte(rng.IntN(4)) // compressible, not constant
	}
	require.NoError(t, ds.Write(bg, engine.All(spec.Shape), buf))
	require.NoError(t, f.Flush(bg))
	want := map[string][]byte{}
	for i := range n {
		for j := range n {
			raw, mask, err := ds.ReadChunkRaw(bg, []uint64{i, j})
			require.NoError(t, err)
			require.Zero(t, mask)
			want[fmt.Sprintf("z/%d.%d", i, j)] = raw
		}
	}
	require.NoError(t, f.Close(bg))
	return path, want
}

// TestStoredChunksThroughSharedCache: many clients reading chunks served
// as stored get them from the shared chunk cache, within its budget: the
// cache's charged bytes never pass its active limit, however many clients
// there are, and concurrent requests of one chunk share its read.
func TestStoredChunksThroughSharedCache(t *testing.T) {
	path, want := sharedFile(t, 8)
	f, err := engine.Open(bg, path, &engine.Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 64 << 10}})
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(context.Background()) })
	s, err := New(bg, f, Options{Refresh: -1, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	addr := listen(t, s)
	c := f.Cache()
	limit := c.Stats().ActiveLimit
	before := c.Stats()

	// Heap objects, a loose bound only (the clients share the process).
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(heap)
	base := heap[0].Value.Uint64()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var over atomic.Int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if r := c.Stats().ResidentBytes; r > limit {
				over.Store(r)
			}
			metrics.Read(heap)
			if v := heap[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(client.CloseIdleConnections)
	const clients, each = 64, 30
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range each {
				k := keys[rng.IntN(len(keys))]
				resp, err := client.Get("http://" + addr + "/" + k)
				if !assert.NoError(t, err) {
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode, k)
				assert.Equal(t, want[k], body, k)
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	st := c.Stats()
	assert.Zero(t, over.Load(), "charged bytes over the active limit %d", limit)
	assert.LessOrEqual(t, st.PeakChunkBytes, limit)
	assert.Less(t, int64(peak.Load())-int64(base), int64(64<<20), "heap growth while 64 clients read")
	ss := c.StoredStats()
	assert.Equal(t, int64(clients*each), ss.Hits+ss.Loads, "every chunk request read through the cache")
	assert.Positive(t, ss.Evicted, "a budget of a few chunks evicts")
	assert.Equal(t, ss.Loads, st.VectorReads-before.VectorReads, "one file read per load")

	// With room for all, every chunk is read from the file once more at
	// most, whatever the number of requests.
	require.NoError(t, c.SetConfig(bg, cache.Config{QuiescentBytes: 64 << 20}))
	loads := c.StoredStats().Loads
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, k := range keys[g%4*16 : g%4*16+16] {
				resp, err := client.Get("http://" + addr + "/" + k)
				if !assert.NoError(t, err) {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, c.StoredStats().Loads-loads, int64(len(keys)))
}
