package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

func vcache(t *testing.T) *cache.Cache {
	t.Helper()
	c, err := cache.New(cache.Config{QuiescentBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// frameVal is the value of element e of global frame g.
func frameVal(g, e uint64) uint32 { return uint32(g)<<8 | uint32(e%251) }

func frameData(g, elems uint64) []uint32 {
	out := make([]uint32, elems)
	for e := range out {
		out[e] = frameVal(g, uint64(e))
	}
	return out
}

// roundRobin is the mapping list of n writers writing frames round-robin:
// frame g of the virtual dataset is frame g/n of writer g%n.
func roundRobin(n int, h, w uint64, pattern bool) []VirtualMapping {
	var ms []VirtualMapping
	for i := 0; i < n; i++ {
		ms = append(ms, VirtualMapping{
			Virtual: Hyperslab([]uint64{uint64(i), 0, 0}, []uint64{uint64(n), 1, 1}, []uint64{Unlimited, 1, 1}, []uint64{1, h, w}),
			File:    fmt.Sprintf("w%d.scc", i),
			Dataset: "frames",
			Source:  Hyperslab([]uint64{0, 0, 0}, nil, []uint64{Unlimited, 1, 1}, []uint64{1, h, w}),
		})
	}
	return ms
}

func TestVirtualCreateRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := vcache(t)
	src, err := Create(ctx, filepath.Join(dir, "src.scc"), &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.CreateDataset(ctx, "i16", DatasetSpec{Type: Int16, Shape: []uint64{4, 4}, Chunk: []uint64{2, 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CreateDataset(ctx, "u32", DatasetSpec{Type: Uint32, Shape: []uint64{4, 4}, Chunk: []uint64{2, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := Create(ctx, filepath.Join(dir, "v.scc"), &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	box := func(s, n []uint64) Selection { return Box(s, n) }
	ok := VirtualMapping{Virtual: box([]uint64{0, 0}, []uint64{4, 4}), File: "src.scc", Dataset: "u32", Source: box([]uint64{0, 0}, []uint64{4, 4})}
	cases := []struct {
		what string
		spec VirtualSpec
	}{
		{"overlap", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{ok, {Virtual: box([]uint64{3, 3}, []uint64{2, 2}), File: "src.scc", Dataset: "u32", Source: box([]uint64{0, 0}, []uint64{2, 2})}}}},
		{"strided overlap", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, MaxShape: []uint64{Unlimited, 8}, Mappings: []VirtualMapping{
			{Virtual: Hyperslab([]uint64{0, 0}, []uint64{6, 1}, []uint64{Unlimited, 1}, []uint64{1, 8}), File: "a", Dataset: "x", Source: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, 8})},
			{Virtual: Hyperslab([]uint64{4, 0}, []uint64{4, 1}, []uint64{Unlimited, 1}, []uint64{1, 8}), File: "b", Dataset: "x", Source: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, 8})},
		}}},
		{"element count", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: box([]uint64{0, 0}, []uint64{4, 4}), File: "src.scc", Dataset: "u32", Source: box([]uint64{0, 0}, []uint64{4, 3})}}}},
		{"shape", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: box([]uint64{0, 0}, []uint64{2, 8}), File: "src.scc", Dataset: "u32", Source: box([]uint64{0, 0}, []uint64{4, 4})}}}},
		{"rank", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: box([]uint64{0}, []uint64{4}), File: "src.scc", Dataset: "u32", Source: box([]uint64{0}, []uint64{4})}}}},
		{"beyond max shape", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: box([]uint64{6, 0}, []uint64{4, 4}), File: "src.scc", Dataset: "u32", Source: box([]uint64{0, 0}, []uint64{4, 4})}}}},
		{"type", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: box([]uint64{0, 0}, []uint64{4, 4}), File: "src.scc", Dataset: "i16", Source: box([]uint64{0, 0}, []uint64{4, 4})}}}},
		{"source rank", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: box([]uint64{0, 0}, []uint64{1, 4}), File: "src.scc", Dataset: "u32", Source: box([]uint64{0}, []uint64{4})}}}},
		{"unlimited along a fixed dimension", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, 8}), File: "a", Dataset: "x", Source: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, 8})}}}},
		{"unlimited onto bounded", VirtualSpec{Type: Uint32, Shape: []uint64{0, 8}, MaxShape: []uint64{Unlimited, 8}, Mappings: []VirtualMapping{{Virtual: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, 8}), File: "a", Dataset: "x", Source: box([]uint64{0, 0}, []uint64{1, 8})}}}},
		{"printf on a bounded mapping", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: box([]uint64{0, 0}, []uint64{4, 4}), File: "s%b.scc", Dataset: "x", Source: box([]uint64{0, 0}, []uint64{4, 4})}}}},
		{"bad pattern", VirtualSpec{Type: Uint32, Shape: []uint64{0, 8}, MaxShape: []uint64{Unlimited, 8}, Mappings: []VirtualMapping{{Virtual: Hyperslab([]uint64{0, 0}, nil, []uint64{Unlimited, 1}, []uint64{1, 8}), File: "s%d.scc", Dataset: "x", Source: box([]uint64{0, 0}, []uint64{1, 8})}}}},
		{"no mappings", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}}},
		{"fill size", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Fill: []byte{1}, Mappings: []VirtualMapping{ok}}},
		{"block larger than stride", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{{Virtual: Hyperslab([]uint64{0, 0}, []uint64{1, 1}, []uint64{2, 4}, []uint64{2, 1}), File: "a", Dataset: "x", Source: box([]uint64{0, 0}, []uint64{4, 4})}}}},
	}
	for _, tc := range cases {
		if _, err := f.CreateVirtualDataset(ctx, "v", tc.spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.what, err)
		}
	}
	if names := f.datasetNames(); len(names) != 0 {
		t.Fatalf("refused creations left datasets %v", names)
	}
	// The valid one, to be sure the refusals were not for another reason.
	ds, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{8, 8}, Mappings: []VirtualMapping{ok}})
	if err != nil {
		t.Fatal(err)
	}
	// Writes, extent changes and chunk calls are refused with typed errors.
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{1, 1}), make([]byte, 4)); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "virtual") {
		t.Fatalf("Write: %v, want ErrReadOnly saying virtual", err)
	}
	if err := ds.SetExtent(ctx, []uint64{4, 4}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("SetExtent: %v, want ErrReadOnly", err)
	}
	if _, _, err := ds.ReadChunkRaw(ctx, []uint64{0, 0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ReadChunkRaw: %v, want ErrInvalid", err)
	}
	if ds.Layout() != Virtual {
		t.Fatalf("layout %v", ds.Layout())
	}
}

// TestVirtualRoundTrip: a committed virtual dataset reopens with its
// mappings, attributes and fill, reads its sources (in another file and in
// its own), and passes Check.
func TestVirtualRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := vcache(t)
	src, err := Create(ctx, filepath.Join(dir, "sub", "src.scc"), &Options{Cache: c, NoSync: true})
	if err == nil {
		t.Fatal("created a file in a missing directory")
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if src, err = Create(ctx, filepath.Join(dir, "sub", "src.scc"), &Options{Cache: c, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	a, _ := src.CreateDataset(ctx, "a", DatasetSpec{Type: Uint32, Shape: []uint64{4, 6}, Chunk: []uint64{3, 4}})
	if err := WriteSlice(ctx, a, All([]uint64{4, 6}), frameData(1, 24)); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	vpath := filepath.Join(dir, "v.scc")
	f, err := Create(ctx, vpath, &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	own, _ := f.CreateDataset(ctx, "own", DatasetSpec{Type: Uint32, Shape: []uint64{2, 6}, Chunk: []uint64{2, 6}})
	if err := WriteSlice(ctx, own, All([]uint64{2, 6}), frameData(2, 12)); err != nil {
		t.Fatal(err)
	}
	ds, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{8, 6}, Fill: []byte{7, 0, 0, 0}, Mappings: []VirtualMapping{
		{Virtual: Box([]uint64{0, 0}, []uint64{4, 6}), File: "sub/src.scc", Dataset: "a", Source: Box([]uint64{0, 0}, []uint64{4, 6})},
		{Virtual: Box([]uint64{5, 0}, []uint64{2, 6}), File: "", Dataset: "own", Source: Box([]uint64{0, 0}, []uint64{2, 6})},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.SetAttr(ctx, "units", StringAttr("counts")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(ctx, vpath, nil); err != nil {
		t.Fatalf("Check: %v", err)
	}
	f, err = Open(ctx, vpath, &Options{Cache: c, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ds.Attr("units"); err != nil {
		t.Fatal(err)
	} else if s, _ := v.Str(); s != "counts" {
		t.Fatalf("attribute %q", s)
	}
	got := make([]uint32, 48)
	if err := ReadSlice(ctx, ds, All([]uint64{8, 6}), got); err != nil {
		t.Fatal(err)
	}
	for i, x := range got {
		var want uint32 = 7
		switch {
		case i < 24:
			want = frameVal(1, uint64(i))
		case i >= 30 && i < 42:
			want = frameVal(2, uint64(i-30))
		}
		if x != want {
			t.Fatalf("element %d = %#x, want %#x", i, x, want)
		}
	}
}

// TestVirtualSourceTypeLater: a printf source that appears later with
// another element type fails the reads that reach it (ErrInvalid naming
// it), never reinterpreted; reads of other blocks go on.
func TestVirtualSourceTypeLater(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := vcache(t)
	mk := func(name string, typ Type) {
		f, err := Create(ctx, filepath.Join(dir, name), &Options{Cache: c, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: typ, Shape: []uint64{4}, Chunk: []uint64{4}}); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mk("b0.scc", Uint32)
	vpath := filepath.Join(dir, "v.scc")
	f, err := Create(ctx, vpath, &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{0}, MaxShape: []uint64{Unlimited}, Mappings: []VirtualMapping{
		{Virtual: Hyperslab([]uint64{0}, []uint64{4}, []uint64{Unlimited}, []uint64{4}), File: "b%b.scc", Dataset: "d", Source: Box([]uint64{0}, []uint64{4})},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, vpath, &Options{Cache: c, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	ds, err := r.OpenDataset(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sh := ds.Shape(); sh[0] != 4 {
		t.Fatalf("extent %v, want [4]", sh)
	}
	mk("b1.scc", Int32)
	if err := ds.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if sh := ds.Shape(); sh[0] != 8 {
		t.Fatalf("extent after refresh %v, want [8]", sh)
	}
	buf := make([]byte, 32)
	if err := ds.Read(ctx, All([]uint64{8}), buf); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "b1.scc") {
		t.Fatalf("read over a source of another type: %v, want ErrInvalid naming b1.scc", err)
	}
	if err := ds.Read(ctx, Box([]uint64{0}, []uint64{4}), buf[:16]); err != nil {
		t.Fatalf("read of the good block: %v", err)
	}
}

// TestVirtualSourceFaults fails, one at a time, every read operation a
// virtual read makes of its sources (each a separate run on a fresh
// cache): each failure comes back as ErrIO naming the source, with the
// injected cause in the chain, never as fill; the run with no failure
// reads the right values.
func TestVirtualSourceFaults(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const h, w, frames = 4, 4, 12
	c0 := vcache(t)
	for i := 0; i < 2; i++ {
		f, err := Create(ctx, filepath.Join(dir, fmt.Sprintf("w%d.scc", i)), &Options{Cache: c0, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		ds, _ := f.CreateDataset(ctx, "frames", DatasetSpec{Type: Uint32, Shape: []uint64{frames / 2, h, w}, MaxShape: []uint64{Unlimited, h, w}, Chunk: []uint64{1, h, w}, Filters: []Filter{Shuffle(), Deflate(1)}})
		for j := uint64(0); j < frames/2; j++ {
			if err := WriteSlice(ctx, ds, Box([]uint64{j, 0, 0}, []uint64{1, h, w}), frameData(2*j+uint64(i), h*w)); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	vpath := filepath.Join(dir, "v.scc")
	f, err := Create(ctx, vpath, &Options{Cache: c0, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{0, h, w}, MaxShape: []uint64{Unlimited, h, w}, Mappings: roundRobin(2, h, w, false)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for n := int64(0); ; n++ {
		if n > 500 {
			t.Fatal("no fault-free run after 500 operations")
		}
		var armed atomic.Bool
		var seen atomic.Int64
		var drivers []vfd.Driver
		var dmu sync.Mutex
		trig := vfd.TriggerFunc(func(info vfd.OpInfo) bool {
			if !armed.Load() || (info.Op != vfd.OpRead && info.Op != vfd.OpReadV) {
				return false
			}
			return seen.Add(1)-1 == n
		})
		open := func(ctx context.Context, name string, opts *Options) (*File, error) {
			drv, err := vfd.Open(name, os.O_RDONLY, 0)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
				}
				return nil, err
			}
			dmu.Lock()
			drivers = append(drivers, drv)
			dmu.Unlock()
			return Open(ctx, "", withDriver(opts, vfd.NewFault(drv, vfd.Fail(trig))))
		}
		c, err := cache.New(cache.Config{QuiescentBytes: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Open(ctx, vpath, &Options{Cache: c, ReadOnly: true, Virtual: VirtualOptions{Open: open}})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := r.OpenDataset(ctx, "v", nil)
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		got := make([]uint32, frames*h*w)
		err = ReadSlice(ctx, ds, All([]uint64{frames, h, w}), got)
		armed.Store(false)
		injected := seen.Load() > n
		r.Close(ctx)
		c.Close()
		for _, d := range drivers {
			d.Close()
		}
		if !injected {
			if err != nil {
				t.Fatalf("fault-free run: %v", err)
			}
			for g := uint64(0); g < frames; g++ {
				for e := uint64(0); e < h*w; e++ {
					if x := got[g*h*w+e]; x != frameVal(g, e) {
						t.Fatalf("frame %d element %d = %#x", g, e, x)
					}
				}
			}
			t.Logf("%d read operations failed one by one", n)
			return
		}
		if !errors.Is(err, ErrIO) || !errors.Is(err, vfd.ErrInjected) || !strings.Contains(err.Error(), "source w") {
			t.Fatalf("read op %d failed: read returned %v, want ErrIO naming the source", n, err)
		}
	}
}

// TestVirtualFollowWriters: four writers append frames round-robin, each
// to its own file, flushing at random moments; readers loop Refresh+Read
// on the virtual dataset (one per extent view) and check every frame they
// can see against what the writers had acknowledged before the Refresh
// and what they had written after the Read. The first-missing reader
// keeps every source open (so only Refresh shows it new frames), the
// other keeps two of four (so sources are closed and reopened).
func TestVirtualFollowWriters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const nw, h, w = 4, 8, 8
	perWriter := 150
	if testing.Short() {
		perWriter = 40
	}
	c := vcache(t)
	writers := make([]*File, nw)
	dss := make([]*Dataset, nw)
	for i := range writers {
		f, err := Create(ctx, filepath.Join(dir, fmt.Sprintf("w%d.scc", i)), &Options{Cache: c, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := f.CreateDataset(ctx, "frames", DatasetSpec{Type: Uint32, Shape: []uint64{0, h, w}, MaxShape: []uint64{Unlimited, h, w}, Chunk: []uint64{1, h, w}, Filters: []Filter{Shuffle(), Deflate(1)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		writers[i], dss[i] = f, ds
	}
	vpath := filepath.Join(dir, "v.scc")
	vf, err := Create(ctx, vpath, &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vf.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{0, h, w}, MaxShape: []uint64{Unlimited, h, w}, Mappings: roundRobin(nw, h, w, false)}); err != nil {
		t.Fatal(err)
	}
	if err := vf.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// acked[i]: frames of writer i a Flush has made durable; started[i]:
	// frames whose extent change has begun (an upper bound of what any
	// commit can hold).
	var acked, started [nw]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, nw+2)
	var readersUp sync.WaitGroup // writers start once the readers follow
	readersUp.Add(2)
	for i := 0; i < nw; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			readersUp.Wait()
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			ds := dss[i]
			for j := 0; j < perWriter; j++ {
				started[i].Store(int64(j + 1))
				if err := ds.SetExtent(ctx, []uint64{uint64(j + 1), h, w}); err != nil {
					errs <- err
					return
				}
				g := uint64(j*nw + i)
				if err := WriteSlice(ctx, ds, Box([]uint64{uint64(j), 0, 0}, []uint64{1, h, w}), frameData(g, h*w)); err != nil {
					errs <- err
					return
				}
				if rng.IntN(3) == 0 || j == perWriter-1 {
					if err := writers[i].Flush(ctx); err != nil {
						errs <- err
						return
					}
					acked[i].Store(int64(j + 1))
				}
			}
		}(i)
	}
	var done atomic.Bool
	var rounds [2]atomic.Int64
	var rwg sync.WaitGroup
	for vi, view := range []VirtualView{FirstMissing, LastAvailable} {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			up := sync.OnceFunc(readersUp.Done)
			defer up()
			r, err := Open(ctx, vpath, &Options{Cache: c, ReadOnly: true, Virtual: VirtualOptions{View: view, MaxSourceFiles: []int{0, 2}[vi]}})
			if err != nil {
				errs <- err
				return
			}
			defer r.Close(ctx)
			ds, err := r.OpenDataset(ctx, "v", nil)
			if err != nil {
				errs <- err
				return
			}
			up()
			for last := false; !last; {
				last = done.Load()
				var ack [nw]int64
				for i := range ack {
					ack[i] = acked[i].Load()
				}
				if err := ds.Refresh(ctx); err != nil {
					if errors.Is(err, ErrStale) {
						continue
					}
					errs <- fmt.Errorf("refresh: %w", err)
					return
				}
				n := ds.Shape()[0]
				buf := make([]uint32, n*h*w)
				if n > 0 {
					if err := ReadSlice(ctx, ds, All([]uint64{n, h, w}), buf); err != nil {
						if errors.Is(err, ErrStale) {
							continue
						}
						errs <- fmt.Errorf("read: %w", err)
						return
					}
				}
				var st [nw]int64
				for i := range st {
					st[i] = started[i].Load()
				}
				// The extent: every acknowledged frame, nothing never begun.
				var lo, hi uint64
				if view == FirstMissing {
					lo, hi = Unlimited, Unlimited
				}
				for i := 0; i < nw; i++ {
					a, s := uint64(i)+uint64(nw)*uint64(ack[i]), uint64(i)+uint64(nw)*uint64(st[i])
					switch {
					case view == FirstMissing:
						lo, hi = min(lo, a), min(hi, s)
					case ack[i] > 0:
						lo, hi = max(lo, a-uint64(nw)+1), max(hi, s)
					default:
						hi = max(hi, s)
					}
				}
				if n < lo || n > hi {
					errs <- fmt.Errorf("view %d: extent %d outside [%d, %d] (acked %v, started %v)", view, n, lo, hi, ack, st)
					return
				}
				for g := uint64(0); g < n; g++ {
					i, j := g%nw, int64(g/nw)
					frame := buf[g*h*w : (g+1)*h*w]
					fill := true
					for _, x := range frame {
						if x != 0 {
							fill = false
						}
					}
					if fill && j >= ack[i] && view == LastAvailable {
						continue // not committed yet: fill in this view
					}
					if j >= st[i] {
						errs <- fmt.Errorf("view %d: frame %d visible before its writer began it", view, g)
						return
					}
					for e, x := range frame {
						if x != frameVal(g, uint64(e)) {
							errs <- fmt.Errorf("view %d: frame %d element %d = %#x (acked %v)", view, g, e, x, ack)
							return
						}
					}
				}
				rounds[vi].Add(1)
			}
		}()
	}
	wg.Wait()
	for i := range writers {
		if err := writers[i].Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// After the writers closed, a last round saw everything: check it
	// directly too.
	r, err := Open(ctx, vpath, &Options{Cache: c, ReadOnly: true, Virtual: VirtualOptions{View: FirstMissing}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	ds, err := r.OpenDataset(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := ds.Shape()[0]; n != uint64(nw*perWriter) {
		t.Fatalf("final extent %d, want %d", n, nw*perWriter)
	}
	t.Logf("reader rounds: first-missing %d, last-available %d", rounds[0].Load(), rounds[1].Load())
}

// TestVirtualSourceLRU: with MaxSourceFiles 2, concurrent reads over six
// source files read the right values while at most two source files stay
// open once they are done.
func TestVirtualSourceLRU(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := vcache(t)
	const ns, h = 6, 4
	var ms []VirtualMapping
	for i := 0; i < ns; i++ {
		f, err := Create(ctx, filepath.Join(dir, fmt.Sprintf("s%d.scc", i)), &Options{Cache: c, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		ds, _ := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint32, Shape: []uint64{1, h}, Chunk: []uint64{1, h}})
		if err := WriteSlice(ctx, ds, All([]uint64{1, h}), frameData(uint64(i), h)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, VirtualMapping{Virtual: Box([]uint64{uint64(i), 0}, []uint64{1, h}), File: fmt.Sprintf("s%d.scc", i), Dataset: "d", Source: Box([]uint64{0, 0}, []uint64{1, h})})
	}
	vpath := filepath.Join(dir, "v.scc")
	f, err := Create(ctx, vpath, &Options{Cache: c, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVirtualDataset(ctx, "v", VirtualSpec{Type: Uint32, Shape: []uint64{ns, h}, Mappings: ms}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, vpath, &Options{Cache: c, ReadOnly: true, Virtual: VirtualOptions{MaxSourceFiles: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	ds, err := r.OpenDataset(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for k := 0; k < 50; k++ {
				row := rng.Uint64N(ns)
				got := make([]uint32, h)
				if err := ReadSlice(ctx, ds, Box([]uint64{row, 0}, []uint64{1, h}), got); err != nil {
					errs <- err
					return
				}
				for e, x := range got {
					if x != frameVal(row, uint64(e)) {
						errs <- fmt.Errorf("row %d element %d = %#x", row, e, x)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r.virt.mu.Lock()
	open := 0
	for _, sf := range r.virt.files {
		if sf.opened.Load() {
			open++
		}
	}
	r.virt.mu.Unlock()
	if open > 2 {
		t.Fatalf("%d source files open, bound 2", open)
	}
}
