package vfd

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func TestFileSecondWriterLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locked")
	w, err := Open(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mustWrite(t, w, pattern(4096, 1), 0)

	for _, flag := range []int{os.O_RDWR, os.O_WRONLY, os.O_RDWR | os.O_TRUNC, os.O_RDWR | os.O_CREATE} {
		if f, err := Open(path, flag, 0o644); !errors.Is(err, ErrLocked) {
			if f != nil {
				f.Close()
			}
			t.Fatalf("second writer (flag %#x): err = %v, want ErrLocked", flag, err)
		}
	}
	// The O_TRUNC loser must not have truncated the winner's file.
	if got := contents(t, w); !bytes.Equal(got, pattern(4096, 1)) {
		t.Fatalf("a refused O_TRUNC open changed the file (size %d)", len(got))
	}

	// Readers take no lock: they may follow a writer.
	r, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("reader beside writer: %v", err)
	}
	defer r.Close()
	if got := contents(t, r); !bytes.Equal(got, pattern(4096, 1)) {
		t.Fatal("reader sees wrong bytes")
	}
	if _, err := r.WriteAt([]byte{1}, 0); err == nil {
		t.Fatal("WriteAt on a read-only File succeeded")
	}

	// Closing the writer releases the lock.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, err := Open(path, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatalf("writer after the first closed: %v", err)
	}
	defer w2.Close()
	if n, _ := w2.Size(); n != 0 {
		t.Fatalf("O_TRUNC by the lock holder left %d bytes", n)
	}
}

// TestFileTruncateOnlyNonEmpty: O_TRUNC empties a file that holds bytes
// and does not truncate one that is already empty (see isEmpty: ext4 would
// write the whole file back at its Close).
func TestFileTruncateOnlyNonEmpty(t *testing.T) {
	defer func(fn func(*os.File, int64) error) { truncateFile = fn }(truncateFile)
	calls := 0
	truncateFile = func(f *os.File, n int64) error { calls++; return f.Truncate(n) }
	dir := t.TempDir()
	open := func(name string) *File {
		t.Helper()
		f, err := Open(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, name := range []string{"new", "empty"} {
		if name == "empty" {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f := open(name)
		f.Close()
		if calls != 0 {
			t.Fatalf("%s file: %d truncates, want none", name, calls)
		}
	}
	f := open("full")
	mustWrite(t, f, pattern(4096, 3), 0)
	f.Close()
	f = open("full")
	defer f.Close()
	if n, _ := f.Size(); n != 0 || calls != 1 {
		t.Fatalf("O_TRUNC of a 4096-byte file: size %d after %d truncates, want 0 after 1", n, calls)
	}
}

func TestFileOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644); !errors.Is(err, ErrInvalid) {
		t.Errorf("O_APPEND: %v, want ErrInvalid", err)
	}
	if _, err := Open(filepath.Join(dir, "missing"), os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}

func TestFileName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "named")
	f, err := Open(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Name() != path {
		t.Fatalf("Name = %q, want %q", f.Name(), path)
	}
}

// TestFileVectorMatchesLoop compares the preadv/pwritev path with the
// portable per-extent loop on the same file.
func TestFileVectorMatchesLoop(t *testing.T) {
	dir := t.TempDir()
	vec, err := Open(filepath.Join(dir, "vec"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer vec.Close()
	loop, err := Open(filepath.Join(dir, "loop"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		exts := randomExtents(rng, 128<<10)
		fillRandom(rng, exts)
		if err := vec.WriteV(exts); err != nil {
			t.Fatal(err)
		}
		sorted, _, err := sortExtents(exts, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := loop.writeVLoop(sorted); err != nil {
			t.Fatal(err)
		}
		a, b := contents(t, vec), contents(t, loop)
		if !bytes.Equal(a, b) {
			t.Fatal("vector and loop writes differ")
		}
		reads := randomExtents(rng, int64(len(a)))
		sortedReads, _, _ := sortExtents(reads, false)
		copies := make([]Extent, len(sortedReads))
		for i, e := range sortedReads {
			copies[i] = Extent{Off: e.Off, Buf: make([]byte, len(e.Buf))}
		}
		if err := vec.ReadV(reads); err != nil {
			t.Fatal(err)
		}
		if err := loop.readVLoop(copies); err != nil {
			t.Fatal(err)
		}
		for i := range copies {
			if !bytes.Equal(copies[i].Buf, sortedReads[i].Buf) {
				t.Fatal("vector and loop reads differ")
			}
		}
	}
}

// TestFileWriteBehindHints: a writable File hints the kernel after every
// SetWriteBehind bytes written (WriteV and WriteAt both count), not before,
// and never when it is off; a read-only File starts with it off.
func TestFileWriteBehindHints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wb")
	f, err := Open(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.WriteBehind(); got != DefaultWriteBehind {
		t.Fatalf("writable open: write-behind %d, want %d", got, DefaultWriteBehind)
	}
	f.SetWriteBehind(4096)
	buf := make([]byte, 3000)
	if err := f.WriteV([]Extent{{Off: 0, Buf: buf}}); err != nil {
		t.Fatal(err)
	}
	if n := f.hints.Load(); n != 0 {
		t.Fatalf("%d hints after 3000 of 4096 bytes", n)
	}
	if _, err := f.WriteAt(buf[:2000], 3000); err != nil {
		t.Fatal(err)
	}
	if n := f.hints.Load(); n != 1 {
		t.Fatalf("%d hints after 5000 bytes, want 1", n)
	}
	if err := f.WriteV([]Extent{{Off: 5000, Buf: buf}, {Off: 9000, Buf: buf[:1096]}}); err != nil {
		t.Fatal(err)
	}
	if n := f.hints.Load(); n != 2 {
		t.Fatalf("%d hints after a 4096-byte vector write, want 2", n)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.SetWriteBehind(0)
	for i := 0; i < 4; i++ {
		if _, err := f.WriteAt(buf, int64(i)*3000); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.hints.Load(); n != 2 {
		t.Fatalf("%d hints with write-behind off, want still 2", n)
	}
	r, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.WriteBehind(); got != 0 {
		t.Fatalf("read-only open: write-behind %d, want 0", got)
	}

	// One large vector write hints as it goes, once per write-behind of
	// bytes its system calls wrote (writeCallMax cuts it into calls), so
	// that the device starts before the write returns: 8 MiB in two
	// extents with a write-behind of 1 MiB gives 8 hints, not 1.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.SetWriteBehind(1 << 20)
	before := f.hints.Load()
	big := make([]byte, 4<<20)
	if err := f.WriteV([]Extent{{Off: 0, Buf: big}, {Off: 4 << 20, Buf: big}}); err != nil {
		t.Fatal(err)
	}
	if n := f.hints.Load() - before; n != 8 {
		t.Fatalf("%d hints during an 8 MiB vector write, want 8", n)
	}
}
