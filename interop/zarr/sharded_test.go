package zarr

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardedCase is a sharded dataset of the export tests: a pipeline, a
// shape with edge chunks, and values on part of it (the rest, inner
// chunks of the fill value, has no frames).
type shardedCase struct {
	name    string
	filters []engine.Filter
	// mode is what the export does with the chunks: copy (inner frames
	// byte for byte), rewrap (a deflate stream kept), reencode.
	mode string
}

var shardedCases = []shardedCase{
	{"zstd", []engine.Filter{engine.Zstd(1)}, "copy"},
	{"shuffle_zlib", []engine.Filter{engine.Shuffle(), engine.Zlib(3)}, "copy"},
	{"lz4", []engine.Filter{engine.LZ4()}, "copy"},
	{"raw", nil, "copy"},
	{"deflate", []engine.Filter{engine.Deflate(1)}, "rewrap"},
	{"crc", []engine.Filter{engine.Zstd(1), engine.CRC32C()}, "copy"},
}

var (
	shardedShape = []uint64{40, 27}
	shardedChunk = []uint64{16, 24}
	shardedInner = []uint64{8, 12}
)

// makeSharded writes a file of the sharded cases and returns it with each
// dataset's elements.
func makeSharded(t *testing.T, path string) (*engine.File, map[string][]byte) {
	f := testfile.Create(t, path, nil)
	want := map[string][]byte{}
	for k, c := range shardedCases {
		ds, err := f.CreateDataset(bg, c.name, engine.DatasetSpec{Type: engine.Uint16, Shape: shardedShape, Chunk: shardedChunk, InnerChunk: shardedInner, Filters: c.filters, Fill: []byte{7, 0}})
		require.NoError(t, err)
		n := int(shardedShape[0] * shardedShape[1])
		data := make([]byte, 2*n)
		for i := range n {
			v := uint16(7)
			// Rows 0..29 hold values; the inner chunks of rows 32.. keep
			// the fill value.
			if i/int(shardedShape[1]) < 30 {
				v = uint16((i/7)%50 + k)
			}
			binary.LittleEndian.PutUint16(data[2*i:], v)
		}
		require.NoError(t, ds.Write(bg, engine.All(shardedShape), data))
		want[c.name] = data
	}
	require.NoError(t, f.Flush(bg))
	return f, want
}

// zarritaRead reads the arrays at paths of a v3 store with zarrita.
func zarritaRead(t *testing.T, store string, paths []string) ([][]byte, readerOut) {
	node := zarrita(t)
	out := t.TempDir()
	cmd := exec.Command("node", append([]string{filepath.Join(node, "zarr3.mjs"), "read", store, out}, paths...)...)
	b, err := cmd.Output()
	require.NoError(t, err, "zarrita read: %s", stderr(err))
	var ro readerOut
	require.NoError(t, json.Unmarshal(b, &ro))
	var got [][]byte
	for i := range paths {
		d, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.bin", i)))
		require.NoError(t, err)
		got = append(got, d)
	}
	return got, ro
}

// TestExportShardedV3: a sharded dataset exports as a v3 array of the
// sharding_indexed codec (shard = chunk, inner chunk = inner chunk), which
// zarrita reads equal; where the pipeline maps, every inner frame is the
// chunk's own byte for byte and the shard is exactly as large as the
// stored chunk; the export imports back into a sharded dataset, equal.
func TestExportShardedV3(t *testing.T) {
	dir := t.TempDir()
	f, want := makeSharded(t, filepath.Join(dir, "src.scc"))
	defer f.Close(bg)
	store := filepath.Join(dir, "v3")
	rep, err := Export(bg, f, store, Options{Version: 3})
	require.NoError(t, err)
	var names []string
	for _, c := range shardedCases {
		names = append(names, c.name)
	}
	got, ro := zarritaRead(t, store, names)
	for i, c := range shardedCases {
		assert.Equal(t, want[c.name], got[i], "%s: zarrita's elements", c.name)
		assert.Equal(t, shardedInner, ro.Arrays[i].Chunks, "%s: zarrita's chunk shape (a sharded array's is the inner one)", c.name)
	}
	for _, d := range rep.Datasets {
		var c shardedCase
		for _, x := range shardedCases {
			if x.name == d.Name {
				c = x
			}
		}
		require.Positive(t, d.Chunks, d.Name)
		switch c.mode {
		case "copy":
			assert.Equal(t, d.Chunks, d.Copied, "%s: %+v", d.Name, d)
		case "rewrap":
			// A chunk of the fill value alone has no inner chunk to
			// rewrap.
			assert.Equal(t, d.Chunks, d.Rewrapped+d.Copied, "%s: %+v", d.Name, d)
			assert.Positive(t, d.Rewrapped, d.Name)
		}
		meta, err := os.ReadFile(filepath.Join(store, d.Name, "zarr.json"))
		require.NoError(t, err)
		assert.Contains(t, string(meta), `"sharding_indexed"`)
		if c.mode != "copy" {
			continue
		}
		// The shard is the chunk's stored bytes with the index
		// rewritten: the same size (inner frames, 16 bytes an entry, a
		// 4-byte checksum).
		ds, err := f.OpenDataset(bg, d.Name, nil)
		require.NoError(t, err)
		for sc, err := range ds.Chunks(bg) {
			require.NoError(t, err)
			raw, _, err := ds.ReadChunkRaw(bg, sc.Coords)
			require.NoError(t, err)
			shard, err := os.ReadFile(chunkPath(filepath.Join(store, d.Name), 3, sc.Coords))
			require.NoError(t, err)
			n := 2 * 2 // inner chunks of a chunk
			assert.Equal(t, len(raw)+4, len(shard), "%s %v: shard size", d.Name, sc.Coords)
			assert.Equal(t, raw[:len(raw)-16*n], shard[:len(shard)-16*n-4], "%s %v: inner frames", d.Name, sc.Coords)
		}
		require.NoError(t, ds.Close(bg))
	}
	g := testfile.Create(t, filepath.Join(dir, "back.scc"), nil)
	defer g.Close(bg)
	irep, err := Import(bg, store, g, Options{})
	require.NoError(t, err)
	for _, d := range irep.Datasets {
		assert.Equal(t, d.Chunks, d.Copied+d.Rewrapped, "%s: import %+v", d.Name, d)
	}
	for _, c := range shardedCases {
		ds, err := g.OpenDataset(bg, c.name, nil)
		require.NoError(t, err)
		assert.Equal(t, shardedInner, ds.InnerChunk(), c.name)
		assert.Equal(t, want[c.name], readAll(t, ds), c.name)
	}
}

// TestExportShardedV2: Zarr v2 has no shards; a sharded dataset exports
// with its inner chunks as the v2 chunks, which zarr-python reads equal.
func TestExportShardedV2(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	f, want := makeSharded(t, filepath.Join(dir, "src.scc"))
	defer f.Close(bg)
	store := filepath.Join(dir, "v2")
	rep, err := Export(bg, f, store, Options{Version: 2})
	require.NoError(t, err)
	var names []string
	for _, c := range shardedCases {
		names = append(names, c.name)
	}
	out := t.TempDir()
	b, err := exec.Command(python, append([]string{filepath.Join(testdata(t), "zarr2.py"), "read", store, out}, names...)...).Output()
	require.NoError(t, err, "zarr-python read: %s", stderr(err))
	var ro readerOut
	require.NoError(t, json.Unmarshal(b, &ro))
	for i, c := range shardedCases {
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.bin", i)))
		require.NoError(t, err)
		assert.Equal(t, want[c.name], got, "%s: zarr-python's elements", c.name)
		assert.Equal(t, shardedInner, ro.Arrays[i].Chunks, c.name)
	}
	for _, d := range rep.Datasets {
		if d.Name == "zstd" || d.Name == "lz4" || d.Name == "raw" || d.Name == "shuffle_zlib" {
			assert.Equal(t, d.Chunks, d.Copied, "%s: %+v", d.Name, d)
		}
	}
	// Inner chunks of the fill value are no chunk files.
	_, err = os.Stat(filepath.Join(store, "zstd", "9.0"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// ---- shards written outside scc ----

// zshard builds a Zarr shard the way other writers do, with no scc code:
// each inner chunk encoded by enc (nil: absent), placed in the reverse of
// C order (zarrs puts them in the order its tasks finish), the index at
// the start or the end, with or without its crc32c.
func zshard(inners [][]byte, atStart, crc bool) []byte {
	n := len(inners)
	is := 16 * n
	if crc {
		is += 4
	}
	base := 0
	if atStart {
		base = is
	}
	var data []byte
	offs, sizes := make([]uint64, n), make([]uint64, n)
	for i := n - 1; i >= 0; i-- {
		if inners[i] == nil {
			offs[i], sizes[i] = math.MaxUint64, math.MaxUint64
			continue
		}
		offs[i], sizes[i] = uint64(base+len(data)), uint64(len(inners[i]))
		data = append(data, inners[i]...)
	}
	var idx []byte
	for i := range offs {
		idx = binary.LittleEndian.AppendUint64(idx, offs[i])
		idx = binary.LittleEndian.AppendUint64(idx, sizes[i])
	}
	if crc {
		idx = binary.LittleEndian.AppendUint32(idx, crc32.Checksum(idx, crc32.MakeTable(crc32.Castagnoli)))
	}
	if atStart {
		return append(idx, data...)
	}
	return append(data, idx...)
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, 5)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func withCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(append([]byte(nil), b...), crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// foreignStore writes a v3 sharded array laid out like zarrs' test store
// sharded_array_write_read.zarr (uint16, shards of two rows of inner
// chunks, gzip level 5, index at the end with crc32c; larger, 32x32 in
// shards of 16x32 and inner chunks of 16x16, so that gzip shrinks an
// inner chunk) with the inner
// codecs and index placement given, and returns the array's elements.
// Inner chunk (1,1) of shard (1,0) is absent (fill 0).
func foreignStore(t *testing.T, dir, name string, innerCodecs string, enc func([]byte) []byte, atStart, crc bool) []byte {
	require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"group","attributes":{}}`), 0o644))
	p := filepath.Join(dir, name, "array")
	require.NoError(t, os.MkdirAll(filepath.Join(p, "c", "0"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(p, "c", "1"), 0o755))
	loc := "end"
	if atStart {
		loc = "start"
	}
	ic := `[{"name":"bytes","configuration":{"endian":"little"}}]`
	if crc {
		ic = `[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}]`
	}
	meta := fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":[32,32],"data_type":"uint16",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[16,32]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,
"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[16,16],"codecs":%s,"index_codecs":%s,"index_location":%q}}],
"attributes":{},"dimension_names":["y","x"]}`, innerCodecs, ic, loc)
	require.NoError(t, os.WriteFile(filepath.Join(p, "zarr.json"), []byte(meta), 0o644))
	want := make([]byte, 2*32*32)
	for s := range 2 {
		var inners [][]byte
		for q := range 2 {
			if s == 1 && q == 1 {
				inners = append(inners, nil)
				continue
			}
			raw := make([]byte, 2*16*16)
			for y := range 16 {
				for x := range 16 {
					v := uint16(((s*16+y)*32+q*16+x)/8 + 1)
					binary.LittleEndian.PutUint16(raw[2*(y*16+x):], v)
					binary.LittleEndian.PutUint16(want[2*((s*16+y)*32+q*16+x):], v)
				}
			}
			inners = append(inners, enc(raw))
		}
		require.NoError(t, os.WriteFile(filepath.Join(p, "c", fmt.Sprint(s), "0"), zshard(inners, atStart, crc), 0o644))
	}
	return want
}

const gzipInner = `[{"name":"bytes","configuration":{"endian":"little"}},{"name":"gzip","configuration":{"level":5}}]`

// TestImportShardedForeign: v3 sharded arrays written as other writers do
// (zarrs' test store's layout, index at the start, no index checksum, a
// crc32c inner codec, big-endian inner chunks) import into sharded
// datasets equal to their elements and, where zarrita reads them (index
// at the end), to zarrita's reading; inner chunks whose codecs map go
// across without being re-encoded.
func TestImportShardedForeign(t *testing.T) {
	dir := t.TempDir()
	beInner := `[{"name":"bytes","configuration":{"endian":"big"}}]`
	cases := []struct {
		name, codecs   string
		enc            func([]byte) []byte
		atStart, crc   bool
		mode           string
		zarritaReadsIt bool
	}{
		{"zarrs_gzip", gzipInner, gzipped, false, true, "rewrap", true},
		{"start_nocrc", gzipInner, gzipped, true, false, "rewrap", false},
		{"crc_inner", `[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}]`, withCRC, false, true, "copy", true},
		{"raw_nocrc", `[{"name":"bytes","configuration":{"endian":"little"}}]`, func(b []byte) []byte { return b }, false, false, "copy", true},
		{"big_endian", beInner, func(b []byte) []byte { return swapBytes(b, 2) }, false, true, "reencode", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := foreignStore(t, dir, c.name, c.codecs, c.enc, c.atStart, c.crc)
			if c.zarritaReadsIt {
				got, _ := zarritaRead(t, filepath.Join(dir, c.name), []string{"array"})
				require.Equal(t, want, got[0], "zarrita's reading of the store")
			}
			g := testfile.Create(t, filepath.Join(dir, c.name+".scc"), nil)
			defer g.Close(bg)
			rep, err := Import(bg, filepath.Join(dir, c.name), g, Options{})
			require.NoError(t, err)
			require.Len(t, rep.Datasets, 1)
			d := rep.Datasets[0]
			switch c.mode {
			case "copy":
				assert.Equal(t, 2, d.Copied, "%+v", d)
			case "rewrap":
				assert.Equal(t, 2, d.Rewrapped, "%+v", d)
			case "reencode":
				assert.Equal(t, 2, d.Reencoded, "%+v", d)
			}
			ds, err := g.OpenDataset(bg, d.Name, nil)
			require.NoError(t, err)
			assert.Equal(t, []uint64{16, 32}, ds.Chunk())
			assert.Equal(t, []uint64{16, 16}, ds.InnerChunk())
			assert.Equal(t, want, readAll(t, ds))
		})
	}
}

// TestImportShardedDamaged: a damaged inner chunk fails the import with
// ErrCorrupt naming the shard and the inner chunk; a damaged or lying
// index with ErrCorrupt.
func TestImportShardedDamaged(t *testing.T) {
	dir := t.TempDir()
	damage := map[string]func(b []byte) []byte{
		"inner":     func(b []byte) []byte { b[12] ^= 0xff; return b },
		"index_crc": func(b []byte) []byte { b[len(b)-10] ^= 1; return b },
		"truncated": func(b []byte) []byte { return b[:20] },
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			foreignStore(t, dir, name, gzipInner, gzipped, false, true)
			p := filepath.Join(dir, name, "array", "c", "1", "0")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, fn(b), 0o644))
			g := testfile.Create(t, filepath.Join(dir, name+".scc"), nil)
			defer g.Close(bg)
			_, err = Import(bg, filepath.Join(dir, name), g, Options{})
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), "shard [1 0]")
			if name == "inner" {
				assert.Contains(t, err.Error(), "inner chunk [0 0]")
			}
		})
	}
}

// TestShardIndexChecks: the foreign index's bounds, each refused with
// ErrCorrupt before anything is trusted.
func TestShardIndexChecks(t *testing.T) {
	entry := func(off, size uint64) []byte {
		return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, off), size)
	}
	cat := func(es ...[]byte) []byte { return bytes.Join(es, nil) }
	const all = math.MaxUint64
	ok := cat(entry(0, 10), entry(all, all), entry(10, 5))
	es, err := decodeShardIndex(ok, 3, false, 0, 15, 100)
	require.NoError(t, err)
	assert.True(t, es[1].empty())
	bad := map[string][]byte{
		"overlap":     cat(entry(0, 10), entry(all, all), entry(9, 5)),
		"past_end":    cat(entry(0, 10), entry(all, all), entry(10, 6)),
		"wraps":       cat(entry(all-1, 10), entry(all, all), entry(0, 1)),
		"half_empty":  cat(entry(0, 10), entry(all, 0), entry(10, 5)),
		"zero_size":   cat(entry(0, 0), entry(all, all), entry(10, 5)),
		"too_large":   cat(entry(0, 101), entry(all, all), entry(10, 5)),
		"short_index": ok[:40],
		"before_data": cat(entry(0, 10), entry(all, all), entry(10, 5)),
	}
	for name, b := range bad {
		lo := uint64(0)
		if name == "before_data" {
			lo = 4 // the index at the start takes the first bytes
		}
		_, err := decodeShardIndex(b, 3, false, lo, 15, 100)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

func FuzzShardIndex(f *testing.F) {
	entry := func(off, size uint64) []byte {
		return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, off), size)
	}
	f.Add(append(entry(0, 10), entry(math.MaxUint64, math.MaxUint64)...), uint16(2), uint64(20), false)
	f.Add(append(entry(16, 4), entry(20, 4)...), uint16(2), uint64(24), true)
	f.Add([]byte{}, uint16(0), uint64(0), false)
	f.Fuzz(func(t *testing.T, idx []byte, n uint16, hi uint64, big bool) {
		// The whole shard as import opens it: idx read as a shard of
		// n%8+1 inner chunks, its index at the start or the end, with
		// or without a crc32c.
		sh := &shardMeta{n: int(n%8) + 1, indexAtStart: big, indexCRC: hi%2 == 0}
		if spans, err := openShard(sh, idx, 1<<10); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
		} else {
			for _, sp := range spans {
				if !sp.empty() && sp.off+sp.size > uint64(len(idx)) {
					t.Fatalf("span %+v outside %d bytes", sp, len(idx))
				}
			}
		}
		es, err := decodeShardIndex(idx, int(n), big, 0, hi, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(es) != int(n) {
			t.Fatalf("%d entries for %d", len(es), n)
		}
		for _, e := range es {
			if e.empty() {
				continue
			}
			if e.size == 0 || e.off+e.size > hi || e.off+e.size < e.off {
				t.Fatalf("entry %+v outside [0, %d)", e, hi)
			}
		}
	})
}
