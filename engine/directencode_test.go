package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// Direct encodes (cache/directwrite_encode.go): a write covering whole
// chunks of a filtered dataset that the cache would not keep encodes them
// from the caller's buffer and writes them to new space.

// deCols is the chunk of the direct-encode tests: one row of 32768 uint16,
// 64 KiB (directMin), above the 16 KiB bypass threshold of deOpts' 64 KiB
// cache, so every whole row is encoded directly.
const deCols = 32768

func deOpts() *Options { return &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 10}} }

var deSpec = DatasetSpec{Type: Uint16, Shape: []uint64{6, deCols}, MaxShape: []uint64{Unlimited, deCols},
	Chunk: []uint64{1, deCols}, Filters: []Filter{Shuffle(), Zstd(1)}}

// deRows returns n rows' worth of bytes: compressible (zstd applies) or
// random (zstd is skipped, the mask says so) by the seed's parity.
func deRows(rng *rand.Rand, n uint64) []byte {
	if rng.IntN(2) == 0 {
		return compressibleBytes(rng, int(n)*deCols*2)
	}
	return randomBytes(rng, int(n)*deCols*2)
}

// TestDirectEncodeFailureKeepsOldData: a direct encode whose vector write
// fails, or is torn, returns ErrIO with the injected cause (never
// ErrCorrupt), publishes nothing and leaves nothing resident or in flight:
// the previous contents stay what reads see; the next write of the same
// rows is right, and the file reopens with it.
func TestDirectEncodeFailureKeepsOldData(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(30, 2))
	mem := vfd.NewMem()
	fd := vfd.NewFault(mem)
	f := tCreate(t, fd, deOpts())
	ds, err := f.CreateDataset(ctx, "d", deSpec)
	must(t, err)
	ref := newRef(deSpec.Shape, 2, nil)
	all := deRows(rng, 6)
	must(t, ds.Write(ctx, All(deSpec.Shape), all))
	ref.write(All(deSpec.Shape), all)
	must(t, f.Flush(ctx))
	c := f.Cache()
	if c.Stats().DirectEncodes != 6 {
		t.Fatalf("%d whole rows encoded directly, want 6", c.Stats().DirectEncodes)
	}
	for _, tc := range []struct {
		name   string
		inject func(n int64) vfd.Injector
		rows   Selection
	}{
		{"failed", func(n int64) vfd.Injector { return vfd.Fail(vfd.Nth(vfd.OpWriteV, n)) }, Box([]uint64{2, 0}, []uint64{1, deCols})},
		{"torn", func(n int64) vfd.Injector { return vfd.TornWrite(vfd.Nth(vfd.OpWriteV, n), 3) }, Box([]uint64{3, 0}, []uint64{2, deCols})},
	} {
		fd.Add(tc.inject(fd.Ops()[vfd.OpWriteV])) // the next WriteV: the direct encode's
		before := c.Stats()
		buf := deRows(rng, tc.rows.NumElements()/deCols)
		err := ds.Write(ctx, tc.rows, buf)
		if !errors.Is(err, ErrIO) || !errors.Is(err, vfd.ErrInjected) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s direct encode: %v, want ErrIO with the injected cause", tc.name, err)
		}
		st := c.Stats()
		if st.Sub(before).DirectEncodes != 0 || st.Chunks != 0 || st.EncodingBytes != 0 {
			t.Fatalf("%s direct encode: %d counted, %d resident, %d bytes of images in flight", tc.name, st.Sub(before).DirectEncodes, st.Chunks, st.EncodingBytes)
		}
		ref.verify(t, ds) // the old rows are what reads see
		must(t, ds.Write(ctx, tc.rows, buf))
		ref.write(tc.rows, buf)
		ref.verify(t, ds)
		if st := c.Stats().Sub(before); st.DirectEncodes == 0 {
			t.Fatalf("%s: the next write was not encoded directly", tc.name)
		}
	}
	must(t, f.Close(ctx))
	checkReopen(t, mem, "d", ref)
}

// directEncodeWorkload is crashWorkload for direct encodes: whole-row
// writes of a filtered dataset with chunks above the bypass threshold
// (encoded directly), mixed with partial writes (cached, bypassed),
// flushes, a shrink and a regrow, and an unfiltered dataset written
// through the cache.
func directEncodeWorkload(st *cache.Stats) workload {
	return defineWorkload(9, deOpts(), func(w *wlRun) error {
		if st != nil {
			w.beforeClose = func(f *File) { *st = f.Cache().Stats() }
		}
		specs := map[string]DatasetSpec{
			"e": deSpec,
			"u": {Type: Uint8, Shape: []uint64{4, 64}, Chunk: []uint64{2, 32}},
		}
		write := func(n int) func() error {
			return func() error {
				for i := 0; i < n; i++ {
					name, sel := "e", Selection{}
					r := w.refs["e"]
					var buf []byte
					switch k := w.rng.IntN(4); k {
					case 0, 1: // whole rows: encoded directly
						lo := w.rng.Uint64N(r.dims[0])
						cnt := 1 + w.rng.Uint64N(r.dims[0]-lo)
						sel = Box([]uint64{lo, 0}, []uint64{cnt, deCols})
						buf = deRows(w.rng, cnt)
					case 2:
						sel = randomSelection(w.rng, r.dims)
					default:
						name = "u"
						sel = randomSelection(w.rng, w.refs["u"].dims)
					}
					if buf == nil {
						buf = randomBytes(w.rng, int(sel.NumElements())*w.refs[name].elemSize)
					}
					if err := w.sets[name].Write(w.ctx, sel, buf); err != nil {
						return err
					}
					w.refs[name].write(sel, buf)
				}
				return nil
			}
		}
		return steps(
			func() error { return w.create(specs, "e", "u") },
			write(4), w.flush,
			write(4), // crash here: the last flush's state
			w.flush,
			write(3),
			func() error { return w.setExtent("e", []uint64{3, deCols}) },
			w.flush,
			func() error { return w.setExtent("e", []uint64{6, deCols}) },
			write(4),
		)
	})
}

// requireDirectEncodes fails t unless directEncodeWorkload with seed
// encodes enough chunks directly for the sweeps to mean something.
func requireDirectEncodes(t *testing.T, seed uint64) {
	t.Helper()
	var st cache.Stats
	if _, err := directEncodeWorkload(&st)(vfd.NewMem(), seed, snapshots{}); err != nil {
		t.Fatal(err)
	}
	if st.DirectEncodes < 4 {
		t.Fatalf("the workload encoded %d chunks directly", st.DirectEncodes)
	}
	t.Logf("%d chunks encoded directly", st.DirectEncodes)
}

// TestDirectEncodeCrashAtEveryWrite cuts the power at every mutating
// operation of directEncodeWorkload, direct encodes included: a crash
// between a direct encode and the next Flush leaves the last committed
// state (the encoded image lies in space no commit names).
func TestDirectEncodeCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	requireDirectEncodes(t, 1)
	crashSweep(t, directEncodeWorkload(nil), 1)
}

// TestDirectEncodeFaultAtEveryOperation fails every operation of
// directEncodeWorkload from index k on, for each k: the error reaches
// the caller, and the file reopens in its last committed state and
// passes the checker.
func TestDirectEncodeFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	requireDirectEncodes(t, 2)
	faultSweep(t, directEncodeWorkload(nil), 2)
}

// TestDirectEncodeTransientFault is the single-fault sweep
// (faultsweep_test.go) over a filtered dataset whose whole chunks are
// encoded directly: one operation fails, for each operation index, fault
// kind and variant, and the workload goes on; a failed whole-chunk write
// leaves each chunk as it was or as asked, the data reads back once the
// fault is over, later writes are right, and the file the run leaves
// passes the checker and holds a committed state.
func TestDirectEncodeTransientFault(t *testing.T) {
	defer verifyNoLeaks(t)
	spec := deSpec
	spec.Shape = []uint64{2, deCols}
	l := faultLayout{"direct-encode", 64 << 10, []fSpec{{"e", spec}}}
	// The workload must encode chunks directly in each variant's cache.
	for _, v := range faultVariants {
		c, err := cache.New(v.opts(l.budget).CacheConfig)
		must(t, err)
		shared := faultVariant{v.name, func(b int64) *Options { return &Options{Cache: c} }}
		if r := faultWorkload(t, "clean run", l, shared, vfd.NewMem(), 1, 0); r == nil || r.failures != 0 {
			t.Fatal("the workload fails without faults")
		}
		n := c.Stats().DirectEncodes
		must(t, c.Close())
		if n < 4 {
			t.Fatalf("%s: the workload encoded %d chunks directly", v.name, n)
		}
	}
	for vi, v := range faultVariants {
		if v.name == "image" && !long() {
			continue // the cache image is not what this sweep is about
		}
		t.Run(v.name, func(t *testing.T) {
			for _, seed := range faultSweepSeeds() {
				singleFaultSweep(t, l, vi, seed)
			}
		})
	}
}
