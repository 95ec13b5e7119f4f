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

// TestContiguousDefault: a fixed-shape spec without a chunk shape, no
// filters and at most contigDefaultMax bytes is contiguous; anything else
// without a chunk shape is refused as before, and a chunk shape keeps
// the chunked layout.
func TestContiguousDefault(t *testing.T) {
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset(context.Background(), "small", DatasetSpec{Type: Float64, Shape: []uint64{128, 128}})
	must(t, err)
	if ds.Layout() != Contiguous || ds.IndexKind() != "none" {
		t.Fatalf("layout %v, index %s", ds.Layout(), ds.IndexKind())
	}
	if c := ds.Chunk(); c[1] != 128 || c[0]*128*8 > contigPieceBytes {
		t.Fatalf("piece shape %v", c)
	}
	for name, spec := range map[string]DatasetSpec{
		"too large": {Type: Float64, Shape: []uint64{1024, 1024}},
		"growable":  {Type: Float64, Shape: []uint64{4}, MaxShape: []uint64{Unlimited}},
		"filtered":  {Type: Float64, Shape: []uint64{4}, Filters: []Filter{Zstd(1)}},
	} {
		if _, err := f.CreateDataset(context.Background(), name, spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s without a chunk shape: %v", name, err)
		}
	}
	for name, spec := range map[string]DatasetSpec{
		"contiguous with chunk": {Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{2}, Layout: Contiguous},
		"contiguous growable":   {Type: Uint8, Shape: []uint64{4}, MaxShape: []uint64{8}, Layout: Contiguous},
		"contiguous filtered":   {Type: Uint8, Shape: []uint64{4}, Filters: []Filter{LZ4()}, Layout: Contiguous},
	} {
		if _, err := f.CreateDataset(context.Background(), name, spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ch, err := f.CreateDataset(context.Background(), "chunked", DatasetSpec{Type: Float64, Shape: []uint64{128, 128}, Chunk: []uint64{16, 16}})
	must(t, err)
	if ch.Layout() != Chunked {
		t.Fatalf("with a chunk shape: %v", ch.Layout())
	}
	big, err := f.CreateDataset(context.Background(), "big", DatasetSpec{Type: Uint8, Shape: []uint64{3 << 20}, Layout: Contiguous})
	must(t, err)
	if big.Layout() != Contiguous {
		t.Fatal(big.Layout())
	}
	if err := big.SetExtent(context.Background(), []uint64{1 << 20}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("shrinking a contiguous dataset: %v", err)
	}
}

// TestContiguousDifferential runs random writes, reads, flushes and
// close/reopen cycles on contiguous datasets against the model, with a
// cache smaller than a dataset, and checks the storage stays one extent
// of the dataset's size.
func TestContiguousDifferential(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []struct {
		name  string
		cache int64
		spec  DatasetSpec
	}{
		{"default-small", 16 << 10, DatasetSpec{Type: Int32, Shape: []uint64{40, 30}, Fill: []byte{9, 0, 0, 0}}},
		{"many-pieces", 96 << 10, DatasetSpec{Type: Uint16, Shape: []uint64{300, 257}, Layout: Contiguous}},
		{"rank-3", 64 << 10, DatasetSpec{Type: Float32, Shape: []uint64{5, 7, 9}}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(cfg.cache)))
			drv := vfd.NewMem()
			opts := &Options{CacheConfig: cache.Config{QuiescentBytes: cfg.cache}}
			f := tCreate(t, drv, opts)
			ds, err := f.CreateDataset(ctx, "c", cfg.spec)
			must(t, err)
			if ds.Layout() != Contiguous {
				t.Fatalf("layout %v", ds.Layout())
			}
			es := cfg.spec.Type.Size()
			ref := newRef(cfg.spec.Shape, es, cfg.spec.Fill)
			size := prod(cfg.spec.Shape) * uint64(es)
			for step := 0; step < 200; step++ {
				switch op := rng.IntN(12); {
				case op < 5:
					sel := randomSelection(rng, ref.dims)
					buf := randomBytes(rng, int(sel.NumElements())*es)
					must(t, ds.Write(ctx, sel, buf))
					ref.write(sel, buf)
				case op < 8:
					sel := randomSelection(rng, ref.dims)
					buf := make([]byte, sel.NumElements()*uint64(es))
					must(t, ds.Read(ctx, sel, buf))
					if !bytes.Equal(buf, ref.read(sel)) {
						t.Fatalf("step %d: read %v differs", step, sel.hyper())
					}
				case op < 10:
					must(t, f.Flush(ctx))
					st, err := ds.Storage(ctx)
					must(t, err)
					exts, err := ds.ChunkExtents(ctx)
					must(t, err)
					if st.StoredBytes != size || len(exts) != 1 || exts[0].Size != int64(size) {
						t.Fatalf("step %d: stored %d bytes in %d extents, want one of %d", step, st.StoredBytes, len(exts), size)
					}
				default:
					must(t, f.Close(ctx))
					f = tOpen(t, drv, opts)
					ds, err = f.OpenDataset(ctx, "c", nil)
					must(t, err)
				}
			}
			ref.verify(t, ds)
			// Every commit copies the extent to new space and frees the
			// old one: the file stays a few extents large.
			must(t, f.Flush(ctx))
			if sz, _ := drv.Size(); sz > int64(4*size)+1<<20 {
				t.Fatalf("file of %d bytes for a %d-byte dataset", sz, size)
			}
		})
	}
}

// TestContiguousConcurrent: readers of one half of a contiguous dataset
// run under -race while a writer rewrites the other half and flushes, in
// a cache that holds only a few pieces.
func TestContiguousConcurrent(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewMem()
	f := tCreate(t, drv, &Options{CacheConfig: cache.Config{QuiescentBytes: 48 << 10}})
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{400, 1024}, Layout: Contiguous}
	ds, err := f.CreateDataset(ctx, "c", spec)
	must(t, err)
	ref := newRef(spec.Shape, 1, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	half := []uint64{200, 1024}
	for i := 0; i < 30; i++ {
		sel := randomSelection(rng, half)
		buf := randomBytes(rng, int(sel.NumElements()))
		must(t, ds.Write(ctx, sel, buf))
		ref.write(sel, buf)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for i := 0; i < 30; i++ {
				sel := randomSelection(rng, half)
				buf := make([]byte, sel.NumElements())
				if err := ds.Read(ctx, sel, buf); err != nil || !bytes.Equal(buf, ref.read(sel)) {
					errc <- fmt.Errorf("reader %d: %v differs (%v)", g, sel.hyper(), err)
					return
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 7))
		for i := 0; i < 30; i++ {
			sel := randomSelection(rng, half)
			start := clone(sel.hyper().Start)
			start[0] += 200
			w := Hyperslab(start, sel.hyper().Stride, sel.hyper().Count, sel.hyper().Block)
			err := ds.Write(ctx, w, randomBytes(rng, int(w.NumElements())))
			if err == nil && i%5 == 4 {
				err = f.Flush(ctx)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

// TestContiguousCorrupt: a damaged byte of the extent is ErrCorrupt on
// read and reported by Check.
func TestContiguousCorrupt(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil, noCheck("the test flips a byte of the contiguous extent"))
	ds, err := f.CreateDataset(ctx, "c", DatasetSpec{Type: Uint8, Shape: []uint64{1000}})
	must(t, err)
	must(t, ds.Write(ctx, All([]uint64{1000}), bytes.Repeat([]byte{5}, 1000)))
	must(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: mem, ReadOnly: true})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "c", nil)
	must(t, err)
	exts, err := ds.ChunkExtents(ctx)
	must(t, err)
	f.Close(ctx)
	b := []byte{0}
	_, _ = mem.ReadAt(b, exts[0].Off+500)
	b[0] ^= 1
	_, _ = mem.WriteAt(b, exts[0].Off+500)
	f, err = Open(ctx, "", &Options{Driver: mem, ReadOnly: true})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "c", nil)
	must(t, err)
	if err := ds.Read(ctx, Box([]uint64{400}, []uint64{200}), make([]byte, 200)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read: %v", err)
	}
	f.Close(ctx)
	if _, err := Check(ctx, "", &Options{Driver: mem}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("check: %v", err)
	}
}

// contigCrashWorkload is crashWorkload for contiguous datasets: writes
// (including ones that reach pieces never stored), flushes and a close.
var contigCrashWorkload = defineWorkload(5, &Options{CacheConfig: cache.Config{QuiescentBytes: 8 << 10}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"c1": {Type: Uint16, Shape: []uint64{6, 10}, Fill: []byte{1, 2}},
		"c2": {Type: Uint8, Shape: []uint64{100, 700}, Layout: Contiguous},
	}
	write := func() error { return w.writeRandom(4) }
	return steps(
		func() error { return w.create(specs, "c1", "c2") },
		write, w.flush,
		write, w.flush,
		func() error { return w.writeRandom(3) },
	)
})

func TestContiguousCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, contigCrashWorkload, 1)
}

func TestContiguousFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, contigCrashWorkload, 2)
}

// TestContiguousDirectRead: reads of whole pieces go straight from the
// extent into the caller's buffer (no load into the cache) and are still
// verified against the piece checksums.
func TestContiguousDirectRead(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	c, err := cache.New(cache.Config{QuiescentBytes: 8 << 20})
	must(t, err)
	defer c.Close()
	f := tCreate(t, mem, &Options{Cache: c}, noCheck("the test flips a byte of the contiguous extent"))
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{256, 1024}, Layout: Contiguous}
	ds, err := f.CreateDataset(ctx, "c", spec)
	must(t, err)
	data := randomBytes(rand.New(rand.NewPCG(1, 1)), 256*1024)
	must(t, ds.Write(ctx, All(spec.Shape), data))
	must(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: mem, Cache: c, ReadOnly: true})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "c", nil)
	must(t, err)
	before := c.Stats()
	got := make([]byte, len(data))
	must(t, ds.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, data) {
		t.Fatal("read differs")
	}
	if st := c.Stats(); st.Loads != before.Loads || st.VectorReads == before.VectorReads {
		t.Fatalf("whole pieces: %d loads, %d vector reads", st.Loads-before.Loads, st.VectorReads-before.VectorReads)
	}
	exts, err := ds.ChunkExtents(ctx)
	must(t, err)
	must(t, f.Close(ctx))
	b := []byte{0}
	_, _ = mem.ReadAt(b, exts[0].Off+70000)
	b[0] ^= 4
	_, _ = mem.WriteAt(b, exts[0].Off+70000)
	f, err = Open(ctx, "", &Options{Driver: mem, Cache: c, ReadOnly: true})
	must(t, err)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "c", nil)
	must(t, err)
	if err := ds.Read(ctx, All(spec.Shape), got); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged piece read directly: %v", err)
	}
}
