package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// sparseRef is the reference model of a sparse dataset: a refArray of
// values plus which elements are defined.
type sparseRef struct {
	*refArray
	def []bool
}

func newSparseRef(dims []uint64, es int, fill []byte) *sparseRef {
	return &sparseRef{refArray: newRef(dims, es, fill), def: make([]bool, prod(dims))}
}

func (r *sparseRef) cloneRef() *sparseRef {
	return &sparseRef{refArray: r.refArray.clone(), def: slices.Clone(r.def)}
}

func (r *sparseRef) write(sel Selection, buf []byte) {
	r.refArray.write(sel, buf)
	points(sel, func(c []uint64, _ uint64) { r.def[r.linear(c)] = true })
}

func (r *sparseRef) erase(sel Selection) {
	es := uint64(r.elemSize)
	points(sel, func(c []uint64, _ uint64) {
		l := r.linear(c)
		r.def[l] = false
		r.fillRange(r.data[l*es : (l+1)*es])
	})
}

func (r *sparseRef) defined(sel Selection) (pos []uint64, vals []byte) {
	es := uint64(r.elemSize)
	points(sel, func(c []uint64, p uint64) {
		l := r.linear(c)
		if r.def[l] {
			pos = append(pos, p)
			vals = append(vals, r.data[l*es:(l+1)*es]...)
		}
	})
	return pos, vals
}

func (r *sparseRef) resize(dims []uint64) {
	old := r.cloneRef()
	r.refArray.resize(dims)
	r.def = make([]bool, prod(dims))
	common := make([]uint64, len(dims))
	for d := range dims {
		common[d] = min(dims[d], old.dims[d])
	}
	if prod(common) > 0 {
		points(All(common), func(c []uint64, _ uint64) { r.def[r.linear(c)] = old.def[old.linear(c)] })
	}
}

// chunksDefined counts the chunks holding at least one defined element:
// exactly the chunks a flushed sparse dataset stores.
func (r *sparseRef) chunksDefined(chunk []uint64) int {
	seen := map[string]bool{}
	if prod(r.dims) == 0 {
		return 0
	}
	points(All(r.dims), func(c []uint64, _ uint64) {
		if r.def[r.linear(c)] {
			cc := make([]uint64, len(c))
			for d := range c {
				cc[d] = c[d] / chunk[d]
			}
			seen[fmt.Sprint(cc)] = true
		}
	})
	return len(seen)
}

// verify checks values (fill where undefined), DefinedElements and
// ReadDefined over sel against the model.
func (r *sparseRef) verifySel(t testing.TB, ds *Dataset, sel Selection) {
	t.Helper()
	ctx := context.Background()
	buf := make([]byte, sel.NumElements()*uint64(r.elemSize))
	if err := ds.Read(ctx, sel, buf); err != nil {
		t.Fatalf("read %v: %v", sel.hyper(), err)
	}
	if want := r.read(sel); !bytes.Equal(buf, want) {
		t.Fatalf("read %v: values differ from the model", sel.hyper())
	}
	wpos, wvals := r.defined(sel)
	pos, err := ds.DefinedElements(ctx, sel)
	if err != nil {
		t.Fatalf("defined %v: %v", sel.hyper(), err)
	}
	if !slices.Equal(pos, wpos) {
		t.Fatalf("DefinedElements %v: %d positions %v, model %d %v", sel.hyper(), len(pos), head(pos), len(wpos), head(wpos))
	}
	pos, vals, err := ds.ReadDefined(ctx, sel)
	if err != nil {
		t.Fatalf("read defined %v: %v", sel.hyper(), err)
	}
	if !slices.Equal(pos, wpos) || !bytes.Equal(vals, wvals) {
		t.Fatalf("ReadDefined %v: %d positions, model %d (values equal %v)", sel.hyper(), len(pos), len(wpos), bytes.Equal(vals, wvals))
	}
}

func head(p []uint64) []uint64 { return p[:min(len(p), 8)] }

func (r *sparseRef) verifyAll(t testing.TB, ds *Dataset) {
	t.Helper()
	if got := ds.Shape(); !equal(got, r.dims) {
		t.Fatalf("shape %v, model %v", got, r.dims)
	}
	if prod(r.dims) > 0 {
		r.verifySel(t, ds, All(r.dims))
	}
}

// randomSparseSelection mostly picks small selections, so the dataset
// stays sparse; sometimes a whole-chunk-sized box.
func randomSparseSelection(rng *rand.Rand, dims []uint64) Selection {
	if rng.IntN(4) == 0 {
		return randomSelection(rng, dims)
	}
	r := len(dims)
	start, count := make([]uint64, r), make([]uint64, r)
	for d := range dims {
		start[d] = rng.Uint64N(dims[d])
		count[d] = 1 + rng.Uint64N(min(dims[d]-start[d], 3))
	}
	return Box(start, count)
}

var sparseSpec = DatasetSpec{
	Type: Uint16, Shape: []uint64{20, 14}, MaxShape: []uint64{Unlimited, 14}, Chunk: []uint64{4, 5},
	Layout: Sparse, Fill: []byte{7, 1}, Filters: []Filter{Shuffle(), Zstd(1)},
}

// TestSparseDifferential runs random define / erase / overwrite / read /
// DefinedElements / ReadDefined / SetExtent / Flush / close-reopen
// sequences on a sparse dataset against the in-memory model, with a cache
// so small that chunks are evicted (written back, reloaded, their
// selections loaded alone) all the time.
func TestSparseDifferential(t *testing.T) {
	for _, cfg := range []struct {
		name  string
		cache int64
		spec  DatasetSpec
	}{
		{"tiny-cache", 2 << 10, sparseSpec},
		{"roomy-cache", 8 << 20, sparseSpec},
		{"selection-filtered", 4 << 10, func() DatasetSpec {
			s := sparseSpec
			s.SelectionFilters = []Filter{Deflate(1)}
			s.Filters = nil
			s.Type, s.Fill = Float64, nil
			s.Shape, s.MaxShape, s.Chunk = []uint64{6, 7, 9}, []uint64{Unlimited, 7, 9}, []uint64{2, 3, 4}
			return s
		}()},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(7, uint64(cfg.cache)))
			drv := vfd.NewMem()
			opts := &Options{CacheConfig: cache.Config{QuiescentBytes: cfg.cache}}
			f := tCreate(t, drv, opts)
			ds, err := f.CreateDataset(ctx, "s", cfg.spec)
			must(t, err)
			if ds.Layout() != Sparse {
				t.Fatalf("layout %v", ds.Layout())
			}
			ref := newSparseRef(cfg.spec.Shape, cfg.spec.Type.Size(), cfg.spec.Fill)
			steps := 400
			if testing.Short() {
				steps = 150
			}
			for step := 0; step < steps; step++ {
				switch op := rng.IntN(20); {
				case op < 7:
					if prod(ref.dims) == 0 {
						continue
					}
					sel := randomSparseSelection(rng, ref.dims)
					buf := randomBytes(rng, int(sel.NumElements())*ref.elemSize)
					must(t, ds.Write(ctx, sel, buf))
					ref.write(sel, buf)
				case op < 11:
					if prod(ref.dims) == 0 {
						continue
					}
					sel := randomSelection(rng, ref.dims)
					must(t, ds.Erase(ctx, sel))
					ref.erase(sel)
				case op < 15:
					if prod(ref.dims) == 0 {
						continue
					}
					ref.verifySel(t, ds, randomSelection(rng, ref.dims))
				case op < 16:
					dims := clone(ref.dims)
					dims[0] = rng.Uint64N(2 * cfg.spec.Shape[0])
					must(t, ds.SetExtent(ctx, dims))
					ref.resize(dims)
				case op < 18:
					must(t, f.Flush(ctx))
					st, err := ds.Storage(ctx)
					must(t, err)
					if want := ref.chunksDefined(cfg.spec.Chunk); st.Chunks != want {
						t.Fatalf("step %d: %d chunks stored, %d hold defined elements", step, st.Chunks, want)
					}
				default:
					must(t, f.Close(ctx))
					f = tOpen(t, drv, opts)
					ds, err = f.OpenDataset(ctx, "s", nil)
					must(t, err)
				}
			}
			ref.verifyAll(t, ds)
		})
	}
}

// TestSparseStorageGrowsWithDefined: storage follows the defined elements,
// and erasing everything deletes every chunk.
func TestSparseStorageGrowsWithDefined(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	spec := DatasetSpec{Type: Float64, Shape: []uint64{1000, 1000}, Chunk: []uint64{100, 100}, Layout: Sparse}
	ds, err := f.CreateDataset(ctx, "s", spec)
	must(t, err)
	v := make([]byte, 8)
	for i := uint64(0); i < 50; i++ {
		must(t, ds.Write(ctx, Box([]uint64{i * 20, i * 20}, []uint64{1, 1}), v))
	}
	must(t, f.Flush(ctx))
	st, err := ds.Storage(ctx)
	must(t, err)
	if st.Chunks != 10 || st.StoredBytes > 10*200 {
		t.Fatalf("50 points in 10 chunks stored as %d chunks, %d bytes", st.Chunks, st.StoredBytes)
	}
	must(t, ds.Erase(ctx, All(spec.Shape)))
	must(t, f.Flush(ctx))
	if st, err = ds.Storage(ctx); err != nil || st.Chunks != 0 {
		t.Fatalf("after erasing everything: %+v %v", st, err)
	}
	pos, err := ds.DefinedElements(ctx, All(spec.Shape))
	if err != nil || len(pos) != 0 {
		t.Fatalf("defined after erase: %d %v", len(pos), err)
	}
}

// TestSparseSelectionAlone: DefinedElements on chunks that are not
// resident reads only the selection sections and keeps them in the cache
// without the values; a second query is served from the cache.
func TestSparseSelectionAlone(t *testing.T) {
	ctx := context.Background()
	drv := &countingDriver{Driver: vfd.NewMem()}
	f := tCreate(t, drv, nil)
	spec := DatasetSpec{Type: Uint64, Shape: []uint64{64, 4096}, Chunk: []uint64{1, 4096}, Layout: Sparse}
	ds, err := f.CreateDataset(ctx, "s", spec)
	must(t, err)
	rng := rand.New(rand.NewPCG(3, 3))
	ref := newSparseRef(spec.Shape, 8, nil)
	for i := 0; i < 64*40; i++ { // 1 % of the elements, scattered
		sel := Box([]uint64{uint64(i % 64), rng.Uint64N(4096)}, []uint64{1, 1})
		buf := randomBytes(rng, int(sel.NumElements())*8)
		must(t, ds.Write(ctx, sel, buf))
		ref.write(sel, buf)
	}
	must(t, f.Close(ctx))
	f = tOpen(t, drv, nil)
	ds, err = f.OpenDataset(ctx, "s", nil)
	must(t, err)
	before := drv.read.Load()
	pos, err := ds.DefinedElements(ctx, All(spec.Shape))
	must(t, err)
	wpos, _ := ref.defined(All(spec.Shape))
	if !slices.Equal(pos, wpos) {
		t.Fatalf("%d positions, model %d", len(pos), len(wpos))
	}
	st, err := ds.Storage(ctx)
	must(t, err)
	read := drv.read.Load() - before
	if read >= int64(st.StoredBytes)/2 {
		t.Fatalf("DefinedElements read %d bytes of %d stored: more than the selections", read, st.StoredBytes)
	}
	if cs := ds.CacheStats(); cs.ResidentBytes != 0 {
		t.Fatalf("the values were loaded: %d bytes resident for the dataset", cs.ResidentBytes)
	}
	before = drv.read.Load()
	if pos, err = ds.DefinedElements(ctx, All(spec.Shape)); err != nil || !slices.Equal(pos, wpos) {
		t.Fatalf("second query: %d positions, %v", len(pos), err)
	}
	if n := drv.read.Load() - before; n != 0 {
		t.Fatalf("second query read %d bytes; the selections should be cached", n)
	}
}

// countingDriver counts the bytes read through it.
type countingDriver struct {
	vfd.Driver
	read atomic.Int64
}

func (c *countingDriver) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.Driver.ReadAt(p, off)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingDriver) ReadV(e []vfd.Extent) error {
	for _, x := range e {
		c.read.Add(int64(len(x.Buf)))
	}
	return c.Driver.ReadV(e)
}

// TestSparseConcurrentReaders: readers of one region (Read,
// DefinedElements, ReadDefined) run under -race while a writer defines,
// erases and flushes in another region, in a cache small enough that the
// readers' chunks are evicted, written back and reloaded meanwhile.
func TestSparseConcurrentReaders(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewMem()
	f := tCreate(t, drv, &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 10}})
	spec := DatasetSpec{Type: Int32, Shape: []uint64{40, 40}, Chunk: []uint64{5, 8}, Layout: Sparse, Fill: []byte{1, 0, 0, 0}}
	ds, err := f.CreateDataset(ctx, "s", spec)
	must(t, err)
	rng := rand.New(rand.NewPCG(5, 5))
	ref := newSparseRef(spec.Shape, 4, spec.Fill)
	readDims := []uint64{20, 40} // rows 0..19 are the readers'
	for i := 0; i < 60; i++ {
		sel := randomSparseSelection(rng, readDims)
		buf := randomBytes(rng, int(sel.NumElements())*4)
		must(t, ds.Write(ctx, sel, buf))
		ref.write(sel, buf)
		if i%3 == 0 {
			sel := randomSparseSelection(rng, readDims)
			must(t, ds.Erase(ctx, sel))
			ref.erase(sel)
		}
	}
	// Left dirty on purpose: the writer's traffic evicts and writes them
	// back while the readers query.
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			for i := 0; i < 40; i++ {
				sel := randomSelection(rng, readDims)
				wpos, wvals := ref.defined(sel)
				switch i % 3 {
				case 0:
					pos, err := ds.DefinedElements(ctx, sel)
					if err != nil || !slices.Equal(pos, wpos) {
						errc <- fmt.Errorf("reader %d: DefinedElements %v: %d positions, want %d (%v)", g, sel.hyper(), len(pos), len(wpos), err)
						return
					}
				case 1:
					pos, vals, err := ds.ReadDefined(ctx, sel)
					if err != nil || !slices.Equal(pos, wpos) || !bytes.Equal(vals, wvals) {
						errc <- fmt.Errorf("reader %d: ReadDefined %v differs (%v)", g, sel.hyper(), err)
						return
					}
				default:
					buf := make([]byte, sel.NumElements()*4)
					if err := ds.Read(ctx, sel, buf); err != nil || !bytes.Equal(buf, ref.read(sel)) {
						errc <- fmt.Errorf("reader %d: Read %v differs (%v)", g, sel.hyper(), err)
						return
					}
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 1))
		for i := 0; i < 80; i++ {
			sel := randomSparseSelection(rng, []uint64{20, 40})
			start := clone(sel.hyper().Start)
			start[0] += 20
			w := Hyperslab(start, sel.hyper().Stride, sel.hyper().Count, sel.hyper().Block)
			var err error
			if i%4 == 3 {
				err = ds.Erase(ctx, w)
			} else {
				err = ds.Write(ctx, w, randomBytes(rng, int(w.NumElements())*4))
			}
			if err == nil && i%10 == 9 {
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

// TestSparseCorruptChunk: a damaged sparse chunk is ErrCorrupt on read and
// on DefinedElements, never a panic, and Check reports it.
func TestSparseCorruptChunk(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{100}, Chunk: []uint64{100}, Layout: Sparse}
	ds, err := f.CreateDataset(ctx, "s", spec)
	must(t, err)
	must(t, ds.Write(ctx, Box([]uint64{10}, []uint64{5}), []byte{1, 2, 3, 4, 5}))
	must(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: mem})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "s", nil)
	must(t, err)
	x, err := ds.s.idx.get(ctx)
	must(t, err)
	e, err := x.Get(ctx, []uint64{0})
	must(t, err)
	must(t, f.Close(ctx))
	for _, off := range []uint64{0, 10, e.Size - 1} {
		b := make([]byte, 1)
		_, _ = mem.ReadAt(b, int64(e.Addr+off))
		b[0] ^= 0x40
		_, _ = mem.WriteAt(b, int64(e.Addr+off))
		f, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true})
		must(t, err)
		ds, err := f.OpenDataset(ctx, "s", nil)
		must(t, err)
		if err := ds.Read(ctx, All([]uint64{100}), make([]byte, 100)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: read: %v", off, err)
		}
		if _, err := ds.DefinedElements(ctx, All([]uint64{100})); off < 40 && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d (header or selection): defined: %v", off, err)
		}
		f.Close(ctx)
		if _, err := Check(ctx, "", &Options{Driver: mem}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: check: %v", off, err)
		}
		b[0] ^= 0x40
		_, _ = mem.WriteAt(b, int64(e.Addr+off))
	}
}

// TestSparseDenseAPI: the sparse calls on a dense dataset treat every
// element as defined; Erase writes the fill value.
func TestSparseDenseAPI(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{10}, Chunk: []uint64{4}, Fill: []byte{9}})
	must(t, err)
	must(t, ds.Write(ctx, All([]uint64{10}), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}))
	must(t, ds.Erase(ctx, Box([]uint64{2}, []uint64{3})))
	pos, vals, err := ds.ReadDefined(ctx, All([]uint64{10}))
	must(t, err)
	if len(pos) != 10 || !bytes.Equal(vals, []byte{0, 1, 9, 9, 9, 5, 6, 7, 8, 9}) {
		t.Fatalf("dense: %v %v", pos, vals)
	}
	if _, err := f.CreateDataset(ctx, "bad", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}, SelectionFilters: []Filter{LZ4()}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("selection filters on a dense dataset: %v", err)
	}
}

// TestSparseWriteInPlace: the in-place write paths (appending after the
// last defined element, overwriting defined elements) give exactly the
// runs and values the general merge gives, and the general merge is used
// for anything else.
func TestSparseWriteInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 9))
	const limit, es = 300, 2
	for it := 0; it < 2000; it++ {
		// A random chunk, built through the general merge.
		base := &sparseChunk{}
		var segs []seg
		for pos := uint64(rng.IntN(20)); pos < limit; pos += uint64(2 + rng.IntN(30)) {
			n := min(uint64(1+rng.IntN(8)), limit-pos)
			segs = append(segs, seg{lo: pos, n: n, buf: 0})
			pos += n
		}
		src := randomBytes(rng, limit*es)
		base.runs, base.data = base.apply(mergeWrite, segs, src, es)
		// A random write: after the end, over defined elements, or anywhere.
		var w []seg
		switch rng.IntN(3) {
		case 0:
			end := uint64(0)
			if k := len(base.runs); k > 0 {
				end = uint64(base.runs[k-1].End())
			}
			for pos := end + uint64(rng.IntN(3)); pos < limit && len(w) < 4; pos += uint64(1 + rng.IntN(10)) {
				n := min(uint64(1+rng.IntN(5)), limit-pos)
				w = append(w, seg{lo: pos, n: n})
				pos += n
			}
		case 1:
			for _, r := range base.runs {
				if rng.IntN(2) == 0 {
					w = append(w, seg{lo: uint64(r.Start), n: uint64(1 + rng.IntN(int(r.Len)))})
				}
			}
		default:
			for pos := uint64(rng.IntN(50)); pos < limit; pos += uint64(1 + rng.IntN(40)) {
				n := min(uint64(1+rng.IntN(10)), limit-pos)
				w = append(w, seg{lo: pos, n: n})
				pos += n
			}
		}
		var b uint64
		for i := range w {
			w[i].buf = b
			b += w[i].n
		}
		wsrc := randomBytes(rng, int(b)*es)
		want := &sparseChunk{}
		want.runs, want.data = base.apply(mergeWrite, w, wsrc, es)
		got := &sparseChunk{runs: slices.Clone(base.runs), data: slices.Clone(base.data)}
		if !got.writeInPlace(w, wsrc, es) {
			got.runs, got.data = got.apply(mergeWrite, w, wsrc, es)
		}
		if !slices.Equal(got.runs, want.runs) || !bytes.Equal(got.data, want.data) {
			t.Fatalf("iteration %d: in place %v, merge %v", it, got.runs, want.runs)
		}
	}
}
