package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestExportImportCommands: export to both Zarr versions, import back, and
// the elements, attributes and chunking survive; the command says what was
// copied and what re-encoded.
func TestExportImportCommands(t *testing.T) {
	path := makeFile(t)
	addAttrs(t, path)
	for _, format := range []string{"zarr2", "zarr3"} {
		store := filepath.Join(t.TempDir(), "store")
		code, out, stderr := runCmd(t, "export", "--format", format, path, store)
		if code != 0 {
			t.Fatalf("export %s: %d %s", format, code, stderr)
		}
		// makeFile's grid chunk is too small to deflate, so scc stored it
		// with the compressor skipped: the command must say it was
		// re-encoded; the zstd frames shrink and copy (interop/zarr's
		// tests cover both).
		for _, want := range []string{"frames: 3 chunks [shuffle,zstd(1)]: all copied", "1 chunks [", "]: RE-ENCODED 1 of 1 (scc stored these chunks with a compressor skipped"} {
			if !strings.Contains(out, want) {
				t.Errorf("export %s output lacks %q:\n%s", format, want, out)
			}
		}
		back := filepath.Join(t.TempDir(), "back.scc")
		code, out, stderr = runCmd(t, "import", store, back)
		if code != 0 {
			t.Fatalf("import %s: %d %s", format, code, stderr)
		}
		testfile.CheckAtCleanup(t, back)
		if !strings.Contains(out, "frames: 3 chunks") {
			t.Errorf("import output:\n%s", out)
		}
		// The imported file lists like the original, attributes included
		// (max shape aside: Zarr has no unlimited dimensions).
		_, a, _ := runCmd(t, "dump", "--dataset", "grid", path)
		_, b, _ := runCmd(t, "dump", "--dataset", "grid", back)
		if a != b || !strings.Contains(a, `ATTRIBUTE "units" { string "m/s" }`) {
			t.Errorf("dump differs or lacks the attribute:\n%s\n---\n%s", a, b)
		}
		_, lsOut, _ := runCmd(t, "ls", back)
		if !strings.Contains(lsOut, `Attribute "origin" string = "test"`) {
			t.Errorf("ls of the import lacks the file attribute:\n%s", lsOut)
		}
		if code, _, stderr := runCmd(t, "import", store, back); code == 0 || !strings.Contains(stderr, "exists") {
			t.Errorf("import over an existing file: %d %s", code, stderr)
		}
	}
}

func addAttrs(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	f, err := engine.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetAttr(ctx, "origin", engine.StringAttr("test")); err != nil {
		t.Fatal(err)
	}
	ds, err := f.OpenDataset(ctx, "grid", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.SetAttr(ctx, "units", engine.StringAttr("m/s")); err != nil {
		t.Fatal(err)
	}
	if err := ds.SetAttr(ctx, "range", engine.ArrayAttr([]float64{-1, 2.5})); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestExportErrors(t *testing.T) {
	path := makeFile(t)
	// HDF5 goes to scc-hdf5; pointing SCC_HDF5 at nothing shows the
	// dispatch (the error names the variable) without needing the tool.
	t.Setenv("SCC_HDF5", filepath.Join(t.TempDir(), "no-scc-hdf5"))
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"export", path}, 2, "want FILE DIR"},
		{[]string{"export", "--format", "hdf5", path, t.TempDir() + "/x"}, 1, "SCC_HDF5"},
		{[]string{"export", "--format", "n5", path, t.TempDir() + "/x"}, 2, "zarr2, zarr3 or hdf5"},
		{[]string{"import", path + ".h5", t.TempDir() + "/x.scc"}, 1, "SCC_HDF5"},
		{[]string{"import", path, t.TempDir() + "/x.scc"}, 2, "not a directory"},
		{[]string{"import", t.TempDir(), t.TempDir() + "/x.scc"}, 1, "no Zarr group or array"},
	} {
		code, _, stderr := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d %q, want %d with %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	// Exporting into a non-empty directory is refused.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCmd(t, "export", path, dir); code != 1 || !strings.Contains(stderr, "not empty") {
		t.Errorf("non-empty dir: %d %s", code, stderr)
	}
}

// TestLsDumpShowAttributes: ls (text and JSON) and dump print attributes.
func TestLsDumpShowAttributes(t *testing.T) {
	path := makeFile(t)
	addAttrs(t, path)
	_, out, _ := runCmd(t, "ls", path)
	for _, want := range []string{`Attribute "origin" string = "test"`, `Attribute: "units" string = "m/s"`, `Attribute: "range" float64[2] = [-1, 2.5]`} {
		if !strings.Contains(out, want) {
			t.Errorf("ls lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runCmd(t, "ls", "--json", path)
	if !strings.Contains(out, `"name": "units"`) {
		t.Errorf("ls --json lacks attributes:\n%s", out)
	}
	_, out, _ = runCmd(t, "dump", "--dataset", "grid", "--json", path)
	if !strings.Contains(out, `"attributes":[{"name":"range","type":"float64[2]","value":"[-1, 2.5]"}`) {
		t.Errorf("dump --json lacks attributes:\n%s", out)
	}
}
