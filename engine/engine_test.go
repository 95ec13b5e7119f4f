package engine

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

var pipelines = map[string][]Filter{
	"none":         nil,
	"shuffle+zstd": {Shuffle(), Zstd(1)},
	"deflate":      {Deflate(1)},
	"lz4":          {LZ4()},
	"crc32c":       {CRC32C()},
	"all":          {Shuffle(), CRC32C(), LZ4(), Zstd(2), Deflate(6)},
}

// TestRoundTripTypesFilters writes random hyperslabs of every element type
// through every filter pipeline, checks every read against the reference
// model, and checks again after close and reopen.
func TestRoundTripTypesFilters(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	for pname, filters := range pipelines {
		for _, typ := range Types {
			t.Run(pname+"/"+typ.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(typ), uint64(len(pname))))
				mem := vfd.NewMem()
				// A tiny cache, so chunks are evicted and reloaded all along.
				opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 8 << 10}}
				f := tCreate(t, mem, opts)
				dims := []uint64{13, 29}
				var fill []byte
				if typ.Size() > 1 && rng.IntN(2) == 0 {
					fill = bytes.Repeat([]byte{0xA5}, typ.Size())
				}
				ds, err := f.CreateDataset(ctx, "d", DatasetSpec{
					Type: typ, Shape: dims, MaxShape: []uint64{Unlimited, 40},
					Chunk: []uint64{4, 7}, Filters: filters, Fill: fill,
				})
				must(t, err)
				ref := newRef(dims, typ.Size(), fill)
				for i := 0; i < 40; i++ {
					sel := randomSelection(rng, dims)
					n := int(sel.NumElements()) * typ.Size()
					var buf []byte
					if i%2 == 0 {
						buf = compressibleBytes(rng, n)
					} else {
						buf = randomBytes(rng, n)
					}
					must(t, ds.Write(ctx, sel, buf))
					ref.write(sel, buf)
					rsel := randomSelection(rng, dims)
					got := make([]byte, int(rsel.NumElements())*typ.Size())
					must(t, ds.Read(ctx, rsel, got))
					if !bytes.Equal(got, ref.read(rsel)) {
						t.Fatalf("step %d: read differs from model", i)
					}
					if i == 20 {
						must(t, f.Flush(ctx))
					}
				}
				ref.verify(t, ds)
				must(t, f.Close(ctx))

				f = tOpen(t, mem, opts)
				ds, err = f.OpenDataset(ctx, "d", nil)
				must(t, err)
				ref.verify(t, ds)
				if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
					t.Fatal(err)
				}
				must(t, f.Close(ctx))
			})
		}
	}
}

// TestFilePathLifecycle covers Create/Open on a real file, the writer lock,
// read-only opens, and typed helpers.
func TestFilePathLifecycle(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.scc")
	f := tCreatePath(t, path, nil)
	if _, err := Open(ctx, path, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	ds, err := f.CreateDataset(ctx, "frames", DatasetSpec{
		Type: Float64, Shape: []uint64{0, 8}, MaxShape: []uint64{Unlimited, 8}, Chunk: []uint64{2, 8},
		Filters: []Filter{Shuffle(), Zstd(1)},
	})
	must(t, err)
	if _, err := f.CreateDataset(ctx, "frames", DatasetSpec{Type: Int8, Shape: []uint64{1}, Chunk: []uint64{1}}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	must(t, ds.SetExtent(ctx, []uint64{5, 8}))
	vals := make([]float64, 40)
	for i := range vals {
		vals[i] = float64(i) * 1.5
	}
	must(t, WriteSlice(ctx, ds, Box([]uint64{0, 0}, []uint64{5, 8}), vals))
	if err := WriteSlice(ctx, ds, Box([]uint64{0, 0}, []uint64{5, 8}), make([]int32, 40)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("typed mismatch: %v", err)
	}
	must(t, f.Close(ctx))
	must(t, f.Close(ctx)) // idempotent
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{1, 1}), make([]byte, 8)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}

	r, err := Open(ctx, path, &Options{ReadOnly: true})
	must(t, err)
	defer r.Close(ctx)
	if got := r.datasetNames(); len(got) != 1 || got[0] != "frames" {
		t.Fatalf("datasets %v", got)
	}
	rd, err := r.OpenDataset(ctx, "frames", nil)
	must(t, err)
	got := make([]float64, 40)
	must(t, ReadSlice(ctx, rd, Box([]uint64{0, 0}, []uint64{5, 8}), got))
	for i := range got {
		if got[i] != vals[i] {
			t.Fatalf("value %d: %v want %v", i, got[i], vals[i])
		}
	}
	if err := rd.Write(ctx, Box([]uint64{0, 0}, []uint64{1, 1}), make([]byte, 8)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write to read-only: %v", err)
	}
	if _, err := r.OpenDataset(ctx, "nope", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing dataset: %v", err)
	}
	if _, err := Check(ctx, path, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCreateReplacesFile: Create over an existing file starts it anew (its
// datasets are gone and it is as small as a new file), Create over a file
// another writer holds fails with ErrLocked and leaves it whole, and an
// empty file (as os.CreateTemp leaves one) is a valid target.
func TestCreateReplacesFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "r.scc")
	size := func() int64 {
		t.Helper()
		st, err := os.Stat(path)
		must(t, err)
		return st.Size()
	}
	f := tCreatePath(t, path, nil)
	ds, err := f.CreateDataset(ctx, "a", DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, Chunk: []uint64{32, 32}})
	must(t, err)
	must(t, ds.Write(ctx, Box([]uint64{0, 0}, []uint64{64, 64}), make([]byte, 4096)))
	must(t, f.Flush(ctx))
	full := size()
	if g, err := Create(ctx, path, nil); !errors.Is(err, ErrLocked) {
		if g != nil {
			g.Close(ctx)
		}
		t.Fatalf("Create over a held file: %v, want ErrLocked", err)
	}
	if got := size(); got != full {
		t.Fatalf("a refused Create changed the file's size from %d to %d", full, got)
	}
	must(t, f.Close(ctx))

	f = tCreatePath(t, path, nil)
	must(t, f.Close(ctx))
	if got := size(); got >= full {
		t.Fatalf("recreated file has %d bytes, the old one %d", got, full)
	}
	r, err := Open(ctx, path, &Options{ReadOnly: true})
	must(t, err)
	if got := r.datasetNames(); len(got) != 0 {
		t.Fatalf("recreated file has datasets %v", got)
	}
	must(t, r.Close(ctx))
	if _, err := Check(ctx, path, nil); err != nil {
		t.Fatal(err)
	}

	empty := filepath.Join(dir, "empty.scc")
	must(t, os.WriteFile(empty, nil, 0o644))
	f = tCreatePath(t, empty, nil)
	_, err = f.CreateDataset(ctx, "b", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{8}})
	must(t, err)
	must(t, f.Close(ctx))
	if _, err := Check(ctx, empty, nil); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyNeverSyncs: a read-only file's reads, Flush and Close sync
// nothing (see syncLatch.Sync), where a writable file's Close does.
func TestReadOnlyNeverSyncs(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "a", DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, Chunk: []uint64{32, 32}})
	must(t, err)
	must(t, ds.Write(ctx, Box([]uint64{0, 0}, []uint64{64, 64}), make([]byte, 4096)))
	must(t, f.Close(ctx))
	for _, readOnly := range []bool{true, false} {
		cnt := vfd.NewCounting(mem)
		f, err := Open(ctx, "", &Options{Driver: cnt, ReadOnly: readOnly})
		must(t, err)
		ds, err := f.OpenDataset(ctx, "a", nil)
		must(t, err)
		must(t, ds.Read(ctx, Box([]uint64{0, 0}, []uint64{64, 64}), make([]byte, 4096)))
		if !readOnly {
			must(t, ds.Write(ctx, Box([]uint64{0, 0}, []uint64{1, 1}), []byte{7}))
		}
		must(t, f.Flush(ctx))
		must(t, f.Close(ctx))
		syncs := cnt.Snapshot().Ops[vfd.OpSync]
		if readOnly && syncs != 0 {
			t.Fatalf("read-only file: %d syncs, want none", syncs)
		}
		if !readOnly && syncs == 0 {
			t.Fatal("writable file: no sync (the test does not see syncs)")
		}
	}
	if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
		t.Fatal(err)
	}
}

// TestBadInput: invalid specs and selections give typed errors, never panics.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	defer f.Close(ctx)
	bad := []DatasetSpec{
		{Type: 0, Shape: []uint64{1}, Chunk: []uint64{1}},
		{Type: Int8, Shape: nil, Chunk: []uint64{1}}, // a scalar has no chunk shape
		{Type: Int8, Shape: []uint64{4}, Chunk: []uint64{0}},
		{Type: Int8, Shape: []uint64{4}, MaxShape: []uint64{3}, Chunk: []uint64{1}},
		{Type: Int16, Shape: []uint64{4}, Chunk: []uint64{2}, Fill: []byte{1}},
		{Type: Int8, Shape: []uint64{4, 4}, Chunk: []uint64{1 << 40, 1 << 40}},
		{Type: Int8, Shape: []uint64{4}, Chunk: []uint64{2}, Filters: []Filter{Deflate(42)}},
	}
	for i, s := range bad {
		if _, err := f.CreateDataset(ctx, name(i), s); !errors.Is(err, ErrInvalid) {
			t.Errorf("spec %d: %v, want ErrInvalid", i, err)
		}
	}
	if _, err := f.CreateDataset(ctx, "", DatasetSpec{Type: Int8, Shape: []uint64{1}, Chunk: []uint64{1}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty name: %v", err)
	}
	ds, err := f.CreateDataset(ctx, "ok", DatasetSpec{Type: Uint16, Shape: []uint64{10, 10}, MaxShape: []uint64{20, 20}, Chunk: []uint64{3, 3}})
	must(t, err)
	cases := []struct {
		sel  Selection
		n    int
		want error
	}{
		{Box([]uint64{9, 9}, []uint64{2, 1}), 4, ErrOutOfRange},
		{Box([]uint64{0}, []uint64{1}), 2, ErrInvalid},
		{Box([]uint64{0, 0}, []uint64{2, 2}), 7, ErrInvalid},
		{Hyperslab([]uint64{0, 0}, []uint64{1, 1}, []uint64{2, 2}, []uint64{2, 2}), 32, ErrInvalid},
		{Box([]uint64{^uint64(0), 0}, []uint64{2, 1}), 4, ErrOutOfRange},
	}
	for i, c := range cases {
		err := ds.Write(ctx, c.sel, make([]byte, c.n))
		if !errors.Is(err, c.want) {
			t.Errorf("case %d write: %v, want %v", i, err, c.want)
		}
		err = ds.Read(ctx, c.sel, make([]byte, c.n))
		if !errors.Is(err, c.want) {
			t.Errorf("case %d read: %v, want %v", i, err, c.want)
		}
	}
	if err := ds.SetExtent(ctx, []uint64{21, 1}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("extent beyond max: %v", err)
	}
	if err := ds.SetExtent(ctx, []uint64{1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("extent rank: %v", err)
	}
	if _, err := Open(ctx, "", &Options{Driver: vfd.NewMem()}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("open empty driver: %v, want ErrCorrupt", err)
	}
}

// TestSetExtent shrinks and grows datasets of every index kind and checks
// that cut-off elements come back as the fill value, across reopen.
func TestSetExtent(t *testing.T) {
	ctx := context.Background()
	specs := map[string]DatasetSpec{
		"extensible": {Type: Int32, Shape: []uint64{10, 6}, MaxShape: []uint64{Unlimited, 6}, Chunk: []uint64{3, 4}},
		"fixed":      {Type: Int32, Shape: []uint64{10, 6}, MaxShape: []uint64{12, 9}, Chunk: []uint64{3, 4}},
		"general":    {Type: Int32, Shape: []uint64{10, 6}, MaxShape: []uint64{Unlimited, Unlimited}, Chunk: []uint64{3, 4}},
	}
	for kind, spec := range specs {
		t.Run(kind, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(kind))))
			mem := vfd.NewMem()
			opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 10}}
			f := tCreate(t, mem, opts)
			spec.Fill = []byte{7, 0, 0, 0}
			ds, err := f.CreateDataset(ctx, "d", spec)
			must(t, err)
			ref := newRef(spec.Shape, 4, spec.Fill)
			extents := [][]uint64{{4, 5}, {11, 6}, {2, 2}, {12, 6}, {0, 6}, {9, 6}}
			for step, ext := range extents {
				all := All(ref.dims)
				if prod(ref.dims) > 0 {
					buf := randomBytes(rng, int(all.NumElements())*4)
					must(t, ds.Write(ctx, all, buf))
					ref.write(all, buf)
				}
				if step%2 == 1 {
					must(t, f.Flush(ctx))
				}
				must(t, ds.SetExtent(ctx, ext))
				ref.resize(ext)
				ref.verify(t, ds)
			}
			must(t, f.Close(ctx))
			f = tOpen(t, mem, opts)
			ds, err = f.OpenDataset(ctx, "d", nil)
			must(t, err)
			ref.verify(t, ds)
			must(t, f.Close(ctx))
			if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUnwrittenReadsFillWithoutIO: reading chunks that exist nowhere does no
// I/O at all.
func TestUnwrittenReadsFillWithoutIO(t *testing.T) {
	ctx := context.Background()
	cnt := vfd.NewCounting(vfd.NewMem())
	f := tCreate(t, cnt, nil)
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{100, 100}, Chunk: []uint64{10, 10}, Fill: []byte{9}})
	must(t, err)
	before := cnt.Snapshot()
	buf := make([]byte, 100*100)
	must(t, ds.Read(ctx, All([]uint64{100, 100}), buf))
	if d := cnt.Snapshot().Sub(before); d.Ops != (vfd.Counts{}).Ops {
		t.Fatalf("reading unwritten chunks did I/O: %+v", d)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{9}, len(buf))) {
		t.Fatal("unwritten elements do not read as the fill value")
	}
}

// TestWriteBehindFollowsNoSync: a file the engine opens keeps the driver's
// write-behind (its Flush's fsync then finds most pages written) unless
// Options.NoSync says it is never synced.
func TestWriteBehindFollowsNoSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wb.scc")
	for _, noSync := range []bool{false, true} {
		want := int64(vfd.DefaultWriteBehind)
		if noSync {
			want = 0
		}
		f := tCreatePath(t, path, &Options{NoSync: noSync})
		if got := f.drv.(*syncLatch).Driver.(*vfd.File).WriteBehind(); got != want {
			t.Errorf("Create, NoSync %v: write-behind %d, want %d", noSync, got, want)
		}
		must(t, f.Close(context.Background()))
		f = tOpenPath(t, path, &Options{NoSync: noSync})
		if got := f.drv.(*syncLatch).Driver.(*vfd.File).WriteBehind(); got != want {
			t.Errorf("Open, NoSync %v: write-behind %d, want %d", noSync, got, want)
		}
		must(t, f.Close(context.Background()))
	}
}
