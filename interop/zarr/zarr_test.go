package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

var bg = context.Background()

type dsDef struct {
	name     string
	spec     engine.DatasetSpec
	random   bool // incompressible data: deflate skipped for those chunks
	skipHead bool // leave chunk 0 unwritten
}

func defs() []dsDef {
	nan := make([]byte, 8)
	binary.LittleEndian.PutUint64(nan, 0x7ff8000000000000) // the quiet NaN JSON's "NaN" stands for
	return []dsDef{
		{"u16sd", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{370, 110}, Chunk: []uint64{80, 40}, Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(4)}, Fill: []byte{7, 0}}, false, true},
		{"f64z", engine.DatasetSpec{Type: engine.Float64, Shape: []uint64{2000}, Chunk: []uint64{600}, Filters: []engine.Filter{engine.Zstd(2)}, Fill: nan}, false, true},
		{"i32lz", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{50, 60, 70}, Chunk: []uint64{20, 30, 40}, Filters: []engine.Filter{engine.Shuffle(), engine.LZ4()}}, false, false},
		{"u8raw", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{1000}, MaxShape: []uint64{engine.Unlimited}, Chunk: []uint64{330}}, false, false},
		{"crc", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{1300}, Chunk: []uint64{500}, Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1), engine.CRC32C()}, Fill: []byte{0xff, 0xff}}, false, false},
		{"g/f32", engine.DatasetSpec{Type: engine.Float32, Shape: []uint64{90, 90}, Chunk: []uint64{40, 40}, Filters: []engine.Filter{engine.Deflate(1)}}, true, false},
		{"u16zl", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{370, 110}, Chunk: []uint64{80, 40}, Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(5)}, Fill: []byte{7, 0}}, false, true},
	}
}

// makeFile builds an scc file with every definition, data in a pattern
// (compressible unless random), attributes on the file and each dataset.
func makeFile(t *testing.T, path string) {
	t.Helper()
	f := testfile.Create(t, path, nil)
	must(t, f.SetAttr(bg, "title", engine.StringAttr("interop \"test\"")))
	must(t, f.SetAttr(bg, "version", engine.ScalarAttr(uint16(3))))
	must(t, f.SetAttr(bg, "blob", engine.BytesAttr([]byte{0, 1, 2, 255})))
	must(t, f.SetAttr(bg, "weights", engine.ArrayAttr([]float32{0.5, float32(math.Inf(1)), -2})))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range defs() {
		ds, err := f.CreateDataset(context.Background(), d.name, d.spec)
		must(t, err)
		must(t, ds.SetAttr(bg, "units", engine.StringAttr("K")))
		must(t, ds.SetAttr(bg, "offsets", engine.ArrayAttr([]int64{math.MinInt64, 0, math.MaxInt64})))
		n := d.spec.Type.Size()
		for _, s := range d.spec.Shape {
			n *= int(s)
		}
		buf := make([]byte, n)
		for i := range buf {
			if d.random {
				buf[i] = byte(rng.Uint32())
			} else {
				buf[i] = byte(i / 3 % 17)
			}
		}
		if !d.random && (d.spec.Type == engine.Float64 || d.spec.Type == engine.Float32) {
			// Finite floats (a random pattern may spell NaNs, which compare
			// by bits anyway, but keep the data ordinary).
			es := d.spec.Type.Size()
			for i := 0; i < len(buf); i += es {
				buf[i+es-1] &= 0x3f
			}
		}
		start := make([]uint64, len(d.spec.Shape))
		count := append([]uint64{}, d.spec.Shape...)
		if d.skipHead {
			start[0] = d.spec.Chunk[0]
			count[0] -= d.spec.Chunk[0]
			n = len(buf) / int(d.spec.Shape[0]) * int(count[0])
			buf = buf[:n]
		}
		must(t, ds.Write(bg, engine.Box(start, count), buf))
	}
	must(t, f.Close(context.Background()))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, ds *engine.Dataset) []byte {
	t.Helper()
	n := ds.Type().Size()
	for _, s := range ds.Shape() {
		n *= int(s)
	}
	buf := make([]byte, n)
	must(t, ds.Read(bg, engine.All(ds.Shape()), buf))
	return buf
}

func sameAttrs(t *testing.T, what string, a, b []engine.Attr) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d attributes, want %d", what, len(b), len(a))
	}
	for i := range a {
		if a[i].Name != b[i].Name || !a[i].Value.Equal(b[i].Value) {
			t.Fatalf("%s: attribute %q = %v, want %q = %v", what, b[i].Name, b[i].Value, a[i].Name, a[i].Value)
		}
	}
}

// TestRoundTrip exports to v2 and v3 and imports back: same datasets,
// elements, fill values, attributes; chunks copied where the codecs map.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	makeFile(t, src)
	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, "store"+string(rune('0'+v)))
		f, err := engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
		must(t, err)
		rep, err := Export(bg, f, store, Options{Version: v})
		must(t, err)
		byName := map[string]DatasetReport{}
		for _, d := range rep.Datasets {
			byName[d.Name] = d
		}
		check := func(name string, copied, rewrapped, reenc int) {
			t.Helper()
			d := byName[name]
			if d.Copied != copied || d.Rewrapped != rewrapped || d.Reencoded != reenc || d.Untouched != copied {
				t.Errorf("v%d %s: copied %d (untouched %d) rewrapped %d re-encoded %d, want %d (%d) %d %d (%s)", v, name, d.Copied, d.Untouched, d.Rewrapped, d.Reencoded, copied, copied, rewrapped, reenc, rep.Summary())
			}
		}
		// scc's Zlib chunks are numcodecs' zlib chunks, byte for byte.
		check("u16zl", 12, 0, 0) // 5×3 chunks, row 0 unwritten
		sameChunkFiles(t, f, "u16zl", store, v, 12)
		check("u16sd", 0, 12, 0) // 5×3 chunks, row 0 unwritten
		check("f64z", 3, 0, 0)
		check("i32lz", 12, 0, 0)
		check("u8raw", 4, 0, 0)
		if v == 2 {
			check("crc", 0, 0, 3) // no crc32c codec in numcodecs
		} else {
			check("crc", 3, 0, 0)
		}
		// Random data: scc skipped deflate in the 4 inner chunks (so they
		// are re-encoded); the 5 edge chunks' fill padding compresses.
		check("g/f32", 0, 5, 4)
		if !strings.Contains(rep.Summary(), "RE-ENCODED") {
			t.Errorf("summary does not say what was re-encoded:\n%s", rep.Summary())
		}

		out := filepath.Join(dir, "back"+string(rune('0'+v))+".scc")
		g := testfile.Create(t, out, nil)
		irep, err := Import(bg, store, g, Options{})
		must(t, err)
		for _, d := range irep.Datasets {
			if d.Reencoded != 0 && d.Name != "g/f32" && !(v == 2 && d.Name == "crc") {
				t.Errorf("v%d import %s: %d chunks re-encoded (%s)", v, d.Name, d.Reencoded, d.Why)
			}
			// Zlib chunks are stored as they are; only the 6 edge chunks
			// of the 12 are inflated (to check their padding).
			if d.Name == "u16zl" && (d.Copied != 12 || d.Untouched != 6) {
				t.Errorf("v%d import u16zl: copied %d untouched %d, want 12 and 6", v, d.Copied, d.Untouched)
			}
		}
		sameChunkFiles(t, g, "u16zl", store, v, 12)
		sameAttrs(t, "file", testfile.Attrs(t, f), testfile.Attrs(t, g))
		for _, d := range defs() {
			a, err := f.OpenDataset(context.Background(), d.name, nil)
			must(t, err)
			b, err := g.OpenDataset(context.Background(), d.name, nil)
			must(t, err)
			if !bytes.Equal(readAll(t, a), readAll(t, b)) {
				t.Errorf("v%d %s: elements differ after the round trip", v, d.name)
			}
			if !bytes.Equal(a.Fill(), b.Fill()) || a.Type() != b.Type() || !equalU(a.Chunk(), b.Chunk()) || !equalU(a.Shape(), b.Shape()) {
				t.Errorf("v%d %s: fill/type/chunk/shape differ: %x %x %v %v", v, d.name, a.Fill(), b.Fill(), a.Chunk(), b.Chunk())
			}
			sameAttrs(t, d.name, testfile.Attrs(t, a), testfile.Attrs(t, b))
			sa, err := testfile.StoredChunks(bg, a)
			must(t, err)
			sb, err := testfile.StoredChunks(bg, b)
			must(t, err)
			if len(sa) != len(sb) {
				t.Errorf("v%d %s: %d stored chunks after import, want %d", v, d.name, len(sb), len(sa))
			}
		}
		must(t, g.Close(context.Background()))
		must(t, f.Close(context.Background()))
	}
}

// sameChunkFiles checks that the named dataset's stored chunks are
// byte for byte the chunk files of the store (raw copies both ways).
func sameChunkFiles(t *testing.T, f *engine.File, name, store string, v, want int) {
	t.Helper()
	ds, err := f.OpenDataset(context.Background(), name, nil)
	must(t, err)
	defer ds.Close(context.Background())
	sc, err := testfile.StoredChunks(bg, ds)
	must(t, err)
	if len(sc) != want {
		t.Fatalf("%s: %d stored chunks, want %d", name, len(sc), want)
	}
	for _, c := range sc {
		data, _, err := ds.ReadChunkRaw(bg, c.Coords)
		must(t, err)
		file, err := os.ReadFile(chunkPath(filepath.Join(store, filepath.FromSlash(name)), v, c.Coords))
		must(t, err)
		if !bytes.Equal(data, file) {
			t.Fatalf("%s chunk %v: scc's stored bytes (%d) differ from the Zarr chunk file (%d)", name, c.Coords, len(data), len(file))
		}
	}
}

func equalU(a, b []uint64) bool {
	return len(a) == len(b) && string(u64bytes(a)) == string(u64bytes(b))
}

func u64bytes(a []uint64) []byte {
	var b []byte
	for _, x := range a {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

// ---- real readers ----

// python is Debian's interpreter, which has python3-zarr (pyenv's python3
// on PATH does not).
const python = "/usr/bin/python3"

func testdata(t *testing.T) string {
	p, err := filepath.Abs("testdata")
	must(t, err)
	return p
}

// needReader fails (never skips) when a reader is missing: CI installs them
// with `make interop-deps`.
func needReader(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s is missing (%v: %s); install it with `make interop-deps`", name, err, out)
	}
}

func zarrPython(t *testing.T) {
	needReader(t, "zarr-python (Debian python3-zarr)", exec.Command(python, "-c", "import zarr, numcodecs, numpy"))
}

func zarrita(t *testing.T) string {
	node := filepath.Join(testdata(t), "node")
	cmd := exec.Command("node", "-e", "import('zarrita').then(()=>0)")
	cmd.Dir = node
	needReader(t, "zarrita (npm, interop/zarr/testdata/node)", cmd)
	if _, err := os.Stat(filepath.Join(node, "node_modules", "zarrita")); err != nil {
		t.Fatalf("zarrita is not installed in %s; run `make interop-deps`", node)
	}
	return node
}

type readerOut struct {
	Attributes map[string]any `json:"attributes"`
	Arrays     []struct {
		Path       string         `json:"path"`
		Shape      []uint64       `json:"shape"`
		Chunks     []uint64       `json:"chunks"`
		Attributes map[string]any `json:"attributes"`
	} `json:"arrays"`
}

// compareWithReader runs a reader over an export of makeFile's file and
// compares every element, the shapes, chunk grids and attributes.
func compareWithReader(t *testing.T, version int, jsNumbers bool, run func(store, out string, paths []string) []byte) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	makeFile(t, src)
	f, err := engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
	must(t, err)
	defer f.Close(context.Background())
	store := filepath.Join(dir, "store")
	_, err = Export(bg, f, store, Options{Version: version})
	must(t, err)
	out := filepath.Join(dir, "out")
	must(t, os.Mkdir(out, 0o755))
	names := testfile.DatasetNames(t, f)
	var res readerOut
	raw := run(store, out, names)
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&res); err != nil {
		t.Fatalf("reader output %q: %v", raw, err)
	}
	wantRoot, err := attrsJSON(testfile.Attrs(t, f))
	must(t, err)
	if got, want := jsonText(res.Attributes, jsNumbers), jsonText(wantRoot, jsNumbers); got != want {
		t.Errorf("root attributes:\n got %s\nwant %s", got, want)
	}
	if len(res.Arrays) != len(names) {
		t.Fatalf("reader saw %d arrays, want %d", len(res.Arrays), len(names))
	}
	for i, name := range names {
		ds, err := f.OpenDataset(context.Background(), name, nil)
		must(t, err)
		got, err := os.ReadFile(filepath.Join(out, string(rune('0'+i))+".bin"))
		must(t, err)
		want := readAll(t, ds)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the reader's elements differ from scc's (%d vs %d bytes)", name, len(got), len(want))
		}
		a := res.Arrays[i]
		if !equalU(a.Shape, ds.Shape()) || !equalU(a.Chunks, ds.Chunk()) {
			t.Errorf("%s: reader shape %v chunks %v, want %v %v", name, a.Shape, a.Chunks, ds.Shape(), ds.Chunk())
		}
		wantAttrs, err := attrsJSON(testfile.Attrs(t, ds))
		must(t, err)
		if g, w := jsonText(a.Attributes, jsNumbers), jsonText(wantAttrs, jsNumbers); g != w {
			t.Errorf("%s attributes:\n got %s\nwant %s", name, g, w)
		}
	}
}

// jsonText renders a decoded JSON value canonically (sorted keys, numbers
// as written, or as JavaScript's doubles hold them when jsNumbers: a JS
// reader cannot hold int64 attributes beyond 2^53 exactly).
func jsonText(v any, jsNumbers bool) string {
	b, _ := json.Marshal(v)
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&x)
	if jsNumbers {
		x = testfile.JSNumbers(x)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

func TestZarrPythonReadsV2Export(t *testing.T) {
	zarrPython(t)
	compareWithReader(t, 2, false, func(store, out string, paths []string) []byte {
		cmd := exec.Command(python, append([]string{filepath.Join(testdata(t), "zarr2.py"), "read", store, out}, paths...)...)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("zarr-python read: %v: %s", err, stderr(err))
		}
		return b
	})
}

func TestZarritaReadsV3Export(t *testing.T) {
	node := zarrita(t)
	compareWithReader(t, 3, true, func(store, out string, paths []string) []byte {
		cmd := exec.Command("node", append([]string{filepath.Join(node, "zarr3.mjs"), "read", store, out}, paths...)...)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("zarrita read: %v: %s", err, stderr(err))
		}
		return b
	})
}

func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// importWritten imports a store a reader wrote and compares each array
// with the elements the writer dumped.
func importWritten(t *testing.T, store, dumps string, want map[string]string) *engine.File {
	t.Helper()
	g := testfile.Create(t, filepath.Join(t.TempDir(), "imported.scc"), nil)
	t.Cleanup(func() { g.Close(context.Background()) })
	rep, err := Import(bg, store, g, Options{})
	must(t, err)
	t.Logf("import:\n%s", rep.Summary())
	byName := map[string]DatasetReport{}
	for _, d := range rep.Datasets {
		byName[d.Name] = d
	}
	for name, mode := range want {
		ds, err := g.OpenDataset(context.Background(), name, nil)
		must(t, err)
		exp, err := os.ReadFile(filepath.Join(dumps, strings.ReplaceAll(name, "/", "_")+".bin"))
		must(t, err)
		if got := readAll(t, ds); !bytes.Equal(got, exp) {
			t.Errorf("%s: imported elements differ from the writer's", name)
		}
		d := byName[name]
		var ok bool
		switch mode {
		case "copy":
			ok = d.Copied == d.Chunks && d.Chunks > 0
		case "rewrap":
			ok = d.Rewrapped == d.Chunks && d.Chunks > 0
		case "zlibraw":
			// Copied with no inflate, except edge chunks (padding check).
			stored, err := testfile.StoredChunks(bg, ds)
			must(t, err)
			inner := 0
			for _, c := range stored {
				if _, _, edge := chunkBox(c.Coords, ds.Chunk(), ds.Shape()); !edge {
					inner++
				}
			}
			ok = d.Copied == d.Chunks && d.Untouched == inner && inner > 0
			for _, c := range stored {
				data, _, err := ds.ReadChunkRaw(bg, c.Coords)
				must(t, err)
				file, err := os.ReadFile(chunkPath(filepath.Join(store, filepath.FromSlash(name)), 2, c.Coords))
				must(t, err)
				if !bytes.Equal(data, file) {
					t.Errorf("%s chunk %v: stored bytes differ from zarr-python's chunk file", name, c.Coords)
				}
			}
		case "reencode":
			ok = d.Reencoded == d.Chunks && d.Chunks > 0
		}
		if !ok {
			t.Errorf("%s: %+v, want every chunk %s", name, d, mode)
		}
		if a, err := ds.Attr("units"); err != nil {
			t.Errorf("%s: attribute units: %v", name, err)
		} else if s, _ := a.Str(); s == "" {
			t.Errorf("%s: attribute units empty", name)
		}
	}
	return g
}

func TestImportZarrPythonWritten(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	store, dumps := filepath.Join(dir, "store"), filepath.Join(dir, "dumps")
	must(t, os.Mkdir(dumps, 0o755))
	if out, err := exec.Command(python, filepath.Join(testdata(t), "zarr2.py"), "write", store, dumps).CombinedOutput(); err != nil {
		t.Fatalf("zarr-python write: %v: %s", err, out)
	}
	g := importWritten(t, store, dumps, map[string]string{
		"zlib_shuffle": "zlibraw", "zstd": "copy", "lz4": "copy", "gzip": "rewrap", "raw_be": "reencode", "group/nested": "zlibraw",
	})
	if v, err := g.Attr("origin"); err != nil {
		t.Fatal(err)
	} else if s, _ := v.Str(); s != "zarr-python" {
		t.Fatalf("root attribute origin = %q", s)
	}
	if v, err := g.Attr("list"); err != nil {
		t.Fatal(err)
	} else if l, err := engine.Array[int64](v); err != nil || len(l) != 3 || l[2] != 3 {
		t.Fatalf("root attribute list = %v %v", l, err)
	}
	ds, err := g.OpenDataset(context.Background(), "zstd", nil)
	must(t, err)
	if fill := ds.Fill(); !math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(fill))) {
		t.Fatalf("fill %x, want NaN", fill)
	}
}

func TestImportZarritaWritten(t *testing.T) {
	node := zarrita(t)
	dir := t.TempDir()
	store, dumps := filepath.Join(dir, "store"), filepath.Join(dir, "dumps")
	must(t, os.Mkdir(dumps, 0o755))
	if out, err := exec.Command("node", filepath.Join(node, "zarr3.mjs"), "write", store, dumps).CombinedOutput(); err != nil {
		t.Fatalf("zarrita write: %v: %s", err, out)
	}
	importWritten(t, store, dumps, map[string]string{"f64": "copy", "u16": "copy", "grp/i32": "copy"})
}

// ---- refusals and hostile input ----

func TestExportRefusesBadNames(t *testing.T) {
	for _, names := range [][]string{{"a", "a/b"}, {"x/../y"}, {"__meta"}, {".zarray"}, {"a//b"}} {
		if err := checkNames(names); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v: %v, want ErrUnsupported", names, err)
		}
	}
	if err := checkNames([]string{"a/b", "a/c", "d"}); err != nil {
		t.Fatal(err)
	}
}

func TestImportRefusesUnmappable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, meta string) string {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(p, 0o755))
		must(t, os.WriteFile(filepath.Join(p, ".zarray"), []byte(meta), 0o644))
		return p
	}
	cases := map[string]string{
		"lzma":     `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":{"id":"lzma"}}`,
		"float128": `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<f16","fill_value":0,"order":"C","filters":null,"compressor":null}`,
		"scalar":   `{"zarr_format":2,"shape":[],"chunks":[],"dtype":"|O","fill_value":0,"order":"C","filters":[{"id":"vlen-utf8"}],"compressor":null}`,
	}
	for name, meta := range cases {
		p := write(name, meta)
		g := testfile.Create(t, filepath.Join(dir, name+".scc"), nil)
		if _, err := Import(bg, p, g, Options{}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
		must(t, g.Close(context.Background()))
	}
	// A corrupt chunk fails the import with ErrCorrupt when verifying;
	// without, a zlib chunk is stored uninflated and every read of it
	// fails as corrupt (its Adler-32 does not match), as does the check.
	p := write("corrupt", `{"zarr_format":2,"shape":[4],"chunks":[4],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":{"id":"zlib","level":1}}`)
	must(t, os.WriteFile(filepath.Join(p, "0"), []byte{0x78, 0x9c, 1, 2, 3, 4, 5, 6, 7}, 0o644))
	g := testfile.Create(t, filepath.Join(dir, "corrupt.scc"), nil)
	if _, err := Import(bg, p, g, Options{Verify: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt chunk, verifying: %v, want ErrCorrupt", err)
	}
	must(t, g.Close(context.Background()))
	g = testfile.Create(t, filepath.Join(dir, "corrupt2.scc"), nil, testfile.NoCheck("the test imports a damaged zlib stream without verifying, which stores it as it is"))
	defer g.Close(context.Background())
	rep, err := Import(bg, p, g, Options{})
	if err != nil || rep.Datasets[0].Untouched != 1 {
		t.Fatalf("corrupt zlib chunk, not verifying: %v %+v, want stored untouched", err, rep)
	}
	ds, err := g.OpenDataset(context.Background(), "corrupt", nil)
	must(t, err)
	if err := ds.Read(bg, engine.All(ds.Shape()), make([]byte, 16)); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("read of the stored damaged stream: %v, want ErrCorrupt", err)
	}
}

// TestCodecsRoundTrip: each Go codec inverts itself, and rewrap/unwrap
// give streams the standard decoders accept.
func TestCodecsRoundTrip(t *testing.T) {
	src := bytes.Repeat([]byte("scc zarr interop 0123456789"), 100)
	rnd := make([]byte, 1000)
	for i := range rnd {
		rnd[i] = byte(rand.Uint32())
	}
	for _, c := range []codec{{id: "shuffle", elemSize: 4}, {id: "zlib", level: 3}, {id: "gzip", level: 9}, {id: "zstd"}, {id: "lz4"}, {id: "crc32c"}} {
		for _, in := range [][]byte{src, rnd, {}} {
			enc, err := c.encode(in)
			must(t, err)
			dec, err := c.decode(enc, len(in))
			if err != nil || !bytes.Equal(dec, in) {
				t.Fatalf("%s: round trip of %d bytes: %v", c.id, len(in), err)
			}
			if len(in) > 0 && c.id != "shuffle" {
				if _, err := c.decode(enc, len(in)-1); err == nil && c.id != "crc32c" {
					t.Errorf("%s: decode past the bound accepted", c.id)
				}
			}
		}
	}
	for _, id := range []string{"zlib", "gzip"} {
		z, err := codec{id: id, level: 5}.encode(src)
		must(t, err)
		body, err := unwrap(id, z, len(src))
		must(t, err)
		again, err := rewrap(id, body, len(src))
		must(t, err)
		if dec, err := (codec{id: id}).decode(again, len(src)); err != nil || !bytes.Equal(dec, src) {
			t.Fatalf("%s rewrap: %v", id, err)
		}
		bad := append([]byte{}, z...)
		bad[len(bad)-1] ^= 1
		if _, err := unwrap(id, bad, len(src)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: bad checksum: %v", id, err)
		}
	}
}

// FuzzDecodeChunk: chunk files are hostile input; every decoder stays
// within the chunk size and never panics.
func FuzzDecodeChunk(f *testing.F) {
	src := bytes.Repeat([]byte{1, 2, 3, 4}, 64)
	for _, c := range []codec{{id: "zlib"}, {id: "gzip"}, {id: "zstd"}, {id: "lz4"}, {id: "crc32c"}} {
		enc, _ := c.encode(src)
		f.Add(enc, uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		ids := []string{"zlib", "gzip", "zstd", "lz4", "crc32c", "shuffle"}
		c := codec{id: ids[int(which)%len(ids)], elemSize: 4}
		out, err := decodeChain([]codec{c}, b, 256)
		if err == nil && len(out) != 256 {
			t.Fatalf("%s: %d bytes accepted for a 256-byte chunk", c.id, len(out))
		}
		if c.id == "zlib" || c.id == "gzip" {
			_, _ = unwrap(c.id, b, 256)
		}
	})
}
