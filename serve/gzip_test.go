package serve

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

// TestGzipWhereItHelps: bodies that are not compressed already
// (metadata, the web tree, chunks with no compressor declared) go gzipped
// to a client that takes gzip when they are large enough and shrink, with
// their own ETag and Vary; chunks a codec compresses, small bodies,
// incompressible ones, range requests and clients that refuse gzip get
// the identity bytes.
func TestGzipWhereItHelps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gz.scc")
	wf := testfile.Create(t, path, nil)
	const n = 4096
	pattern := make([]byte, n)
	for i := range pattern {
		pattern[i] = byte(i / 64)
	}
	noise := make([]byte, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	mk := func(name string, filters []engine.Filter, data []byte, chunk uint64) {
		ds, err := wf.CreateDataset(context.Background(), name, engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{uint64(len(data))}, Chunk: []uint64{chunk}, Filters: filters})
		require.NoError(t, err)
		require.NoError(t, ds.Write(bg, engine.All([]uint64{uint64(len(data))}), data))
	}
	mk("plain", nil, pattern, n)                                            // stored, no codec: gzip helps
	mk("shuf", []engine.Filter{engine.Shuffle()}, pattern, n)               // shuffle only: not compressed
	mk("noise", nil, noise, n)                                              // does not shrink
	mk("small", nil, pattern[:512], 512)                                    // below the threshold
	mk("zs", []engine.Filter{engine.Zstd(1)}, pattern, n)                   // compressed by its codec
	mk("zsnoise", []engine.Filter{engine.Zstd(1)}, noise, n)                // codec skipped, chain declares zstd
	mk("dec", []engine.Filter{engine.Zstd(1), engine.CRC32C()}, pattern, n) // v2 has no crc32c: served decoded
	require.NoError(t, wf.Close(context.Background()))
	_, s, _ := open(t, path, Options{Refresh: -1})

	ident := func(key string) *http.Response {
		w := get(s, "GET", key)
		require.Equal(t, http.StatusOK, w.Code, key)
		return w.Result()
	}
	gzipped := func(key string, want []byte) {
		t.Helper()
		id := ident(key)
		idBody, _ := io.ReadAll(id.Body)
		if want != nil {
			require.Equal(t, want, idBody, key)
		}
		w := get(s, "GET", key, "Accept-Encoding", "br, gzip")
		require.Equal(t, http.StatusOK, w.Code, key)
		assert.Equal(t, "gzip", w.Header().Get("Content-Encoding"), key)
		assert.Equal(t, "Accept-Encoding", w.Header().Get("Vary"), key)
		assert.Less(t, w.Body.Len(), len(idBody), key)
		assert.Equal(t, itoa(uint64(w.Body.Len())), w.Header().Get("Content-Length"), key)
		assert.Equal(t, idBody, gunzip(t, w.Body.Bytes()), "%s: the decoded bytes are the identity ones", key)
		etag := w.Header().Get("ETag")
		idTag := id.Header.Get("ETag")
		assert.NotEqual(t, idTag, etag, key)
		assert.Equal(t, strings.TrimSuffix(idTag, `"`)+`+gzip"`, etag, key)

		w = get(s, "GET", key, "Accept-Encoding", "gzip", "If-None-Match", etag)
		assert.Equal(t, http.StatusNotModified, w.Code, key)
		assert.Equal(t, etag, w.Header().Get("ETag"), key)
		w = get(s, "GET", key, "Accept-Encoding", "gzip", "If-None-Match", idTag)
		assert.Equal(t, http.StatusOK, w.Code, "%s: the identity validator does not stand for the gzipped bytes", key)
		w = get(s, "GET", key, "If-None-Match", idTag)
		assert.Equal(t, http.StatusNotModified, w.Code, key)

		w = get(s, "HEAD", key, "Accept-Encoding", "gzip")
		assert.Equal(t, "gzip", w.Header().Get("Content-Encoding"), key)
		assert.Equal(t, etag, w.Header().Get("ETag"), key)
		assert.Empty(t, w.Body.Bytes())

		w = get(s, "GET", key, "Accept-Encoding", "gzip", "Range", "bytes=10-19")
		require.Equal(t, http.StatusPartialContent, w.Code, key)
		assert.Empty(t, w.Header().Get("Content-Encoding"), "%s: a range is of the identity bytes", key)
		assert.Equal(t, idBody[10:20], w.Body.Bytes(), key)

		for _, ae := range []string{"gzip;q=0", "identity", "gzip;q=0, *", "deflate"} {
			w = get(s, "GET", key, "Accept-Encoding", ae)
			assert.Empty(t, w.Header().Get("Content-Encoding"), "%s: %s", key, ae)
			assert.Equal(t, idBody, w.Body.Bytes(), key)
		}
		w = get(s, "GET", key, "Accept-Encoding", "*")
		assert.Equal(t, "gzip", w.Header().Get("Content-Encoding"), key)
	}
	identity := func(key string) {
		t.Helper()
		id := ident(key)
		idBody, _ := io.ReadAll(id.Body)
		w := get(s, "GET", key, "Accept-Encoding", "gzip")
		require.Equal(t, http.StatusOK, w.Code, key)
		assert.Empty(t, w.Header().Get("Content-Encoding"), key)
		assert.Equal(t, idBody, w.Body.Bytes(), key)
		assert.Equal(t, id.Header.Get("ETag"), w.Header().Get("ETag"), key)
	}

	gzipped("/.zmetadata", nil)
	gzipped("/plain/0", pattern)
	gzipped("/dec/0", pattern)
	gzipped("/__scc/tree", nil)
	identity("/noise/0")
	identity("/small/0")
	identity("/zs/0")
	identity("/zsnoise/0")
	identity("/zs/.zattrs") // small
	assert.Empty(t, get(s, "GET", "/zs/0", "Accept-Encoding", "gzip").Header().Get("Vary"), "a compressed chunk never varies")

	// shuf's chunk is shuffled, not compressed: gzip helps (the bytes are
	// the stored, shuffled ones).
	w := get(s, "GET", "/shuf/0", "Accept-Encoding", "gzip")
	assert.Equal(t, "gzip", w.Header().Get("Content-Encoding"))
	assert.Equal(t, get(s, "GET", "/shuf/0").Body.Bytes(), gunzip(t, w.Body.Bytes()))
}

// TestGzipRevalidationFromIndex: a chunk stored without a codec and sent
// gzipped is revalidated from the chunk index like its identity form,
// without reading the chunk.
func TestGzipRevalidationFromIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gz.scc")
	wf := testfile.Create(t, path, nil)
	ds, err := wf.CreateDataset(context.Background(), "a", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}})
	require.NoError(t, err)
	require.NoError(t, ds.Write(bg, engine.All([]uint64{8192}), make([]byte, 8192)))
	require.NoError(t, ds.Write(bg, engine.Box([]uint64{0}, []uint64{4}), []byte{1, 2, 3, 4}))
	require.NoError(t, wf.Close(context.Background()))
	_, s, _ := open(t, path, Options{Refresh: -1})
	w := get(s, "GET", "/a/0", "Accept-Encoding", "gzip")
	require.Equal(t, "gzip", w.Header().Get("Content-Encoding"))
	etag := w.Header().Get("ETag")
	rf := s.f
	before := rf.Cache().Stats()
	w = get(s, "GET", "/a/0", "Accept-Encoding", "gzip", "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, w.Code)
	assert.Equal(t, etag, w.Header().Get("ETag"))
	assert.Equal(t, "Accept-Encoding", w.Header().Get("Vary"))
	assert.Equal(t, before.VectorReads, rf.Cache().Stats().VectorReads, "a 304 reads only the chunk index")
	// Without gzip the gzipped validator names another representation.
	assert.Equal(t, http.StatusOK, get(s, "GET", "/a/0", "If-None-Match", etag).Code)
}
