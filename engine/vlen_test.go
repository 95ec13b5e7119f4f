package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// newVlenRef is the model of a variable-length dataset: one sequence per
// element (nil: empty).
func newVlenRef(dims []uint64, es int) *refArray {
	return &refArray{dims: clone(dims), elemSize: es, vlen: make([][]byte, prod(dims))}
}

func (r *refArray) writeVlen(sel Selection, vals [][]byte) {
	points(sel, func(c []uint64, pos uint64) {
		v := vals[pos]
		if len(v) == 0 {
			v = nil
		}
		r.vlen[r.linear(c)] = bytes.Clone(v)
	})
}

func (r *refArray) readVlen(sel Selection) [][]byte {
	out := make([][]byte, sel.NumElements())
	points(sel, func(c []uint64, pos uint64) { out[pos] = r.vlen[r.linear(c)] })
	return out
}

func (r *refArray) resizeVlen(dims []uint64) {
	n := newVlenRef(dims, r.elemSize)
	common := make([]uint64, len(dims))
	for d := range dims {
		common[d] = min(dims[d], r.dims[d])
	}
	if prod(common) > 0 {
		points(All(common), func(c []uint64, _ uint64) { n.vlen[n.linear(c)] = r.vlen[r.linear(c)] })
	}
	*r = *n
}

func (r *refArray) verifyVlen(t testing.TB, ds *Dataset) {
	t.Helper()
	require.Equal(t, r.dims, ds.Shape(), "%s: shape (want the model's)", ds.Path())
	if prod(r.dims) == 0 {
		return
	}
	sameVlen(t, ds, All(r.dims), r.readVlen(All(r.dims)))
}

func sameVlen(t testing.TB, ds *Dataset, sel Selection, want [][]byte) {
	t.Helper()
	got, err := ds.ReadVlen(context.Background(), sel)
	require.NoError(t, err, "%s: ReadVlen %v", ds.Path(), sel.hyper())
	if err := vlenDiff(got, want); err != nil {
		t.Fatalf("%s: ReadVlen %v: %v", ds.Path(), sel.hyper(), err)
	}
}

func vlenDiff(got, want [][]byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, model %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) || (got[i] == nil) != (want[i] == nil) {
			return fmt.Errorf("element %d is %q, model %q", i, got[i], want[i])
		}
	}
	return nil
}

func randomVlen(rng *rand.Rand, n int, es int) [][]byte {
	vals := make([][]byte, n)
	for i := range vals {
		switch rng.IntN(6) {
		case 0: // empty
		case 1:
			vals[i] = randomBytes(rng, es*(50+rng.IntN(400)))
		default:
			vals[i] = randomBytes(rng, es*(1+rng.IntN(12)))
		}
	}
	return vals
}

// TestVlenDifferential runs random writes, overwrites, erases, reads,
// extent changes, flushes and close/reopen cycles on variable-length
// datasets against the model, with a cache that keeps evicting.
func TestVlenDifferential(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []struct {
		name  string
		cache int64
		spec  DatasetSpec
	}{
		{"bytes-tiny-cache", 4 << 10, DatasetSpec{Type: Uint8, Shape: []uint64{12, 9}, MaxShape: []uint64{Unlimited, 9}, Chunk: []uint64{4, 3}, Layout: Vlen}},
		{"int32-zstd", 1 << 20, DatasetSpec{Type: Int32, Shape: []uint64{30}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{7}, Layout: Vlen,
			Filters: []Filter{Shuffle(), Zstd(1)}, HeapDefragPercent: 60}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, uint64(cfg.cache)))
			drv := vfd.NewMem()
			opts := &Options{CacheConfig: cache.Config{QuiescentBytes: cfg.cache}}
			f := tCreate(t, drv, opts)
			ds, err := f.CreateDataset(ctx, "v", cfg.spec)
			must(t, err)
			es := cfg.spec.Type.Size()
			ref := newVlenRef(cfg.spec.Shape, es)
			for step := 0; step < 300; step++ {
				op := rng.IntN(12)
				if prod(ref.dims) == 0 && op < 9 {
					op = 9 // nothing to select: change the extent
				}
				switch {
				case op < 5:
					sel := randomSelection(rng, ref.dims)
					vals := randomVlen(rng, int(sel.NumElements()), es)
					must(t, ds.WriteVlen(ctx, sel, vals))
					ref.writeVlen(sel, vals)
				case op < 6:
					sel := randomSelection(rng, ref.dims)
					must(t, ds.Erase(ctx, sel))
					ref.writeVlen(sel, make([][]byte, sel.NumElements()))
				case op < 9:
					sel := randomSelection(rng, ref.dims)
					sameVlen(t, ds, sel, ref.readVlen(sel))
				case op < 10:
					dims := clone(ref.dims)
					dims[0] = rng.Uint64N(2 * cfg.spec.Shape[0])
					must(t, ds.SetExtent(ctx, dims))
					ref.resizeVlen(dims)
				case op < 11:
					must(t, f.Flush(ctx))
				default:
					must(t, f.Close(ctx))
					f = tOpen(t, drv, opts)
					ds, err = f.OpenDataset(ctx, "v", nil)
					must(t, err)
				}
			}
			ref.verifyVlen(t, ds)
		})
	}
}

// TestVlenDefrag: overwriting elements again and again leaves the heap at
// most the threshold's share unused, in memory and in the file, and
// without defragmentation (threshold 100 %) the file keeps the garbage.
func TestVlenDefrag(t *testing.T) {
	ctx := context.Background()
	stored := map[int]uint64{}
	for _, pct := range []int{10, 100} {
		f := tCreate(t, vfd.NewMem(), nil)
		ds, err := f.CreateDataset(ctx, "v", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{64}, Layout: Vlen, HeapDefragPercent: pct})
		must(t, err)
		rng := rand.New(rand.NewPCG(1, 1))
		ref := newVlenRef([]uint64{64}, 1)
		for i := 0; i < 500; i++ {
			sel := Box([]uint64{rng.Uint64N(64)}, []uint64{1})
			v := [][]byte{randomBytes(rng, 100)}
			must(t, ds.WriteVlen(ctx, sel, v))
			ref.writeVlen(sel, v)
		}
		must(t, f.Flush(ctx))
		st, err := ds.Storage(ctx)
		must(t, err)
		stored[pct] = st.StoredBytes
		live := uint64(0)
		for _, v := range ref.vlen {
			live += uint64(len(v))
		}
		if pct == 10 && st.StoredBytes > live*110/100+64*8+200 {
			t.Fatalf("threshold 10 %%: %d bytes stored for %d live heap bytes", st.StoredBytes, live)
		}
		ref.verifyVlen(t, ds)
	}
	if stored[100] < 2*stored[10] {
		t.Fatalf("no defragmentation stored %d bytes, 10 %% threshold %d: the threshold changed nothing", stored[100], stored[10])
	}
}

// TestVlenStringsAndErrors: the string API, and what a variable-length
// dataset refuses.
func TestVlenStringsAndErrors(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset(ctx, "names", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{2}, Layout: Vlen})
	must(t, err)
	must(t, ds.WriteStrings(ctx, All([]uint64{4}), []string{"alpha", "", "γάμμα", "d"}))
	got, err := ds.ReadStrings(ctx, Box([]uint64{1}, []uint64{3}))
	must(t, err)
	if fmt.Sprint(got) != fmt.Sprint([]string{"", "γάμμα", "d"}) {
		t.Fatalf("%q", got)
	}
	if err := ds.Read(ctx, All([]uint64{4}), make([]byte, 4)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("plain Read: %v", err)
	}
	if err := ds.WriteVlen(ctx, All([]uint64{4}), [][]byte{nil}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("value count mismatch: %v", err)
	}
	i32, err := f.CreateDataset(ctx, "i32", DatasetSpec{Type: Int32, Shape: []uint64{2}, Chunk: []uint64{2}, Layout: Vlen})
	must(t, err)
	if err := i32.WriteVlen(ctx, All([]uint64{2}), [][]byte{{1, 2, 3}, nil}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("3 bytes of int32: %v", err)
	}
	if err := i32.WriteStrings(ctx, All([]uint64{2}), []string{"a", "b"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("strings in int32: %v", err)
	}
	if _, err := f.CreateDataset(ctx, "bad", DatasetSpec{Type: Uint8, Shape: []uint64{2}, Chunk: []uint64{2}, Layout: Vlen, Fill: []byte{1}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("vlen with a fill value: %v", err)
	}
	if _, err := f.CreateDataset(ctx, "bad2", DatasetSpec{Type: Uint8, Shape: []uint64{2}, Chunk: []uint64{2}, HeapDefragPercent: 5}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("defrag threshold on a chunked dataset: %v", err)
	}
	dense, err := f.CreateDataset(ctx, "dense", DatasetSpec{Type: Uint8, Shape: []uint64{2}, Chunk: []uint64{2}})
	must(t, err)
	if _, err := dense.ReadVlen(ctx, All([]uint64{2})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ReadVlen of a dense dataset: %v", err)
	}
}

// TestVlenConcurrent: readers of one half run under -race while a writer
// rewrites the other half and flushes, in a small cache.
func TestVlenConcurrent(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 8 << 10}})
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{40, 10}, Chunk: []uint64{5, 5}, Layout: Vlen}
	ds, err := f.CreateDataset(ctx, "v", spec)
	must(t, err)
	ref := newVlenRef(spec.Shape, 1)
	rng := rand.New(rand.NewPCG(4, 4))
	half := []uint64{20, 10}
	for i := 0; i < 30; i++ {
		sel := randomSelection(rng, half)
		vals := randomVlen(rng, int(sel.NumElements()), 1)
		must(t, ds.WriteVlen(ctx, sel, vals))
		ref.writeVlen(sel, vals)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; i < 40; i++ {
				sel := randomSelection(rng, half)
				got, err := ds.ReadVlen(ctx, sel)
				if err == nil {
					err = vlenDiff(got, ref.readVlen(sel))
				}
				if err != nil {
					errc <- fmt.Errorf("reader %d: %v: %v", g, sel.hyper(), err)
					return
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(8, 8))
		for i := 0; i < 40; i++ {
			sel := randomSelection(rng, half)
			start := clone(sel.hyper().Start)
			start[0] += 20
			w := Hyperslab(start, sel.hyper().Stride, sel.hyper().Count, sel.hyper().Block)
			err := ds.WriteVlen(ctx, w, randomVlen(rng, int(w.NumElements()), 1))
			if err == nil && i%8 == 7 {
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

// vlenCrashWorkload is crashWorkload for a variable-length dataset.
var vlenCrashWorkload = vlenWorkloadWith(cache.Config{QuiescentBytes: 4 << 10})

// vlenWorkloadWith is vlenCrashWorkload in a cache of configuration cfg.
func vlenWorkloadWith(cfg cache.Config) workload {
	return defineWorkload(3, &Options{CacheConfig: cfg}, func(w *wlRun) error {
		specs := map[string]DatasetSpec{"v": {Type: Uint8, Shape: []uint64{8, 6}, MaxShape: []uint64{Unlimited, 6}, Chunk: []uint64{2, 3}, Layout: Vlen,
			Filters: []Filter{Zstd(1)}, HeapDefragPercent: 30}}
		write := func(n int) func() error {
			return func() error {
				for i := 0; i < n; i++ {
					r := w.refs["v"]
					sel := randomSelection(w.rng, r.dims)
					vals := randomVlen(w.rng, int(sel.NumElements()), 1)
					if err := w.sets["v"].WriteVlen(w.ctx, sel, vals); err != nil {
						return err
					}
					r.writeVlen(sel, vals)
				}
				return nil
			}
		}
		// Read back under faults (directly when the cache bypasses every
		// chunk): an error surfaces, a clean run reads the model.
		readBack := func() error {
			all := All(w.refs["v"].dims)
			got, err := w.sets["v"].ReadVlen(w.ctx, all)
			if err != nil {
				return err
			}
			if err := vlenDiff(got, w.refs["v"].readVlen(all)); err != nil {
				return fmt.Errorf("read back: %w", err)
			}
			return nil
		}
		return steps(
			func() error { return w.create(specs, "v") },
			write(5), w.flush,
			write(5),
			func() error { return w.setExtent("v", []uint64{3, 6}) },
			w.flush,
			func() error { return w.setExtent("v", []uint64{7, 6}) },
			write(4),
			readBack,
		)
	})
}

func TestVlenCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, vlenCrashWorkload, 1)
}

func TestVlenFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, vlenCrashWorkload, 2)
}
