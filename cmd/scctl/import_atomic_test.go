package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

const (
	zgroup  = `{"zarr_format":2}`
	zarrayT = `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":null}`
	chunk8  = "\x01\x00\x00\x00\x02\x00\x00\x00"
)

func put(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goodStore is a store with one array "a" of 4 int32, chunk 0 stored.
func goodStore(t *testing.T) string {
	t.Helper()
	store := filepath.Join(t.TempDir(), "s.zarr")
	put(t, filepath.Join(store, ".zgroup"), zgroup)
	put(t, filepath.Join(store, "a", ".zarray"), zarrayT)
	put(t, filepath.Join(store, "a", "0"), chunk8)
	return store
}

// onlyFiles lists dir's entries (no temporary leftovers allowed).
func onlyFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestImportHostileLeavesNothing: a refused store, however it is refused
// (its metadata, a key leaving it, a FIFO, a chunk that fails after other
// arrays were written), leaves no FILE and no temporary file.
func TestImportHostileLeavesNothing(t *testing.T) {
	for name, build := range map[string]func(t *testing.T, store string){
		"separator": func(t *testing.T, store string) {
			put(t, filepath.Join(store, "a", ".zarray"), strings.Replace(zarrayT, `"compressor":null`, `"compressor":null,"dimension_separator":"/../"`, 1))
		},
		"symlink outside": func(t *testing.T, store string) {
			put(t, filepath.Join(store, "a", ".zarray"), zarrayT)
			if err := os.Symlink("/etc/passwd", filepath.Join(store, "a", "0")); err != nil {
				t.Fatal(err)
			}
		},
		"FIFO chunk": func(t *testing.T, store string) {
			put(t, filepath.Join(store, "a", ".zarray"), zarrayT)
			mkfifoAt(t, filepath.Join(store, "a", "0"))
		},
		"fill out of range": func(t *testing.T, store string) {
			put(t, filepath.Join(store, "a", ".zarray"), strings.Replace(strings.Replace(zarrayT, `"<i4"`, `"<u2"`, 1), `"fill_value":0`, `"fill_value":70000`, 1))
		},
		"draft v3": func(t *testing.T, store string) {
			os.Remove(filepath.Join(store, ".zgroup"))
			put(t, filepath.Join(store, "zarr.json"), `{"zarr_format":"https://purl.org/zarr/spec/protocol/core/3.0"}`)
		},
		"bad chunk after a good array": func(t *testing.T, store string) {
			put(t, filepath.Join(store, "a", ".zarray"), zarrayT)
			put(t, filepath.Join(store, "a", "0"), chunk8)
			put(t, filepath.Join(store, "b", ".zarray"), strings.Replace(zarrayT, `"compressor":null`, `"compressor":{"id":"zstd","level":1}`, 1))
			put(t, filepath.Join(store, "b", "1"), "not zstd")
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "s")
			put(t, filepath.Join(store, ".zgroup"), zgroup)
			build(t, store)
			outDir := t.TempDir()
			out := filepath.Join(outDir, "x.scc")
			code, stdout, stderr := runCmd(t, "import", store, out)
			if code != 1 || stderr == "" {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			if names := onlyFiles(t, outDir); len(names) != 0 {
				t.Fatalf("a failed import left %v (%s)", names, stderr)
			}
		})
	}
}

// TestImportForceReplaces: --force replaces FILE with the new import (no
// dataset of the old file survives), and a failed --force import leaves
// the old FILE as it was.
func TestImportForceReplaces(t *testing.T) {
	old := makeFile(t)
	before, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	put(t, filepath.Join(bad, ".zgroup"), zgroup)
	put(t, filepath.Join(bad, "a", ".zarray"), strings.Replace(zarrayT, `"order":"C"`, `"order":"X"`, 1))
	if code, _, stderr := runCmd(t, "import", "--force", bad, old); code != 1 || !strings.Contains(stderr, `"order"`) {
		t.Fatalf("failing --force import: exit %d %s", code, stderr)
	}
	if after, err := os.ReadFile(old); err != nil || !bytes.Equal(before, after) {
		t.Fatal("a failed --force import changed the old file")
	}
	if names := onlyFiles(t, filepath.Dir(old)); len(names) != 1 {
		t.Fatalf("left behind: %v", names)
	}
	if code, out, stderr := runCmd(t, "import", "--force", goodStore(t), old); code != 0 {
		t.Fatalf("--force: exit %d %s%s", code, out, stderr)
	}
	f, err := engine.Open(context.Background(), old, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if got := testfile.DatasetNames(t, f); len(got) != 1 || got[0] != "a" {
		t.Fatalf("datasets after --force: %v", got)
	}
}

// TestImportStrict: an array scc cannot hold is skipped and named; the
// import succeeds unless --strict, which fails and writes nothing.
func TestImportStrict(t *testing.T) {
	store := goodStore(t)
	put(t, filepath.Join(store, "c", ".zarray"), strings.Replace(zarrayT, `"<i4"`, `"<f16"`, 1))
	dir := t.TempDir()
	out := filepath.Join(dir, "x.scc")
	code, stdout, stderr := runCmd(t, "import", store, out)
	if code != 0 || !strings.Contains(stdout, `SKIPPED c: zarr: unsupported: dtype "<f16" (long double`) || !strings.Contains(stdout, "1 imported, 1 skipped") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	testfile.CheckAtCleanup(t, out)
	strict := filepath.Join(dir, "y.scc")
	code, stdout, stderr = runCmd(t, "import", "--strict", store, strict)
	if code != 1 || !strings.Contains(stderr, "1 of 2 arrays skipped (--strict)") || !strings.Contains(stdout, "SKIPPED c") {
		t.Fatalf("--strict: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(strict); err == nil {
		t.Fatal("--strict failure left a file")
	}
}

// TestImportRoutesHDF5: netCDF-4 and any file with the HDF5 signature go to
// scc-hdf5; classic netCDF is refused by name.
func TestImportRoutesHDF5(t *testing.T) {
	t.Setenv("SCC_HDF5", filepath.Join(t.TempDir(), "no-scc-hdf5"))
	dir := t.TempDir()
	nc := filepath.Join(dir, "x.nc")
	magic := filepath.Join(dir, "data.bin")
	classic := filepath.Join(dir, "old.nc")
	put(t, nc, "\x89HDF\r\n\x1a\n")
	put(t, magic, strings.Repeat("\x00", 512)+"\x89HDF\r\n\x1a\n")
	put(t, classic, "CDF\x01\x00\x00\x00\x00")
	for _, c := range []struct {
		src  string
		code int
		msg  string
	}{{nc, 1, "SCC_HDF5"}, {magic, 1, "SCC_HDF5"}, {filepath.Join(dir, "missing.nc4"), 1, "SCC_HDF5"}, {classic, 2, "classic netCDF"}} {
		code, _, stderr := runCmd(t, "import", c.src, filepath.Join(t.TempDir(), "o.scc"))
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%s: exit %d %q, want %d with %q", c.src, code, stderr, c.code, c.msg)
		}
	}
}

// TestExportForceAndFailure: a failed export leaves no store; --force
// replaces an existing Zarr store but never a directory that is not one.
func TestExportForceAndFailure(t *testing.T) {
	path := makeFile(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "out.zarr")
	if code, _, stderr := runCmd(t, "export", path, store); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := runCmd(t, "export", path, store); code != 1 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("existing store without --force: %d %s", code, stderr)
	}
	marker := filepath.Join(store, "stale")
	put(t, marker, "x")
	if code, _, stderr := runCmd(t, "export", "--force", "--format", "zarr3", path, store); code != 0 {
		t.Fatalf("--force: %d %s", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("--force kept the old store's files")
	}
	if _, err := os.Stat(filepath.Join(store, "zarr.json")); err != nil {
		t.Fatal("--force did not write the new store")
	}
	notStore := filepath.Join(dir, "home")
	put(t, filepath.Join(notStore, "precious"), "x")
	if code, _, stderr := runCmd(t, "export", "--force", path, notStore); code != 1 || !strings.Contains(stderr, "not a Zarr store") {
		t.Fatalf("--force over a non-store: %d %s", code, stderr)
	}
	if names := onlyFiles(t, dir); len(names) != 2 {
		t.Fatalf("left behind: %v", names)
	}
	// An export that fails part-way (here: interrupted) leaves nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"export", path, filepath.Join(dir, "cut.zarr")}, &out, &errb); code != 1 {
		t.Fatalf("cancelled export: exit %d %s", code, errb.String())
	}
	if names := onlyFiles(t, dir); len(names) != 2 {
		t.Fatalf("a failed export left %v", names)
	}
}
