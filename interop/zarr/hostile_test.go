package zarr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

const (
	v2i4   = `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":null%s}`
	v3i4   = `{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int32","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"%s},"fill_value":0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}`
	chunk8 = "\x01\x00\x00\x00\x02\x00\x00\x00"
)

// hostileStore writes a store under root/store with its array at "a";
// root/outside holds a file and a directory that no key may reach.
type hostileCase struct {
	name  string
	build func(t *testing.T, store, outside string)
	want  error
	msg   string // the error names this
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte(data), 0o644))
}

func v2Array(t *testing.T, store, meta string) string {
	t.Helper()
	a := filepath.Join(store, "a")
	writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
	writeFile(t, filepath.Join(a, ".zarray"), meta)
	return a
}

func hostileCases() []hostileCase {
	meta := func(extra string) string { return strings.Replace(v2i4, "%s", extra, 1) }
	v3 := func(extra string) string { return strings.Replace(v3i4, "%s", extra, 1) }
	bad := func(name, doc string, want error, msg string) hostileCase {
		return hostileCase{name, func(t *testing.T, store, _ string) { v2Array(t, store, doc) }, want, msg}
	}
	bad3 := func(name, doc string, want error, msg string) hostileCase {
		return hostileCase{name, func(t *testing.T, store, _ string) {
			writeFile(t, filepath.Join(store, "zarr.json"), `{"zarr_format":3,"node_type":"group"}`)
			writeFile(t, filepath.Join(store, "a", "zarr.json"), doc)
		}, want, msg}
	}
	return []hostileCase{
		{"v2 separator ../", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(`,"dimension_separator":"/../../outside/"`))
			writeFile(t, filepath.Join(a, "0"), chunk8)
		}, ErrCorrupt, "dimension_separator"},
		bad("v2 separator x", meta(`,"dimension_separator":"x"`), ErrCorrupt, "dimension_separator"),
		bad("v2 separator number", meta(`,"dimension_separator":1`), ErrCorrupt, "dimension_separator"),
		bad3("v3 separator ../", v3(`,"configuration":{"separator":"/../"}`), ErrCorrupt, "separator"),
		bad3("v3 separator empty", v3(`,"configuration":{"separator":""}`), ErrCorrupt, "separator"),
		{"chunk symlink to an absolute path outside", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(a, "0")))
		}, ErrUnsafe, `"a/0"`},
		{"chunk symlink ../ outside", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			must(t, os.Symlink("../../outside/secret", filepath.Join(a, "1")))
		}, ErrUnsafe, `"a/1"`},
		{"dangling chunk symlink outside", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			must(t, os.Symlink("/nonexistent/x", filepath.Join(a, "0")))
		}, ErrUnsafe, "outside"},
		{"chunk directory symlink outside", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, `{"zarr_format":2,"shape":[4,4],"chunks":[2,2],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":null,"dimension_separator":"/"}`)
			writeFile(t, filepath.Join(outside, "dir", "0"), chunk8+chunk8)
			must(t, os.Symlink(filepath.Join(outside, "dir"), filepath.Join(a, "1")))
		}, ErrUnsafe, "outside"},
		{".zarray symlink outside", func(t *testing.T, store, outside string) {
			writeFile(t, filepath.Join(outside, "meta"), meta(""))
			writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
			must(t, os.MkdirAll(filepath.Join(store, "a"), 0o755))
			must(t, os.Symlink(filepath.Join(outside, "meta"), filepath.Join(store, "a", ".zarray")))
		}, ErrUnsafe, ".zarray"},
		{"symlink loop", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			must(t, os.Symlink("1", filepath.Join(a, "0")))
			must(t, os.Symlink("0", filepath.Join(a, "1")))
		}, ErrUnsafe, "symlinks"},
		{"FIFO chunk", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			mkfifo(t, filepath.Join(a, "0"))
		}, ErrNotRegular, "FIFO"},
		{"FIFO .zarray", func(t *testing.T, store, outside string) {
			writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
			must(t, os.MkdirAll(filepath.Join(store, "a"), 0o755))
			mkfifo(t, filepath.Join(store, "a", ".zarray"))
		}, ErrNotRegular, "FIFO"},
		{"directory as chunk", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			must(t, os.MkdirAll(filepath.Join(a, "0"), 0o755))
		}, ErrNotRegular, "directory"},
		{".zarray over the bound", func(t *testing.T, store, outside string) {
			v2Array(t, store, meta(`,"pad":"`+strings.Repeat("x", maxMetaBytes)+`"`))
		}, ErrCorrupt, "16777216"},
		{"chunk over its bound", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			writeFile(t, filepath.Join(a, "0"), strings.Repeat("x", 65<<10+8))
		}, ErrCorrupt, "chunk [0]"},
		bad("huge chunk", `{"zarr_format":2,"shape":[4],"chunks":[4611686018427387904],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":null}`, ErrUnsupported, "exceeds"),
		bad("chunk bytes overflow", `{"zarr_format":2,"shape":[4,4],"chunks":[4294967296,4294967296],"dtype":"<i8","fill_value":0,"order":"C","filters":null,"compressor":null}`, ErrUnsupported, "exceeds"),
		bad("fill 70000 for <u2", strings.Replace(strings.Replace(meta(""), `"<i4"`, `"<u2"`, 1), `"fill_value":0`, `"fill_value":70000`, 1), ErrCorrupt, "fill_value"),
		bad("fill 300 for |i1", strings.Replace(strings.Replace(meta(""), `"<i4"`, `"|i1"`, 1), `"fill_value":0`, `"fill_value":300`, 1), ErrCorrupt, "300 is out of range for int8"),
		bad("fill -1 for <u4", strings.Replace(strings.Replace(meta(""), `"<i4"`, `"<u4"`, 1), `"fill_value":0`, `"fill_value":-1`, 1), ErrCorrupt, "fill_value"),
		bad("fill 1e3 for |u1", strings.Replace(strings.Replace(meta(""), `"<i4"`, `"|u1"`, 1), `"fill_value":0`, `"fill_value":1e3`, 1), ErrCorrupt, "fill_value"),
		bad("fill 2.5 for <i4", strings.Replace(meta(""), `"fill_value":0`, `"fill_value":2.5`, 1), ErrCorrupt, "fill_value"),
		bad3("v3 fill out of range", strings.Replace(strings.Replace(v3(""), `"int32"`, `"int8"`, 1), `"fill_value":0`, `"fill_value":-129`, 1), ErrCorrupt, "fill_value"),
		{"typed attribute out of range", func(t *testing.T, store, outside string) {
			a := v2Array(t, store, meta(""))
			writeFile(t, filepath.Join(a, ".zattrs"), `{"x":70000,"_scc_attr_types":{"x":"uint16"}}`)
		}, ErrCorrupt, `attribute "x"`},
		{"draft v3", func(t *testing.T, store, outside string) {
			writeFile(t, filepath.Join(store, "zarr.json"), `{"zarr_format":"https://purl.org/zarr/spec/protocol/core/3.0","metadata_encoding":"https://purl.org/zarr/spec/protocol/core/3.0","metadata_key_suffix":".json","extensions":[]}`)
			writeFile(t, filepath.Join(store, "meta", "root", "a.array.json"), `{"shape":[4]}`)
		}, ErrUnsupported, "zarr_format"},
		bad("shape a string", strings.Replace(meta(""), `"shape":[4]`, `"shape":"4"`, 1), ErrCorrupt, `"shape"`),
		bad("shape negative", strings.Replace(meta(""), `"shape":[4]`, `"shape":[-4]`, 1), ErrCorrupt, `"shape"`),
		bad("chunks zero", strings.Replace(meta(""), `"chunks":[2]`, `"chunks":[0]`, 1), ErrCorrupt, `"chunks"`),
		bad("chunks fraction", strings.Replace(meta(""), `"chunks":[2]`, `"chunks":[2.5]`, 1), ErrCorrupt, `"chunks"`),
		bad("rank mismatch", strings.Replace(meta(""), `"chunks":[2]`, `"chunks":[2,2]`, 1), ErrCorrupt, "do not match"),
		bad("dtype a number", strings.Replace(meta(""), `"<i4"`, `5`, 1), ErrCorrupt, `"dtype"`),
		bad("order X", strings.Replace(meta(""), `"order":"C"`, `"order":"X"`, 1), ErrCorrupt, `"order"`),
		bad("compressor a string", strings.Replace(meta(""), `"compressor":null`, `"compressor":"zlib"`, 1), ErrCorrupt, "codec object"),
		bad("compressor level a string", strings.Replace(meta(""), `"compressor":null`, `"compressor":{"id":"zlib","level":"9"}`, 1), ErrCorrupt, `"level"`),
		bad("filters an object", strings.Replace(meta(""), `"filters":null`, `"filters":{}`, 1), ErrCorrupt, `"filters"`),
		bad("zarr_format a string", strings.Replace(meta(""), `"zarr_format":2`, `"zarr_format":"2"`, 1), ErrCorrupt, `"zarr_format"`),
		bad("fill_value missing", strings.Replace(meta(""), `"fill_value":0,`, ``, 1), ErrCorrupt, `"fill_value"`),
		bad("not JSON", `{"zarr_format":2,`, ErrCorrupt, ".zarray"),
		bad("trailing data", meta("")+`{}`, ErrCorrupt, "after"),
		bad("a list", `[1,2]`, ErrCorrupt, "not a JSON object"),
		bad3("v3 node_type missing", strings.Replace(v3(""), `"node_type":"array",`, ``, 1), ErrCorrupt, `"node_type"`),
		bad3("v3 codecs an object", strings.Replace(v3(""), `"codecs":[`, `"codecs":{"x":[`, 1)+"}", ErrCorrupt, "zarr.json"),
		bad3("v3 endian", strings.Replace(v3(""), `"little"`, `"middle"`, 1), ErrCorrupt, "endian"),
		bad3("v3 transpose not a permutation", strings.Replace(v3(""), `"codecs":[`, `"codecs":[{"name":"transpose","configuration":{"order":[1]}},`, 1), ErrCorrupt, "permutation"),
	}
}

// TestImportHostileStores: every store breaking the specification, leaving
// its root or naming a non-regular file is refused with a typed error that
// names the culprit, before anything is written to the file.
func TestImportHostileStores(t *testing.T) {
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			store, outside := filepath.Join(root, "store"), filepath.Join(root, "outside")
			writeFile(t, filepath.Join(outside, "secret"), chunk8)
			must(t, os.MkdirAll(store, 0o755))
			c.build(t, store, outside)
			f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
			defer f.Close(context.Background())
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			rep, err := Import(ctx, store, f, Options{})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v (report %+v), want %v naming %q", err, rep, c.want, c.msg)
			}
		})
	}
}

// TestImportLinksInside: links that stay inside the store are followed;
// links leaving it only with FollowOutsideLinks.
func TestImportLinks(t *testing.T) {
	root := t.TempDir()
	store, outside := filepath.Join(root, "store"), filepath.Join(root, "outside")
	writeFile(t, filepath.Join(outside, "secret"), chunk8)
	a := v2Array(t, store, strings.Replace(v2i4, "%s", "", 1))
	writeFile(t, filepath.Join(store, "other", "x"), "\x03\x00\x00\x00\x04\x00\x00\x00")
	must(t, os.Symlink("../other/x", filepath.Join(a, "0")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(a, "1")))
	for _, follow := range []bool{false, true} {
		f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
		_, err := Import(bg, store, f, Options{FollowOutsideLinks: follow})
		if !follow {
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("outside link followed by default: %v", err)
			}
			must(t, f.Close(context.Background()))
			continue
		}
		must(t, err)
		ds, err := f.OpenDataset(context.Background(), "a", nil)
		must(t, err)
		if got := readAll(t, ds); string(got) != "\x03\x00\x00\x00\x04\x00\x00\x00"+chunk8 {
			t.Fatalf("elements % x", got)
		}
		must(t, f.Close(context.Background()))
	}
}

// TestStoreResolve: keys with "..", absolute or empty segments never
// resolve, whatever exists.
func TestStoreResolve(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "s")
	writeFile(t, filepath.Join(store, "a", "0"), "x")
	writeFile(t, filepath.Join(root, "secret"), "x")
	s, err := openStore(store, Options{})
	must(t, err)
	for _, key := range []string{"../secret", "a/../../secret", "/etc/passwd", filepath.Join(root, "secret"), "a//0", "./a/0", "a\\0", ""} {
		if _, _, err := s.resolve(key); !errors.Is(err, ErrUnsafe) {
			t.Errorf("resolve(%q) = %v, want ErrUnsafe", key, err)
		}
	}
	if p, _, err := s.resolve("a/0"); err != nil || p != filepath.Join(s.root, "a", "0") {
		t.Fatalf("resolve(a/0) = %q %v", p, err)
	}
}

// TestStoreReadBound: a file that holds more than the bound is refused
// after reading bound+1 bytes, including one that grew after its stat.
func TestStoreReadBound(t *testing.T) {
	store := t.TempDir()
	writeFile(t, filepath.Join(store, "k"), strings.Repeat("x", 100))
	s, err := openStore(store, Options{})
	must(t, err)
	if b, err := s.read(bg, "k", 100); err != nil || len(b) != 100 {
		t.Fatalf("read at the bound: %d %v", len(b), err)
	}
	if _, err := s.read(bg, "k", 99); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read past the bound: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.read(ctx, "k", 100); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
}

// TestImportHugeGrid: an array of 2^60 chunks of which three are stored
// costs three reads: chunks are found by listing, never by visiting the
// grid.
func TestImportHugeGrid(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	a := v2Array(t, store, `{"zarr_format":2,"shape":[2147483648,2147483648],"chunks":[1,4],"dtype":"|u1","fill_value":7,"order":"C","filters":null,"compressor":null}`)
	for _, k := range []string{"0.0", "5.1", "99.3", "x.0", "0.0.0", "1.536870912"} {
		writeFile(t, filepath.Join(a, k), "\x01\x02\x03\x04")
	}
	f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
	defer f.Close(context.Background())
	rep, err := Import(bg, store, f, Options{})
	must(t, err)
	t.Logf("%s", rep.Summary())
	if len(rep.Datasets) != 1 || rep.Datasets[0].Chunks != 3 {
		t.Fatalf("report %+v", rep)
	}
}

// TestExportAllOrNothing: an export that fails after writing part of the
// store (here a dataset with no Zarr form under Strict, after one that
// exported) leaves no store and nothing beside it; an existing store is replaced only with
// Replace, and a directory that is not a store never.
func TestExportAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	f := testfile.Create(t, src, nil)
	ds, err := f.CreateDataset(context.Background(), "a", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{10}, Chunk: []uint64{5}})
	must(t, err)
	must(t, ds.Write(bg, engine.All([]uint64{10}), make([]byte, 10)))
	_, err = f.CreateDataset(context.Background(), "z", engine.DatasetSpec{Type: engine.ArrayOf(engine.Int16, 3), Shape: []uint64{10}, Chunk: []uint64{5}})
	must(t, err)
	must(t, f.Close(context.Background()))
	f, err = engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
	must(t, err)
	defer f.Close(context.Background())
	out := t.TempDir()
	store := filepath.Join(out, "s.zarr")
	if _, err := Export(bg, f, store, Options{Strict: true}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("export: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("a failed export left %v", ents)
	}
	// Into an existing store: refused, replaced with Replace, and kept
	// whole when the replacing export fails.
	writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
	if _, err := Export(bg, f, store, Options{Replace: true, Strict: true}); err == nil {
		t.Fatal("export of a vlen dataset succeeded")
	}
	if b, err := os.ReadFile(filepath.Join(store, ".zgroup")); err != nil || string(b) != `{"zarr_format":2}` {
		t.Fatalf("a failed replacing export changed the store: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Fatalf("left beside the store: %v", ents)
	}
}

// countingReader is an endless stream that counts what is read from it.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// TestReadBoundedGrowing: a file holding more than its size said (it grew,
// or never ends) is read to at most bound+1 bytes and refused.
func TestReadBoundedGrowing(t *testing.T) {
	r := &countingReader{}
	if _, err := readBounded(r, 10, 1000); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("endless reader: %v", err)
	}
	if r.n > 1001 {
		t.Fatalf("read %d bytes for a bound of 1000", r.n)
	}
	if b, err := readBounded(strings.NewReader(strings.Repeat("y", 300)), 10, 1000); err != nil || len(b) != 300 {
		t.Fatalf("grown past its size, under the bound: %d %v", len(b), err)
	}
	if _, err := readBounded(strings.NewReader(strings.Repeat("y", 300)), 10, 299); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("grown past the bound: %v", err)
	}
}

// TestImportDeviceChunk: even with links leaving the store allowed, a
// chunk that is a device (an endless /dev/zero) is refused unopened.
func TestImportDeviceChunk(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip(err)
	}
	root := t.TempDir()
	store := filepath.Join(root, "store")
	a := v2Array(t, store, strings.Replace(v2i4, "%s", "", 1))
	must(t, os.Symlink("/dev/zero", filepath.Join(a, "0")))
	f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
	defer f.Close(context.Background())
	if _, err := Import(bg, store, f, Options{FollowOutsideLinks: true}); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "device") {
		t.Fatalf("device chunk: %v", err)
	}
}

// TestExportRefusesUnmappedTypes: a dataset with no Zarr data type is
// refused (ErrUnsupported) and leaves no store, rather than written with a
// missing dtype or a fill value read as something else.
func TestExportRefusesUnmappedTypes(t *testing.T) {
	for _, c := range []struct {
		name string
		spec engine.DatasetSpec
		why  string
		only int // the one version that refuses it, when the other has the type
	}{
		{"vlen", engine.DatasetSpec{Type: engine.Int32, Layout: engine.Vlen, Shape: []uint64{4}, Chunk: []uint64{2}}, "no variable-length sequence", 3},
		{"vlen of compounds", engine.DatasetSpec{Type: engine.PackedCompound(engine.Field{Name: "a", Type: engine.Int8}), Layout: engine.Vlen, Shape: []uint64{4}, Chunk: []uint64{2}}, "variable-length dataset of", 0},
		{"utf-8", engine.DatasetSpec{Type: engine.FixedString(8, engine.NullPad, engine.UTF8), Shape: []uint64{4}, Chunk: []uint64{2}}, "UTF-32", 0},
		{"spacepad", engine.DatasetSpec{Type: engine.FixedString(8, engine.SpacePad, engine.ASCII), Shape: []uint64{4}, Chunk: []uint64{2}}, "spacepad padding rule", 0},
		{"nullterm", engine.DatasetSpec{Type: engine.FixedString(8, engine.NullTerm, engine.ASCII), Shape: []uint64{4}, Chunk: []uint64{2}}, "nullterm padding rule", 0},
		{"bfloat16", engine.DatasetSpec{Type: engine.BFloat16, Shape: []uint64{4}, Layout: engine.Contiguous}, "no bfloat16 type", 2},
		{"array", engine.DatasetSpec{Type: engine.ArrayOf(engine.Int16, 3), Shape: []uint64{4}, Chunk: []uint64{2}}, "spreads an array type", 0},
		{"enum field", engine.DatasetSpec{Type: engine.PackedCompound(engine.Field{Name: "e", Type: engine.Enum(engine.Uint8, engine.EnumMember{Name: "a", Value: 1})}), Shape: []uint64{4}, Chunk: []uint64{2}}, "is an enum", 0},
		{"null", engine.DatasetSpec{Type: engine.Int32, Space: engine.SpaceNull}, "null dataspace", 0},
	} {
		dir := t.TempDir()
		src := filepath.Join(dir, "src.scc")
		f := testfile.Create(t, src, nil)
		_, err := f.CreateDataset(context.Background(), "a", c.spec)
		must(t, err)
		store := filepath.Join(t.TempDir(), "s.zarr")
		for _, v := range []int{2, 3} {
			if c.only != 0 && v != c.only {
				continue
			}
			if _, err := Export(bg, f, store, Options{Version: v}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("%s v%d: export: %v, want ErrUnsupported saying %q", c.name, v, err, c.why)
			}
			if _, err := os.Stat(store); !os.IsNotExist(err) {
				t.Fatalf("%s v%d: a failed export left a store (%v)", c.name, v, err)
			}
		}
		must(t, f.Close(context.Background()))
	}
}
