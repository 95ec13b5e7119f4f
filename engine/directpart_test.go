package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// partSpec is a contiguous dataset of 8 pieces of 64 KiB (64 rows of 1 KiB).
var partSpec = DatasetSpec{Type: Uint8, Shape: []uint64{512, 1024}, Layout: Contiguous}

// partCache is small enough that a 64 KiB piece is above its bypass
// threshold (QuiescentBytes/4): reads of part of a piece go directly.
var partCache = cache.Config{QuiescentBytes: 128 << 10}

// TestDirectPartDifferential runs random reads (mostly of parts of
// pieces), writes (of part of pieces, and whole rows that go directly),
// flushes and reopens of a contiguous dataset against the model, in a
// cache whose bypass threshold is below the piece size, and checks that
// the reads of part of pieces went directly (no load) and, after a reopen,
// with one vector read of exactly the pieces they touch.
func TestDirectPartDifferential(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(12, 5))
	drv := vfd.NewCounting(vfd.NewMem())
	// The bypass threshold is below the piece size; the cache is large
	// enough that the engine admits a read of several pieces at once.
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20, BypassBytes: 32 << 10}}
	f := tCreate(t, drv, opts)
	ds, err := f.CreateDataset(ctx, "c", partSpec)
	must(t, err)
	ref := newRef(partSpec.Shape, 1, nil)
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(16); {
		case op < 4:
			sel := randomSelection(rng, ref.dims)
			buf := randomBytes(rng, int(sel.NumElements()))
			must(t, ds.Write(ctx, sel, buf))
			ref.write(sel, buf)
		case op < 6: // whole pieces: the direct write
			p := uint64(rng.IntN(8))
			sel := Box([]uint64{64 * p, 0}, []uint64{64 * uint64(1+rng.IntN(int(8-p))), 1024})
			buf := randomBytes(rng, int(sel.NumElements()))
			must(t, ds.Write(ctx, sel, buf))
			ref.write(sel, buf)
		case op < 13:
			sel := randomSelection(rng, ref.dims)
			buf := make([]byte, sel.NumElements())
			must(t, ds.Read(ctx, sel, buf))
			if !bytes.Equal(buf, ref.read(sel)) {
				t.Fatalf("step %d: read %v differs", step, sel.hyper())
			}
		case op < 15:
			must(t, f.Flush(ctx))
		default:
			must(t, f.Close(ctx))
			f = tOpen(t, drv, opts)
			ds, err = f.OpenDataset(ctx, "c", nil)
			must(t, err)
			// Columns 100-299 of rows 70-200: parts of pieces 1-3, not
			// contiguous in the buffer: one vector read of the three
			// pieces, nothing else, and nothing is loaded.
			sel := Box([]uint64{70, 100}, []uint64{131, 200})
			before, cb := f.Cache().Stats(), drv.Snapshot()
			buf := make([]byte, sel.NumElements())
			must(t, ds.Read(ctx, sel, buf))
			if !bytes.Equal(buf, ref.read(sel)) {
				t.Fatalf("step %d: column slab differs", step)
			}
			st, ca := f.Cache().Stats(), drv.Snapshot()
			if n := st.VectorReads - before.VectorReads; st.Loads != before.Loads || n != 1 {
				t.Fatalf("column slab: %d loads, %d vector reads, want 0 and 1", st.Loads-before.Loads, n)
			}
			if n := ca.BytesRead() - cb.BytesRead(); n != 3<<16 {
				t.Fatalf("column slab of 3 pieces read %d bytes", n)
			}
		}
	}
	ref.verify(t, ds)
	if st := f.Cache().Stats(); st.DirectWrites == 0 {
		t.Fatal("no whole piece went directly to the file")
	}
}

// TestDirectPartCorrupt: a byte flipped inside one piece fails a direct
// read of part of it with ErrCorrupt; the neighbouring pieces still read
// fine in a separate call.
func TestDirectPartCorrupt(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: partCache}, noCheck("the test flips a byte inside a stored chunk"))
	ds, err := f.CreateDataset(ctx, "c", partSpec)
	must(t, err)
	data := randomBytes(rand.New(rand.NewPCG(1, 2)), 512*1024)
	must(t, ds.Write(ctx, All(partSpec.Shape), data))
	must(t, f.Flush(ctx))
	exts, err := ds.ChunkExtents(ctx)
	must(t, err)
	must(t, f.Close(ctx))
	// Row 150, column 7: inside piece 2 (rows 128-191).
	b := []byte{0}
	off := exts[0].Off + 150*1024 + 7
	_, _ = mem.ReadAt(b, off)
	b[0] ^= 0x10
	_, _ = mem.WriteAt(b, off)
	f, err = Open(ctx, "", &Options{Driver: mem, CacheConfig: partCache, ReadOnly: true})
	must(t, err)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "c", nil)
	must(t, err)
	read := func(r0, n uint64) ([]byte, error) {
		sel := Box([]uint64{r0, 5}, []uint64{n, 10})
		buf := make([]byte, sel.NumElements())
		return buf, ds.Read(ctx, sel, buf)
	}
	want := func(r0, n uint64) []byte {
		var w []byte
		for r := r0; r < r0+n; r++ {
			w = append(w, data[r*1024+5:r*1024+15]...)
		}
		return w
	}
	// The damaged byte is outside the columns read: the piece's checksum
	// still catches it.
	if _, err := read(130, 4); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("part of a damaged piece: %v", err)
	}
	if _, err := read(100, 80); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("parts of pieces 1-2: %v", err)
	}
	for _, r := range [][2]uint64{{64, 64}, {192, 64}, {0, 128}, {192, 320}} {
		got, err := read(r[0], r[1])
		must(t, err)
		if !bytes.Equal(got, want(r[0], r[1])) {
			t.Fatalf("rows %d+%d differ", r[0], r[1])
		}
	}
	if st := f.Cache().Stats(); st.Loads != 0 {
		t.Fatalf("%d loads: the reads did not go directly", st.Loads)
	}
}

// TestDirectPartDirtyWins: a piece resident and dirty in the cache is
// served from memory while its neighbours are read directly.
func TestDirectPartDirtyWins(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 20}})
	ds, err := f.CreateDataset(ctx, "c", partSpec)
	must(t, err)
	ref := newRef(partSpec.Shape, 1, nil)
	data := randomBytes(rand.New(rand.NewPCG(1, 3)), 512*1024)
	must(t, ds.Write(ctx, All(partSpec.Shape), data))
	ref.write(All(partSpec.Shape), data)
	must(t, f.Flush(ctx))
	must(t, f.Close(ctx))
	f = tOpen(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 20}})
	ds, err = f.OpenDataset(ctx, "c", nil)
	must(t, err)
	// Part of piece 2 becomes dirty and resident (the bypass threshold,
	// 1 MiB, keeps it).
	sel := Box([]uint64{140, 0}, []uint64{10, 1024})
	buf := bytes.Repeat([]byte{0xAB}, int(sel.NumElements()))
	must(t, ds.Write(ctx, sel, buf))
	ref.write(sel, buf)
	c := f.Cache()
	cfg := c.Config()
	cfg.BypassBytes = 1 // now every piece is above it: misses go directly
	must(t, c.SetConfig(ctx, cfg))
	before := c.Stats()
	rd := Box([]uint64{100, 3}, []uint64{100, 500}) // parts of pieces 1-3
	got := make([]byte, rd.NumElements())
	must(t, ds.Read(ctx, rd, got))
	if !bytes.Equal(got, ref.read(rd)) {
		t.Fatal("the dirty piece lost to the disk")
	}
	if st := c.Stats(); st.Loads != before.Loads || st.Hits == before.Hits {
		t.Fatalf("%d loads, %d hits: want the neighbours direct and the dirty piece a hit", st.Loads-before.Loads, st.Hits-before.Hits)
	}
}

// TestDirectPartConcurrentWriter: readers read parts of pieces directly
// while a writer rewrites an overlapping region with one value per
// version, directly and through the cache, and flushes (-race). The
// serializer orders overlapping requests, so every read sees one version
// whole, and versions never go back.
func TestDirectPartConcurrentWriter(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: partCache})
	ds, err := f.CreateDataset(ctx, "c", partSpec)
	must(t, err)
	const versions = 40
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 1; v <= versions; v++ {
			// Rows 64-255 whole (direct writes of pieces 1-3), or a
			// column band of them (through the cache).
			sel := Box([]uint64{64, 0}, []uint64{192, 1024})
			if v%3 == 0 {
				sel = Box([]uint64{64, 0}, []uint64{192, 600})
			}
			buf := bytes.Repeat([]byte{byte(v)}, int(sel.NumElements()))
			if err := ds.Write(ctx, sel, buf); err != nil {
				errs <- err
				return
			}
			if v%5 == 0 {
				if err := f.Flush(ctx); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			last := byte(0)
			for i := 0; i < 150; i++ {
				r0 := 64 + uint64(rng.IntN(150))
				sel := Box([]uint64{r0, uint64(rng.IntN(100))}, []uint64{uint64(1 + rng.IntN(int(256-r0))), uint64(1 + rng.IntN(500))})
				buf := make([]byte, sel.NumElements())
				if err := ds.Read(ctx, sel, buf); err != nil {
					errs <- err
					return
				}
				for _, b := range buf {
					if b != buf[0] {
						errs <- fmt.Errorf("read %v saw versions %d and %d", sel.hyper(), buf[0], b)
						return
					}
				}
				if buf[0] < last {
					errs <- fmt.Errorf("version went back from %d to %d", last, buf[0])
					return
				}
				last = buf[0]
			}
		}(r)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// directPartWorkload mixes direct reads of part of pieces, direct writes of
// whole pieces and writes of parts through the cache, with flushes, on a
// contiguous dataset in a cache that bypasses its pieces. Reads are
// checked against the model with t.
func directPartWorkload(t *testing.T) workload {
	return defineWorkload(12, &Options{CacheConfig: partCache}, func(w *wlRun) error {
		spec := DatasetSpec{Type: Uint8, Shape: []uint64{256, 1024}, Layout: Contiguous}
		if err := w.create(map[string]DatasetSpec{"c": spec}, "c"); err != nil {
			return err
		}
		ds, ref := w.sets["c"], w.refs["c"]
		for round := 0; round < 3; round++ {
			for i := 0; i < 3; i++ {
				sel := randomSelection(w.rng, ref.dims)
				if i == 0 {
					sel = Box([]uint64{64 * uint64(w.rng.IntN(4)), 0}, []uint64{64, 1024})
				}
				buf := randomBytes(w.rng, int(sel.NumElements()))
				if err := ds.Write(w.ctx, sel, buf); err != nil {
					return err
				}
				ref.write(sel, buf)
				rs := randomSelection(w.rng, ref.dims)
				got := make([]byte, rs.NumElements())
				if err := ds.Read(w.ctx, rs, got); err != nil {
					return err
				}
				if !bytes.Equal(got, ref.read(rs)) {
					t.Errorf("seed %d round %d: read %v differs", w.seed, round, rs.hyper())
				}
			}
			if err := w.flush(); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestDirectPartFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, directPartWorkload(t), 3)
}

func TestDirectPartCrashAtEveryWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash sweep")
	}
	defer verifyNoLeaks(t)
	crashSweep(t, directPartWorkload(t), 4)
}

// bypassAll puts every chunk above the bypass threshold: every read of a
// chunk not resident goes directly (whole or in part).
var bypassAll = cache.Config{QuiescentBytes: 4 << 10, BypassBytes: 1}

// TestDirectPartSparseFault and TestDirectPartVlenFault run the sparse and
// variable-length fault sweeps with every read of a stored chunk going
// directly (frames, and selection sections alone for DefinedElements).
func TestDirectPartSparseFault(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, sparseWorkloadWith(bypassAll), 5)
}

func TestDirectPartVlenFault(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, vlenWorkloadWith(bypassAll), 6)
}

// TestDirectPartSparse: with every chunk above the bypass threshold,
// DefinedElements reads only the header and selection section of each
// stored sparse chunk, and value reads decode whole frames directly;
// both agree with what the cached path returned, and nothing is loaded.
func TestDirectPartSparse(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewCounting(vfd.NewMem())
	f := tCreate(t, drv, nil)
	spec := DatasetSpec{Type: Int32, Shape: []uint64{256, 256}, Chunk: []uint64{64, 64}, Layout: Sparse}
	ds, err := f.CreateDataset(ctx, "s", spec)
	must(t, err)
	rng := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 200; i++ {
		sel := Box([]uint64{uint64(rng.IntN(250)), uint64(rng.IntN(250))}, []uint64{uint64(1 + rng.IntN(6)), uint64(1 + rng.IntN(6))})
		must(t, ds.Write(ctx, sel, randomBytes(rng, int(sel.NumElements())*4)))
	}
	all := All(spec.Shape)
	want := make([]byte, 256*256*4)
	must(t, ds.Read(ctx, all, want))
	wantDef, err := ds.DefinedElements(ctx, all)
	must(t, err)
	must(t, f.Flush(ctx))
	exts, err := ds.ChunkExtents(ctx)
	must(t, err)
	var stored int64
	for _, e := range exts {
		stored += e.Size
	}
	must(t, f.Close(ctx))
	f = tOpen(t, drv, &Options{CacheConfig: cache.Config{BypassBytes: 1}})
	ds, err = f.OpenDataset(ctx, "s", nil)
	must(t, err)
	cb := drv.Snapshot()
	def, err := ds.DefinedElements(ctx, all)
	must(t, err)
	if fmt.Sprint(def) != fmt.Sprint(wantDef) {
		t.Fatal("defined elements differ")
	}
	if n := drv.Snapshot().BytesRead() - cb.BytesRead(); n >= stored {
		t.Fatalf("DefinedElements read %d bytes of %d stored: not only the selections", n, stored)
	}
	got := make([]byte, len(want))
	must(t, ds.Read(ctx, all, got))
	if !bytes.Equal(got, want) {
		t.Fatal("values differ")
	}
	if st := f.Cache().Stats(); st.Loads != 0 {
		t.Fatalf("%d loads: the reads did not go directly", st.Loads)
	}
}

// TestDirectReadAllocs: a steady-state direct read of whole pieces
// allocates a bounded number of objects per call, not per piece.
func TestDirectReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "c", partSpec)
	must(t, err)
	must(t, ds.Write(ctx, All(partSpec.Shape), make([]byte, 512*1024)))
	must(t, f.Close(ctx))
	// Nothing resident: every piece goes directly, every time.
	f = tOpen(t, mem, &Options{ReadOnly: true})
	ds, err = f.OpenDataset(ctx, "c", nil)
	must(t, err)
	allocs := func(pieces uint64) float64 {
		sel := Box([]uint64{0, 0}, []uint64{64 * pieces, 1024})
		buf := make([]byte, sel.NumElements())
		return testing.AllocsPerRun(20, func() {
			if err := ds.Read(ctx, sel, buf); err != nil {
				t.Fatal(err)
			}
		})
	}
	one, eight := allocs(1), allocs(8)
	t.Logf("allocations per read: %.0f for one piece, %.0f for eight", one, eight)
	if per := (eight - one) / 7; per > 2 {
		t.Fatalf("%.1f allocations per piece read directly", per)
	}
}

// TestDirectReadLarge: a direct read of 64 whole pieces is one vector
// read; the bytes are right, a damaged piece first or last in the read
// fails it with ErrCorrupt, and a read of the pieces after it succeeds.
func TestDirectReadLarge(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{4096, 1024}, Layout: Contiguous} // 64 pieces
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "c", spec)
	must(t, err)
	data := randomBytes(rand.New(rand.NewPCG(6, 6)), 4096*1024)
	must(t, ds.Write(ctx, All(spec.Shape), data))
	must(t, f.Flush(ctx))
	exts, err := ds.ChunkExtents(ctx)
	must(t, err)
	must(t, f.Close(ctx))
	open := func() (*File, *Dataset) {
		f, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true})
		must(t, err)
		ds, err := f.OpenDataset(ctx, "c", nil)
		must(t, err)
		return f, ds
	}
	f, ds = open()
	got := make([]byte, len(data))
	before := f.Cache().Stats()
	must(t, ds.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, data) {
		t.Fatal("read differs")
	}
	// One vector read, which a split read (cache/splitread.go) shares
	// with helpers: each share is one more ReadV.
	if st := f.Cache().Stats().Sub(before); st.Loads != 0 || st.VectorReads-st.SplitShares != 1 {
		t.Fatalf("%d loads, %d vector reads (%d by split helpers): want 0 and 1", st.Loads, st.VectorReads, st.SplitShares)
	}
	must(t, f.Close(ctx))
	for _, p := range []int64{0, 63} {
		b := []byte{0}
		off := exts[0].Off + p<<16 + 999
		_, _ = mem.ReadAt(b, off)
		b[0] ^= 1
		_, _ = mem.WriteAt(b, off)
		f, ds = open()
		if err := ds.Read(ctx, All(spec.Shape), got); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("piece %d damaged: %v", p, err)
		}
		q := (p + 1) % 63 // pieces q and q+1 are undamaged
		sel := Box([]uint64{uint64(q) * 64, 0}, []uint64{64 * 2, 1024})
		buf := make([]byte, sel.NumElements())
		must(t, ds.Read(ctx, sel, buf))
		if !bytes.Equal(buf, data[q<<16:(q+2)<<16]) {
			t.Fatalf("pieces %d-%d differ", q, q+1)
		}
		must(t, f.Close(ctx))
		b[0] ^= 1
		_, _ = mem.WriteAt(b, off)
	}
}
