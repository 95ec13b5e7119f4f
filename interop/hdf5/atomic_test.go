package hdf5

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// countdownCtx ends after its Err has been asked n times: a cancellation
// that lands at a different point of the work for each n, without timing.
type countdownCtx struct {
	context.Context
	n    atomic.Int64
	once sync.Once
	done chan struct{}
}

func newCountdown(n int64) *countdownCtx {
	c := &countdownCtx{Context: context.Background(), done: make(chan struct{})}
	c.n.Store(n)
	return c
}

func (c *countdownCtx) Done() <-chan struct{} { return c.done }

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		c.once.Do(func() { close(c.done) })
		return context.Canceled
	}
	return nil
}

func (c *countdownCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// TestImportFileCancelled: an import cancelled at any point either
// completes (it was past its last check) or leaves no file at all, and an
// export likewise.
func TestImportFileCancelled(t *testing.T) {
	needReaders(t)
	dir := t.TempDir()
	h5path := filepath.Join(dir, "in.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    for i in range(4):
        f.create_dataset("c%d" % i, data=np.arange(4000, dtype="<i4") * i, chunks=(500,), compression="gzip", shuffle=True)
        f.create_dataset("p%d" % i, data=np.arange(3000, dtype="<f8") / (i + 1))
`, h5path)
	base := dirNames(t, dir)
	cancelled, completed := 0, 0
	for n := int64(0); n < 400; n += 7 {
		out := filepath.Join(dir, "out.scc")
		_, err := ImportFile(newCountdown(n), h5path, out, &Options{Workers: 2})
		switch {
		case err == nil:
			completed++
			f, err := engine.Open(context.Background(), out, &engine.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := testfile.DatasetNames(t, f); len(got) != 8 {
				t.Fatalf("countdown %d: completed with %v", n, got)
			}
			f.Close(context.Background())
			// Checked here rather than at cleanup: the next countdown
			// imports to the same name.
			if rep, err := engine.Check(context.Background(), out, nil); err != nil {
				t.Fatalf("countdown %d: the completed import does not check: %v (%+v)", n, err, rep)
			}
			os.Remove(out)
		case errors.Is(err, context.Canceled):
			cancelled++
		default:
			t.Fatalf("countdown %d: %v", n, err)
		}
		if l := leftovers(t, dir, base); len(l) != 0 {
			t.Fatalf("countdown %d (%v): left %v", n, err, l)
		}
	}
	if cancelled == 0 || completed == 0 {
		t.Fatalf("%d cancelled, %d completed: the countdowns do not span the import", cancelled, completed)
	}
	// Export of the imported file, cancelled the same way.
	src := filepath.Join(dir, "src.scc")
	if _, err := ImportFile(context.Background(), h5path, src, nil); err != nil {
		t.Fatal(err)
	}
	f, err := engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	testfile.CheckAtCleanup(t, src)
	defer f.Close(context.Background())
	base = dirNames(t, dir)
	cancelled, completed = 0, 0
	for n := int64(0); n < 200; n += 3 {
		out := filepath.Join(dir, "out.h5")
		_, err := Export(newCountdown(n), f, out, &Options{Workers: 2})
		switch {
		case err == nil:
			completed++
			os.Remove(out)
		case errors.Is(err, context.Canceled):
			cancelled++
		default:
			t.Fatalf("export countdown %d: %v", n, err)
		}
		if l := leftovers(t, dir, base); len(l) != 0 {
			t.Fatalf("export countdown %d (%v): left %v", n, err, l)
		}
	}
	if cancelled == 0 || completed == 0 {
		t.Fatalf("export: %d cancelled, %d completed", cancelled, completed)
	}
}

// TestPublishNoClobber: a destination that appeared while the file was
// being written is not overwritten unless asked to be.
func TestPublishNoClobber(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "d.scc")
	tmp, err := tempBeside(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := publish(tmp, dst, false); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("publish over a file: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "theirs" {
		t.Fatalf("overwritten: %q", b)
	}
	if err := publish(tmp, dst, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "new" {
		t.Fatalf("not replaced: %q", b)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"d.scc"}) {
		t.Fatalf("left %v", got)
	}
	// A destination that is not a regular file is refused.
	if _, err := ImportFile(context.Background(), "x.h5", dir, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("import onto a directory: %v", err)
	}
}
