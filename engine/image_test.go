package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// Tests of the cache image (Cache image RFC §6): control flow (1A-1E), contents
// and structure (2A-2E), write and read (3, 4), prefetched entries on
// access, flush and eviction (5), sizing state (2C, 4A-II), SWMR readers
// (8), crash points and faults inside the image write, and age-out.
// Item 6 (reloaded flush dependencies) has no counterpart: an image here
// holds only clean blocks, which depend on nothing.

var imgOpts = ImageOptions{Generate: true}

// imgSpecs are three datasets, one per index kind, one filtered.
var imgSpecs = map[string]DatasetSpec{
	"ea": {Type: Uint16, Shape: []uint64{40, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
	"fa": {Type: Int32, Shape: []uint64{30, 30}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}},
	"ga": {Type: Uint8, Shape: []uint64{20, 20}, MaxShape: []uint64{Unlimited, Unlimited}, Chunk: []uint64{3, 3}},
}

// imgFile creates a file on drv with imgSpecs, fills every dataset and
// closes it with opts; it returns the model.
func imgFile(t *testing.T, drv vfd.Driver, opts *Options, o ...tOpt) map[string]*refArray {
	t.Helper()
	ctx := context.Background()
	f := tCreate(t, drv, opts, o...)
	refs := map[string]*refArray{}
	rng := rand.New(rand.NewPCG(7, 7))
	for n, sp := range imgSpecs {
		ds, err := f.CreateDataset(ctx, n, sp)
		if err != nil {
			t.Fatal(err)
		}
		r := newRef(sp.Shape, sp.Type.Size(), sp.Fill)
		sel := Box(make([]uint64, len(sp.Shape)), sp.Shape)
		buf := randomBytes(rng, int(sel.NumElements())*r.elemSize)
		if err := ds.Write(ctx, sel, buf); err != nil {
			t.Fatal(err)
		}
		r.write(sel, buf)
		refs[n] = r
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return refs
}

func verifyAll(t *testing.T, f *File, refs map[string]*refArray) {
	t.Helper()
	for n, r := range refs {
		ds, err := f.OpenDataset(context.Background(), n, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.verify(t, ds)
		ds.Close(context.Background())
	}
}

func readImage(t *testing.T, drv vfd.Driver) (format.Superblock, format.Image) {
	t.Helper()
	sb, err := readSuperblock(drv)
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Image.Exists() {
		t.Fatal("no image recorded")
	}
	buf := make([]byte, sb.Image.Size)
	if err := readFull(drv, buf, int64(sb.Image.Addr)); err != nil {
		t.Fatal(err)
	}
	img, err := format.DecodeImage(buf)
	if err != nil {
		t.Fatal(err)
	}
	return sb, img
}

// TestImageOptionsValidate: out-of-range options are ErrInvalid at Open and
// Create, before anything is read or written (1A).
func TestImageOptionsValidate(t *testing.T) {
	for _, o := range []ImageOptions{{MaxAge: -2}, {MaxAge: 101}, {ChunkBytes: -2}} {
		if _, err := Create(context.Background(), "", &Options{Driver: vfd.NewMem(), Image: o}); !errors.Is(err, ErrInvalid) {
			t.Errorf("create with %+v: %v, want ErrInvalid", o, err)
		}
		c := vfd.NewCounting(vfd.NewMem())
		if _, err := Open(context.Background(), "", &Options{Driver: c, Image: o}); !errors.Is(err, ErrInvalid) || c.Snapshot().Ops[vfd.OpRead] != 0 {
			t.Errorf("open with %+v: %v after %d reads, want ErrInvalid and none", o, err, c.Snapshot().Ops[vfd.OpRead])
		}
	}
	for _, o := range []ImageOptions{{}, {MaxAge: -1}, {MaxAge: 100}, {ChunkBytes: -1}, {Generate: true, SaveSizing: true, ChunkBytes: 1}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestImageControl: the option makes Close write an image (1A, 1C); the
// next open finds and uses it (1E); without the option no image is
// written; a read-only open ignores the request (Cache image RFC §3.1) and
// leaves an image in place, a writable open removes it at its first
// commit (Cache image RFC §2).
func TestImageControl(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	refs := imgFile(t, mem, &Options{Image: imgOpts})
	sb, img := readImage(t, mem)
	if img.Generation != sb.Generation || img.CatalogSum != sb.CatalogSum || img.FileID != sb.FileID {
		t.Fatalf("image names generation %d catalog %08x, superblock %d %08x", img.Generation, img.CatalogSum, sb.Generation, sb.CatalogSum)
	}

	// Read-only, asking for an image: ignored, and the image stays.
	ro := tOpen(t, mem, &Options{ReadOnly: true, Image: imgOpts})
	info := ro.ImageInfo()
	if !info.Exists || !info.Used || info.Addr != sb.Image.Addr || info.Size != sb.Image.Size || info.Entries != len(img.Entries) || info.Ignored != "" {
		t.Fatalf("read-only info %+v, image at %d+%d with %d entries", info, sb.Image.Addr, sb.Image.Size, len(img.Entries))
	}
	verifyAll(t, ro, refs)
	if err := ro.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if sb2, _ := readSuperblock(mem); sb2 != sb {
		t.Fatalf("read-only open changed the superblock: %+v, was %+v", sb2, sb)
	}

	// Writable, without the option: the image is used, then removed at
	// the first commit, and its space is reusable (Check passes).
	w := tOpen(t, mem, nil)
	if info := w.ImageInfo(); !info.Exists || !info.Used {
		t.Fatalf("writable info before the first commit %+v", info)
	}
	verifyAll(t, w, refs)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if info := w.ImageInfo(); info.Exists {
		t.Fatalf("image still recorded after the first commit: %+v", info)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if sb, _ := readSuperblock(mem); sb.Image.Exists() {
		t.Fatal("a writer without the option left an image")
	}
	if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
		t.Fatal(err)
	}
}

// TestImageContents: the image holds the catalog, every header, every
// index block and chunks, each entry's bytes equal to the file's bytes at
// its address (2A, 2B, 2E, 3), ranks rising (metadata first), and the
// chunk bound honoured.
func TestImageContents(t *testing.T) {
	ctx := context.Background()
	for _, bound := range []int64{0, 300, -1} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			mem := vfd.NewMem()
			imgFile(t, mem, &Options{Image: ImageOptions{Generate: true, ChunkBytes: bound}})
			sb, img := readImage(t, mem)
			kinds := map[uint8]int{}
			var chunkBytes int64
			maxMeta, minChunk := uint32(0), ^uint32(0)
			ranks := map[uint32]bool{}
			for _, e := range img.Entries {
				kinds[e.Kind]++
				if ranks[e.Rank] {
					t.Fatalf("rank %d twice", e.Rank)
				}
				ranks[e.Rank] = true
				if e.Kind == format.ImageChunk {
					minChunk = min(minChunk, e.Rank)
				} else {
					maxMeta = max(maxMeta, e.Rank)
				}
				onDisk := make([]byte, len(e.Data))
				if err := readFull(mem, onDisk, int64(e.Addr)); err != nil || !bytes.Equal(onDisk, e.Data) {
					t.Fatalf("entry kind %d at %d differs from the file (%v)", e.Kind, e.Addr, err)
				}
				if e.Age != 0 {
					t.Fatalf("fresh entry with age %d", e.Age)
				}
				if e.Kind == format.ImageChunk {
					chunkBytes += int64(len(e.Data))
				}
			}
			if kinds[format.ImageChunk] > 0 && maxMeta > minChunk {
				t.Fatalf("metadata ranked up to %d, chunks from %d: metadata must rank first", maxMeta, minChunk)
			}
			// The reference: what the committed state references.
			f := tOpen(t, mem, &Options{ReadOnly: true})
			rep, err := Check(ctx, "", &Options{Driver: mem})
			if err != nil {
				t.Fatal(err)
			}
			if kinds[format.ImageCatalog] != 1 || kinds[format.ImageHeader] != len(imgSpecs) || kinds[format.ImageIndex] != rep.IndexBlocks {
				t.Fatalf("kinds %v; want 1 catalog, %d headers, %d index blocks", kinds, len(imgSpecs), rep.IndexBlocks)
			}
			switch {
			case bound < 0 && kinds[format.ImageChunk] != 0:
				t.Fatalf("%d chunks with chunks off", kinds[format.ImageChunk])
			case bound > 0 && (chunkBytes > bound || chunkBytes == 0):
				t.Fatalf("%d chunk bytes with bound %d", chunkBytes, bound)
			case bound == 0 && kinds[format.ImageChunk] != rep.Chunks:
				// The default bound holds every chunk of this small file.
				t.Fatalf("%d chunks of %d", kinds[format.ImageChunk], rep.Chunks)
			}
			if int64(sb.Image.Size) != format.ImageSize(img) {
				t.Fatalf("recorded size %d, image %d", sb.Image.Size, format.ImageSize(img)) // 2D
			}
			_ = f
		})
	}
}

// TestImageOpenReads: with an image, a read-only open and the first read
// of every dataset cost the two superblock slots and the image: three
// reads, against one per block without (4A-I, 5A: a requested prefetched
// entry skips its read; it is decoded on first use).
func TestImageOpenReads(t *testing.T) {
	for _, withImage := range []bool{true, false} {
		mem := vfd.NewMem()
		refs := imgFile(t, mem, &Options{Image: ImageOptions{Generate: withImage}})
		c := vfd.NewCounting(mem)
		f := tOpen(t, c, &Options{ReadOnly: true})
		verifyAll(t, f, refs)
		got := c.Snapshot()
		reads := got.Ops[vfd.OpRead] + got.Ops[vfd.OpReadV]
		st := f.ImageInfo().Prefetched
		if withImage {
			if reads != 3 {
				t.Fatalf("with image: %d reads (%+v), want 3", reads, got.Ops)
			}
			if st.Taken == 0 || st.Taken != st.Loaded || st.Stale != 0 {
				t.Fatalf("prefetched stats %+v", st)
			}
		} else if reads < 10 {
			t.Fatalf("without image only %d reads: the comparison means nothing", reads)
		}
		t.Logf("image %v: %d reads, %d bytes", withImage, reads, got.BytesRead())
	}
}

// TestImageWritableOpenReads: a writable open walks every index (the
// free-space rebuild); with an image that walk reads nothing, and the
// datasets' later opens are served from the journal.
func TestImageWritableOpenReads(t *testing.T) {
	mem := vfd.NewMem()
	refs := imgFile(t, mem, &Options{Image: imgOpts})
	c := vfd.NewCounting(mem)
	f := tOpen(t, c, &Options{Image: imgOpts})
	verifyAll(t, f, refs)
	got := c.Snapshot()
	if reads := got.Ops[vfd.OpRead] + got.Ops[vfd.OpReadV]; reads != 3 {
		t.Fatalf("%d reads (%+v), want 3", reads, got.Ops)
	}
}

// TestImagePrefetchedEviction: prefetched entries count in the cache's
// budget and are the first thing evicted (5C); a read after the eviction
// reads the file and gets the right data; a Flush writes none of them
// (5B: they are clean).
func TestImagePrefetchedEviction(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	refs := imgFile(t, mem, &Options{Image: imgOpts})
	c, err := cache.New(cache.Config{QuiescentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the files' cleanups, so it runs after them.
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	cnt := vfd.NewCounting(mem)
	f := tOpen(t, cnt, &Options{Cache: c, Image: imgOpts})
	st := f.ImageInfo().Prefetched
	if st.Entries == 0 || st.Bytes == 0 {
		t.Fatalf("nothing prefetched: %+v", st)
	}
	if r := c.Stats().ResidentBytes; r < st.Bytes {
		t.Fatalf("resident %d < prefetched %d: not charged", r, st.Bytes)
	}
	// A flush writes the catalog and the superblock, never a prefetched
	// entry (they are clean): its bytes are far below the chunks'.
	before, w0 := f.ImageInfo().Prefetched.Entries, cnt.Snapshot()
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if after := f.ImageInfo().Prefetched.Entries; after != before {
		t.Fatalf("flush changed prefetched entries %d -> %d", before, after)
	}
	written := cnt.Snapshot().Sub(w0).BytesWritten()
	var chunkBytes int64
	for _, r := range refs {
		chunkBytes += int64(len(r.data))
	}
	if written >= chunkBytes {
		t.Fatalf("flush wrote %d bytes, the datasets hold %d: prefetched entries written?", written, chunkBytes)
	}
	// Fill the cache with another file's chunks: the prefetched entries go.
	// The first half of each chunk, so the chunks are cached (whole ones
	// into a full cache would go straight to the file, directwrite.go, and
	// so would chunks completed in halves, cache/completed.go).
	other := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	ds, err := other.CreateDataset(ctx, "big", DatasetSpec{Type: Uint8, Shape: []uint64{4 << 20}, Chunk: []uint64{64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	half := make([]byte, 32<<10)
	for off := uint64(0); off < 3<<20; off += 64 << 10 {
		if err := ds.Write(ctx, Box([]uint64{off}, []uint64{32 << 10}), half); err != nil {
			t.Fatal(err)
		}
	}
	st = f.ImageInfo().Prefetched
	if st.Evicted == 0 {
		t.Fatalf("no prefetched entry evicted: %+v", st)
	}
	verifyAll(t, f, refs)
}

// TestImageAgeOut: a chunk never requested is carried into the next image
// one cycle older, and dropped once older than MaxAge (Cache image RFC
// entry_ageout); ImageNoCarry drops it at once; 0 keeps it.
func TestImageAgeOut(t *testing.T) {
	for _, tc := range []struct {
		maxAge int
		cycles []bool // chunks still imaged after each cycle
	}{
		{maxAge: 2, cycles: []bool{true, true, false}},
		{maxAge: ImageNoCarry, cycles: []bool{false}},
		{maxAge: 0, cycles: []bool{true, true, true, true}},
	} {
		t.Run(fmt.Sprint(tc.maxAge), func(t *testing.T) {
			mem := vfd.NewMem()
			opts := &Options{Image: ImageOptions{Generate: true, MaxAge: tc.maxAge}}
			refs := imgFile(t, mem, opts)
			for cycle, want := range tc.cycles {
				f, err := Open(context.Background(), "", withDriver(opts, mem)) // touches nothing
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				_, img := readImage(t, mem)
				// A writable open reads every header and index
				// block (its free-space walk): they never age.
				chunks, maxAge := 0, 0
				for _, e := range img.Entries {
					switch {
					case e.Kind == format.ImageChunk:
						chunks++
						maxAge = max(maxAge, int(e.Age))
					case e.Age != 0:
						t.Fatalf("cycle %d: metadata entry (kind %d) aged %d: the open requested it", cycle, e.Kind, e.Age)
					}
				}
				if (chunks > 0) != want || (want && maxAge != cycle+1) {
					t.Fatalf("cycle %d: %d chunks of age up to %d, want present=%v age %d", cycle, chunks, maxAge, want, cycle+1)
				}
			}
			// A requested chunk is young again.
			f := tOpen(t, mem, opts)
			verifyAll(t, f, refs)
			if err := f.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			_, img := readImage(t, mem)
			for _, e := range img.Entries {
				if e.Age != 0 {
					t.Fatalf("entry kind %d aged %d after being read", e.Kind, e.Age)
				}
			}
		})
	}
}

// TestImageStale: an image the superblock names but that does not belong
// to it — a record carried into a later generation, damaged bytes — is
// ignored, never trusted: the file opens in its committed state, reads
// right, and checks clean.
func TestImageStale(t *testing.T) {
	ctx := context.Background()
	for name, spoil := range map[string]func(t *testing.T, drv vfd.Driver){
		"carried forward": func(t *testing.T, drv vfd.Driver) {
			sb, _ := readSuperblock(drv)
			sb.Generation++
			if _, err := drv.WriteAt(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation)); err != nil {
				t.Fatal(err)
			}
		},
		"damaged": func(t *testing.T, drv vfd.Driver) {
			sb, _ := readSuperblock(drv)
			if _, err := drv.WriteAt([]byte{0xff, 0xfe}, int64(sb.Image.Addr+sb.Image.Size/2)); err != nil {
				t.Fatal(err)
			}
		},
		"overwritten by a valid image of another state": func(t *testing.T, drv vfd.Driver) {
			sb, img := readImage(t, drv)
			img.Generation--
			b := format.EncodeImage(img)
			if _, err := drv.WriteAt(b, int64(sb.Image.Addr)); err != nil {
				t.Fatal(err)
			}
			sb.Image.Sum = format.Trailer(b) // the record names these bytes
			if _, err := drv.WriteAt(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation)); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			mem := vfd.NewMem()
			refs := imgFile(t, mem, &Options{Image: imgOpts})
			spoil(t, mem)
			for _, ro := range []bool{true, false} {
				f := tOpen(t, mem, &Options{ReadOnly: ro})
				info := f.ImageInfo()
				if info.Used || info.Ignored == "" || info.Prefetched.Loaded != 0 {
					t.Fatalf("read-only %v: stale image used: %+v", ro, info)
				}
				verifyAll(t, f, refs)
				if !ro {
					if err := f.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestImageStaleEntry: an entry whose checksum is not the parent's is
// never served: a reader whose superblock points at a chunk the image
// holds other bytes for reads the file (the entry is dropped as stale).
func TestImageStaleEntry(t *testing.T) {
	mem := vfd.NewMem()
	refs := imgFile(t, mem, &Options{Image: imgOpts})
	sb, img := readImage(t, mem)
	// Make one chunk entry's bytes different but self-consistent: its own
	// trailer matches, the index's checksum does not.
	for i, e := range img.Entries {
		if e.Kind == format.ImageChunk {
			d := append([]byte(nil), e.Data[:len(e.Data)-4]...)
			d[0] ^= 0xff
			img.Entries[i].Data = format.AppendChunkChecksum(d)
			break
		}
	}
	b := format.EncodeImage(img)
	if _, err := mem.WriteAt(b, int64(sb.Image.Addr)); err != nil {
		t.Fatal(err)
	}
	sb.Image.Sum = format.Trailer(b)
	if _, err := mem.WriteAt(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation)); err != nil {
		t.Fatal(err)
	}
	r := tOpen(t, mem, &Options{ReadOnly: true})
	verifyAll(t, r, refs)
	if st := r.ImageInfo().Prefetched; st.Stale != 1 {
		t.Fatalf("stats %+v, want one stale entry", st)
	}
}

// TestImageSizingRestored: with SaveSizing the image records the cache's
// limits (2C) and an open with a default private cache restores them
// (4A-II); an explicit configuration or a shared cache wins.
func TestImageSizingRestored(t *testing.T) {
	mem := vfd.NewMem()
	cfg := cache.Config{QuiescentBytes: 3 << 20, ActiveMultiplier: 1.5}
	imgFile(t, mem, &Options{CacheConfig: cfg, Image: ImageOptions{Generate: true, SaveSizing: true}})
	_, img := readImage(t, mem)
	var st cache.SizingState
	if err := st.UnmarshalBinary(img.Sizing); err != nil || st.QuiescentBytes != 3<<20 || st.ActiveMultiplier != 1.5 {
		t.Fatalf("sizing %+v, %v", st, err)
	}
	f := tOpen(t, mem, &Options{ReadOnly: true})
	if got := f.Cache().SizingState(); got != st || !f.ImageInfo().SizingRestored {
		t.Fatalf("restored %+v (info %+v), want %+v", got, f.ImageInfo(), st)
	}
	g := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 5 << 20}})
	if got := g.Cache().SizingState(); got.QuiescentBytes != 5<<20 || got.ActiveMultiplier != 1.5 {
		t.Fatalf("explicit size overridden: %+v", got)
	}
	// Without SaveSizing: no section.
	mem2 := vfd.NewMem()
	imgFile(t, mem2, &Options{CacheConfig: cfg, Image: imgOpts})
	if _, img := readImage(t, mem2); img.Sizing != nil {
		t.Fatal("sizing section without SaveSizing")
	}
}

// TestImageSWMR: a read-only File follows a writer with Refresh while the
// writer's images come and go (closed with an image, reopened — which
// drops it and reuses its space — written, closed again); every read
// matches the model of the generation the reader is at (Cache image RFC §6
// item 8).
func TestImageSWMR(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 256 << 10}, Image: imgOpts}
	refs := imgFile(t, mem, opts)
	byGen := map[uint64]map[string]*refArray{}
	snap := func(gen uint64) {
		m := map[string]*refArray{}
		for n, r := range refs {
			m[n] = r.clone()
		}
		byGen[gen] = m
	}
	sb, _ := readSuperblock(mem)
	snap(sb.Generation)
	reader := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 128 << 10}})
	if !reader.ImageInfo().Used {
		t.Fatal("reader did not use the image")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func() {
		t.Helper()
		if err := reader.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		want, ok := byGen[reader.Generation()]
		if !ok {
			t.Fatalf("reader at generation %d, which no commit wrote", reader.Generation())
		}
		verifyAll(t, reader, want)
	}
	for cycle := 0; cycle < 6; cycle++ {
		check()
		w, err := Open(ctx, "", withDriver(opts, mem))
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 3; step++ {
			for n, r := range refs {
				ds, err := w.OpenDataset(ctx, n, nil)
				if err != nil {
					t.Fatal(err)
				}
				sel := randomSelection(rng, r.dims)
				buf := randomBytes(rng, int(sel.NumElements())*r.elemSize)
				if err := ds.Write(ctx, sel, buf); err != nil {
					t.Fatal(err)
				}
				r.write(sel, buf)
				ds.Close(ctx)
			}
			snap(w.Generation() + 1)
			if step < 2 {
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				check()
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		check()
	}
	if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
		t.Fatal(err)
	}
}

// imageWorkload is the crash and fault workload of a file that lives
// through an image: created and closed with one, reopened for writing
// (uses it, drops it at its first commit), written and closed with a new
// one.
var imageWorkload = defineWorkload(5, &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 10}, Image: ImageOptions{Generate: true, SaveSizing: true}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"ea": {Type: Uint16, Shape: []uint64{6, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
		"fa": {Type: Int32, Shape: []uint64{9, 9}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}},
	}
	names := []string{"ea", "fa"}
	// Datasets are opened for each write and closed after it, so that
	// every close of the file finds none open.
	create := func() error {
		for _, n := range names {
			ds, err := w.f.CreateDataset(context.Background(), n, specs[n])
			if err != nil {
				return err
			}
			ds.Close(context.Background())
			w.refs[n] = newRef(specs[n].Shape, specs[n].Type.Size(), specs[n].Fill)
		}
		return nil
	}
	write := func(n int) func() error {
		return func() error {
			for i := 0; i < n; i++ {
				name := names[w.rng.IntN(2)]
				r := w.refs[name]
				ds, err := w.f.OpenDataset(context.Background(), name, nil)
				if err != nil {
					return err
				}
				sel := randomSelection(w.rng, r.dims)
				buf := randomBytes(w.rng, int(sel.NumElements())*r.elemSize)
				err = ds.Write(w.ctx, sel, buf)
				ds.Close(context.Background())
				if err != nil {
					return err
				}
				r.write(sel, buf)
			}
			return nil
		}
	}
	// The first Close committed its image: the reopen must use it.
	usedImage := func() error {
		if info := w.f.ImageInfo(); !info.Used {
			return fmt.Errorf("reopen did not use the image: %+v", info)
		}
		return nil
	}
	return steps(create, write(6), w.reopen, usedImage, write(4), w.flush, write(4))
})

// TestImageCrash cuts the power at every write and sync of the workload,
// those of both image writes included: every crash image opens in a
// committed state, with or without its image, and checks clean.
func TestImageCrash(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, imageWorkload, 11)
}

// TestImageFault fails every I/O operation of the workload from some
// index on (the image's read at open, its write at close, the syncs and
// superblocks around it): the error surfaces and the file reopens in its
// last committed state.
func TestImageFault(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, imageWorkload, 12)
}

// raceDriver damages the first read at addr, after running hook: a
// reader's view of space its writer reused under it.
type raceDriver struct {
	vfd.Driver
	addr  int64
	fired atomic.Bool
	hook  func()
}

func (d *raceDriver) ReadAt(p []byte, off int64) (int, error) {
	if off == d.addr && d.fired.CompareAndSwap(false, true) {
		d.hook()
		n, err := d.Driver.ReadAt(p, off)
		p[0] ^= 0xff
		return n, err
	}
	return d.Driver.ReadAt(p, off)
}

// TestOpenRacesWriter: a read-only open whose catalog read meets space
// the writer reused (a newer superblock is on disk) starts over from the
// newer superblock instead of failing with ErrCorrupt; with no newer
// superblock the damage is real and the open fails.
func TestOpenRacesWriter(t *testing.T) {
	ctx := context.Background()
	for _, withImage := range []bool{false, true} {
		mem := vfd.NewMem()
		refs := imgFile(t, mem, &Options{Image: ImageOptions{Generate: withImage}})
		sb, _ := readSuperblock(mem)
		addr := int64(sb.CatalogAddr)
		if withImage {
			addr = int64(sb.Image.Addr) // the catalog comes with the image
		}
		w := tOpen(t, mem, nil)
		d := &raceDriver{Driver: mem, addr: addr, hook: func() {
			if err := w.Flush(ctx); err != nil {
				t.Error(err)
			}
		}}
		r := tOpen(t, d, &Options{ReadOnly: true})
		if withImage {
			// The image that space reuse damaged is ignored; the
			// catalog comes from the file, still the state the
			// superblock the reader read names.
			if info := r.ImageInfo(); info.Used || info.Ignored == "" {
				t.Fatalf("damaged image used: %+v", info)
			}
		} else if r.Generation() <= sb.Generation {
			t.Fatalf("reader at generation %d, writer committed past %d", r.Generation(), sb.Generation)
		}
		verifyAll(t, r, refs)
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		// No writer: the same damage is corruption.
		sb, _ = readSuperblock(mem)
		d = &raceDriver{Driver: mem, addr: int64(sb.CatalogAddr), hook: func() {}}
		if sb.Image.Exists() {
			d.addr = int64(sb.Image.Addr)
		}
		if _, err := Open(ctx, "", &Options{Driver: d, ReadOnly: true}); withImage == false && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("damaged catalog, no writer: %v", err)
		}
	}
}

// TestImageAdaptiveSizingRestored: with adaptive sizing on, SaveSizing
// records the adaptive state (version 2 of the sizing section) and an open
// with a default private cache resumes it: same configuration, size and
// epoch count; an explicit adaptive configuration wins.
func TestImageAdaptiveSizingRestored(t *testing.T) {
	mem := vfd.NewMem()
	ad := cache.AdaptiveConfig{Enabled: true, InitialBytes: 2 << 20, MinBytes: 1 << 20, MaxBytes: 8 << 20, EpochAccesses: 64}
	imgFile(t, mem, &Options{CacheConfig: cache.Config{Adaptive: ad}, Image: ImageOptions{Generate: true, SaveSizing: true}})
	_, img := readImage(t, mem)
	var st cache.SizingState
	if err := st.UnmarshalBinary(img.Sizing); err != nil || st.Adaptive == nil || !st.Adaptive.Config.Enabled {
		t.Fatalf("sizing %+v (adaptive %+v), %v: want an adaptive state", st, st.Adaptive, err)
	}
	if img.Sizing[0] != 2 {
		t.Fatalf("sizing section version %d, want 2 with adaptive sizing", img.Sizing[0])
	}
	f := tOpen(t, mem, &Options{ReadOnly: true})
	got := f.Cache().AdaptiveState()
	if got.Config != st.Adaptive.Config || got.SizeBytes != st.Adaptive.SizeBytes || got.Epoch != st.Adaptive.Epoch ||
		got.OpenAccesses != st.Adaptive.OpenAccesses || st.Adaptive.OpenAccesses == 0 || !f.ImageInfo().SizingRestored {
		t.Fatalf("restored %+v (info %+v), want %+v", got, f.ImageInfo(), *st.Adaptive)
	}
	own := cache.AdaptiveConfig{Enabled: true, InitialBytes: 4 << 20, MinBytes: 4 << 20, MaxBytes: 16 << 20}
	g := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{Adaptive: own}})
	if got := g.Cache().AdaptiveState(); got.Config.MaxBytes != 16<<20 || got.Epoch != 0 {
		t.Fatalf("explicit adaptive configuration overridden: %+v", got)
	}
}
