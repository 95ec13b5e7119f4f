package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestParseElemRange: integers out of the element type's range are
// refused, whatever JSON spelling they come in, never truncated.
func TestParseElemRange(t *testing.T) {
	for _, c := range []struct {
		t  engine.Type
		in string
		ok bool
	}{
		{engine.Uint16, "70000", false}, {engine.Uint16, "65535", true}, {engine.Uint16, "65535.0", true},
		{engine.Uint16, "65536.0", false}, {engine.Uint16, "7e4", false}, {engine.Uint16, "-1", false}, {engine.Uint16, "-0", false},
		{engine.Int8, "300", false}, {engine.Int8, "-128", true}, {engine.Int8, "-129", false}, {engine.Int8, "1.28e2", false},
		{engine.Int8, "127.0", true}, {engine.Int64, "9223372036854775808", false}, {engine.Uint64, "18446744073709551615", true},
		{engine.Uint8, "1.5", false}, {engine.Int32, "x", false},
	} {
		_, err := parseElem(c.t, jsonNumber(c.in))
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("parseElem(%v, %s) = %v, want ok=%v", c.t, c.in, err, c.ok)
		}
	}
}

// TestErrorsNameTheThing: refusals name the feature (a sharding index
// scc does not read, nested sharding), the type's
// class, and print data types as JSON.
func TestErrorsNameTheThing(t *testing.T) {
	v3 := func(dt, codecs string) []byte {
		return []byte(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":` + dt + `,"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":` + codecs + `}`)
	}
	bytesCodec := `[{"name":"bytes","configuration":{"endian":"little"}}]`
	for _, c := range []struct {
		doc  []byte
		v3   bool
		want []string
	}{
		{v3(`"int32"`, `[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes"},{"name":"zstd"}]}}]`), true, []string{"sharding_indexed", "index codecs"}},
		{v3(`"int32"`, `[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes"}]}}],"index_codecs":[{"name":"bytes"}]}}]`), true, []string{"sharding inside sharding"}},
		{v3(`"float8_e4m3"`, bytesCodec), true, []string{`"float8_e4m3"`}},
		{v3(`"r12"`, bytesCodec), true, []string{"raw bits"}},
		{v3(`{"name":"datetime","configuration":{"unit":"s"}}`, bytesCodec), true, []string{`{"configuration":{"unit":"s"},"name":"datetime"}`}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":[[["title","a"],"<i4"],["b","<f8"]],"fill_value":null,"order":"C","filters":null,"compressor":null}`), false, []string{`["title","a"]`, "structured dtype field 0"}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":[["a","<i4"],["b","<f16"]],"fill_value":null,"order":"C","filters":null,"compressor":null}`), false, []string{`field "b"`, "long double"}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<f16","fill_value":0,"order":"C","filters":null,"compressor":null}`), false, []string{"long double"}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|V0","fill_value":null,"order":"C","filters":null,"compressor":null}`), false, []string{"void"}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<U8","fill_value":"x","order":"C","filters":null,"compressor":null}`), false, []string{"fill_value", "empty string"}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|O","fill_value":0,"order":"C","filters":null,"compressor":null}`), false, []string{"object"}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|O","fill_value":0,"order":"C","filters":[{"id":"pickle"}],"compressor":null}`), false, []string{`"pickle"`}},
		{[]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":{"id":"lzma"}}`), false, []string{`"lzma"`}},
	} {
		var err error
		if c.v3 {
			_, _, _, err = decodeV3(c.doc)
		} else {
			_, err = decodeV2Array(c.doc)
		}
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", c.doc, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.doc, err, w)
			}
		}
		if strings.Contains(err.Error(), "map[") {
			t.Errorf("%q prints a Go map", err)
		}
	}
}

// TestImportSkipsOnlyTheUnsupported: an array scc cannot hold is skipped
// with its reason; the others are imported.
func TestImportSkipsOnlyTheUnsupported(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
	writeFile(t, filepath.Join(store, "good", ".zarray"), strings.Replace(v2i4, "%s", "", 1))
	writeFile(t, filepath.Join(store, "good", "0"), chunk8)
	writeFile(t, filepath.Join(store, "half", ".zarray"), `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<f16","fill_value":0,"order":"C","filters":null,"compressor":null}`)
	writeFile(t, filepath.Join(store, "g", "zarr.json"), `{"zarr_format":3,"node_type":"group"}`)
	writeFile(t, filepath.Join(store, "g", "shard", "zarr.json"), string(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int32","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{}}]}`))
	f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
	defer f.Close(context.Background())
	rep, err := Import(bg, store, f, Options{})
	must(t, err)
	if len(rep.Datasets) != 1 || rep.Datasets[0].Name != "good" || len(rep.Skipped) != 2 ||
		rep.Skipped[0].Name != "g/shard" || !strings.Contains(rep.Skipped[0].Reason, "sharding") ||
		rep.Skipped[1].Name != "half" || !strings.Contains(rep.Skipped[1].Reason, "long double") {
		t.Fatalf("report %+v", rep)
	}
	if s := rep.Summary(); !strings.Contains(s, "SKIPPED half: ") || !strings.Contains(s, "1 imported, 2 skipped") {
		t.Fatalf("summary:\n%s", s)
	}
	if got := testfile.DatasetNames(t, f); len(got) != 1 || got[0] != "good" {
		t.Fatalf("datasets %v", got)
	}
}

// TestUntranspose checks the transposition against index arithmetic for
// every permutation of a 3-D chunk and Fortran order in 2-D.
func TestUntranspose(t *testing.T) {
	chunk := []uint64{3, 4, 5}
	for _, order := range [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		tshape := []uint64{chunk[order[0]], chunk[order[1]], chunk[order[2]]}
		src := make([]byte, 0, 60*2)
		// Element j of the permuted array is chunk element x, x[order[i]] = j[i];
		// store x's C-order index as its value.
		for j0 := uint64(0); j0 < tshape[0]; j0++ {
			for j1 := uint64(0); j1 < tshape[1]; j1++ {
				for j2 := uint64(0); j2 < tshape[2]; j2++ {
					var x [3]uint64
					x[order[0]], x[order[1]], x[order[2]] = j0, j1, j2
					src = binary.LittleEndian.AppendUint16(src, uint16((x[0]*4+x[1])*5+x[2]))
				}
			}
		}
		out := untranspose(src, chunk, order, 2)
		for i := 0; i < 60; i++ {
			if v := binary.LittleEndian.Uint16(out[2*i:]); int(v) != i {
				t.Fatalf("order %v: element %d holds %d", order, i, v)
			}
		}
	}
}

// TestZstdContentSize: every zstd frame the export writes records its
// content size, small chunks included (numcodecs refuses frames without).
func TestZstdContentSize(t *testing.T) {
	for _, n := range []int{1, 100, 255, 256, 1000, 1 << 20} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rand.Uint32() % 4)
		}
		enc, err := codec{id: "zstd"}.encode(src)
		must(t, err)
		var h zstd.Header
		must(t, h.Decode(enc))
		if !h.HasFCS || h.FrameContentSize != uint64(n) {
			t.Errorf("%d bytes: frame header %+v lacks the content size", n, h)
		}
	}
}

// TestASCIIJSON: exported metadata is ASCII and decodes to the same text.
func TestASCIIJSON(t *testing.T) {
	dir := t.TempDir()
	v := map[string]any{"k": "Grüße, 温度 \U0001F600 \"q\" \\ \u2028"}
	p := filepath.Join(dir, "x.json")
	must(t, writeJSON(p, v))
	b, err := os.ReadFile(p)
	must(t, err)
	for _, c := range b {
		if c >= 0x80 {
			t.Fatalf("non-ASCII byte in %s", b)
		}
	}
	m, err := decodeObject(b, "x")
	must(t, err)
	if m["k"] != v["k"] {
		t.Fatalf("%q != %q", m["k"], v["k"])
	}
	if !bytes.Contains(b, []byte(`\ud83d\ude00`)) {
		t.Fatalf("no surrogate pair: %s", b)
	}
}

// ---- fuzz targets: every metadata decoder takes hostile bytes ----

const fuzzMax = 1 << 16

func checkMeta(t *testing.T, m *arrayMeta) {
	if len(m.chunk) != len(m.shape) && len(m.shape) > 0 {
		// checkShape refuses it; the decoder may pass it on.
		if _, err := checkShape(m, "x"); err == nil {
			t.Fatalf("rank mismatch accepted: %v %v", m.shape, m.chunk)
		}
		return
	}
	if m.sep != "." && m.sep != "/" {
		t.Fatalf("separator %q accepted", m.sep)
	}
	if m.fill != nil && len(m.fill) != m.typ.Size() {
		t.Fatalf("fill of %d bytes for %v", len(m.fill), m.typ)
	}
	if m.order != nil {
		seen := map[int]bool{}
		for _, a := range m.order {
			if a < 0 || a >= len(m.shape) || seen[a] {
				t.Fatalf("order %v", m.order)
			}
			seen[a] = true
		}
	}
	for _, c := range m.chunk {
		if c == 0 {
			t.Fatal("zero chunk accepted")
		}
	}
	if grid, err := checkShape(m, "x"); err == nil {
		if m.chunkBytes <= 0 || m.chunkBytes > maxChunkBytes || len(grid) != len(m.shape) {
			t.Fatalf("chunk bytes %d", m.chunkBytes)
		}
		importPlan(m)
	}
}

func FuzzDecodeV2Array(f *testing.F) {
	f.Add([]byte(`{"zarr_format":2,"shape":[4,6],"chunks":[2,3],"dtype":"<i4","fill_value":0,"order":"F","filters":[{"id":"shuffle","elementsize":4}],"compressor":{"id":"zlib","level":1},"dimension_separator":"/"}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":">u2","fill_value":65535,"order":"C","filters":null,"compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1}}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<f8","fill_value":"NaN","order":"C","filters":null,"compressor":null}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":">M8[10ms]","fill_value":"NaT","order":"C","filters":[{"id":"delta","dtype":">i8"}],"compressor":{"id":"bz2","level":9}}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|O","fill_value":0,"order":"C","filters":[{"id":"vlen-utf8"}],"compressor":{"id":"zstd","level":1}}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<U7","fill_value":"","order":"F","filters":null,"compressor":null}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":">f2","fill_value":"NaN","order":"C","filters":null,"compressor":null}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[],"chunks":[],"dtype":"|V3","fill_value":"AAEC","order":"C","filters":null,"compressor":null}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[3],"chunks":[2],"dtype":[["a","<i4"],["",">V4"],["p",[["x",">f8"],["y","<f2",[2,3]]]],["s","|S3",[2]]],"fill_value":null,"order":"C","filters":null,"compressor":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > fuzzMax {
			return
		}
		m, err := decodeV2Array(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		checkMeta(t, m)
	})
}

func FuzzDecodeAttrs(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,2.5],"c":"s","d":{"x":null},"_scc_attr_types":{"a":"uint16","b":"float32[]"}}`))
	f.Add([]byte(`{"x":70000,"_scc_attr_types":{"x":"uint16"}}`))
	f.Add([]byte(`{"blob":"AAEC","_scc_attr_types":{"blob":"bytes"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > fuzzMax {
			return
		}
		raw, err := decodeAttrs(b, ".zattrs")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		attrs, _, _, err := jsonAttrs(raw)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, a := range attrs {
			if v := a.Value; v.Kind() == engine.AttrScalar && len(v.Bytes()) != v.Type().Size() {
				t.Fatalf("attribute %q: %d bytes for %v", a.Name, len(v.Bytes()), v.Type())
			}
		}
	})
}

func FuzzDecodeV3(f *testing.F) {
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[4,5],"data_type":"float32","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,2]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"."}},"fill_value":"NaN","codecs":[{"name":"transpose","configuration":{"order":[1,0]}},{"name":"bytes","configuration":{"endian":"big"}},{"name":"gzip","configuration":{"level":1}}],"attributes":{"a":[1,2.5]}}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"group","attributes":{"x":1}}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"string","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":"","codecs":[{"name":"vlen-utf8"},{"name":"zstd","configuration":{"level":0}}]}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":{"name":"numpy.timedelta64","configuration":{"unit":"us","scale_factor":3}},"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":"NaT","codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":{"name":"fixed_length_utf32","configuration":{"length_bytes":12}},"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":"","codecs":[{"name":"bytes","configuration":{"endian":"big"}}]}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[8,8],"data_type":"uint16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4,8]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[4,4],"codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"gzip","configuration":{"level":5}}],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}],"index_location":"start"}}]}`))
	f.Add([]byte(`{"zarr_format":"https://purl.org/zarr/spec/protocol/core/3.0"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > fuzzMax {
			return
		}
		node, m, attrs, err := decodeV3(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if (node == "array") != (m != nil) || node != "array" && node != "group" {
			t.Fatalf("node %q with meta %v", node, m)
		}
		if m != nil {
			checkMeta(t, m)
		}
		_, _, _, _ = jsonAttrs(attrs)
	})
}

func jsonNumber(s string) any { return json.Number(s) }

// TestBloscSeam: with a decoder linked into bloscDecode, blosc arrays are
// imported through it (decoded, stored with the nearest scc stages);
// without one they are skipped naming blosc. The stand-in decoder here
// takes a frame to be its decoded bytes.
func TestBloscSeam(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
	writeFile(t, filepath.Join(store, "b", ".zarray"), `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":{"id":"blosc","cname":"zstd","clevel":5,"shuffle":1,"blocksize":0}}`)
	writeFile(t, filepath.Join(store, "b", "1"), chunk8)
	old := bloscDecode
	defer func() { bloscDecode = old }()
	for _, linked := range []bool{false, true} {
		bloscDecode = nil
		if linked {
			bloscDecode = func(src []byte, max int) ([]byte, error) {
				if len(src) > max {
					return nil, ErrCorrupt
				}
				return src, nil
			}
		}
		f := testfile.Create(t, filepath.Join(root, "x.scc"), nil)
		rep, err := Import(bg, store, f, Options{})
		if !linked {
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"blosc" (cname "zstd")`) {
				t.Fatalf("no decoder: %v", err)
			}
			must(t, f.Close(context.Background()))
			continue
		}
		must(t, err)
		ds, err := f.OpenDataset(context.Background(), "b", nil)
		must(t, err)
		if got := readAll(t, ds); string(got) != "\x00\x00\x00\x00\x00\x00\x00\x00"+chunk8 || rep.Datasets[0].Reencoded != 1 {
			t.Fatalf("elements % x, report %+v", got, rep.Datasets[0])
		}
		if names := filterNames(ds.Filters()); names != "shuffle,zstd" {
			t.Fatalf("stored with %s", names)
		}
		must(t, f.Close(context.Background()))
	}
}

func filterNames(fs []engine.Filter) string {
	var n []string
	for _, f := range fs {
		name, _ := f.Stage()
		n = append(n, name)
	}
	return strings.Join(n, ",")
}
