package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
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
	ds, err := f.CreateDataset("hits", engine.DatasetSpec{
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
	if err := f.Close(); err != nil {
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
	ds, err := f.CreateDataset("table", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{10, 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Write(context.Background(), engine.All([]uint64{10, 10}), make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
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
