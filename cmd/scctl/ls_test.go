package main

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLs(t *testing.T) {
	path := makeFile(t)
	code, out, stderr := runCmd(t, "ls", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"frames               Dataset {3/Inf, 4, 5}",
		"Type:      uint16",
		"Chunks:    {1, 4, 5} 40 B",
		"Filters:   shuffle + zstd(1)",
		"Index:     extensible-array, 3 of 3 chunks stored",
		"grid                 Dataset {4, 6}",
		"Type:      float64",
		"Fill:      -1",
		"1 of 4 chunks stored",
		"2 datasets, 312 B logical",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	code, out, _ = runCmd(t, "ls", "--json", path)
	if code != 0 {
		t.Fatal(code)
	}
	var l lsFile
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Datasets) != 2 || l.Size == 0 || l.Logical != 120+192 || l.StoredLogical != 120+48 {
		t.Fatalf("%+v", l)
	}
	fr := l.Datasets[0]
	if fr.Name != "frames" || fr.MaxShape[0] != "unlimited" || fr.StoredChunks != 3 || fr.GridChunks != 3 ||
		fr.ChunkBytes != 40 || strings.Join(fr.Filters, "+") != "shuffle+zstd(1)" {
		t.Fatalf("%+v", fr)
	}
	if g := l.Datasets[1]; g.IndexKind == "extensible-array" || g.StoredChunks != 1 || g.GridChunks != 4 {
		t.Fatalf("%+v", g)
	}
}

func TestLsErrors(t *testing.T) {
	if code, _, _ := runCmd(t, "ls"); code != 2 {
		t.Fatalf("no file: %d", code)
	}
	code, _, stderr := runCmd(t, "ls", t.TempDir()+"/absent.scc")
	if code != 1 || !strings.Contains(stderr, "not found") {
		t.Fatalf("absent file: %d %q", code, stderr)
	}
}

// TestLsRefusesNonRegular: a FIFO used to hang the command in open(2).
func TestLsRefusesNonRegular(t *testing.T) { refusesNonRegular(t, "ls") }

// makeSparseFile writes a file with one sparse dataset: five defined
// elements of a 6×8 grid (element (r, c) holds r*10+c), one of them
// erased again.
func makeSparseFile(t *testing.T, o ...testfile.Opt) string {
	t.Helper()
	ctx := context.Background()
	path := t.TempDir() + "/sparse.scc"
	f := testfile.Create(t, path, nil, o...)
	ds, err := f.CreateDataset(ctx, "hits", engine.DatasetSpec{
		Type: engine.Int32, Shape: []uint64{6, 8}, Chunk: []uint64{3, 4}, Layout: engine.Sparse,
		SelectionFilters: []engine.Filter{engine.Deflate(1)}, Fill: []byte{0xff, 0xff, 0xff, 0xff},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range [][2]int32{{0, 1}, {2, 2}, {4, 7}, {5, 0}, {5, 5}} {
		if err := engine.WriteSlice(ctx, ds, engine.Box([]uint64{uint64(rc[0]), uint64(rc[1])}, []uint64{1, 1}), []int32{rc[0]*10 + rc[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds.Erase(ctx, engine.Box([]uint64{5, 5}, []uint64{1, 1})); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLsSparse(t *testing.T) {
	path := makeSparseFile(t)
	code, out, stderr := runCmd(t, "ls", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"hits                 Dataset {6, 8}",
		"Layout:    sparse, 4 elements defined, selection filters: deflate(1)",
		"3 of 4 chunks stored",
		"16 B in stored chunks (decoded)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	code, out, _ = runCmd(t, "ls", "--json", path)
	if code != 0 {
		t.Fatal(code)
	}
	var l lsFile
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if d := l.Datasets[0]; d.Layout != "sparse" || d.DefinedElements != 4 || d.StoredChunks != 3 || d.StoredLogicalBytes != 16 {
		t.Fatalf("%+v", d)
	}
}

func TestLsContiguous(t *testing.T) {
	path := t.TempDir() + "/contig.scc"
	f := testfile.Create(t, path, nil)
	ds, err := f.CreateDataset(context.Background(), "table", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{10, 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Write(context.Background(), engine.All([]uint64{10, 10}), make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "ls", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Layout:    contiguous", "Index:     none, 1 of 1 chunks stored", "100 B stored"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if code, out, _ := runCmd(t, "check", path); code != 0 {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
}

// TestLsRecursive lists a hierarchy as h5ls -r does: every group and
// dataset by its path from the root, depth first in name order, with the
// groups' attributes under them.
func TestLsRecursive(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/tree.scc"
	f := testfile.Create(t, path, nil)
	if err := f.SetAttr(ctx, "title", engine.StringAttr("run 7")); err != nil {
		t.Fatal(err)
	}
	entry, err := f.CreateGroup(ctx, "entry")
	if err != nil {
		t.Fatal(err)
	}
	if err := entry.SetAttr(ctx, "NX_class", engine.StringAttr("NXentry")); err != nil {
		t.Fatal(err)
	}
	spec := engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{2, 3}, Chunk: []uint64{1, 3}}
	d, err := f.CreateDataset(ctx, "entry/data/data", spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetAttr(ctx, "units", engine.StringAttr("counts")); err != nil {
		t.Fatal(err)
	}
	data, err := f.OpenGroup(ctx, "entry/data")
	if err != nil {
		t.Fatal(err)
	}
	if err := data.SetAttr(ctx, "gain", engine.ScalarAttr(int32(4))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateDataset(ctx, "a", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{5}, Chunk: []uint64{5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateGroup(ctx, "entry/empty"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "ls", "-r", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	want := []string{
		`/                    Group`,
		`    Attribute: "title" string = "run 7"`,
		`/a                   Dataset {5}`,
		`/entry               Group`,
		`    Attribute: "NX_class" string = "NXentry"`,
		`/entry/data          Group`,
		`    Attribute: "gain" int32 = 4`,
		`/entry/data/data     Dataset {2, 3}`,
		`    Attribute: "units" string = "counts"`,
		`/entry/empty         Group`,
	}
	if len(lines) != len(want)+1 || !strings.HasPrefix(lines[len(want)], "4 groups, 2 datasets, ") {
		t.Fatalf("got:\n%s", out)
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: got %q, want %q", i, lines[i], w)
		}
	}
	code, out, _ = runCmd(t, "ls", "--json", path)
	if code != 0 {
		t.Fatal(code)
	}
	var l lsFile
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Groups) != 3 || l.Groups[0].Path != "/entry" || l.Groups[1].Path != "/entry/data" ||
		l.Groups[2].Path != "/entry/empty" || len(l.Groups[1].Attrs) != 1 || l.Groups[1].Attrs[0].Value != "4" {
		t.Fatalf("groups: %+v", l.Groups)
	}
	// Without -r the listing stays flat.
	if _, out, _ = runCmd(t, "ls", path); strings.Contains(out, "Group") || !strings.Contains(out, "2 datasets, ") {
		t.Fatalf("flat listing changed:\n%s", out)
	}
}

// TestLsNamesAndHugeSizes: names older files may hold (control
// characters, NUL, invalid UTF-8) print escaped and quoted, other names as
// they are; a dataset of 2^63 bytes and more prints a positive size.
func TestLsNamesAndHugeSizes(t *testing.T) {
	for name, want := range map[string]string{
		"plain": "plain", "a b/ü/数据": "a b/ü/数据", "a\nb": `"a\nb"`, "x\x00y": `"x\x00y"`,
		"bad\xff": `"bad\xff"`, "esc\x1b[31m": `"esc\x1b[31m"`,
	} {
		if got := displayName(name); got != want {
			t.Errorf("displayName(%q) = %s, want %s", name, got, want)
		}
	}
	for n, want := range map[uint64]string{
		100: "100 B", 1 << 62: "4096 PiB", 1 << 63: "8192 PiB", 3 << 62: "12288 PiB", math.MaxUint64: "16384 PiB or more",
	} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %s, want %s", n, got, want)
		}
	}
	d := lsDataset{Name: "g/a\nb", Type: "uint16", Shape: []uint64{1 << 62}, MaxShape: []string{"4611686018427387904"},
		Chunk: []uint64{1 << 20}, Filters: []string{}, Layout: "chunked", LogicalBytes: 1 << 63}
	l := &lsFile{Datasets: []lsDataset{d}, Logical: 1 << 63,
		tree:   []lsNode{{Path: "/", Group: -1, Dataset: -1}, {Path: "/g", Group: 0, Dataset: -1}, {Path: "/g/a\nb", Group: -1, Dataset: 0}},
		Groups: []lsGroup{{Path: "/g"}}}
	var b strings.Builder
	printListing(&b, l)
	printTree(&b, l)
	out := b.String()
	for _, want := range []string{`"g/a\nb"`, `"/g/a\nb"`, "8192 PiB logical"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "a\nb") || strings.Contains(out, "-") && strings.Contains(out, "-8192") {
		t.Errorf("raw name or negative size in:\n%s", out)
	}
}

func TestLsSharded(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/sharded.scc"
	f := testfile.Create(t, path, nil)
	ds, err := f.CreateDataset(ctx, "img", engine.DatasetSpec{
		Type: engine.Uint16, Shape: []uint64{64, 64}, Chunk: []uint64{32, 64}, InnerChunk: []uint64{8, 16},
		Filters: []engine.Filter{engine.Zstd(1)},
	})
	require.NoError(t, err)
	require.NoError(t, engine.WriteSlice(ctx, ds, engine.Box([]uint64{3, 3}, []uint64{1, 1}), []uint16{7}))
	require.NoError(t, f.Close(ctx))
	code, out, stderr := runCmd(t, "ls", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "Sharded:   inner chunks {8, 16}")
	code, out, _ = runCmd(t, "ls", "--json", path)
	require.Equal(t, 0, code)
	var l lsFile
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	assert.Equal(t, []uint64{8, 16}, l.Datasets[0].InnerChunk)
	code, _, stderr = runCmd(t, "check", path)
	assert.Equal(t, 0, code, stderr)
}
