package engine

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestDatasetFlushDurableAlone: Dataset.Flush commits its dataset's
// acknowledged writes and leaves another dataset's dirty chunks in the
// cache. The file as Flush left it (a crash right after) opens, passes
// Check, holds a's data and none of b's; the next File.Flush commits b.
func TestDatasetFlushDurableAlone(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{16}}
	a, err := f.CreateDataset(ctx, "a", spec)
	must(t, err)
	b, err := f.CreateDataset(ctx, "b", spec)
	must(t, err)
	must(t, f.Flush(ctx)) // both exist, empty, in the committed state
	da, db := bytes.Repeat([]byte{0xa}, 64), bytes.Repeat([]byte{0xb}, 64)
	must(t, a.Write(ctx, All(spec.Shape), da))
	must(t, b.Write(ctx, All(spec.Shape), db))
	gen := f.Generation()
	must(t, a.Flush(ctx))
	if f.Generation() != gen+1 {
		t.Fatalf("generation %d after Dataset.Flush, want %d", f.Generation(), gen+1)
	}
	if st := b.CacheStats(); st.Chunks != 4 {
		t.Fatalf("b has %d chunks cached after a's Flush, want its 4 dirty ones", st.Chunks)
	}

	crashed := vfd.NewMemFrom(mem.Bytes())
	r := tOpen(t, crashed, &Options{ReadOnly: true})
	ra, err := r.OpenDataset(ctx, "a", nil)
	must(t, err)
	rb, err := r.OpenDataset(ctx, "b", nil)
	must(t, err)
	got := make([]byte, 64)
	must(t, ra.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, da) {
		t.Fatalf("a after its Flush and a crash: %v", got)
	}
	must(t, rb.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, make([]byte, 64)) {
		t.Fatalf("b was committed by a's Flush: %v", got)
	}

	must(t, f.Flush(ctx))
	r2 := tOpen(t, vfd.NewMemFrom(mem.Bytes()), &Options{ReadOnly: true})
	rb2, err := r2.OpenDataset(ctx, "b", nil)
	must(t, err)
	must(t, rb2.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, db) {
		t.Fatalf("b after File.Flush: %v", got)
	}
}

// TestDatasetFlushErrorKeepsWrites: a Dataset.Flush that fails at the
// device returns ErrIO and loses nothing: the next Flush commits the data.
func TestDatasetFlushErrorKeepsWrites(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	fd := vfd.NewFault(mem, vfd.Fail(vfd.Every(vfd.OpWrite)), vfd.Fail(vfd.Every(vfd.OpWriteV)))
	fd.SetEnabled(false)
	f := tCreate(t, fd, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{16}}
	a, err := f.CreateDataset(ctx, "a", spec)
	must(t, err)
	must(t, f.Flush(ctx))
	data := bytes.Repeat([]byte{7}, 64)
	must(t, a.Write(ctx, All(spec.Shape), data))
	fd.SetEnabled(true)
	if err := a.Flush(ctx); !errors.Is(err, ErrIO) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Dataset.Flush with failing writes: %v, want ErrIO", err)
	}
	fd.SetEnabled(false)
	must(t, a.Flush(ctx))
	r := tOpen(t, vfd.NewMemFrom(mem.Bytes()), &Options{ReadOnly: true})
	ra, err := r.OpenDataset(ctx, "a", nil)
	must(t, err)
	got := make([]byte, 64)
	must(t, ra.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, data) {
		t.Fatalf("after a failed then a successful Flush: %v", got)
	}
}

// TestDatasetEvict: Evict writes the dataset's dirty chunks back and drops
// every chunk from the cache; the data reads back, and another dataset's
// chunks stay.
func TestDatasetEvict(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{16}}
	a, err := f.CreateDataset(ctx, "a", spec)
	must(t, err)
	b, err := f.CreateDataset(ctx, "b", spec)
	must(t, err)
	data := bytes.Repeat([]byte{3}, 64)
	must(t, a.Write(ctx, All(spec.Shape), data))
	must(t, b.Write(ctx, All(spec.Shape), data))
	must(t, a.Evict(ctx))
	if st := a.CacheStats(); st.Chunks != 0 || st.ResidentBytes != 0 {
		t.Fatalf("a after Evict: %+v, want nothing cached", st)
	}
	if st := b.CacheStats(); st.Chunks != 4 {
		t.Fatalf("b after a's Evict: %+v, want its 4 chunks", st)
	}
	got := make([]byte, 64)
	must(t, a.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, data) {
		t.Fatalf("a read back after Evict: %v", got)
	}
	if st := a.CacheStats(); st.Misses == 0 {
		t.Fatalf("a's read after Evict hit the cache: %+v", st)
	}
	must(t, a.Close(ctx))
	if err := a.Evict(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Evict on a closed handle: %v", err)
	}
	if err := a.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush on a closed handle: %v", err)
	}
}

// TestOpenDatasetOptions: the open-time options reach the dataset's cache
// registration, hold for every handle until the last one closes, and a
// refused option leaves no handle and no change.
func TestOpenDatasetOptions(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20, MinBytes: 4096}})
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{16}, CacheMinBytes: 8192}
	d, err := f.CreateDataset(ctx, "d", spec)
	must(t, err)
	must(t, d.Close(ctx))

	h, err := f.OpenDataset(ctx, "d", &DatasetOptions{})
	must(t, err)
	if got := h.CacheStats().MinBytes; got != 8192 {
		t.Fatalf("zero options: MinBytes %d, want the stored 8192", got)
	}
	h2, err := f.OpenDataset(ctx, "d", &DatasetOptions{CacheMinBytes: 65536})
	must(t, err)
	if got := h.CacheStats().MinBytes; got != 65536 {
		t.Fatalf("after an open with 65536: the first handle sees MinBytes %d", got)
	}
	if _, err := f.OpenDataset(ctx, "d", &DatasetOptions{CacheMinBytes: 1, Prefetch: PrefetchOn}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PrefetchOn on a cache without a prefetcher: %v, want ErrInvalid", err)
	}
	if got := h.CacheStats().MinBytes; got != 65536 {
		t.Fatalf("a refused open changed MinBytes to %d", got)
	}
	if _, err := f.OpenDataset(ctx, "d", &DatasetOptions{CacheMinBytes: -2}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CacheMinBytes -2: %v, want ErrInvalid", err)
	}
	h3, err := f.OpenDataset(ctx, "d", &DatasetOptions{CacheMinBytes: -1})
	must(t, err)
	if got := h.CacheStats().MinBytes; got != 0 {
		t.Fatalf("CacheMinBytes -1: MinBytes %d, want 0 (none)", got)
	}
	for _, x := range []*Dataset{h, h2, h3} {
		must(t, x.Close(ctx))
	}
	h4, err := f.OpenDataset(ctx, "d", nil)
	must(t, err)
	if got := h4.CacheStats().MinBytes; got != 8192 {
		t.Fatalf("reopened after every handle closed: MinBytes %d, want the stored 8192", got)
	}
}

// TestOpenDatasetOptionsPrefetchOff: on a cache that prefetches, a dataset
// opened with PrefetchOff reads half its chunks in order and holds exactly
// those, while the same reads of a dataset with the default bring chunks
// ahead of the reader. The second dataset is read after the first, so by
// the time its prefetches have landed the prefetcher has served any job
// the first could have queued.
func TestOpenDatasetOptionsPrefetchOff(t *testing.T) {
	ctx := context.Background()
	c, err := cache.New(cache.Config{QuiescentBytes: 4 << 20, Prefetch: true})
	must(t, err)
	t.Cleanup(func() { c.Close() })
	f := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{64 << 10}, Chunk: []uint64{4 << 10}}
	for _, n := range []string{"off", "on"} {
		d, err := f.CreateDataset(ctx, n, spec)
		must(t, err)
		must(t, d.Write(ctx, All(spec.Shape), bytes.Repeat([]byte{1}, 64<<10)))
		must(t, d.Close(ctx))
	}
	must(t, f.Flush(ctx))
	open := func(name string, o DatasetOptions) *Dataset {
		d, err := f.OpenDataset(ctx, name, &o)
		must(t, err)
		t.Cleanup(func() { d.Close(ctx) })
		must(t, d.Evict(ctx))
		buf := make([]byte, 4<<10)
		for i := uint64(0); i < 8; i++ {
			must(t, d.Read(ctx, Box([]uint64{i * 4 << 10}, []uint64{4 << 10}), buf))
		}
		return d
	}
	off := open("off", DatasetOptions{Prefetch: PrefetchOff})
	on := open("on", DatasetOptions{})
	deadline := time.Now().Add(20 * time.Second) // a bound on waiting, not a timing assertion
	for on.CacheStats().Chunks <= 8 {
		if time.Now().After(deadline) {
			t.Fatalf("default on a prefetching cache: nothing prefetched (%+v, cache %+v)", on.CacheStats(), c.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if n := off.CacheStats().Chunks; n != 8 {
		t.Fatalf("PrefetchOff: %d chunks cached after reading 8", n)
	}
}

// TestDatasetFlushRace: writers of several datasets each flush their own
// dataset after every write, racing each other, File.Flush and Evict.
// Every Flush that returned nil made its generation durable: the file as
// it stands right after that Flush (a crash then) holds at least that
// generation of that dataset, and the final file holds the last one.
func TestDatasetFlushRace(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{256}, Chunk: []uint64{32}}
	const writers, gens = 4, 12
	names := []string{"w0", "w1", "w2", "w3"}
	for _, n := range names {
		d, err := f.CreateDataset(ctx, n, spec)
		must(t, err)
		must(t, d.Close(ctx))
	}
	must(t, f.Flush(ctx))
	errc := make(chan error, writers+1)
	stop := make(chan struct{})
	go func() { // a File.Flush and an Evict now and then, until the writers end
		for {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			if err := f.Flush(ctx); err != nil {
				errc <- err
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var snaps [writers][]byte // the file right after the writer's last Flush
	done := make(chan int, writers)
	for w := range writers {
		go func() {
			d, err := f.OpenDataset(ctx, names[w], nil)
			if err != nil {
				errc <- err
				return
			}
			defer d.Close(ctx)
			for g := 1; g <= gens; g++ {
				if err := d.Write(ctx, All(spec.Shape), bytes.Repeat([]byte{byte(g)}, 256)); err != nil {
					errc <- err
					return
				}
				if g%4 == 0 {
					if err := d.Evict(ctx); err != nil {
						errc <- err
						return
					}
				}
				if err := d.Flush(ctx); err != nil {
					errc <- err
					return
				}
				snaps[w] = mem.Bytes()
			}
			done <- w
		}()
	}
	for range writers {
		select {
		case <-done:
		case err := <-errc:
			t.Fatal(err)
		}
	}
	close(stop)
	must(t, <-errc)
	for w := range writers {
		r := tOpen(t, vfd.NewMemFrom(snaps[w]), &Options{ReadOnly: true})
		d, err := r.OpenDataset(ctx, names[w], nil)
		must(t, err)
		got := make([]byte, 256)
		must(t, d.Read(ctx, All(spec.Shape), got))
		if !bytes.Equal(got, bytes.Repeat([]byte{gens}, 256)) {
			t.Fatalf("%s right after its last Flush returned: %v, want generation %d throughout", names[w], got[:8], gens)
		}
	}
}
