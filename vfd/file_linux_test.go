package vfd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAdvance(t *testing.T) {
	mk := func() [][]byte { return [][]byte{make([]byte, 3), {}, make([]byte, 2), make([]byte, 4)} }
	lens := func(b [][]byte) []int {
		var l []int
		for _, x := range b {
			l = append(l, len(x))
		}
		return l
	}
	for _, c := range []struct {
		n    int
		want []int
	}{
		{0, []int{3, 0, 2, 4}},
		{1, []int{2, 0, 2, 4}},
		{3, []int{0, 2, 4}}, // the empty buffer is left for dropEmpty
		{4, []int{1, 4}},
		{5, []int{4}},
		{8, []int{1}},
		{9, nil},
	} {
		got := advance(mk(), c.n)
		if !slices.Equal(lens(got), c.want) {
			t.Errorf("advance(%d) lens = %v, want %v", c.n, lens(got), c.want)
		}
	}
	if got := dropEmpty([][]byte{{}, {}, {1}}); len(got) != 1 {
		t.Errorf("dropEmpty left %d buffers", len(got))
	}
}

// TestFileWriteBehindErrorReachesSync: an error the write-behind hint gets
// is not the write's (which succeeded) but is never dropped: the next Sync
// reports it, once, with its cause, or Close if no Sync comes first.
func TestFileWriteBehindErrorReachesSync(t *testing.T) {
	defer func(fn func(int, int64, int64, int) error) { syncFileRange = fn }(syncFileRange)
	var calls atomic.Int64
	syncFileRange = func(int, int64, int64, int) error { calls.Add(1); return unix.EIO }
	f, err := Open(filepath.Join(t.TempDir(), "wb"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.SetWriteBehind(1024)
	if err := f.WriteV([]Extent{{Off: 0, Buf: make([]byte, 4096)}}); err != nil {
		t.Fatalf("the write itself succeeded: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d hints, want 1", calls.Load())
	}
	if err := f.Sync(); !errors.Is(err, unix.EIO) {
		t.Fatalf("Sync after a failed hint: %v, want EIO", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("second Sync: %v; the error was reported already", err)
	}
	// Unsupported is not an error.
	syncFileRange = func(int, int64, int64, int) error { return unix.ESPIPE }
	if _, err := f.WriteAt(make([]byte, 2048), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync after an unsupported hint: %v", err)
	}
	// Not synced before Close: Close reports it.
	syncFileRange = func(int, int64, int64, int) error { return unix.EIO }
	if _, err := f.WriteAt(make([]byte, 2048), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, unix.EIO) {
		t.Fatalf("Close after a failed hint: %v, want EIO", err)
	}
}
