package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// sparseCrashWorkload is crashWorkload for sparse datasets: defines,
// erases (down to deleting chunks), overwrites, extent changes, flushes
// and a close. Written values never equal the fill value, so the model's
// values tell defined from undefined and verifyCommitted can check
// DefinedElements too (verifyDefined).
var sparseCrashWorkload = sparseWorkloadWith(cache.Config{QuiescentBytes: 3 << 10})

// sparseWorkloadWith is sparseCrashWorkload in a cache of configuration cfg.
func sparseWorkloadWith(cfg cache.Config) workload {
	return defineWorkload(7, &Options{CacheConfig: cfg}, func(w *wlRun) error {
		specs := map[string]DatasetSpec{
			"sp": {Type: Uint16, Shape: []uint64{8, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5},
				Layout: Sparse, Fill: []byte{0xff, 0xff}, Filters: []Filter{Shuffle(), Zstd(1)}, SelectionFilters: []Filter{Deflate(1)}},
			"sq": {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, Layout: Sparse, Fill: []byte{0xff, 0xff, 0xff, 0xff}},
		}
		ops := func(n int) func() error {
			return func() error {
				for i := 0; i < n; i++ {
					name := w.names[w.rng.IntN(2)]
					r := w.refs[name]
					if prod(r.dims) == 0 {
						continue
					}
					if w.rng.IntN(3) == 0 {
						sel := randomSelection(w.rng, r.dims)
						if err := w.sets[name].Erase(w.ctx, sel); err != nil {
							return err
						}
						r.write(sel, fillBuf(r, sel))
						continue
					}
					sel := randomSparseSelection(w.rng, r.dims)
					buf := randomBytes(w.rng, int(sel.NumElements())*r.elemSize)
					for j := range buf {
						if j%r.elemSize == 0 {
							buf[j] &= 0x7f // never the fill value 0xff...
						}
					}
					if err := w.sets[name].Write(w.ctx, sel, buf); err != nil {
						return err
					}
					r.write(sel, buf)
				}
				return nil
			}
		}
		// After a reopen, query: selection sections read alone and whole
		// chunks, from the file, under faults.
		query := func() error {
			for _, n := range w.names {
				if _, err := w.sets[n].DefinedElements(w.ctx, All(w.refs[n].dims)); err != nil {
					return err
				}
				if _, _, err := w.sets[n].ReadDefined(w.ctx, All(w.refs[n].dims)); err != nil {
					return err
				}
			}
			return nil
		}
		return steps(
			func() error { return w.create(specs, "sp", "sq") },
			ops(8), w.flush,
			ops(8),
			w.reopen, query,
			func() error { return w.setExtent("sp", []uint64{3, 10}) },
			w.flush,
			func() error { return w.setExtent("sp", []uint64{9, 10}) },
			ops(6),
		)
	})
}

// fillBuf is a buffer of the fill value for sel.
func fillBuf(r *refArray, sel Selection) []byte {
	b := make([]byte, sel.NumElements()*uint64(r.elemSize))
	r.fillRange(b)
	return b
}

// verifyDefined checks a sparse dataset's DefinedElements against a model
// whose undefined elements, and only those, hold the fill value.
func verifyDefined(t *testing.T, ds *Dataset, ref *refArray) {
	t.Helper()
	if ds.Layout() != Sparse || prod(ref.dims) == 0 {
		return
	}
	pos, err := ds.DefinedElements(context.Background(), All(ref.dims))
	if err != nil {
		t.Fatalf("%s: DefinedElements: %v", ds.Path(), err)
	}
	var want []uint64
	es := ref.elemSize
	for i := 0; i < len(ref.data)/es; i++ {
		if !slices.Equal(ref.data[i*es:(i+1)*es], ref.fill) {
			want = append(want, uint64(i))
		}
	}
	if !slices.Equal(pos, want) {
		t.Fatalf("%s: %d defined elements, model %d", ds.Path(), len(pos), len(want))
	}
}

// TestSparseCrashAtEveryWrite is TestCrashAtEveryWrite for sparse
// datasets.
func TestSparseCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, sparseCrashWorkload, 1)
}

// TestSparseFaultAtEveryOperation is TestFaultAtEveryOperation for sparse
// datasets.
func TestSparseFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, sparseCrashWorkload, 2)
}
