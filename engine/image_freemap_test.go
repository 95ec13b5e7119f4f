package engine

import (
	"cmp"
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
	"github.com/scc-dev/scc/engine/internal/alloc"
	"github.com/scc-dev/scc/engine/internal/format"
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
// datasets created and emptied, attributes). Every writable open finds the
// image's map equal to the free space its walk of every index finds:
// nothing referenced is in it (Check also verifies that at every cycle),
// and nothing unreferenced is left out.
func TestImageFreeMapCycles(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{Image: imgOpts}
	refs := imgFile(t, mem, opts)
	rng := rand.New(rand.NewPCG(3, 4))
	// And a contiguous dataset: its commits move the whole extent.
	{
		f, err := Open(ctx, "", withDriver(opts, mem))
		must(t, err)
		sp := DatasetSpec{Type: Uint16, Shape: []uint64{300, 100}}
		ds, err := f.CreateDataset(ctx, "ct", sp)
		must(t, err)
		if ds.Layout() != Contiguous {
			t.Fatalf("layout %v", ds.Layout())
		}
		r := newRef(sp.Shape, 2, nil)
		buf := randomBytes(rng, 300*100*2)
		must(t, ds.Write(ctx, All(sp.Shape), buf))
		r.write(All(sp.Shape), buf)
		refs["ct"] = r
		ds.Close(ctx)
		must(t, f.Close(ctx))
	}
	for cycle := 0; cycle < 40; cycle++ {
		f, err := Open(ctx, "", withDriver(opts, mem))
		if err != nil {
			t.Fatal(err)
		}
		info := f.ImageInfo()
		if !info.Used || !info.FreeMap || info.Ignored != "" {
			t.Fatalf("cycle %d: %+v", cycle, info)
		}
		f.img.mu.Lock()
		claimed := f.img.mu.free
		f.img.mu.Unlock()
		walk := fullRebuild(t, f)
		if got, want := claimed, walk.FreeExtents(); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("cycle %d: free extents in the map %v, from the indexes %v", cycle, got, want)
		}
		if got, want := f.space.a.Stats(), walk.Stats(); got != want {
			t.Fatalf("cycle %d: allocator %+v, from the indexes %+v", cycle, got, want)
		}
		for _, name := range slices.Sorted(maps.Keys(refs)) {
			r := refs[name]
			ds, err := f.OpenDataset(ctx, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			shape := ds.Shape()
			if cycle%2 == 1 { // a light cycle: one element of one dataset
				if name == "fa" {
					sel := Box([]uint64{rng.Uint64N(shape[0]), rng.Uint64N(shape[1])}, []uint64{1, 1})
					buf := randomBytes(rng, r.elemSize)
					must(t, ds.Write(ctx, sel, buf))
					r.write(sel, buf)
				}
				ds.Close(ctx)
				continue
			}
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
			ds.Close(ctx)
		}
		if cycle%3 == 0 { // a dataset filled in one cycle
			tmp := fmt.Sprintf("tmp%d", cycle)
			ds, err := f.CreateDataset(ctx, tmp, DatasetSpec{Type: Uint8, Shape: []uint64{64}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{16}})
			if err != nil {
				t.Fatal(err)
			}
			if err := ds.Write(ctx, Box([]uint64{0}, []uint64{64}), randomBytes(rng, 64)); err != nil {
				t.Fatal(err)
			}
			ds.Close(ctx)
		}
		if cycle%3 == 1 { // and is emptied in the next
			ds, err := f.OpenDataset(ctx, fmt.Sprintf("tmp%d", cycle-1), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := ds.SetExtent(ctx, []uint64{0}); err != nil {
				t.Fatal(err)
			}
			ds.Close(ctx)
		}
		if err := f.SetAttr(ctx, "cycle", ScalarAttr(int64(cycle))); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
		rep, err := Check(ctx, "", &Options{Driver: mem})
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
			f, err := Open(ctx, "", withDriver(opts, mem))
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(run), uint64(w)))
					ds, err := f.OpenDataset(ctx, "ea", nil)
					if err != nil {
						return // closed already
					}
					defer ds.Close(ctx)
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
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			rep, err := Check(ctx, "", &Options{Driver: mem})
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
			ds, err := f.OpenDataset(ctx, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			refs[name].verify(t, ds)
			ds.Close(ctx)
		}
	}
}

// TestImageFreeMapCheckCatchesLiveSpace: a map that calls referenced
// bytes free (what a broken writer would record) is ErrCorrupt for Check.
func TestImageFreeMapCheckCatchesLiveSpace(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	imgFile(t, mem, &Options{Image: imgOpts}, noCheck("the test rewrites the image's free-space map over live space"))
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
	rep, err := Check(ctx, "", &Options{Driver: mem})
	if !errors.Is(err, ErrCorrupt) || rep == nil || len(rep.Problems) == 0 {
		t.Fatalf("Check of a map over the catalog: %v %+v", err, rep)
	}
	t.Log(rep.Problems[0])
	// A writable open sees it too: the catalog is the first block it
	// reads.
	f, err := Open(ctx, "", &Options{Driver: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer f.release()
	if info := f.ImageInfo(); info.Ignored == "" {
		t.Fatalf("%+v", info)
	}
}

// forgeImage rewrites the file's valid cache image through mut, with every
// checksum recomputed: the image goes past the end and the superblock (same
// generation, same slot) names it, as a deliberate forgery would.
func forgeImage(t *testing.T, drv vfd.Driver, mut func(sb format.Superblock, img *format.Image)) {
	t.Helper()
	sb, img := readImage(t, drv)
	mut(sb, &img)
	if err := format.ValidateImage(img); err != nil {
		t.Fatal(err)
	}
	b := format.EncodeImage(img)
	addr := sb.EOF
	if _, err := drv.WriteAt(b, int64(addr)); err != nil {
		t.Fatal(err)
	}
	sb.Image = format.ImageRecord{Addr: addr, Size: uint64(len(b)), Sum: format.Trailer(b)}
	sb.EOF += uint64(len(b))
	if _, err := drv.WriteAt(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation)); err != nil {
		t.Fatal(err)
	}
}

// chunkFree lists the stored chunks of the named datasets as free
// extents, in address order (what a forged map names).
func chunkFree(t *testing.T, drv vfd.Driver, names ...string) []format.FreeExtent {
	t.Helper()
	ctx := context.Background()
	f, err := Open(ctx, "", &Options{Driver: drv, ReadOnly: true})
	must(t, err)
	defer f.Close(ctx)
	var out []format.FreeExtent
	for _, n := range names {
		ds, err := f.OpenDataset(ctx, n, nil)
		must(t, err)
		exts, err := ds.ChunkExtents(ctx)
		must(t, err)
		for _, x := range exts {
			out = append(out, format.FreeExtent{Off: uint64(x.Off), Size: uint64(x.Size)})
		}
		ds.Close(ctx)
	}
	slices.SortFunc(out, func(a, b format.FreeExtent) int { return cmp.Compare(a.Off, b.Off) })
	return out
}

// TestImageForgedFreeMap: a cache image whose free-space map names live
// blocks, checksums recomputed, never makes a writable open allocate over
// them: the forgery names a few chunks of a dataset the open never
// touches (nothing short of a walk of every index can tell), every chunk,
// the whole file, or the catalog. The open reports the image's map as
// ignored; the open then writes (relocating chunks, creating a dataset) and
// closes; Close succeeds, Check passes and every dataset reads back.
func TestImageForgedFreeMap(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		mut  func(t *testing.T, drv vfd.Driver, sb format.Superblock, img *format.Image)
	}{
		{"untouched chunks", func(t *testing.T, drv vfd.Driver, _ format.Superblock, img *format.Image) {
			img.Free = chunkFree(t, drv, "fa")[:3]
		}},
		{"every chunk", func(t *testing.T, drv vfd.Driver, _ format.Superblock, img *format.Image) {
			img.Free = chunkFree(t, drv, "ea", "fa", "ga")
		}},
		{"the whole file", func(t *testing.T, _ vfd.Driver, sb format.Superblock, img *format.Image) {
			img.Free = []format.FreeExtent{{Off: format.DataStart, Size: sb.EOF - format.DataStart}}
		}},
		{"catalog", func(t *testing.T, _ vfd.Driver, sb format.Superblock, img *format.Image) {
			img.Free = []format.FreeExtent{{Off: sb.CatalogAddr, Size: sb.CatalogSize}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfd.NewMem()
			opts := &Options{Image: imgOpts}
			refs := imgFile(t, mem, opts)
			// A second cycle, so the map names real free space too.
			rng := rand.New(rand.NewPCG(27, 6))
			f, err := Open(ctx, "", withDriver(opts, mem))
			must(t, err)
			ea, err := f.OpenDataset(ctx, "ea", nil)
			must(t, err)
			sel := Box([]uint64{0, 0}, []uint64{40, 10})
			buf := randomBytes(rng, 40*10*2)
			must(t, ea.Write(ctx, sel, buf))
			refs["ea"].write(sel, buf)
			ea.Close(ctx)
			must(t, f.Close(ctx))

			forgeImage(t, mem, func(sb format.Superblock, img *format.Image) { tc.mut(t, mem, sb, img) })
			f, err = Open(ctx, "", withDriver(opts, mem))
			must(t, err)
			info := f.ImageInfo()
			t.Logf("%+v", info)
			ea, err = f.OpenDataset(ctx, "ea", nil)
			must(t, err)
			for i := 0; i < 3; i++ { // relocates ea's chunks (zstd) and frees the old ones
				buf := randomBytes(rng, 40*10*2)
				must(t, ea.Write(ctx, sel, buf))
				refs["ea"].write(sel, buf)
				must(t, f.Flush(ctx))
			}
			ea.Close(ctx)
			sp := DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, Chunk: []uint64{8, 8}}
			nd, err := f.CreateDataset(ctx, "new", sp)
			must(t, err)
			r := newRef(sp.Shape, 1, nil)
			buf = randomBytes(rng, 64*64)
			must(t, nd.Write(ctx, All(sp.Shape), buf))
			r.write(All(sp.Shape), buf)
			refs["new"] = r
			nd.Close(ctx)
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if rep, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
				t.Fatalf("%v %q", err, rep.Problems)
			}
			g := tOpen(t, mem, &Options{ReadOnly: true})
			verifyAll(t, g, refs)
			if !info.Used || !info.FreeMap || info.Ignored == "" || info.Prefetched.Entries != 0 {
				t.Fatalf("forged map not reported, or the image's entries kept: %+v", info)
			}
		})
	}
}

// FuzzImageFreeMap: whatever free-space map a decodable image carries, the
// extents an open takes from it (freeMinus) are in address order, disjoint,
// inside [DataStart, EOF) and clear of the image's own extent, and the
// walk's cross-check (freeOverlap) finds a referenced extent in them
// exactly when one overlaps.
func FuzzImageFreeMap(f *testing.F) {
	f.Add(format.EncodeImage(format.Image{HasFree: true, Free: []format.FreeExtent{{Off: format.DataStart, Size: 100}, {Off: format.DataStart + 200, Size: 50}}}), uint64(format.DataStart+1000), uint64(format.DataStart+40), uint64(30), []byte{0, 1, 100, 1})
	f.Add(format.EncodeImage(format.Image{HasFree: true, Free: []format.FreeExtent{{Off: format.DataStart, Size: 1 << 40}}}), uint64(format.DataStart+64), uint64(format.DataStart+10), uint64(10), []byte{9, 9})
	f.Fuzz(func(t *testing.T, b []byte, eof, imgAddr, imgSize uint64, liveSpec []byte) {
		img, err := format.DecodeImage(b)
		if err != nil || !img.HasFree || eof > 1<<62 || imgAddr > 1<<62 || imgSize > 1<<40 {
			return
		}
		free := freeMinus(img.Free, format.ImageRecord{Addr: imgAddr, Size: imgSize}, eof)
		prev := int64(format.DataStart)
		for _, x := range free {
			if x.Size <= 0 || x.Off < prev || uint64(x.End()) > eof {
				t.Fatalf("extent %v after %d (eof %d): %v", x, prev, eof, free)
			}
			if imgSize > 0 && uint64(x.Off) < imgAddr+imgSize && imgAddr < uint64(x.End()) {
				t.Fatalf("extent %v overlaps the image [%d,+%d)", x, imgAddr, imgSize)
			}
			prev = x.End()
		}
		// Live extents from liveSpec: pairs of (offset step, size) bytes.
		var live []alloc.Extent
		pos := int64(format.DataStart)
		for i := 0; i+1 < len(liveSpec); i += 2 {
			pos += int64(liveSpec[i])
			live = append(live, alloc.Extent{Off: pos, Size: int64(liveSpec[i+1])})
		}
		want := false
		for _, l := range live {
			for _, x := range free {
				if l.Size > 0 && l.Off < x.End() && x.Off < l.End() {
					want = true
				}
			}
		}
		if got := freeOverlap(free, live); (got != "") != want {
			t.Fatalf("freeOverlap %q, overlap %v (free %v, live %v)", got, want, free, live)
		}
	})
}
