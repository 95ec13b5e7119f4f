package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// TestSWMRRefreshFollowsReusedHeaders: reader Files following a writer
// with Refresh, each reading every dataset whole, must read exactly the
// generation Generation reports. It caught a stale-read bug: a dataset
// header written two commits later at the address of the one a reader
// held has the same CRC32C whenever only its IndexRoot changed (the root
// record ends with its own CRC32C, and a CRC over a record carrying its own
// CRC of the same polynomial does not depend on the record), so Refresh,
// which took an equal catalog entry (address, size, checksum) for an
// unchanged header, kept the old index and cached chunks, and the reader
// served data two generations old (a few runs in 20 failed). Refresh now
// compares the header itself. Each run is a fresh file; runs repeat
// because the reuse depends on the allocator and the readers' timing.
func TestSWMRRefreshFollowsReusedHeaders(t *testing.T) {
	runs := 15
	if long() {
		runs = 200
	}
	for i := 0; i < runs && !t.Failed(); i++ {
		t.Run(fmt.Sprint(i), swmrFollowRun)
	}
}

func swmrFollowRun(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 256 << 10}}
	refs := imgFile(t, mem, opts)
	var mu sync.Mutex
	byGen := map[uint64]map[string][]byte{}
	snap := func(gen uint64) {
		m := map[string][]byte{}
		for n, r := range refs {
			m[n] = bytes.Clone(r.data)
		}
		mu.Lock()
		byGen[gen] = m
		mu.Unlock()
	}
	sb, _ := readSuperblock(mem)
	snap(sb.Generation)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var checked atomic.Int64
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := Open(ctx, "", &Options{Driver: mem, ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 64 << 10}})
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Close(ctx)
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := r.Refresh(ctx); err != nil && !errors.Is(err, ErrStale) {
					t.Error(err)
					return
				}
				for n, ref := range refs {
					ds, err := r.OpenDataset(ctx, n, nil)
					if errors.Is(err, ErrStale) {
						continue // the writer reused the header's space meanwhile: the documented answer
					}
					if err != nil {
						t.Error(err)
						return
					}
					buf := make([]byte, len(ref.data))
					before := r.Generation()
					err = ds.Read(ctx, All(ref.dims), buf)
					after := r.Generation()
					ds.Close(ctx)
					if errors.Is(err, ErrStale) || before != after {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					want := byGen[before][n]
					mu.Unlock()
					if !bytes.Equal(buf, want) {
						diff := 0
						for i := range buf {
							if buf[i] != want[i] {
								diff++
							}
						}
						other := []uint64{}
						mu.Lock()
						for g, m := range byGen {
							if bytes.Equal(m[n], buf) {
								other = append(other, g)
							}
						}
						mu.Unlock()
						t.Errorf("%s at generation %d differs from the model (%d bytes differ; equals generations %v)", n, before, diff, other)
						return
					}
					checked.Add(1)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for cycle := 0; cycle < 8 && !t.Failed(); cycle++ {
		w, err := Open(ctx, "", withDriver(opts, mem))
		if err != nil {
			t.Fatal(err)
		}
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
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if checked.Load() == 0 {
		t.Fatal("no read was checked")
	}
	t.Logf("%d whole-dataset reads checked", checked.Load())
}

// TestImageLargerThanCache: an image larger than the cache's budget is
// not read at all (no large allocation driven by a record) and the file
// opens without it.
func TestImageLargerThanCache(t *testing.T) {
	mem := vfd.NewMem()
	refs := imgFile(t, mem, &Options{Image: imgOpts})
	sb, _ := readImage(t, mem)
	c := vfd.NewCounting(mem)
	f := tOpen(t, c, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: int64(sb.Image.Size) - 1}})
	if info := f.ImageInfo(); info.Used || info.Ignored == "" {
		t.Fatalf("info %+v", info)
	}
	if got := c.Snapshot().BytesRead(); got >= int64(sb.Image.Size) {
		t.Fatalf("read %d bytes: the image was read", got)
	}
	verifyAll(t, f, refs)
}

// TestReaderOvertakenByReuse: a read-only File at generation G opens a
// dataset; the writer then commits (its frames elsewhere) and, as it may
// once G+1 is durable, reuses the space of G's frames for frames of the
// same size with valid checksums of their own (random contents here: what
// another chunk or a later write would leave). The reader must not serve
// those bytes as generation G's: the chunk index names each frame's
// checksum, not only its place, so the read fails its check, refreshes
// and reads the writer's generation.
func TestReaderOvertakenByReuse(t *testing.T) {
	ctx := context.Background()
	o := newOvertaken(t, 3)
	mem, r, g0, data0 := o.mem, o.r, o.r.Generation(), o.data0
	rds, err := r.OpenDataset(ctx, "d", nil)
	must(t, err)
	old, err := rds.ChunkExtents(ctx)
	must(t, err)
	data1 := o.rewrite()
	check := tOpen(t, mem, &Options{ReadOnly: true})
	cds, err := check.OpenDataset(ctx, "d", nil)
	must(t, err)
	cur, err := cds.ChunkExtents(ctx)
	must(t, err)
	must(t, check.Close(ctx))
	// The reuse: G's frames, which the current generation does not
	// reference, rewritten with valid frames of other contents.
	for _, e := range old {
		for _, c := range cur {
			if e.Off < c.Off+c.Size && c.Off < e.Off+e.Size {
				t.Fatalf("the new generation reuses G's space already (chunk %v): the test needs it free", c.Coord)
			}
		}
		img := randomBytes(o.rng, int(e.Size)-4)
		if _, err := mem.WriteAt(format.AppendChunkChecksum(img), e.Off); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 64*64)
	must(t, rds.Read(ctx, All(overtakenSpec.Shape), buf))
	if g := r.Generation(); g == g0 || !bytes.Equal(buf, data1) {
		t.Fatalf("read at generation %d (opened at %d): equals the writer's data %v, the reused frames' %v",
			g, g0, bytes.Equal(buf, data1), !bytes.Equal(buf, data1) && !bytes.Equal(buf, data0))
	}
}

// TestOpenOvertakenHeader: a read-only File at generation G has the
// catalog entry of a dataset it has not opened; the writer commits again,
// changing only the dataset's index root, and (as it may once G+1 is
// durable) reuses the space of G's header for the new header, which passes
// the checksum G's catalog entry names (the checksum is blind to the index
// root, refresh.go). OpenDataset must not follow that header at generation
// G: it refreshes, and the dataset reads as the generation the File then
// reports.
func TestOpenOvertakenHeader(t *testing.T) {
	ctx := context.Background()
	spec := overtakenSpec
	o := newOvertaken(t, 5)
	mem, r, g0, data0 := o.mem, o.r, o.r.Generation(), o.data0
	r.mu.Lock()
	old := r.mu.catalog["d"]
	r.mu.Unlock()
	data1 := o.rewrite()
	latest := func() (*File, format.CatalogEntry) {
		f := tOpen(t, mem, &Options{ReadOnly: true})
		f.mu.Lock()
		defer f.mu.Unlock()
		return f, f.mu.catalog["d"]
	}
	l, cur := latest()
	must(t, l.Close(ctx))
	if cur.HeaderSize != old.HeaderSize || cur.HeaderSum != old.HeaderSum || cur.HeaderAddr == old.HeaderAddr {
		t.Fatalf("headers %+v then %+v: not the blind-checksum case this test builds", old, cur)
	}
	hdr := make([]byte, cur.HeaderSize)
	if _, err := mem.ReadAt(hdr, int64(cur.HeaderAddr)); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.WriteAt(hdr, int64(old.HeaderAddr)); err != nil { // the reuse
		t.Fatal(err)
	}
	// The writer's state is intact: G's header space was free.
	l, _ = latest()
	lds, err := l.OpenDataset(ctx, "d", nil)
	must(t, err)
	buf := make([]byte, 64*64)
	must(t, lds.Read(ctx, All(spec.Shape), buf))
	must(t, l.Close(ctx))
	if !bytes.Equal(buf, data1) {
		t.Fatal("the test damaged the latest generation")
	}
	rds, err := r.OpenDataset(ctx, "d", nil)
	must(t, err)
	clear(buf)
	must(t, rds.Read(ctx, All(spec.Shape), buf))
	want := data0
	if r.Generation() != g0 {
		want = data1
	}
	if !bytes.Equal(buf, want) {
		t.Fatalf("read at generation %d (opened at %d): the contents of another generation", r.Generation(), g0)
	}
	if r.Generation() == g0 {
		t.Fatalf("opened at generation %d through a header of a later one", g0)
	}
}

// overtaken is the start of the overtaken-reader tests: a file with one
// chunked dataset "d" holding data0, and a read-only File r opened on it.
type overtaken struct {
	mem   *vfd.Mem
	r     *File
	data0 []byte
	rng   *rand.Rand
	t     *testing.T
}

var overtakenSpec = DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, Chunk: []uint64{16, 16}}

func newOvertaken(t *testing.T, seed uint64) *overtaken {
	o := &overtaken{mem: vfd.NewMem(), rng: rand.New(rand.NewPCG(seed, seed+1)), t: t}
	w := tCreate(t, o.mem, nil)
	ds, err := w.CreateDataset(context.Background(), "d", overtakenSpec)
	must(t, err)
	o.data0 = randomBytes(o.rng, 64*64)
	must(t, ds.Write(context.Background(), All(overtakenSpec.Shape), o.data0))
	must(t, w.Close(context.Background()))
	o.r = tOpen(t, o.mem, &Options{ReadOnly: true})
	return o
}

// rewrite commits new contents for all of "d" as the writer and returns
// them.
func (o *overtaken) rewrite() []byte {
	w := tOpen(o.t, o.mem, nil)
	ds, err := w.OpenDataset(context.Background(), "d", nil)
	must(o.t, err)
	data := randomBytes(o.rng, 64*64)
	must(o.t, ds.Write(context.Background(), All(overtakenSpec.Shape), data))
	must(o.t, w.Close(context.Background()))
	return data
}
