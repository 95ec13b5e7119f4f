package vfd

import (
	"bytes"
	"errors"
	"math/rand/v2"
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

// TestWriteCallsCapped: WriteV and WriteAt write what they are given
// however it is cut, and no pwrite or pwritev carries more than
// writeCallMax bytes and its sixteenth of slack (see their comments for
// why), nor cuts a write that fits in that. The system calls are
// watched through pwriteSys and pwritevSys, which here also write only part
// of what they are asked now and then, so that the resumption after a short
// write is exercised at and across the cuts.
func TestWriteCallsCapped(t *testing.T) {
	const limit = 1000
	defer func(n int) { writeCallMax = n }(writeCallMax)
	writeCallMax = limit
	defer func(w func(int, []byte, int64) (int, error), wv func(int, [][]byte, int64) (int, error)) {
		pwriteSys, pwritevSys = w, wv
	}(pwriteSys, pwritevSys)
	const slack = limit / 16
	var calls, atLimit, short atomic.Int64
	var over atomic.Int64 // largest call over the limit, if any
	watch := func(n int) {
		calls.Add(1)
		if n > limit+slack {
			over.Store(int64(n))
		}
		if n == limit {
			atLimit.Add(1)
		}
	}
	var whole atomic.Bool
	shorten := func(n int) int { // every 7th call writes half
		if calls.Load()%7 == 0 && n > 1 && !whole.Load() {
			short.Add(1)
			return n / 2
		}
		return n
	}
	pwriteSys = func(fd int, p []byte, off int64) (int, error) {
		watch(len(p))
		return unix.Pwrite(fd, p[:shorten(len(p))], off)
	}
	pwritevSys = func(fd int, bufs [][]byte, off int64) (int, error) {
		n := 0
		for _, b := range bufs {
			n += len(b)
		}
		watch(n)
		keep := shorten(n)
		var cut [][]byte
		for _, b := range bufs {
			if keep == 0 {
				break
			}
			k := min(len(b), keep)
			cut = append(cut, b[:k])
			keep -= k
		}
		return unix.Pwritev(fd, cut, off)
	}

	f, err := Open(filepath.Join(t.TempDir(), "capped"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var model []byte
	put := func(off int64, b []byte) {
		if end := int(off) + len(b); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], b)
	}
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var off int64
	for round := 0; round < 200; round++ {
		if round%5 == 4 {
			b := fill(1 + rng.IntN(4*limit))
			at := rng.Int64N(off + 1)
			if n, err := f.WriteAt(b, at); err != nil || n != len(b) {
				t.Fatalf("WriteAt %d bytes at %d: %d, %v", len(b), at, n, err)
			}
			put(at, b)
			continue
		}
		// A run of adjacent extents, sometimes after a gap, of sizes from
		// one byte to several limits.
		var exts []Extent
		off += rng.Int64N(3) * int64(rng.IntN(limit))
		for range 1 + rng.IntN(6) {
			b := fill(1 + rng.IntN(3*limit))
			exts = append(exts, Extent{Off: off, Buf: b})
			off += int64(len(b))
		}
		if err := f.WriteV(exts); err != nil {
			t.Fatal(err)
		}
		for _, x := range exts {
			put(x.Off, x.Buf)
		}
	}
	if n := over.Load(); n != 0 {
		t.Fatalf("a write call carried %d bytes, over the limit of %d+%d", n, limit, slack)
	}
	// A frame of limit bytes and a 4-byte trailer, as two extents and as
	// one buffer, goes in one call (no shortening from here on).
	whole.Store(true)
	for _, exts := range [][]Extent{
		{{Off: off, Buf: fill(limit)}, {Off: off + limit, Buf: fill(4)}},
		{{Off: off + limit + 4, Buf: fill(limit + 4)}},
	} {
		c0 := calls.Load()
		if err := f.WriteV(exts); err != nil {
			t.Fatal(err)
		}
		for _, x := range exts {
			put(x.Off, x.Buf)
		}
		if n := calls.Load() - c0; n != 1 {
			t.Fatalf("a frame of %d+4 bytes took %d write calls, want 1", limit, n)
		}
	}
	if atLimit.Load() == 0 || short.Load() == 0 {
		t.Fatalf("the test cut no write at the limit (%d) or shortened none (%d)", atLimit.Load(), short.Load())
	}
	got := make([]byte, len(model))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		i := 0
		for got[i] == model[i] {
			i++
		}
		t.Fatalf("file differs from the writes at byte %d", i)
	}
}
