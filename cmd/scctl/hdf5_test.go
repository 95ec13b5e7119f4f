package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHDF5Missing: without scc-hdf5 the command fails with a message that
// says how to get it.
func TestHDF5Missing(t *testing.T) {
	t.Setenv("SCC_HDF5", "")
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := runCmd(t, "hdf5", "export", "a.scc", "b.h5")
	if code != 1 || !strings.Contains(stderr, "scc-hdf5 not found") || !strings.Contains(stderr, "make hdf5") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Setenv("SCC_HDF5", filepath.Join(t.TempDir(), "nope"))
	if code, _, stderr := runCmd(t, "hdf5", "import", "a.h5", "b.scc"); code != 1 || !strings.Contains(stderr, "SCC_HDF5") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, _ := runCmd(t, "hdf5", "frobnicate"); code != 2 {
		t.Fatalf("bad verb: exit %d", code)
	}
}

// TestHDF5Exec: scctl hdf5 runs scc-hdf5 with the arguments as given,
// passes its output through and keeps its exit status.
func TestHDF5Exec(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "scc-hdf5")
	script := "#!/bin/sh\necho \"args: $*\"\necho oops >&2\nexit $FAKE_EXIT\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SCC_HDF5", "")
	t.Setenv("PATH", dir)
	t.Setenv("FAKE_EXIT", "0")
	code, out, stderr := runCmd(t, "hdf5", "export", "-level", "3", "a b.scc", "o.h5")
	if code != 0 || out != "args: export -level 3 a b.scc o.h5\n" || stderr != "oops\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	t.Setenv("FAKE_EXIT", "2")
	if code, _, _ := runCmd(t, "hdf5", "import", "x.h5", "y.scc"); code != 2 {
		t.Fatalf("exit status not passed through: %d", code)
	}
}

// TestImportH5PassesOptions: `scctl import X.h5 FILE` hands --verify and
// --workers to scc-hdf5 and, like a Zarr import, refuses an existing FILE
// without --force. scc-hdf5 writes a new file under a temporary name,
// which replaces FILE only once it succeeded (never merged into it).
func TestImportH5PassesOptions(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "scc-hdf5")
	script := "#!/bin/sh\necho \"args: $*\"\nfor a; do last=$a; done\nif [ -e \"$last\" ]; then echo merged >> \"$last\"; fi\necho \"run $FAKE_RUN\" >> \"$last\"\nexit ${FAKE_EXIT:-0}\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SCC_HDF5", "")
	t.Setenv("PATH", dir)
	out := filepath.Join(dir, "y.scc")
	t.Setenv("FAKE_RUN", "1")
	code, stdout, stderr := runCmd(t, "import", "--verify", "--workers", "3", "x.h5", out)
	if want := "args: import -workers 3 -verify x.h5 "; code != 0 || !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, "/y.scc\n") {
		t.Fatalf("exit %d, stdout %q (want %q...), stderr %q", code, stdout, want, stderr)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "run 1\n" {
		t.Fatalf("FILE holds %q (%v)", b, err)
	}
	if code, stdout, stderr := runCmd(t, "import", "x.h5", out); code == 0 || stdout != "" || !strings.Contains(stderr, "exists") {
		t.Fatalf("existing FILE without --force: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	t.Setenv("FAKE_RUN", "2")
	if code, _, _ := runCmd(t, "import", "--force", "x.h5", out); code != 0 {
		t.Fatalf("--force: exit %d", code)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "run 2\n" {
		t.Fatalf("--force: FILE holds %q (%v), want the new import alone", b, err)
	}
	// A failed import leaves FILE as it was, and nothing else.
	t.Setenv("FAKE_RUN", "3")
	t.Setenv("FAKE_EXIT", "1")
	if code, _, _ := runCmd(t, "import", "--force", "x.h5", out); code != 1 {
		t.Fatalf("failing scc-hdf5: exit %d", code)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "run 2\n" {
		t.Fatalf("a failed --force import changed FILE: %q (%v)", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("left behind: %v", ents)
	}
}

// TestHDF5Args: the arguments scctl's import and export hand scc-hdf5
// carry -force (replace, not add to, an existing destination) and
// -strict, which scc-hdf5 parses.
func TestHDF5Args(t *testing.T) {
	for _, tc := range []struct {
		got  []string
		want string
	}{
		{hdf5ImportArgs("a.h5", "b.scc", 0, false, false, false), "import -workers 0 a.h5 b.scc"},
		{hdf5ImportArgs("a.h5", "b.scc", 3, true, true, true), "import -workers 3 -verify -force -strict a.h5 b.scc"},
		{hdf5ExportArgs("a.scc", "b.h5", false), "export a.scc b.h5"},
		{hdf5ExportArgs("a.scc", "b.h5", true), "export -force a.scc b.h5"},
	} {
		if got := strings.Join(tc.got, " "); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestExportH5WritesSourcesBesideOut: `scctl export --format hdf5` hands
// scc-hdf5 OUT itself, so the source files of virtual datasets it writes
// beside OUT stay there (beside a temporary name they were lost); an
// existing OUT is refused without --force and replaced with it.
func TestExportH5WritesSourcesBesideOut(t *testing.T) {
	src := makeFile(t)
	dir := t.TempDir()
	fake := filepath.Join(dir, "bin", "scc-hdf5")
	os.MkdirAll(filepath.Dir(fake), 0o755)
	script := "#!/bin/sh\necho \"args: $*\"\nfor a; do last=$a; done\necho vds > \"$last\"\necho src > \"$(dirname \"$last\")/w0.h5\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SCC_HDF5", fake)
	out := filepath.Join(dir, "out", "v.h5")
	os.MkdirAll(filepath.Dir(out), 0o755)
	code, stdout, stderr := runCmd(t, "export", "--format", "hdf5", src, out)
	if want := "args: export " + src + " " + out + "\n"; code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout %q (want %q), stderr %q", code, stdout, want, stderr)
	}
	for _, name := range []string{"v.h5", "w0.h5"} {
		if _, err := os.Stat(filepath.Join(dir, "out", name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if code, _, stderr := runCmd(t, "export", "--format", "hdf5", src, out); code == 0 || !strings.Contains(stderr, "exists") {
		t.Fatalf("existing OUT without --force: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, _ := runCmd(t, "export", "--format", "hdf5", "--force", src, out); code != 0 || !strings.HasPrefix(stdout, "args: export -force ") {
		t.Fatalf("--force: exit %d, stdout %q", code, stdout)
	}
}
