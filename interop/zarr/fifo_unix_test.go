//go:build unix

package zarr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/scc-dev/scc/internal/testfile"
)

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// TestImportFIFOFedPastBound: a FIFO .zarray with a writer feeding it far
// more than the metadata bound is refused without reading it (an open of
// it would block with no writer, and a read would never end).
func TestImportFIFOFedPastBound(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	writeFile(t, filepath.Join(store, ".zgroup"), `{"zarr_format":2}`)
	must(t, os.MkdirAll(filepath.Join(store, "a"), 0o755))
	fifo := filepath.Join(store, "a", ".zarray")
	mkfifo(t, fifo)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until a reader opens
		if err != nil {
			return
		}
		defer w.Close()
		buf := make([]byte, 1<<20)
		for i := 0; i < 64; i++ {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}()
	f := testfile.Create(t, filepath.Join(root, "out.scc"), nil)
	defer f.Close(context.Background())
	if _, err := Import(bg, store, f, Options{}); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("err = %v, want ErrNotRegular", err)
	}
	// Free the writer: open the read end and close it, until the writer
	// is gone. Once, as before, raced the writer's open: a read end opened
	// and closed before the writer reached open(2) left it blocked there
	// for good.
	for {
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			select {
			case <-done:
			case <-time.After(10 * time.Millisecond):
			}
			r.Close() // a writer that opened meanwhile now fails with EPIPE
		}
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}
