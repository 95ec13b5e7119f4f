package serve

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

var bg = context.Background()

// fixture is what makeFile puts in the file, for the tests to compare.
type fixture struct {
	path string
	// served are the datasets the view holds; skipped those it leaves
	// out.
	served, skipped []string
}

// makeFile builds a file with one dataset of every kind the view serves
// (each pipeline that maps, one that does not, sparse, contiguous,
// virtual, fixed strings) and some it leaves out, with attributes on the
// file, a group and the datasets.
func makeFile(t testing.TB) fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.scc")
	f := testfile.Create(t, path, nil)
	require.NoError(t, f.SetAttr(bg, "title", engine.StringAttr("served \"live\"")))
	require.NoError(t, f.SetAttr(bg, "version", engine.ScalarAttr(uint16(3))))
	require.NoError(t, f.SetAttr(bg, "weights", engine.ArrayAttr([]float32{0.5, float32(math.Inf(1)), -2})))
	g, err := f.CreateGroup(bg, "g")
	require.NoError(t, err)
	require.NoError(t, g.SetAttr(bg, "kind", engine.StringAttr("group")))

	type def struct {
		name     string
		spec     engine.DatasetSpec
		skipHead bool
	}
	nan := binary.LittleEndian.AppendUint64(nil, 0x7ff8000000000000) // the quiet NaN JSON's "NaN" stands for
	defs := []def{
		{"zs", engine.DatasetSpec{Type: engine.Float64, Shape: []uint64{100, 50}, Chunk: []uint64{30, 20}, Filters: []engine.Filter{engine.Zstd(2)}, Fill: nan}, true},
		{"g/sh", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{70, 30}, Chunk: []uint64{32, 16}, Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(5)}, Fill: []byte{7, 0}}, true},
		{"g/h/crc", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{1300}, Chunk: []uint64{500}, Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1), engine.CRC32C()}, Fill: []byte{0xff, 0xff}}, false},
		{"raw", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{1000}, MaxShape: []uint64{engine.Unlimited}, Chunk: []uint64{330}}, false},
		{"defl", engine.DatasetSpec{Type: engine.Float32, Shape: []uint64{90, 90}, Chunk: []uint64{40, 40}, Filters: []engine.Filter{engine.Deflate(1)}}, false},
		{"sp", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{100, 100}, Chunk: []uint64{10, 10}, Layout: engine.Sparse, Fill: []byte{0xff, 0xff, 0xff, 0xff}}, false},
		{"ct", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{30, 40}, Layout: engine.Contiguous}, false},
		{"str", engine.DatasetSpec{Type: engine.FixedString(6, engine.NullPad, engine.ASCII), Shape: []uint64{10}, Chunk: []uint64{4}}, false},
	}
	// Incompressible: the engine skips zstd for these chunks (a filter
	// mask), which the declared chain cannot say.
	rnd, err := f.CreateDataset(context.Background(), "rnd", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{3000}, Chunk: []uint64{1024}, Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	noise := make([]byte, 3000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	require.NoError(t, rnd.Write(bg, engine.All([]uint64{3000}), noise))
	var fx fixture
	fx.path = path
	fx.served = append(fx.served, "rnd")
	for i, d := range defs {
		ds, err := f.CreateDataset(context.Background(), d.name, d.spec)
		require.NoError(t, err, d.name)
		require.NoError(t, ds.SetAttr(bg, "units", engine.StringAttr("K")))
		require.NoError(t, ds.SetAttr(bg, "offsets", engine.ArrayAttr([]int64{math.MinInt64, 0, math.MaxInt64})))
		fx.served = append(fx.served, d.name)
		switch {
		case d.spec.Layout == engine.Sparse:
			require.NoError(t, ds.Write(bg, engine.Box([]uint64{3, 4}, []uint64{1, 2}), []byte{1, 2, 3, 4, 5, 6, 7, 8}))
			require.NoError(t, ds.Write(bg, engine.Box([]uint64{95, 99}, []uint64{1, 1}), []byte{9, 0, 0, 0}))
			continue
		case d.spec.Type.IsString():
			require.NoError(t, ds.WriteStrings(bg, engine.Box([]uint64{0}, []uint64{7}), []string{"a", "bb", "ccc", "", "dddddd", "e", "ff"}))
			continue
		}
		n := d.spec.Type.Size()
		for _, s := range d.spec.Shape {
			n *= int(s)
		}
		buf := make([]byte, n)
		for j := range buf {
			buf[j] = byte(j/3%17 + i)
		}
		if d.spec.Type == engine.Float64 || d.spec.Type == engine.Float32 {
			es := d.spec.Type.Size()
			for j := 0; j < len(buf); j += es {
				buf[j+es-1] &= 0x3f
			}
		}
		start := make([]uint64, len(d.spec.Shape))
		count := append([]uint64{}, d.spec.Shape...)
		if d.skipHead {
			start[0] = d.spec.Chunk[0]
			count[0] -= d.spec.Chunk[0]
			buf = buf[:len(buf)/int(d.spec.Shape[0])*int(count[0])]
		}
		require.NoError(t, ds.Write(bg, engine.Box(start, count), buf))
	}
	// A virtual dataset over two of the others' parts.
	_, err = f.CreateVirtualDataset(bg, "virt", engine.VirtualSpec{
		Type: engine.Uint8, Shape: []uint64{2, 500}, Fill: []byte{9},
		Mappings: []engine.VirtualMapping{
			{Virtual: engine.Box([]uint64{0, 0}, []uint64{1, 500}), Dataset: "raw", Source: engine.Box([]uint64{100}, []uint64{500})},
			{Virtual: engine.Box([]uint64{1, 0}, []uint64{1, 300}), Dataset: "raw", Source: engine.Box([]uint64{0}, []uint64{300})},
		},
	})
	require.NoError(t, err)
	fx.served = append(fx.served, "virt")
	// Left out: UTF-8 strings, variable-length, a name Zarr v2 reserves
	// (the engine itself refuses Zarr's metadata keys, ".zarray" and the
	// like, but not the rest of the ".z" prefix).
	_, err = f.CreateDataset(context.Background(), "utf", engine.DatasetSpec{Type: engine.FixedString(8, engine.NullPad, engine.UTF8), Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	_, err = f.CreateDataset(context.Background(), "vl", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}, Layout: engine.Vlen})
	require.NoError(t, err)
	_, err = f.CreateDataset(context.Background(), "g/.zfoo", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	fx.skipped = []string{"utf", "vl", "g/.zfoo"}
	require.NoError(t, f.Close(context.Background()))
	return fx
}

// logBuf collects a Server's log.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// open opens path read-only and serves it.
func open(t testing.TB, path string, o Options) (*engine.File, *Server, *logBuf) {
	t.Helper()
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(context.Background()) })
	lb := &logBuf{}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(lb, nil))
	}
	s, err := New(bg, f, o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return f, s, lb
}

// get runs one request through h.
func get(h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func getJSON(t *testing.T, h http.Handler, key string) map[string]any {
	t.Helper()
	w := get(h, "GET", "/"+key)
	require.Equal(t, http.StatusOK, w.Code, "%s: %s", key, w.Body)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m), key)
	return m
}

// TestMetadataV2: the root, groups and arrays have their documents, the
// consolidated metadata holds every one of them, and what Zarr cannot
// hold is absent and logged with why.
func TestMetadataV2(t *testing.T) {
	fx := makeFile(t)
	_, s, lb := open(t, fx.path, Options{})
	assert.Equal(t, float64(2), getJSON(t, s, ".zgroup")["zarr_format"])
	root := getJSON(t, s, ".zattrs")
	assert.Equal(t, `served "live"`, root["title"])
	assert.Equal(t, []any{0.5, "Infinity", float64(-2)}, root["weights"])
	assert.Equal(t, "group", getJSON(t, s, "g/.zattrs")["kind"])
	getJSON(t, s, "g/.zgroup")
	getJSON(t, s, "g/h/.zgroup") // a dataset's parent that is no explicit group

	zs := getJSON(t, s, "zs/.zarray")
	assert.Equal(t, []any{float64(100), float64(50)}, zs["shape"])
	assert.Equal(t, []any{float64(30), float64(20)}, zs["chunks"])
	assert.Equal(t, "<f8", zs["dtype"])
	assert.Equal(t, "NaN", zs["fill_value"])
	assert.Equal(t, ".", zs["dimension_separator"])
	assert.Equal(t, "zstd", zs["compressor"].(map[string]any)["id"])
	sh := getJSON(t, s, "g/sh/.zarray")
	assert.Equal(t, "zlib", sh["compressor"].(map[string]any)["id"])
	assert.Equal(t, "shuffle", sh["filters"].([]any)[0].(map[string]any)["id"])
	// v2 has no crc32c codec: served decoded, nothing declared.
	crc := getJSON(t, s, "g/h/crc/.zarray")
	assert.Nil(t, crc["compressor"])
	assert.Nil(t, crc["filters"])
	assert.Equal(t, "|S6", getJSON(t, s, "str/.zarray")["dtype"])
	assert.Equal(t, float64(-1), getJSON(t, s, "sp/.zarray")["fill_value"])
	assert.Equal(t, "K", getJSON(t, s, "zs/.zattrs")["units"])

	cons := getJSON(t, s, ".zmetadata")
	assert.Equal(t, float64(1), cons["zarr_consolidated_format"])
	meta := cons["metadata"].(map[string]any)
	for _, name := range fx.served {
		assert.Contains(t, meta, name+"/.zarray")
		assert.Contains(t, meta, name+"/.zattrs")
		assert.Equal(t, getJSON(t, s, name+"/.zarray"), meta[name+"/.zarray"], name)
	}
	for _, k := range []string{".zgroup", ".zattrs", "g/.zgroup", "g/.zattrs", "g/h/.zgroup"} {
		assert.Contains(t, meta, k)
	}
	assert.NotContains(t, meta, ".zmetadata")
	for _, name := range fx.skipped {
		assert.NotContains(t, meta, name+"/.zarray")
		assert.Equal(t, http.StatusNotFound, get(s, "GET", "/"+name+"/.zarray").Code, name)
		assert.Contains(t, lb.String(), "name="+name, "the log names %s", name)
	}
}

// TestMetadataV3: zarr.json documents for the root, groups and arrays,
// with attributes inline and the v3 codecs (crc32c maps in v3).
func TestMetadataV3(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{Format: 3})
	root := getJSON(t, s, "zarr.json")
	assert.Equal(t, "group", root["node_type"])
	assert.Equal(t, `served "live"`, root["attributes"].(map[string]any)["title"])
	assert.Equal(t, "group", getJSON(t, s, "g/zarr.json")["attributes"].(map[string]any)["kind"])
	crc := getJSON(t, s, "g/h/crc/zarr.json")
	var names []string
	for _, c := range crc["codecs"].([]any) {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"bytes", "numcodecs.shuffle", "zstd", "crc32c"}, names)
	assert.Equal(t, "default", crc["chunk_key_encoding"].(map[string]any)["name"])
	assert.Equal(t, "K", crc["attributes"].(map[string]any)["units"])
	for _, name := range fx.served {
		getJSON(t, s, name+"/zarr.json")
	}
	assert.Equal(t, http.StatusNotFound, get(s, "GET", "/.zmetadata").Code)
	assert.Equal(t, http.StatusNotFound, get(s, "GET", "/.zgroup").Code)
}

// TestChunksAsStored: a chunk whose pipeline maps is the stored bytes
// (ReadChunkRaw's), a raw deflate chunk is its stream in a zlib wrapper,
// an unmapped pipeline's chunk is decoded, and a chunk never written is
// 404; v2 keys are "i.j", v3 "c/i/j".
func TestChunksAsStored(t *testing.T) {
	fx := makeFile(t)
	f, s2, _ := open(t, fx.path, Options{})
	_, s3, _ := open(t, fx.path, Options{Format: 3})
	ds, err := f.OpenDataset(context.Background(), "zs", nil)
	require.NoError(t, err)
	defer ds.Close(context.Background())
	raw, mask, err := ds.ReadChunkRaw(bg, []uint64{1, 2})
	require.NoError(t, err)
	require.Zero(t, mask)
	for _, c := range []struct {
		h   http.Handler
		key string
	}{{s2, "/zs/1.2"}, {s3, "/zs/c/1/2"}} {
		w := get(c.h, "GET", c.key)
		require.Equal(t, http.StatusOK, w.Code, c.key)
		assert.Equal(t, raw, w.Body.Bytes(), "%s: the stored bytes", c.key)
		assert.Equal(t, "application/octet-stream", w.Header().Get("Content-Type"))
		dec, err := zstd.NewReader(nil)
		require.NoError(t, err)
		el, err := dec.DecodeAll(w.Body.Bytes(), nil)
		require.NoError(t, err)
		want, err := ds.DecodeChunk(raw, 0)
		require.NoError(t, err)
		assert.Equal(t, want, el)
	}
	for _, key := range []string{"/zs/0.0", "/zs/0.1", "/g/sh/0.0"} {
		assert.Equal(t, http.StatusNotFound, get(s2, "GET", key).Code, "%s is not stored", key)
	}
	assert.Equal(t, http.StatusNotFound, get(s3, "GET", "/zs/c/0/0").Code)
	// Outside the grid, malformed coordinates, wrong rank: 404.
	for _, key := range []string{"/zs/4.0", "/zs/1.3", "/zs/1", "/zs/1.2.0", "/zs/01.2", "/zs/+1.2", "/zs/1.-2", "/zs/c/1/2", "/zs/18446744073709551616.0", "/nothing/0.0", "/zs"} {
		assert.Equal(t, http.StatusNotFound, get(s2, "GET", key).Code, key)
	}
	for _, key := range []string{"/zs/1.2", "/zs/c/4/0", "/zs/c/1", "/zs/c/1/2/0", "/zs/c"} {
		assert.Equal(t, http.StatusNotFound, get(s3, "GET", key).Code, key)
	}

	// A chunk stored with zstd skipped is encoded with the declared zstd.
	rnd, err := f.OpenDataset(context.Background(), "rnd", nil)
	require.NoError(t, err)
	defer rnd.Close(context.Background())
	rraw, rmask, err := rnd.ReadChunkRaw(bg, []uint64{1})
	require.NoError(t, err)
	require.NotZero(t, rmask, "the engine stored the noise without zstd")
	w0 := get(s2, "GET", "/rnd/1")
	require.Equal(t, http.StatusOK, w0.Code)
	zd, err := zstd.NewReader(nil)
	require.NoError(t, err)
	el0, err := zd.DecodeAll(w0.Body.Bytes(), nil)
	require.NoError(t, err)
	want0, err := rnd.DecodeChunk(rraw, rmask)
	require.NoError(t, err)
	assert.Equal(t, want0, el0)

	// Raw deflate: the stream rewrapped as zlib decodes to the chunk.
	defl, err := f.OpenDataset(context.Background(), "defl", nil)
	require.NoError(t, err)
	defer defl.Close(context.Background())
	w := get(s2, "GET", "/defl/1.1")
	require.Equal(t, http.StatusOK, w.Code)
	zr, err := zlib.NewReader(bytes.NewReader(w.Body.Bytes()))
	require.NoError(t, err)
	el, err := io.ReadAll(zr)
	require.NoError(t, err)
	draw, dmask, err := defl.ReadChunkRaw(bg, []uint64{1, 1})
	require.NoError(t, err)
	want, err := defl.DecodeChunk(draw, dmask)
	require.NoError(t, err)
	assert.Equal(t, want, el)

	// crc32c in v2: decoded bytes; in v3: as stored.
	crc, err := f.OpenDataset(context.Background(), "g/h/crc", nil)
	require.NoError(t, err)
	defer crc.Close(context.Background())
	craw, cmask, err := crc.ReadChunkRaw(bg, []uint64{2})
	require.NoError(t, err)
	cdec, err := crc.DecodeChunk(craw, cmask)
	require.NoError(t, err)
	assert.Equal(t, cdec, get(s2, "GET", "/g/h/crc/2").Body.Bytes())
	assert.Equal(t, craw, get(s3, "GET", "/g/h/crc/c/2").Body.Bytes())

	// Sparse: the chunks holding defined elements, decoded; the others 404.
	w = get(s2, "GET", "/sp/0.0")
	require.Equal(t, http.StatusOK, w.Code)
	require.Len(t, w.Body.Bytes(), 10*10*4)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, w.Body.Bytes()[(3*10+4)*4:(3*10+6)*4])
	assert.Equal(t, []byte{0xff, 0xff, 0xff, 0xff}, w.Body.Bytes()[:4])
	assert.Equal(t, http.StatusOK, get(s2, "GET", "/sp/9.9").Code)
	assert.Equal(t, http.StatusNotFound, get(s2, "GET", "/sp/5.5").Code)
}

// TestHTTPSemantics: ETag and Last-Modified on metadata and chunks,
// If-None-Match answered 304, ranges 206, HEAD without a body,
// Cache-Control no-cache, and If-Modified-Since not trusted over the ETag.
func TestHTTPSemantics(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	for _, key := range []string{"/.zmetadata", "/zs/.zarray", "/zs/1.2"} {
		w := get(s, "GET", key)
		require.Equal(t, http.StatusOK, w.Code, key)
		body := w.Body.Bytes()
		etag := w.Header().Get("ETag")
		require.True(t, strings.HasPrefix(etag, `"`) && len(etag) > 10, "%s: ETag %q", key, etag)
		require.NotEmpty(t, w.Header().Get("Last-Modified"), key)
		assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"), key)
		assert.Equal(t, "bytes", w.Header().Get("Accept-Ranges"), key)

		assert.Equal(t, etag, get(s, "GET", key).Header().Get("ETag"), "%s: the ETag is stable", key)
		w = get(s, "GET", key, "If-None-Match", etag)
		assert.Equal(t, http.StatusNotModified, w.Code, key)
		assert.Empty(t, w.Body.Bytes())
		w = get(s, "GET", key, "If-None-Match", `"other"`)
		assert.Equal(t, http.StatusOK, w.Code, key)
		// A date alone never answers 304: only the ETag is exact.
		w = get(s, "GET", key, "If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")
		assert.Equal(t, http.StatusOK, w.Code, key)

		w = get(s, "GET", key, "Range", "bytes=2-9")
		require.Equal(t, http.StatusPartialContent, w.Code, key)
		assert.Equal(t, body[2:10], w.Body.Bytes())
		w = get(s, "GET", key, "Range", "bytes=-3")
		require.Equal(t, http.StatusPartialContent, w.Code, key)
		assert.Equal(t, body[len(body)-3:], w.Body.Bytes())
		w = get(s, "GET", key, "Range", "bytes=100000000-")
		assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, w.Code, key)
		w = get(s, "GET", key, "Range", "bytes=2-9", "If-Range", `"stale"`)
		assert.Equal(t, http.StatusOK, w.Code, "%s: a stale If-Range gets the whole content", key)
		w = get(s, "GET", key, "Range", "bytes=2-9", "If-Range", "Fri, 01 Jan 2100 00:00:00 GMT")
		assert.Equal(t, http.StatusOK, w.Code, "%s: a date in If-Range gets the whole content", key)

		w = get(s, "HEAD", key)
		assert.Equal(t, http.StatusOK, w.Code, key)
		assert.Empty(t, w.Body.Bytes())
		assert.Equal(t, etag, w.Header().Get("ETag"))
	}
	w := get(s, "POST", "/.zgroup")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	assert.Equal(t, http.StatusOK, get(s, "GET", "/").Code)
}

// TestChunkETagFromIndex: a chunk served as stored is validated by the
// index's record of its stored frame (checksum, address, size), not by
// hashing its bytes on every request; a rewrite changes it, and the
// chunk's If-None-Match answer follows.
func TestChunkETagFromIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.scc")
	wf := testfile.Create(t, path, nil)
	ds, err := wf.CreateDataset(context.Background(), "a", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{8, 8}, Chunk: []uint64{4, 4},
		Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	frame := make([]byte, 2*4*4)
	write := func(v byte) {
		for i := range frame {
			frame[i] = v
		}
		require.NoError(t, ds.Write(bg, engine.Box([]uint64{4, 0}, []uint64{4, 4}), frame))
		require.NoError(t, wf.Flush(bg))
	}
	write(1)
	_, s, _ := open(t, path, Options{Refresh: -1})
	stored := func() engine.StoredChunk {
		chunks, err := testfile.StoredChunks(bg, ds)
		require.NoError(t, err)
		require.Len(t, chunks, 1)
		return chunks[0]
	}
	w := get(s, "GET", "/a/1.0")
	require.Equal(t, http.StatusOK, w.Code)
	etag := w.Header().Get("ETag")
	sc := stored()
	assert.Contains(t, etag, fmt.Sprintf("%08x", sc.Sum), "the index's checksum of the stored frame")
	rf := s.f
	before := rf.Cache().Stats()
	for _, inm := range []string{etag, `"x", ` + etag, "W/" + etag, "*"} {
		w = get(s, "GET", "/a/1.0", "If-None-Match", inm)
		assert.Equal(t, http.StatusNotModified, w.Code, inm)
		assert.Equal(t, etag, w.Header().Get("ETag"), inm)
		assert.Empty(t, w.Body.Bytes())
	}
	assert.Equal(t, before.VectorReads, rf.Cache().Stats().VectorReads, "a 304 reads only the chunk index")
	assert.Equal(t, http.StatusOK, get(s, "GET", "/a/1.0", "If-None-Match", `"x"`).Code)
	assert.Equal(t, http.StatusNotFound, get(s, "GET", "/a/0.0", "If-None-Match", "*").Code, "not stored")

	write(2)
	require.NoError(t, s.Refresh(bg))
	w = get(s, "GET", "/a/1.0", "If-None-Match", etag)
	require.Equal(t, http.StatusOK, w.Code, "a rewritten chunk is sent again")
	assert.NotEqual(t, etag, w.Header().Get("ETag"))
	assert.Contains(t, w.Header().Get("ETag"), fmt.Sprintf("%08x", stored().Sum))
}

// TestHostileKeys: every path that could leave the view or is no store
// key is 400 or 404, never a panic or a file of the host.
func TestHostileKeys(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	bad := []string{
		"/../f.scc", "/zs/../../etc/passwd", "/%2e%2e/f.scc", "/zs/%2e%2e/.zarray", "/g%2fsh/.zarray",
		"/g%2Fsh/0.0", "/zs%5c.zarray", "/zs/.zarray%00", "//etc/passwd", "/zs//1.2", "/./.zgroup",
		"/zs/./1.2", "/g/sh/", "/zs\\1.2", "/" + strings.Repeat("a/", MaxKeyLen),
	}
	for _, p := range bad {
		w := get(s, "GET", p)
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, w.Code, "%q: %d %s", p, w.Code, w.Body)
	}
	for _, p := range []string{"/etc/passwd", "/f.scc", "/zs/.zarray/x", "/zs/zarr.json", "/.zarray", "/g/.zarray", "/vl/.zarray", "/zs/1.2/0", "/zs/1.2.", "/zs/.2", "/zs/1..2"} {
		assert.Equal(t, http.StatusNotFound, get(s, "GET", p).Code, p)
	}
	// Over a real connection too, where the path reaches the handler as
	// sent (httptest.NewRequest cleans nothing either, but a client might).
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, p := range []string{"/../f.scc", "/%2e%2e/%2e%2e/etc/passwd", "/zs/%00"} {
		req, err := http.NewRequest("GET", srv.URL, nil)
		require.NoError(t, err)
		req.URL.Opaque = p
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, resp.StatusCode, p)
	}
}

// TestAuth: with a token, a request needs it as a bearer header or a
// token query parameter; CheckAddr refuses an open non-loopback address.
func TestAuth(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{Token: "s3cret"})
	assert.Equal(t, http.StatusUnauthorized, get(s, "GET", "/.zgroup").Code)
	assert.Equal(t, http.StatusUnauthorized, get(s, "GET", "/.zgroup", "Authorization", "Bearer wrong").Code)
	assert.Equal(t, http.StatusUnauthorized, get(s, "GET", "/.zgroup", "Authorization", "Basic s3cret").Code)
	assert.Equal(t, http.StatusUnauthorized, get(s, "GET", "/.zgroup?token=s3cre").Code)
	assert.Equal(t, http.StatusUnauthorized, get(s, "GET", "/.zgroup?token=%zz").Code)
	assert.Equal(t, http.StatusUnauthorized, get(s, "GET", "/../f.scc").Code, "auth before anything else")
	assert.Equal(t, `Bearer realm="scc"`, get(s, "GET", "/.zgroup").Header().Get("WWW-Authenticate"))
	assert.Equal(t, http.StatusOK, get(s, "GET", "/.zgroup", "Authorization", "Bearer s3cret").Code)
	assert.Equal(t, http.StatusOK, get(s, "GET", "/.zgroup?token=s3cret").Code)
	assert.Equal(t, http.StatusOK, get(s, "GET", "/zs/1.2?token=s3cret").Code)

	require.NoError(t, CheckAddr("127.0.0.1:0", "", false))
	require.NoError(t, CheckAddr("[::1]:8080", "", false))
	require.NoError(t, CheckAddr("localhost:8080", "", false))
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.168.1.2:80", "[::]:80", "example.org:80"} {
		require.ErrorIs(t, CheckAddr(addr, "", false), engine.ErrInvalid, addr)
		require.NoError(t, CheckAddr(addr, "t", false), addr)
		require.NoError(t, CheckAddr(addr, "", true), addr)
	}
	require.ErrorIs(t, CheckAddr("no-port", "", false), engine.ErrInvalid)
}

// TestBusy: past MaxInFlight requests at once, the next is answered 503
// at once.
func TestBusy(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{MaxInFlight: 2})
	s.sem <- struct{}{}
	s.sem <- struct{}{}
	w := get(s, "GET", "/.zgroup")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	<-s.sem
	assert.Equal(t, http.StatusOK, get(s, "GET", "/.zgroup").Code)
	<-s.sem
	require.NoError(t, s.Close())
	assert.Equal(t, http.StatusServiceUnavailable, get(s, "GET", "/.zgroup").Code, "closed")
}

// TestLive: a writer appends frames and Flushes; each request after the
// refresh bound sees the new extent, the new chunk, a new dataset and the
// deletion of a dataset; a rewritten chunk gets a new ETag.
func TestLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.scc")
	wf := testfile.Create(t, path, nil)
	defer wf.Close(context.Background())
	ds, err := wf.CreateDataset(context.Background(), "frames", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{0, 4, 4},
		MaxShape: []uint64{engine.Unlimited, 4, 4}, Chunk: []uint64{1, 4, 4}, Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	require.NoError(t, wf.Flush(bg))
	// Every request is past a 1 ns bound: each one refreshes first.
	for _, format := range []int{2, 3} {
		_, s, _ := open(t, path, Options{Format: format, Refresh: 1})
		meta, chunk := "frames/.zarray", "/frames/%d.0.0"
		if format == 3 {
			meta, chunk = "frames/zarr.json", "/frames/c/%d/0/0"
		}
		n := ds.Shape()[0]
		assert.Equal(t, float64(n), getJSON(t, s, meta)["shape"].([]any)[0])
		for i := n; i < n+3; i++ {
			frame := make([]byte, 32)
			for j := range frame {
				frame[j] = byte(i) + byte(j)
			}
			require.NoError(t, ds.SetExtent(bg, []uint64{i + 1, 4, 4}))
			require.NoError(t, ds.Write(bg, engine.Box([]uint64{i, 0, 0}, []uint64{1, 4, 4}), frame))
			key := strings.Replace(chunk, "%d", itoa(i), 1)
			assert.Equal(t, http.StatusNotFound, get(s, "GET", key).Code, "before the Flush")
			require.NoError(t, wf.Flush(bg))
			assert.Equal(t, float64(i+1), getJSON(t, s, meta)["shape"].([]any)[0], "the extent after the Flush")
			w := get(s, "GET", key)
			require.Equal(t, http.StatusOK, w.Code, key)
			dec, err := zstd.NewReader(nil)
			require.NoError(t, err)
			got, err := dec.DecodeAll(w.Body.Bytes(), nil)
			require.NoError(t, err)
			assert.Equal(t, frame, got)
		}
		// A chunk rewritten: a new ETag, and the old one no longer
		// answers 304.
		key := strings.Replace(chunk, "%d", "0", 1)
		old := get(s, "GET", key).Header().Get("ETag")
		require.NoError(t, ds.Write(bg, engine.Box([]uint64{0, 0, 0}, []uint64{1, 4, 4}), bytes.Repeat([]byte{byte(format)}, 32)))
		require.NoError(t, wf.Flush(bg))
		w := get(s, "GET", key, "If-None-Match", old)
		assert.Equal(t, http.StatusOK, w.Code, "a rewritten chunk against its old ETag")
		assert.NotEqual(t, old, w.Header().Get("ETag"))
		name := "new" + itoa(uint64(format))
		nd, err := wf.CreateDataset(context.Background(), name, engine.DatasetSpec{Type: engine.Int8, Shape: []uint64{5}, Chunk: []uint64{5}})
		require.NoError(t, err)
		require.NoError(t, nd.Close(context.Background()))
		require.NoError(t, wf.Flush(bg))
		key = name + "/zarr.json"
		if format == 2 {
			key = name + "/.zarray"
			assert.Contains(t, getJSON(t, s, ".zmetadata")["metadata"], key)
		}
		getJSON(t, s, key)
		// A deleted dataset leaves the view.
		require.NoError(t, wf.Delete(bg, name, nil))
		require.NoError(t, wf.Flush(bg))
		assert.Equal(t, http.StatusNotFound, get(s, "GET", "/"+key).Code, "%s after its deletion", key)
		if format == 2 {
			assert.NotContains(t, getJSON(t, s, ".zmetadata")["metadata"], key)
		}
	}
	// With a bound that has not passed, the view stays as it was until
	// Refresh; then it follows.
	_, s, _ := open(t, path, Options{Refresh: -1})
	n := ds.Shape()[0]
	require.NoError(t, ds.SetExtent(bg, []uint64{n + 1, 4, 4}))
	require.NoError(t, wf.Flush(bg))
	assert.Equal(t, float64(n), getJSON(t, s, "frames/.zarray")["shape"].([]any)[0])
	require.NoError(t, s.Refresh(bg))
	assert.Equal(t, float64(n+1), getJSON(t, s, "frames/.zarray")["shape"].([]any)[0])
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestConcurrentRequests: many requests at once, while the writer
// appends, under -race: every answer is 200 or 404.
func TestConcurrentRequests(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{Refresh: 1})
	var wg sync.WaitGroup
	keys := []string{"/.zmetadata", "/zs/1.2", "/zs/0.0", "/sp/0.0", "/virt/0.0", "/ct/0.0", "/defl/1.1", "/str/0"}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				w := get(s, "GET", keys[(g+i)%len(keys)])
				if w.Code != http.StatusOK && w.Code != http.StatusNotFound {
					t.Errorf("%s: %d %s", keys[(g+i)%len(keys)], w.Code, w.Body)
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzKeys: whatever the path and query, the answer is 200, 400, 401 or
// 404, never a panic or a server error.
func FuzzKeys(f *testing.F) {
	for _, seed := range []string{"/.zmetadata", "/zs/1.2", "/zs/c/1/2", "/../x", "/%2e%2e/x", "/g%2Fsh/0.0", "/zs/1.2?token=x", "//", "/zs/99999999999999999999.0", "/\x00", "/zs/1.2%00", "/c/c/c", "/zs/c/"} {
		f.Add(seed)
	}
	fx := makeFile(f)
	_, s2, _ := open(f, fx.path, Options{})
	_, s3, _ := open(f, fx.path, Options{Format: 3, Token: "t"})
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		for _, s := range []*Server{s2, s3} {
			r := httptest.NewRequest("GET", "/", nil)
			r.URL, r.RequestURI = u, u.RequestURI()
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			switch w.Code {
			case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusUnauthorized:
			default:
				t.Fatalf("%q: %d %s", target, w.Code, w.Body)
			}
		}
	})
}

// TestChunkBytesBound: a chunk request waits for room under MaxChunkBytes
// (a client that leaves while waiting gets nothing), and is served once
// the bytes held by others are released.
func TestChunkBytesBound(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{MaxChunkBytes: 1000})
	require.NoError(t, s.bytes.Acquire(bg, 1000))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	r := httptest.NewRequest("GET", "/zs/1.2", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	assert.Empty(t, w.Body.Bytes())
	assert.Empty(t, w.Header().Get("ETag"))
	// Metadata holds no chunk: served while the chunk bytes are taken.
	assert.Equal(t, http.StatusOK, get(s, "GET", "/zs/.zarray").Code)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- get(s, "GET", "/zs/1.2") }()
	s.bytes.Release(1000)
	assert.Equal(t, http.StatusOK, (<-done).Code)
	assert.True(t, s.bytes.TryAcquire(1000), "every byte is released after the response")
}

// TestDecodedThroughCache: a chunk served decoded is read through the
// shared chunk cache: a second request for it is a cache hit, also after
// the writer's commit rebuilt the view.
func TestDecodedThroughCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.scc")
	wf := testfile.Create(t, path, nil)
	defer wf.Close(context.Background())
	ds, err := wf.CreateDataset(context.Background(), "crc", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{1000}, Chunk: []uint64{500},
		Filters: []engine.Filter{engine.Zstd(1), engine.CRC32C()}}) // crc32c: v2 serves it decoded
	require.NoError(t, err)
	require.NoError(t, ds.Write(bg, engine.All([]uint64{1000}), bytes.Repeat([]byte{1, 2}, 1000)))
	require.NoError(t, wf.Flush(bg))
	f, s, _ := open(t, path, Options{Refresh: 1})
	require.Equal(t, http.StatusOK, get(s, "GET", "/crc/1").Code)
	before := f.Cache().Stats()
	require.Equal(t, http.StatusOK, get(s, "GET", "/crc/1").Code)
	after := f.Cache().Stats()
	assert.Greater(t, after.Hits, before.Hits, "the second read is a cache hit")
	assert.Equal(t, before.Misses, after.Misses)

	_, err = wf.CreateDataset(context.Background(), "other", engine.DatasetSpec{Type: engine.Int8, Shape: []uint64{4}, Chunk: []uint64{4}})
	require.NoError(t, err)
	require.NoError(t, wf.Flush(bg))
	getJSON(t, s, "other/.zarray") // the view was rebuilt
	require.Equal(t, http.StatusOK, get(s, "GET", "/crc/1").Code)
	assert.Equal(t, after.Misses, f.Cache().Stats().Misses, "still cached after the rebuild")
}

// TestHTTPServer: the http.Server NewHTTPServer makes keeps connections
// alive between requests and closes one whose client stalls in its
// request header (the bound is shortened here; the test waits for the
// close, not for a time).
func TestHTTPServer(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	srv := NewHTTPServer("127.0.0.1:0", s)
	assert.NotZero(t, srv.ReadHeaderTimeout)
	assert.NotZero(t, srv.IdleTimeout)
	assert.NotZero(t, srv.MaxHeaderBytes)
	srv.ReadHeaderTimeout = 50 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()

	reused := 0
	for i := 0; i < 3; i++ {
		req, err := http.NewRequest("GET", url+"/zs/1.2", nil)
		require.NoError(t, err)
		req = req.WithContext(httptrace.WithClientTrace(bg, &httptrace.ClientTrace{
			GotConn: func(c httptrace.GotConnInfo) {
				if c.Reused {
					reused++
				}
			},
		}))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Equal(t, 2, reused, "keep-alive: one connection for three requests")

	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /.zgroup HTTP/1.1\r\nHost: x\r\n") // never ends its header
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a hang fails, not a slow close
	b, err := io.ReadAll(c)
	assert.NoError(t, err, "the server closes the stalled connection")
	assert.NotContains(t, string(b), "200 OK")
}

// TestDimensionNamesV3: the v3 view names every array's dimensions in its
// zarr.json (dimension_names) as the v2 view does in _ARRAY_DIMENSIONS:
// the dataset's own names when it has them, else generated ones.
func TestDimensionNamesV3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.scc")
	wf := testfile.Create(t, path, nil)
	_, err := wf.CreateDataset(context.Background(), "g/img", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4, 6}, Chunk: []uint64{2, 3}})
	require.NoError(t, err)
	own, err := wf.CreateDataset(context.Background(), "own", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4, 6}, Chunk: []uint64{2, 3}})
	require.NoError(t, err)
	names := engine.RawAttr(engine.AttrArray, engine.FixedString(4, engine.NullPad, engine.ASCII), []byte("timexpos"))
	require.NoError(t, own.SetAttr(bg, dimsAttrName, names))
	require.NoError(t, wf.Close(context.Background()))

	for _, format := range []int{2, 3} {
		_, s, _ := open(t, path, Options{Format: format})
		dims := func(name string) any {
			if format == 2 {
				return getJSON(t, s, name+"/.zattrs")[dimsAttrName]
			}
			return getJSON(t, s, name+"/zarr.json")["dimension_names"]
		}
		assert.Equal(t, []any{"img_dim_0", "img_dim_1"}, dims("g/img"), "v%d", format)
		assert.Equal(t, []any{"time", "xpos"}, dims("own"), "v%d", format)
	}
}
