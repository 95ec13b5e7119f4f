package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/alloc"
	"github.com/scc-dev/scc/engine/format"
	"github.com/scc-dev/scc/vfd"
)

// The free-space map a cache image carries (FORMAT.md §20, image.go): a
// writable open with a valid image rebuilds its allocator from the map
// instead of walking every index.

// fullRebuild is the allocator a writable open without an image builds
// for f's committed state.
func fullRebuild(t *testing.T, f *File) *alloc.Allocator {
	t.Helper()
	live, err := f.liveExtents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := f.sb.Load().Image; r.Exists() {
		live = append(live, alloc.Extent{Off: int64(r.Addr), Size: int64(r.Size)})
	}
	a, err := alloc.Rebuild(format.DataStart, int64(f.sb.Load().EOF), live)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestImageFreeMapCycles: open/change/close cycles of every kind of change
// a commit makes (overwrites that relocate chunks, appends, shrinks,
// datasets created and emptied, attributes). Every writable open after
// the first uses the image's map, and the allocator it builds equals the
// one a walk of every index builds: nothing referenced is free (Check
// also verifies that at every cleanup), and nothing unreferenced is lost
// (Check finds no byte the map leaves out).
func TestImageFreeMapCycles(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{Image: imgOpts}
	refs := imgFile(t, mem, opts)
	rng := rand.New(rand.NewPCG(3, 4))
	// And a contiguous dataset: its commits move the whole extent.
	{
		f, err := OpenWith(mem, opts)
		must(t, err)
		sp := DatasetSpec{Type: Uint16, Shape: []uint64{300, 100}}
		ds, err := f.CreateDataset("ct", sp)
		must(t, err)
		if ds.Layout() != Contiguous {
			t.Fatalf("layout %v", ds.Layout())
		}
		r := newRef(sp.Shape, 2, nil)
		buf := randomBytes(rng, 300*100*2)
		must(t, ds.Write(ctx, All(sp.Shape), buf))
		r.write(All(sp.Shape), buf)
		refs["ct"] = r
		ds.Close()
		must(t, f.Close())
	}
	for cycle := 0; cycle < 40; cycle++ {
		f, err := OpenWith(mem, opts)
		if err != nil {
			t.Fatal(err)
		}
		info := f.ImageInfo()
		if !info.FreeMapUsed {
			t.Fatalf("cycle %d: the writable open did not use the image's free-space map: %+v", cycle, info)
		}
		if got, want := f.space.a.FreeExtents(), fullRebuild(t, f).FreeExtents(); !reflect.DeepEqual(got, want) {
			t.Fatalf("cycle %d: free extents from the map %v, from the indexes %v", cycle, got, want)
		}
		if got, want := f.space.a.Stats(), fullRebuild(t, f).Stats(); got != want {
			t.Fatalf("cycle %d: allocator from the map %+v, from the indexes %+v", cycle, got, want)
		}
		for _, name := range slices.Sorted(maps.Keys(refs)) {
			r := refs[name]
			ds, err := f.OpenDataset(name)
			if err != nil {
				t.Fatal(err)
			}
			shape := ds.Shape()
			switch rng.IntN(4) {
			case 0, 1: // overwrite a box (zstd chunks change size and move)
				start, count := make([]uint64, len(shape)), make([]uint64, len(shape))
				for d := range shape {
					start[d] = rng.Uint64N(shape[d])
					count[d] = 1 + rng.Uint64N(shape[d]-start[d])
				}
				sel := Box(start, count)
				buf := randomBytes(rng, int(sel.NumElements())*r.elemSize)
				if err := ds.Write(ctx, sel, buf); err != nil {
					t.Fatal(err)
				}
				r.write(sel, buf)
			case 2: // resize the unlimited ones (shrinks free chunks)
				if name == "fa" || name == "ct" {
					break
				}
				dims := append([]uint64(nil), shape...)
				dims[0] = 1 + rng.Uint64N(2*shape[0])
				if err := ds.SetExtent(ctx, dims); err != nil {
					t.Fatal(err)
				}
				r.resize(dims)
			}
			ds.Close()
		}
		if cycle%3 == 0 { // a dataset filled in one cycle
			tmp := fmt.Sprintf("tmp%d", cycle)
			ds, err := f.CreateDataset(tmp, DatasetSpec{Type: Uint8, Shape: []uint64{64}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{16}})
			if err != nil {
				t.Fatal(err)
			}
			if err := ds.Write(ctx, Box([]uint64{0}, []uint64{64}), randomBytes(rng, 64)); err != nil {
				t.Fatal(err)
			}
			ds.Close()
		}
		if cycle%3 == 1 { // and is emptied in the next
			ds, err := f.OpenDataset(fmt.Sprintf("tmp%d", cycle-1))
			if err != nil {
				t.Fatal(err)
			}
			if err := ds.SetExtent(ctx, []uint64{0}); err != nil {
				t.Fatal(err)
			}
			ds.Close()
		}
		if err := f.SetAttr(ctx, "cycle", ScalarAttr(int64(cycle))); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Check(ctx, mem)
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		if !rep.ImageFreeMap || rep.ImageMapLeak != 0 {
			t.Fatalf("cycle %d: image free map %v, %d bytes left out", cycle, rep.ImageFreeMap, rep.ImageMapLeak)
		}
	}
	f := tOpen(t, mem, &Options{ReadOnly: true})
	verifyAll(t, f, refs)
}

// TestImageFreeMapRacingClose: writers still running when Close commits.
// Their frees may belong to chunks the closing state still names, so the
// map leaves them out: Check proves that no byte the state references is
// in the map (the leak is allowed and reported), and the next writable
// open from the map never overwrites live data.
func TestImageFreeMapRacingClose(t *testing.T) {
	ctx := context.Background()
	for run := 0; run < 12; run++ {
		mem := vfd.NewMem()
		refs := imgFile(t, mem, &Options{Image: imgOpts})
		// A cache of a few chunks: the racing writes are written back
		// (and their old chunks freed) while the commit runs.
		opts := &Options{Image: imgOpts, CacheConfig: cache.Config{QuiescentBytes: 2 << 10}}
		for cycle := 0; cycle < 3; cycle++ {
			f, err := OpenWith(mem, opts)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(run), uint64(w)))
					ds, err := f.OpenDataset("ea")
					if err != nil {
						return // closed already
					}
					defer ds.Close()
					for i := 0; ; i++ {
						row := rng.Uint64N(40)
						if err := ds.Write(ctx, Box([]uint64{row, 0}, []uint64{1, 10}), randomBytes(rng, 20)); err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Error(err)
							}
							return
						}
					}
				}()
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			rep, err := Check(ctx, mem)
			if err != nil {
				t.Fatalf("run %d cycle %d: %v", run, cycle, err)
			}
			if !rep.ImageFreeMap {
				t.Fatalf("run %d cycle %d: no free map", run, cycle)
			}
		}
		// The datasets nobody raced keep their data through every
		// allocator built from a map.
		f := tOpen(t, mem, &Options{ReadOnly: true})
		for _, name := range []string{"fa", "ga"} {
			ds, err := f.OpenDataset(name)
			if err != nil {
				t.Fatal(err)
			}
			refs[name].verify(t, ds)
			ds.Close()
		}
	}
}

// TestImageFreeMapCheckCatchesLiveSpace: a map that calls referenced
// bytes free (what a broken writer would record) is ErrCorrupt for Check.
func TestImageFreeMapCheckCatchesLiveSpace(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	imgFile(t, mem, &Options{Image: imgOpts})
	sb, img := readImage(t, mem)
	if !img.HasFree {
		t.Fatal("image without a free-space map")
	}
	// The doctored image goes past the end, and the superblock (same
	// generation, same slot) names it.
	img.Free = []format.FreeExtent{{Off: sb.CatalogAddr, Size: sb.CatalogSize}}
	b := format.EncodeImage(img)
	addr := sb.EOF
	if _, err := mem.WriteAt(b, int64(addr)); err != nil {
		t.Fatal(err)
	}
	sb.Image = format.ImageRecord{Addr: addr, Size: uint64(len(b)), Sum: format.Trailer(b)}
	sb.EOF += uint64(len(b))
	if _, err := mem.WriteAt(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation)); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(ctx, mem)
	if !errors.Is(err, ErrCorrupt) || rep == nil || len(rep.Problems) == 0 {
		t.Fatalf("Check of a map over the catalog: %v %+v", err, rep)
	}
	t.Log(rep.Problems[0])
	// A writable open trusts a valid image's map: this is what Check
	// exists to catch. (With the map, the next allocation would land on
	// the catalog.)
	f, err := OpenWith(mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !f.ImageInfo().FreeMapUsed {
		t.Fatalf("%+v", f.ImageInfo())
	}
	f.release()
}
