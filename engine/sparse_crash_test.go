package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// sparseCrashWorkload is crashWorkload for sparse datasets: defines,
// erases (down to deleting chunks), overwrites, extent changes, flushes
// and a close. Written values never equal the fill value, so the model's
// values tell defined from undefined and verifyCommitted can check
// DefinedElements too (verifyDefined).
func sparseCrashWorkload(drv vfd.Driver, seed uint64, snaps snapshots) (lastAck uint64, err error) {
	return sparseWorkloadWith(cache.Config{QuiescentBytes: 3 << 10}, drv, seed, snaps)
}

// sparseWorkloadWith is sparseCrashWorkload in a cache of configuration cfg.
func sparseWorkloadWith(cfg cache.Config, drv vfd.Driver, seed uint64, snaps snapshots) (lastAck uint64, err error) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	opts := &Options{CacheConfig: cfg}
	refs := map[string]*refArray{}
	snaps.record(1, refs)
	f, err := CreateWith(drv, opts)
	if err != nil {
		return 0, err
	}
	lastAck = 1
	defer func() {
		if f == nil {
			return // a reopen failed: nothing is open
		}
		if cerr := f.Close(); err == nil {
			if cerr == nil {
				lastAck = f.Generation()
			}
			err = cerr
		}
	}()
	flush := func() error { return snaps.commit(ctx, f, refs, &lastAck) }
	specs := map[string]DatasetSpec{
		"sp": {Type: Uint16, Shape: []uint64{8, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5},
			Layout: Sparse, Fill: []byte{0xff, 0xff}, Filters: []Filter{Shuffle(), Zstd(1)}, SelectionFilters: []Filter{Deflate(1)}},
		"sq": {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, Layout: Sparse, Fill: []byte{0xff, 0xff, 0xff, 0xff}},
	}
	names := []string{"sp", "sq"}
	sets := map[string]*Dataset{}
	for _, n := range names {
		ds, err := f.CreateDataset(n, specs[n])
		if err != nil {
			return lastAck, err
		}
		sets[n] = ds
		refs[n] = newRef(specs[n].Shape, specs[n].Type.Size(), specs[n].Fill)
	}
	ops := func(n int) error {
		for i := 0; i < n; i++ {
			name := names[rng.IntN(2)]
			r := refs[name]
			if prod(r.dims) == 0 {
				continue
			}
			if rng.IntN(3) == 0 {
				sel := randomSelection(rng, r.dims)
				if err := sets[name].Erase(ctx, sel); err != nil {
					return err
				}
				r.write(sel, fillBuf(r, sel))
				continue
			}
			sel := randomSparseSelection(rng, r.dims)
			buf := randomBytes(rng, int(sel.NumElements())*r.elemSize)
			for j := range buf {
				if j%r.elemSize == 0 {
					buf[j] &= 0x7f // never the fill value 0xff...
				}
			}
			if err := sets[name].Write(ctx, sel, buf); err != nil {
				return err
			}
			r.write(sel, buf)
		}
		return nil
	}
	if err := ops(8); err != nil {
		return lastAck, err
	}
	if err := flush(); err != nil {
		return lastAck, err
	}
	if err := ops(8); err != nil {
		return lastAck, err
	}
	// Close and reopen, then query: selection sections read alone and
	// whole chunks, from the file, under faults.
	snaps.record(f.Generation()+1, refs)
	if err := f.Close(); err != nil {
		return lastAck, err
	}
	lastAck = f.Generation()
	if f, err = OpenWith(drv, opts); err != nil {
		f = nil
		return lastAck, err
	}
	for _, n := range names {
		if sets[n], err = f.OpenDataset(n); err != nil {
			return lastAck, err
		}
	}
	for _, n := range names {
		if _, err := sets[n].DefinedElements(ctx, All(refs[n].dims)); err != nil {
			return lastAck, err
		}
		if _, _, err := sets[n].ReadDefined(ctx, All(refs[n].dims)); err != nil {
			return lastAck, err
		}
	}
	if err := sets["sp"].SetExtent(ctx, []uint64{3, 10}); err != nil {
		return lastAck, err
	}
	refs["sp"].resize([]uint64{3, 10})
	if err := flush(); err != nil {
		return lastAck, err
	}
	if err := sets["sp"].SetExtent(ctx, []uint64{9, 10}); err != nil {
		return lastAck, err
	}
	refs["sp"].resize([]uint64{9, 10})
	if err := ops(6); err != nil {
		return lastAck, err
	}
	snaps.record(f.Generation()+1, refs) // what Close commits
	return lastAck, nil
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
		t.Fatalf("%s: DefinedElements: %v", ds.Name(), err)
	}
	var want []uint64
	es := ref.elemSize
	for i := 0; i < len(ref.data)/es; i++ {
		if !slices.Equal(ref.data[i*es:(i+1)*es], ref.fill) {
			want = append(want, uint64(i))
		}
	}
	if !slices.Equal(pos, want) {
		t.Fatalf("%s: %d defined elements, model %d", ds.Name(), len(pos), len(want))
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
