package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCreateNeverExposesUnborn: while Create is making a file, its path
// holds either nothing (a first create) or the previous file, whole; once
// Create returns, the new file, committed. Before, the path held an empty
// or half-written file from the first byte on, and a reader looking then
// (a fresh open, a virtual dataset's follower) failed ErrCorrupt.
func TestCreateNeverExposesUnborn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.scc")
	staged := 0
	look := func(want string) func(string) {
		return func(tmp string) {
			staged++
			if filepath.Dir(tmp) != dir {
				t.Errorf("staged at %s, not beside %s", tmp, p)
			}
			f, err := Open(ctx, p, &Options{ReadOnly: true})
			switch {
			case want == "" && !errors.Is(err, ErrNotFound):
				t.Errorf("while the first Create runs: open: %v, want ErrNotFound", err)
			case want == "":
			case err != nil:
				t.Errorf("while Create replaces the file: open: %v, want the previous file", err)
			default:
				if _, ok := f.lookupDataset(want); !ok {
					t.Errorf("while Create replaces the file: it holds %v, want %q", f.datasetNames(), want)
				}
				f.Close(ctx)
			}
			// The staged file is committed already.
			g, err := Open(ctx, tmp, &Options{ReadOnly: true})
			if err != nil {
				t.Errorf("the staged file does not open: %v", err)
				return
			}
			g.Close(ctx)
		}
	}
	defer func() { testHookCreateStaged = nil }()
	for i, prev := range []string{"", "first", "second"} {
		testHookCreateStaged = look(prev)
		f, err := Create(ctx, p, &Options{NoSync: i == 2})
		testHookCreateStaged = nil
		must(t, err)
		next := []string{"first", "second", "third"}[i]
		_, err = f.CreateDataset(ctx, next, DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
		must(t, err)
		must(t, f.Close(ctx))
		g := tOpenPath(t, p, &Options{ReadOnly: true})
		if ds := g.datasetNames(); len(ds) != 1 || ds[0] != next {
			t.Fatalf("after Create %d: %v, want [%s]", i, ds, next)
		}
		must(t, g.Close(ctx))
	}
	if staged != 3 {
		t.Fatalf("the hook ran %d times, want 3", staged)
	}
	es, err := os.ReadDir(dir)
	must(t, err)
	if len(es) != 1 {
		t.Fatalf("the directory holds %d names, want only a.scc: %v", len(es), es)
	}
	_ = ctx
}

// TestCreateLocked: Create over a file another writer holds fails
// ErrLocked and leaves the file alone; a Create racing another over a new
// path sees the other's file locked.
func TestCreateLocked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.scc")
	w, err := Create(context.Background(), p, nil)
	must(t, err)
	_, err = w.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	must(t, err)
	must(t, w.Flush(context.Background()))
	if f, err := Create(context.Background(), p, nil); !errors.Is(err, ErrLocked) {
		if f != nil {
			f.Close(context.Background())
		}
		t.Fatalf("Create over a file a writer holds: %v, want ErrLocked", err)
	}
	must(t, w.Close(context.Background()))
	g := tOpenPath(t, p, &Options{ReadOnly: true})
	if ds := g.datasetNames(); len(ds) != 1 {
		t.Fatalf("the refused Create changed the file: %v", ds)
	}
	must(t, g.Close(context.Background()))

	// The second creator of a new path: it stages while the first has
	// published and holds the file.
	q := filepath.Join(dir, "b.scc")
	var first *File
	defer func() {
		if first != nil {
			first.Close(context.Background())
		}
	}()
	testHookCreateStaged = func(string) {
		testHookCreateStaged = nil
		first, err = Create(context.Background(), q, nil)
		must(t, err)
	}
	defer func() { testHookCreateStaged = nil }()
	if f, err := Create(context.Background(), q, nil); !errors.Is(err, ErrLocked) {
		if f != nil {
			f.Close(context.Background())
		}
		t.Fatalf("Create racing another creator of a new path: %v, want ErrLocked", err)
	}
	es, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("a staged file was left behind: %s", e.Name())
		}
	}
}

// TestCreateReplacesSymlinkTarget: Create through a symbolic link replaces
// the file it names and keeps the link, and keeps the replaced file's
// permissions, as truncating it did.
func TestCreateReplacesSymlinkTarget(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real.scc"), filepath.Join(dir, "link.scc")
	f, err := Create(context.Background(), real, nil)
	must(t, err)
	must(t, f.Close(context.Background()))
	must(t, os.Chmod(real, 0o600))
	must(t, os.Symlink("real.scc", link))
	f, err = Create(context.Background(), link, nil)
	must(t, err)
	must(t, f.Close(context.Background()))
	fi, err := os.Lstat(link)
	must(t, err)
	if fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("Create replaced the link itself")
	}
	fi, err = os.Stat(real)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("the replaced file's mode %v, want 0600", fi.Mode().Perm())
	}
	tOpenPath(t, real, &Options{ReadOnly: true}).Close(context.Background())
	// A dangling link is created through.
	dangling, target := filepath.Join(dir, "dangling.scc"), filepath.Join(dir, "target.scc")
	must(t, os.Symlink("target.scc", dangling))
	f, err = Create(context.Background(), dangling, nil)
	must(t, err)
	must(t, f.Close(context.Background()))
	if fi, err := os.Lstat(dangling); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("Create replaced the dangling link itself: %v", err)
	}
	tOpenPath(t, target, &Options{ReadOnly: true}).Close(context.Background())
}

// TestCreateReplacedFollower: a follower of a file that Create replaced
// holds the old file; its Refresh says the file was replaced, as it did
// when Create rewrote the file in place, instead of following a file no
// writer will write again.
func TestCreateReplacedFollower(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "a.scc")
	f, err := Create(ctx, p, nil)
	must(t, err)
	must(t, f.Close(ctx))
	r := tOpenPath(t, p, &Options{ReadOnly: true})
	defer r.Close(ctx)
	must(t, r.Refresh(ctx))
	f, err = Create(ctx, p, nil)
	must(t, err)
	must(t, f.Close(ctx))
	if err := r.Refresh(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("Refresh of a file Create replaced: %v, want ErrCorrupt saying so", err)
	}
}

// TestOpenBecameFIFO: the path passed the regular-file check and then
// became a FIFO (a source replaced under a follower): the open refuses it
// with ErrInvalid instead of blocking until a writer opens the FIFO.
func TestOpenBecameFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.scc")
	f, err := Create(context.Background(), p, nil)
	must(t, err)
	must(t, f.Close(context.Background()))
	testHookOpenChecked = func(path string) {
		must(t, os.Remove(path))
		must(t, syscall.Mkfifo(path, 0o644))
	}
	defer func() { testHookOpenChecked = nil }()
	for _, ro := range []bool{true, false} {
		if ro == false {
			must(t, os.Remove(p))
			f, err := Create(context.Background(), p, nil)
			must(t, err)
			must(t, f.Close(context.Background()))
		}
		g, err := Open(context.Background(), p, &Options{ReadOnly: ro})
		if err == nil {
			g.Close(context.Background())
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("read-only %v: open of a path that became a FIFO: %v, want ErrInvalid", ro, err)
		}
	}
}
