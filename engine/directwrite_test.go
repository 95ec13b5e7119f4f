package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// Direct writes (cache/directwrite.go): a write covering whole chunks of an
// unfiltered dataset whose chunks exceed the cache's bypass threshold goes
// from the caller's buffer to the file.

// dwRow is the chunk of the direct-write tests: one row of 4 KiB uint8,
// above the 2 KiB bypass threshold of dwOpts' 8 KiB cache.
const dwRow = 4096

// dwRows is the rows (chunks) of dwSpec's extent.
const dwRows = 6

func dwOpts() *Options { return &Options{CacheConfig: cache.Config{QuiescentBytes: 8 << 10}} }

var dwSpec = DatasetSpec{Type: Uint8, Shape: []uint64{dwRows, dwRow}, MaxShape: []uint64{Unlimited, dwRow}, Chunk: []uint64{1, dwRow}}

// recDriver records the extents of the WriteV calls made while on.
type recDriver struct {
	vfd.Driver
	mu    sync.Mutex
	on    bool
	calls [][]vfd.Extent
}

func (r *recDriver) WriteV(exts []vfd.Extent) error {
	r.mu.Lock()
	if r.on {
		r.calls = append(r.calls, append([]vfd.Extent(nil), exts...))
	}
	r.mu.Unlock()
	return r.Driver.WriteV(exts)
}

func (r *recDriver) record(on bool) [][]vfd.Extent {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = on
	c := r.calls
	r.calls = nil
	return c
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

// TestDirectWriteZeroCopy: a whole-chunk write above the threshold makes no
// chunk resident, creates nothing, and is one WriteV whose chunk extents
// are the caller's own bytes (same address), the CRC32C trailer beside
// them. Below the threshold (or filtered) the cached path runs as before.
func TestDirectWriteZeroCopy(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	rec := &recDriver{Driver: vfd.NewMem()}
	f := tCreate(t, rec, dwOpts())
	ds, err := f.CreateDataset(ctx, "d", dwSpec)
	must(t, err)
	c := f.Cache()
	before := c.Stats()

	one := pattern(dwRow, 1)
	rec.record(true)
	must(t, ds.Write(ctx, Box([]uint64{2, 0}, []uint64{1, dwRow}), one))
	calls := rec.record(false)
	st := c.Stats().Sub(before)
	if st.DirectWrites != 1 || st.Creates != 0 || st.Loads != 0 || st.Bypasses != 0 || c.Stats().Chunks != 0 || c.Stats().DirtyBytes != 0 {
		t.Fatalf("one chunk: direct %d creates %d loads %d bypasses %d, resident chunks %d, dirty %d; want 1 direct and nothing cached",
			st.DirectWrites, st.Creates, st.Loads, st.Bypasses, c.Stats().Chunks, c.Stats().DirtyBytes)
	}
	if len(calls) != 1 || len(calls[0]) != 2 {
		t.Fatalf("one chunk: %d WriteV calls (%v); want one of 2 extents", len(calls), calls)
	}
	x, tr := calls[0][0], calls[0][1]
	if unsafe.SliceData(x.Buf) != unsafe.SliceData(one) || len(x.Buf) != dwRow {
		t.Fatal("the chunk's extent is not the caller's buffer: it was copied")
	}
	if tr.Off != x.Off+dwRow || len(tr.Buf) != format.ChunkFrameOverhead || format.Trailer(tr.Buf) != ds.s.csum.Sum([]uint64{2, 0}, one) {
		t.Fatalf("trailer extent at %d (chunk at %d), %x", tr.Off, x.Off, tr.Buf)
	}

	// Several whole chunks in one call: every chunk extent aliases its row.
	all := pattern(6*dwRow, 2)
	rec.record(true)
	must(t, ds.Write(ctx, All([]uint64{6, dwRow}), all))
	calls = rec.record(false)
	seen := 0
	for _, call := range calls {
		for _, x := range call {
			if len(x.Buf) == dwRow {
				p := uintptr(unsafe.Pointer(unsafe.SliceData(x.Buf))) - uintptr(unsafe.Pointer(&all[0]))
				if p%dwRow != 0 || p >= uintptr(len(all)) {
					t.Fatalf("chunk extent does not alias a row of the caller's buffer (offset %d)", p)
				}
				seen++
			}
		}
	}
	if seen != 6 || c.Stats().Chunks != 0 || c.Stats().Sub(before).DirectWrites != 7 {
		t.Fatalf("six rows: %d aliased extents, %d resident, %d direct", seen, c.Stats().Chunks, c.Stats().Sub(before).DirectWrites)
	}
	ref := newRef(dwSpec.Shape, 1, nil)
	ref.write(All([]uint64{6, dwRow}), all)
	ref.verify(t, ds)

	// Below the threshold, and filtered datasets: the cached path.
	small, err := f.CreateDataset(ctx, "small", DatasetSpec{Type: Uint8, Shape: []uint64{4, 1024}, Chunk: []uint64{1, 1024}})
	must(t, err)
	zs, err := f.CreateDataset(ctx, "z", DatasetSpec{Type: Uint8, Shape: []uint64{2, dwRow}, Chunk: []uint64{1, dwRow}, Filters: []Filter{Zstd(1)}})
	must(t, err)
	b0 := c.Stats()
	must(t, small.Write(ctx, All([]uint64{4, 1024}), pattern(4096, 3)))
	must(t, zs.Write(ctx, All([]uint64{2, dwRow}), pattern(2*dwRow, 4)))
	if st := c.Stats().Sub(b0); st.DirectWrites != 0 || st.Creates != 6 {
		t.Fatalf("small and filtered chunks: %d direct writes, %d creates; want 0 and 6", st.DirectWrites, st.Creates)
	}
	must(t, f.Close(ctx))
	// Config.NoDirectWrites: the same write is bypassed (created, copied,
	// written, dropped) instead.
	f, err = Open(ctx, "", &Options{Driver: rec, CacheConfig: cache.Config{QuiescentBytes: 8 << 10, NoDirectWrites: true}})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	b0 = f.Cache().Stats()
	two := pattern(dwRow, 16)
	must(t, ds.Write(ctx, Box([]uint64{2, 0}, []uint64{1, dwRow}), two))
	ref.write(Box([]uint64{2, 0}, []uint64{1, dwRow}), two)
	if st := f.Cache().Stats().Sub(b0); st.DirectWrites != 0 || st.Creates != 1 || st.Bypasses != 1 {
		t.Fatalf("NoDirectWrites: %d direct, %d creates, %d bypasses; want 0, 1, 1", st.DirectWrites, st.Creates, st.Bypasses)
	}
	must(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: rec})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	ref.verify(t, ds)
	must(t, f.Close(ctx))
	if _, err := Check(ctx, "", &Options{Driver: rec}); err != nil {
		t.Fatal(err)
	}
}

// TestDirectWriteCoherence: a resident copy (dirty or clean) wins over the
// direct path; partial writes, shrinks, flushes and reopening after direct
// writes see the directly written bytes.
func TestDirectWriteCoherence(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	mem := vfd.NewMem()
	fd := vfd.NewFault(mem)
	f := tCreate(t, fd, dwOpts())
	ds, err := f.CreateDataset(ctx, "d", dwSpec)
	must(t, err)
	c := f.Cache()
	ref := newRef(dwSpec.Shape, 1, nil)
	write := func(sel Selection, buf []byte) {
		t.Helper()
		must(t, ds.Write(ctx, sel, buf))
		ref.write(sel, buf)
	}
	row := func(r uint64) Selection { return Box([]uint64{r, 0}, []uint64{1, dwRow}) }
	write(All([]uint64{6, dwRow}), pattern(6*dwRow, 5))
	must(t, f.Flush(ctx))

	// A partial write whose bypass write-back fails returns the error
	// and is not applied: nothing stays in the cache, the stored chunk
	// is still what reads see.
	half := Box([]uint64{1, 0}, []uint64{1, dwRow / 2})
	hb := pattern(dwRow/2, 6)
	fd.Add(vfd.Fail(vfd.Nth(vfd.OpWriteV, fd.Ops()[vfd.OpWriteV])))
	if err := ds.Write(ctx, half, hb); !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("failed write-back: %v", err)
	}
	if st := c.Stats(); st.Chunks != 0 || st.DirtyBytes != 0 {
		t.Fatalf("after a failed bypass write-back: %d chunks, %d dirty bytes; want none kept", st.Chunks, st.DirtyBytes)
	}
	ref.verify(t, ds)
	// A dirty resident copy: the same partial write while the bypass
	// threshold is higher stays in the cache, dirty.
	must(t, c.SetConfig(ctx, cache.Config{QuiescentBytes: 8 << 10, BypassBytes: 8 << 10}))
	write(half, hb)
	must(t, c.SetConfig(ctx, dwOpts().CacheConfig))
	if st := c.Stats(); st.Chunks != 1 || st.DirtyBytes == 0 {
		t.Fatalf("dirty resident copy: %d chunks, %d dirty bytes", st.Chunks, st.DirtyBytes)
	}
	ref.verify(t, ds)
	// A whole-chunk write of that chunk goes through the cache (dirty copy wins).
	b0 := c.Stats()
	w1 := pattern(dwRow, 7)
	write(row(1), w1)
	if st := c.Stats().Sub(b0); st.DirectWrites != 0 || c.Stats().Chunks != 1 {
		t.Fatalf("whole write over a dirty copy: %d direct writes, %d resident; want 0 and 1", st.DirectWrites, c.Stats().Chunks)
	}
	ref.verify(t, ds)
	// Flushed, the copy is clean and resident: still the cached path.
	must(t, f.Flush(ctx))
	if st := c.Stats(); st.Chunks != 1 || st.DirtyBytes != 0 {
		t.Fatalf("after flush: %d chunks, %d dirty", st.Chunks, st.DirtyBytes)
	}
	b0 = c.Stats()
	write(row(1), pattern(dwRow, 8))
	if st := c.Stats().Sub(b0); st.DirectWrites != 0 {
		t.Fatalf("whole write over a clean copy went direct")
	}
	ref.verify(t, ds)
	// Other rows are not resident: direct.
	b0 = c.Stats()
	write(Box([]uint64{2, 0}, []uint64{3, dwRow}), pattern(3*dwRow, 9))
	if st := c.Stats().Sub(b0); st.DirectWrites != 3 {
		t.Fatalf("three non-resident rows: %d direct writes", st.DirectWrites)
	}
	ref.verify(t, ds)
	// Partial write after a direct write: loaded from the direct image.
	p := Box([]uint64{3, 100}, []uint64{1, 50})
	write(p, pattern(50, 10))
	ref.verify(t, ds)
	// Shrink through directly written rows, then grow back: fill value.
	write(row(5), pattern(dwRow, 11))
	must(t, ds.SetExtent(ctx, []uint64{4, dwRow}))
	ref.resize([]uint64{4, dwRow})
	ref.verify(t, ds)
	must(t, ds.SetExtent(ctx, []uint64{6, dwRow}))
	ref.resize([]uint64{6, dwRow})
	ref.verify(t, ds)
	write(row(4), pattern(dwRow, 12))
	ref.verify(t, ds)
	// Close commits; reopen (a fresh, larger cache: nothing resident) sees it.
	must(t, f.Close(ctx))
	checkReopen(t, mem, "d", ref)
}

// checkReopen checks the closed file in mem (Check), opens it again and
// verifies dataset name against ref.
func checkReopen(t *testing.T, mem vfd.Driver, name string, ref *refArray) {
	t.Helper()
	if _, err := Check(context.Background(), "", &Options{Driver: mem}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(context.Background(), "", &Options{Driver: mem})
	must(t, err)
	ds, err := f.OpenDataset(context.Background(), name, nil)
	must(t, err)
	ref.verify(t, ds)
	must(t, f.Close(context.Background()))
}

// TestDirectWriteFailureKeepsOldData: a direct write whose WriteV fails
// returns the error (cause kept), publishes nothing and leaks no space: the
// previous contents stay visible and committed.
func TestDirectWriteFailureKeepsOldData(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	mem := vfd.NewMem()
	fd := vfd.NewFault(mem)
	f := tCreate(t, fd, dwOpts())
	ds, err := f.CreateDataset(ctx, "d", dwSpec)
	must(t, err)
	ref := newRef(dwSpec.Shape, 1, nil)
	all := pattern(6*dwRow, 13)
	must(t, ds.Write(ctx, All(dwSpec.Shape), all))
	ref.write(All(dwSpec.Shape), all)
	must(t, f.Flush(ctx))
	c := f.Cache()
	// Fail the next WriteV: the direct write of row 2.
	fd.Add(vfd.Fail(vfd.Nth(vfd.OpWriteV, fd.Ops()[vfd.OpWriteV])))
	b0 := c.Stats()
	err = ds.Write(ctx, Box([]uint64{2, 0}, []uint64{1, dwRow}), pattern(dwRow, 14))
	if !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("direct write with a failing WriteV: %v", err)
	}
	if st := c.Stats().Sub(b0); st.DirectWrites != 0 || c.Stats().Chunks != 0 {
		t.Fatalf("failed direct write: %d counted, %d resident", st.DirectWrites, c.Stats().Chunks)
	}
	ref.verify(t, ds) // the old row is still what reads see
	// Torn: half the bytes reach the new space, the write fails; the index
	// still names the old image.
	fd.Add(vfd.TornWrite(vfd.Nth(vfd.OpWriteV, fd.Ops()[vfd.OpWriteV]), 3))
	if err := ds.Write(ctx, Box([]uint64{3, 0}, []uint64{2, dwRow}), pattern(2*dwRow, 15)); err == nil {
		t.Fatal("torn direct write reported success")
	}
	ref.verify(t, ds)
	must(t, f.Close(ctx))
	checkReopen(t, mem, "d", ref)
}

// directWorkload is crashWorkload for direct writes: whole-row writes of an
// unfiltered dataset with chunks above the bypass threshold (direct),
// mixed with partial writes (cached, bypassed), flushes, a shrink, and a
// filtered dataset written through the cache.
var directWorkload = directWorkloadOf(dwRow)

// directWorkloadChunks is directWorkload with chunks of cols columns of a
// row: dwRow (above the bypass threshold) or smaller ones that go direct
// only because the cache is full (directFullCols). If st is not nil, it
// receives the cache's statistics before the close.
func directWorkloadChunks(st *cache.Stats, cols uint64) workload {
	return directWorkloadOpts(st, cols, dwOpts())
}

// directWorkloadOpts is directWorkloadChunks under opts.
func directWorkloadOpts(st *cache.Stats, cols uint64, opts *Options) workload {
	return defineWorkload(7, opts, func(w *wlRun) error {
		if st != nil {
			w.beforeClose = func(f *File) { *st = f.Cache().Stats() }
		}
		specs := map[string]DatasetSpec{
			"d": dwSpecCols(cols),
			"z": {Type: Uint16, Shape: []uint64{4, 64}, Chunk: []uint64{2, 32}, Filters: []Filter{Shuffle(), Zstd(1)}},
		}
		write := func(n int) func() error {
			return func() error {
				for i := 0; i < n; i++ {
					name, sel := "d", Selection{}
					r := w.refs["d"]
					switch k := w.rng.IntN(4); k {
					case 0, 1: // whole rows: direct
						lo := w.rng.Uint64N(r.dims[0])
						sel = Box([]uint64{lo, 0}, []uint64{1 + w.rng.Uint64N(r.dims[0]-lo), dwRow})
					case 2:
						sel = randomSelection(w.rng, r.dims)
					default:
						name = "z"
						sel = randomSelection(w.rng, w.refs["z"].dims)
					}
					buf := randomBytes(w.rng, int(sel.NumElements())*w.refs[name].elemSize)
					if err := w.sets[name].Write(w.ctx, sel, buf); err != nil {
						return err
					}
					w.refs[name].write(sel, buf)
				}
				return nil
			}
		}
		return steps(
			func() error { return w.create(specs, "d", "z") },
			write(4), w.flush,
			write(4), // crash here: the last flush's state
			w.flush,
			write(3),
			func() error { return w.setExtent("d", []uint64{3, dwRow}) },
			w.flush,
			func() error { return w.setExtent("d", []uint64{6, dwRow}) },
			write(4),
		)
	})
}

// TestDirectWriteCrashAtEveryWrite cuts the power at every mutating
// operation of directWorkload, direct writes included: a crash between a
// direct write and the next Flush leaves the last committed state.
func TestDirectWriteCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	requireDirectWrites(t, 1, dwRow)
	crashSweep(t, directWorkloadOf(dwRow), 1)
}

// directFullCols is the chunk width of the full-cache variants: 1 KiB
// chunks, at or below dwOpts' 2 KiB bypass threshold, so that every direct
// write they make is one into a full cache (cache/directwrite.go
// directWorthIt).
const directFullCols = dwRow / 4

func dwSpecCols(cols uint64) DatasetSpec {
	s := dwSpec
	s.Chunk = []uint64{1, cols}
	return s
}

// TestDirectWriteFullCacheCrashAndFault runs both sweeps over
// directWorkload with chunks that go direct only because the cache is
// full.
func TestDirectWriteFullCacheCrashAndFault(t *testing.T) {
	defer verifyNoLeaks(t)
	requireDirectWrites(t, 3, directFullCols)
	crashSweep(t, directWorkloadOf(directFullCols), 3)
	faultSweep(t, directWorkloadOf(directFullCols), 4)
}

// TestDirectWriteFaultAtEveryOperation injects an I/O error from every
// operation index of directWorkload on (each op of every direct write
// included): it reaches the caller, and the file reopens in its last
// committed state and passes the checker. (A single failed direct write in
// a live process: TestDirectWriteFailureKeepsOldData.)
func TestDirectWriteFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	requireDirectWrites(t, 2, dwRow)
	faultSweep(t, directWorkloadOf(dwRow), 2)
}

// requireDirectWrites fails t unless directWorkload with seed makes enough
// direct writes for the sweeps to mean something.
func requireDirectWrites(t *testing.T, seed, cols uint64) {
	t.Helper()
	var st cache.Stats
	if _, err := directWorkloadChunks(&st, cols)(vfd.NewMem(), seed, snapshots{}); err != nil {
		t.Fatal(err)
	}
	if st.DirectWrites < 4 {
		t.Fatalf("the workload made %d direct writes", st.DirectWrites)
	}
	t.Logf("%d direct writes", st.DirectWrites)
}

// directWorkloadOf adapts directWorkload to the sweeps' workload type.
func directWorkloadOf(cols uint64) workload { return directWorkloadChunks(nil, cols) }

// TestDirectWriteConcurrentDifferential: goroutines write (whole rows,
// direct; partial boxes, cached) and read their own rows of a shared
// dataset, and read a shared row that one of them rewrites whole (each
// read must see one complete version), while another goroutine flushes;
// a filtered dataset is written alongside through the cache. Every read
// matches the in-memory reference; after close and reopen the file equals
// it and passes the checker. Run under -race by `go test -race`.
func TestDirectWriteConcurrentDifferential(t *testing.T) {
	directConcurrentDifferential(t, dwRow, dwOpts())
}

// TestDirectWriteFullCacheConcurrentDifferential is the same with chunks
// that go direct only because the cache is full.
func TestDirectWriteFullCacheConcurrentDifferential(t *testing.T) {
	directConcurrentDifferential(t, directFullCols, dwOpts())
}

// TestDirectWriteThresholdConcurrentDifferential is the same with chunks
// that go direct only because they reach cache.Config.DirectWriteBytes,
// in a cache with room for all of them (far below its bypass threshold).
func TestDirectWriteThresholdConcurrentDifferential(t *testing.T) {
	directConcurrentDifferential(t, directFullCols, &Options{CacheConfig: cache.Config{
		QuiescentBytes: 4 << 20, DirectWriteBytes: int64(directFullCols)}})
}

// TestAdmitOnRereadConcurrentDifferential is the same with a cache that
// keeps only chunks read again (cache.Config.AdmitOnReread), so that most
// reads of chunks not resident decode them without keeping them, into a
// chunk scattered and given back or straight into the caller's buffer,
// while other goroutines write and flush the same chunks.
func TestAdmitOnRereadConcurrentDifferential(t *testing.T) {
	directConcurrentDifferential(t, directFullCols, &Options{CacheConfig: cache.Config{
		QuiescentBytes: 4 << 20, DirectWriteBytes: int64(directFullCols), AdmitOnReread: true}})
}

func directConcurrentDifferential(t *testing.T, cols uint64, opts *Options) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const workers, rowsEach, ops = 4, 3, 60
	mem := vfd.NewMem()
	f := tCreate(t, mem, opts)
	shape := []uint64{workers*rowsEach + 1, dwRow} // last row: shared
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: shape, Chunk: []uint64{1, cols}})
	must(t, err)
	zs, err := f.CreateDataset(ctx, "z", DatasetSpec{Type: Uint16, Shape: []uint64{workers, 256}, Chunk: []uint64{1, 128}, Filters: []Filter{Zstd(1)}})
	must(t, err)
	ref := newRef(shape, 1, nil)
	zref := newRef([]uint64{workers, 256}, 2, nil)
	shared := uint64(workers * rowsEach)
	var refMu sync.Mutex // guards ref's shared row and the write of rows into ref.data
	var wg sync.WaitGroup
	errs := make(chan error, workers+2)
	stop := make(chan struct{})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			lo := uint64(w * rowsEach)
			mine := newRef([]uint64{rowsEach, dwRow}, 1, nil) // this worker's rows
			for i := 0; i < ops; i++ {
				switch rng.IntN(6) {
				case 0, 1: // whole rows: direct
					a := rng.Uint64N(rowsEach)
					n := 1 + rng.Uint64N(rowsEach-a)
					buf := randomBytes(rng, int(n)*dwRow)
					if err := ds.Write(ctx, Box([]uint64{lo + a, 0}, []uint64{n, dwRow}), buf); err != nil {
						errs <- err
						return
					}
					mine.write(Box([]uint64{a, 0}, []uint64{n, dwRow}), buf)
				case 2: // partial: cached
					sel := randomSelection(rng, []uint64{rowsEach, dwRow})
					buf := randomBytes(rng, int(sel.NumElements()))
					h := sel.hyper()
					start := append([]uint64(nil), h.Start...)
					start[0] += lo
					if err := ds.Write(ctx, Hyperslab(start, h.Stride, h.Count, h.Block), buf); err != nil {
						errs <- err
						return
					}
					mine.write(sel, buf)
				case 3: // read back own rows (direct or cached)
					got := make([]byte, rowsEach*dwRow)
					if err := ds.Read(ctx, Box([]uint64{lo, 0}, []uint64{rowsEach, dwRow}), got); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, mine.data) {
						errs <- fmt.Errorf("worker %d op %d: rows differ from the reference", w, i)
						return
					}
				case 4: // the shared row: whole, one byte value
					v := byte(rng.IntN(255) + 1)
					refMu.Lock() // one writer at a time keeps the reference in order
					err := ds.Write(ctx, Box([]uint64{shared, 0}, []uint64{1, dwRow}), bytes.Repeat([]byte{v}, dwRow))
					if err == nil {
						copy(ref.data[shared*dwRow:], bytes.Repeat([]byte{v}, dwRow))
					}
					refMu.Unlock()
					if err != nil {
						errs <- err
						return
					}
				default: // read the shared row: one whole version
					got := make([]byte, dwRow)
					if err := ds.Read(ctx, Box([]uint64{shared, 0}, []uint64{1, dwRow}), got); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, bytes.Repeat(got[:1], dwRow)) {
						errs <- fmt.Errorf("worker %d: shared row read torn", w)
						return
					}
					zb := randomBytes(rng, 256*2)
					if err := zs.Write(ctx, Box([]uint64{uint64(w), 0}, []uint64{1, 256}), zb); err != nil {
						errs <- err
						return
					}
					refMu.Lock()
					zref.write(Box([]uint64{uint64(w), 0}, []uint64{1, 256}), zb)
					refMu.Unlock()
				}
			}
			refMu.Lock()
			copy(ref.data[lo*dwRow:], mine.data)
			refMu.Unlock()
		}(w)
	}
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() {
		defer fwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := f.Flush(ctx); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	fwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := f.Cache().Stats(); st.DirectWrites == 0 {
		t.Fatal("no direct writes happened")
	}
	ref.verify(t, ds)
	zref.verify(t, zs)
	must(t, f.Close(ctx))
	if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
		t.Fatal(err)
	}
	f, err = Open(ctx, "", &Options{Driver: mem})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	zs, err = f.OpenDataset(ctx, "z", nil)
	must(t, err)
	ref.verify(t, ds)
	zref.verify(t, zs)
	must(t, f.Close(ctx))
}
