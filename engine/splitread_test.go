package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// Large direct reads split between the caller and helper goroutines
// (cache/splitread.go), each goroutine checksumming the pieces it read
// (denseLayout.SumDirect / CombineDirect / VerifyDirectSum).

// splitProcs gives the test at least 2 Ps (the split helpers are sized
// from GOMAXPROCS when the cache is made).
func splitProcs(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		old := runtime.GOMAXPROCS(2)
		t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	}
}

// splitWidth is an odd chunk size (bytes, uint8 elements): rows of one
// chunk each, so chunk boundaries and share boundaries never line up.
const splitWidth = 100003

func splitRows(rows int) []byte {
	b := make([]byte, rows*splitWidth)
	for i := range b {
		b[i] = byte(i*13 + i/splitWidth)
	}
	return b
}

// splitImage writes rows rows of splitWidth bytes, one chunk each.
func splitImage(t *testing.T, rows int) (*vfd.Mem, []byte) {
	t.Helper()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{uint64(rows), splitWidth}, Chunk: []uint64{1, splitWidth}})
	must(t, err)
	want := splitRows(rows)
	must(t, ds.Write(context.Background(), All([]uint64{uint64(rows), splitWidth}), want))
	must(t, f.Close(context.Background()))
	return mem, want
}

func splitOpen(t *testing.T, drv vfd.Driver, split int64) (*File, *Dataset) {
	t.Helper()
	return splitOpenCfg(t, drv, cache.Config{QuiescentBytes: 1 << 20, SplitReadBytes: split})
}

func splitOpenCfg(t *testing.T, drv vfd.Driver, cfg cache.Config) (*File, *Dataset) {
	t.Helper()
	f := tOpen(t, drv, &Options{CacheConfig: cfg})
	ds, err := f.OpenDataset(context.Background(), "d", nil)
	must(t, err)
	return f, ds
}

func readRows(ctx context.Context, ds *Dataset, from, n int) ([]byte, error) {
	got := make([]byte, n*splitWidth)
	err := ds.Read(ctx, Box([]uint64{uint64(from), 0}, []uint64{uint64(n), splitWidth}), got)
	return got, err
}

// Split reads return the stored bytes, for one chunk and for several
// (chunks straddling the cuts), and are split only above the threshold.
func TestSplitReadBytes(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	const rows = 8
	mem, want := splitImage(t, rows)
	cnt := vfd.NewCounting(mem)
	f, ds := splitOpen(t, cnt, 64<<10)
	c := f.Cache()
	for _, r := range []struct{ from, n int }{{0, 1}, {3, 1}, {1, 2}, {2, 5}, {0, rows}} {
		before, io := c.Stats(), cnt.Snapshot()
		got, err := readRows(ctx, ds, r.from, r.n)
		must(t, err)
		if !bytes.Equal(got, want[r.from*splitWidth:(r.from+r.n)*splitWidth]) {
			t.Fatalf("rows %d+%d: wrong bytes", r.from, r.n)
		}
		st, ops := c.Stats().Sub(before), cnt.Snapshot().Sub(io)
		if st.SplitReads != 1 || st.Loads != 0 || ops.Ops[vfd.OpReadV] != st.SplitShares+1 {
			t.Fatalf("rows %d+%d: %d split reads, %d loads, %d ReadV for %d helper shares; want 1, 0, shares+1",
				r.from, r.n, st.SplitReads, st.Loads, ops.Ops[vfd.OpReadV], st.SplitShares)
		}
	}

	// Threshold 256 KiB: one chunk (100 KiB) is read alone, three
	// (300 KiB) are split.
	f2, ds2 := splitOpen(t, mem, 256<<10)
	c2 := f2.Cache()
	got, err := readRows(ctx, ds2, 4, 1)
	must(t, err)
	if !bytes.Equal(got, want[4*splitWidth:5*splitWidth]) || c2.Stats().SplitReads != 0 {
		t.Fatalf("one chunk under the threshold: equal %v, %d split reads; want 0", bytes.Equal(got, want[4*splitWidth:5*splitWidth]), c2.Stats().SplitReads)
	}
	got, err = readRows(ctx, ds2, 5, 3)
	must(t, err)
	if !bytes.Equal(got, want[5*splitWidth:8*splitWidth]) || c2.Stats().SplitReads != 1 {
		t.Fatalf("three chunks over the threshold: equal %v, %d split reads; want 1", bytes.Equal(got, want[5*splitWidth:]), c2.Stats().SplitReads)
	}

	// Off: never split.
	f3, ds3 := splitOpen(t, mem, -1)
	got, err = readRows(ctx, ds3, 0, rows)
	must(t, err)
	if !bytes.Equal(got, want) || f3.Cache().Stats().SplitReads != 0 {
		t.Fatal("SplitReadBytes -1: wrong bytes or a split read")
	}
}

// chunkAt finds row r's stored bytes in the file image.
func chunkAt(t *testing.T, img, want []byte, r int) int {
	t.Helper()
	k := bytes.Index(img, want[r*splitWidth:(r+1)*splitWidth])
	if k < 0 {
		t.Fatalf("row %d not found in the file", r)
	}
	return k
}

// splitKinds are the two reads that split: a whole row (a direct read
// into the caller's buffer) and part of a row (a load into the cache,
// cache/splitload.go), each of row r of rows stored as want.
var splitKinds = []struct {
	name string
	read func(ctx context.Context, ds *Dataset, r int) ([]byte, error)
	want func(want []byte, r int) []byte
}{
	{"direct", func(ctx context.Context, ds *Dataset, r int) ([]byte, error) { return readRows(ctx, ds, r, 1) },
		func(want []byte, r int) []byte { return want[r*splitWidth : (r+1)*splitWidth] }},
	{"load", func(ctx context.Context, ds *Dataset, r int) ([]byte, error) { return readPart(ctx, ds, r, 10, 50) },
		func(want []byte, r int) []byte { return want[r*splitWidth+10 : r*splitWidth+60] }},
}

// readPart reads columns [col, col+n) of row r.
func readPart(ctx context.Context, ds *Dataset, r, col, n int) ([]byte, error) {
	got := make([]byte, n)
	err := ds.Read(ctx, Box([]uint64{uint64(r), uint64(col)}, []uint64{1, uint64(n)}), got)
	return got, err
}

// A damaged byte in either goroutine's share of a split direct read or
// split load is ErrCorrupt, every time, and nothing of the chunk stays
// cached.
func TestSplitCorrupt(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	mem, want := splitImage(t, 4)
	for _, kind := range splitKinds {
		for _, where := range []struct {
			name string
			at   int
		}{{"caller's half", 100}, {"helper's half", splitWidth - 100}} {
			img := append([]byte(nil), mem.Bytes()...)
			img[chunkAt(t, img, want, 2)+where.at] ^= 0x40
			// Not tOpen: the file is damaged on purpose, its check would fail.
			f, err := Open(ctx, "", &Options{Driver: vfd.NewMemFrom(img), CacheConfig: cache.Config{QuiescentBytes: 1 << 20, SplitReadBytes: 64 << 10}})
			must(t, err)
			ds, err := f.OpenDataset(ctx, "d", nil)
			must(t, err)
			for try := 0; try < 2; try++ {
				if _, err := kind.read(ctx, ds, 2); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s, %s damaged, try %d: %v, want ErrCorrupt", kind.name, where.name, try, err)
				}
			}
			if st := f.Cache().Stats(); st.SplitReads != 2 || st.Chunks != 0 {
				t.Fatalf("%s, %s damaged: %d split reads, %d chunks cached; want 2, 0", kind.name, where.name, st.SplitReads, st.Chunks)
			}
			// Undamaged rows still read right.
			got, err := kind.read(ctx, ds, 1)
			must(t, err)
			if !bytes.Equal(got, kind.want(want, 1)) {
				t.Fatalf("%s, %s damaged: row 1 wrong", kind.name, where.name)
			}
			must(t, f.Close(ctx))
		}
	}
}

// A failure of either goroutine's share of a split direct read or split
// load is an I/O error, never corruption, and leaves nothing cached; the
// next read of the chunk is right.
func TestSplitShareFault(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	mem, want := splitImage(t, 4)
	start := int64(chunkAt(t, mem.Bytes(), want, 1))
	for _, kind := range splitKinds {
		for _, share := range []struct {
			name string
			hits func(off int64) bool
		}{
			// The caller's share starts at the chunk; a helper's inside it.
			{"caller's", func(off int64) bool { return off == start }},
			{"helper's", func(off int64) bool { return off > start && off < start+splitWidth }},
		} {
			var hit atomic.Int64
			fault := vfd.NewFault(mem, vfd.Fail(vfd.TriggerFunc(func(i vfd.OpInfo) bool {
				if i.Op == vfd.OpReadV && share.hits(i.Off) {
					hit.Add(1)
					return true
				}
				return false
			})))
			f, ds := splitOpen(t, fault, 64<<10)
			_, err := kind.read(ctx, ds, 1)
			if hit.Load() != 1 || !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, ErrIO) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s, %s share failed (%d hits): %v; want vfd.ErrInjected as ErrIO, not ErrCorrupt", kind.name, share.name, hit.Load(), err)
			}
			if st := f.Cache().Stats(); st.SplitReads != 1 || st.Chunks != 0 {
				t.Fatalf("%s, %s share: %d split reads, %d chunks cached after the failure; want 1, 0", kind.name, share.name, st.SplitReads, st.Chunks)
			}
			fault.SetEnabled(false)
			got, err := kind.read(ctx, ds, 1)
			must(t, err)
			if !bytes.Equal(got, kind.want(want, 1)) {
				t.Fatalf("%s, %s share: read after the fault: wrong bytes", kind.name, share.name)
			}
		}
	}
}

// Many goroutines reading large runs of rows directly (split when a core
// is idle) while others rewrite rows whole and Flush: every row read is
// one version, written whole, and not older than the last write of it
// that completed before the read began (the reference model: a version
// per row). The cache is small, so rows written go direct or are evicted
// and reads find them on disk.
func TestSplitReadConcurrentModel(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	const rows = 12
	mem, _ := splitImage(t, rows)
	f, ds := splitOpenCfg(t, mem, cache.Config{QuiescentBytes: 256 << 10, SplitReadBytes: 64 << 10})
	// Row r at version v: v in its first 8 bytes, a pattern of r and v
	// after.
	rowOf := func(r int, v uint64) []byte {
		b := make([]byte, splitWidth)
		binary.LittleEndian.PutUint64(b, v)
		for i := 8; i < len(b); i++ {
			b[i] = byte(r)*31 ^ byte(v)*7 ^ byte(i%251)
		}
		return b
	}
	w := startRowWriters(t, ctx, f, ds, rows, rowOf)
	done := w.done
	var readers sync.WaitGroup
	for g := 0; g < 6; g++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; i < 25; i++ {
				from := (g*3 + i) % rows
				n := 1 + (g+i)%(rows-from)
				floor := make([]uint64, rows)
				for r := from; r < from+n; r++ {
					floor[r] = done[r].Load()
				}
				got, err := readRows(ctx, ds, from, n)
				if err != nil {
					t.Error(err)
					return
				}
				for r := from; r < from+n; r++ {
					b := got[(r-from)*splitWidth : (r-from+1)*splitWidth]
					v := binary.LittleEndian.Uint64(b)
					if !bytes.Equal(b, rowOf(r, v)) {
						t.Errorf("reader %d: row %d is not one whole version", g, r)
						return
					}
					if v < floor[r] {
						t.Errorf("reader %d: row %d at version %d, older than %d written before the read", g, r, v, floor[r])
						return
					}
				}
			}
		}()
	}
	readers.Wait()
	w.stop()
	if t.Failed() {
		return
	}
	if st := f.Cache().Stats(); st.SplitReads == 0 {
		t.Fatalf("no read was split (%d vector reads)", st.VectorReads)
	}
}

// rowWriters is the reference model of the concurrent split tests: rows of
// splitWidth bytes, each rewritten whole at increasing versions by two
// writer goroutines (one writer per row at a time, so a row's versions
// land in order) that also Flush now and then.
type rowWriters struct {
	done    []atomic.Uint64 // per row: the last version whose write completed
	halt    atomic.Bool
	writers sync.WaitGroup
}

// startRowWriters writes version 1 of every row, flushes, and starts the
// writers; rowOf(r, v) is row r's content at version v.
func startRowWriters(t *testing.T, ctx context.Context, f *File, ds *Dataset, rows int, rowOf func(r int, v uint64) []byte) *rowWriters {
	t.Helper()
	w := &rowWriters{done: make([]atomic.Uint64, rows)}
	for r := 0; r < rows; r++ {
		must(t, ds.Write(ctx, Box([]uint64{uint64(r), 0}, []uint64{1, splitWidth}), rowOf(r, 1)))
		w.done[r].Store(1)
	}
	must(t, f.Flush(ctx))
	mu := make([]sync.Mutex, rows)
	for k := 0; k < 2; k++ {
		w.writers.Add(1)
		go func() {
			defer w.writers.Done()
			for i := 0; !w.halt.Load(); i++ {
				r := (i*5 + k*7) % rows
				mu[r].Lock()
				v := w.done[r].Load() + 1
				err := ds.Write(ctx, Box([]uint64{uint64(r), 0}, []uint64{1, splitWidth}), rowOf(r, v))
				if err == nil {
					w.done[r].Store(v)
				}
				mu[r].Unlock()
				if err == nil && i%7 == 0 {
					err = f.Flush(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	return w
}

// stop ends the writers and waits for them.
func (w *rowWriters) stop() {
	w.halt.Store(true)
	w.writers.Wait()
}
