package engine

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// TestRefreshDropsChunksBackgroundHolds: a Refresh must drop every cached
// chunk of a dataset whose header changed, including one the cache holds
// at that moment for background work. Here a read of another dataset
// needs space, and the cache's condense pass (run before any eviction)
// holds the read-only File's variable-length chunks; a Refresh meanwhile
// adopted the writer's new generation. Dropping only the chunks nobody
// held (what Flush with evict does) left the held ones cached, and the
// dataset then read the previous generation's sequences under the new
// generation (the heaps of a follower served older data with no error).
//
// The condense is held until the Refresh returns, which with the bug it
// does at once; a Refresh that (correctly) waits for the chunks is let go
// after a while instead. Either way the verdict is the read afterwards.
func TestRefreshDropsChunksBackgroundHolds(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	w := tCreate(t, mem, nil)
	// Heaps that keep their garbage (HeapDefragPercent 100): the follower
	// decodes chunks with slack, which condense gives back without
	// evicting anything.
	v, err := w.CreateDataset(ctx, "v", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}, Layout: Vlen, HeapDefragPercent: 100})
	must(t, err)
	d, err := w.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{16, 32 << 10}, Chunk: []uint64{1, 32 << 10}})
	must(t, err)
	all := All([]uint64{8})
	gen := func(tag string) []string {
		big := make([]string, 8)
		small := make([]string, 8)
		for i := range big {
			big[i] = string(bytes.Repeat([]byte{'x'}, 10<<10))
			small[i] = tag + string(rune('0'+i))
		}
		must(t, v.WriteStrings(ctx, all, big))
		must(t, v.WriteStrings(ctx, all, small))
		return small
	}
	old := gen("a")
	must(t, d.Write(ctx, All([]uint64{16, 32 << 10}), make([]byte, 16*32<<10)))
	must(t, w.Flush(ctx))

	r := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 256 << 10}})
	rv, err := r.OpenDataset(ctx, "v", nil)
	must(t, err)
	rd, err := r.OpenDataset(ctx, "d", nil)
	must(t, err)
	got, err := rv.ReadStrings(ctx, all)
	must(t, err)
	if !slices.Equal(got, old) {
		t.Fatalf("read %q, want %q", got, old)
	}
	want := gen("b")
	must(t, w.Flush(ctx))

	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(s *dsState) {
		if s.f == r {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	}
	testHookCondense.Store(&hook)
	defer testHookCondense.Store(nil)
	readDone := make(chan error, 1)
	go func() {
		// Row by row, each twice (a full cache keeps a chunk read again
		// soon), until the cache needs space and condenses.
		row := make([]byte, 32<<10)
		for i := uint64(0); i < 32; i++ {
			if err := rd.Read(ctx, Box([]uint64{i / 2, 0}, []uint64{1, 32 << 10}), row); err != nil {
				readDone <- err
				return
			}
		}
		readDone <- nil
	}()
	select {
	case <-held:
	case err := <-readDone:
		t.Fatalf("the reads of d never condensed (err %v, v %+v, d %+v): the test needs a condense", err, rv.CacheStats(), rd.CacheStats())
	}
	refreshDone := make(chan error, 1)
	go func() { refreshDone <- r.Refresh(ctx) }()
	var rerr error
	select {
	case rerr = <-refreshDone:
		close(release)
	case <-time.After(200 * time.Millisecond):
		close(release)
		rerr = <-refreshDone
	}
	must(t, rerr)
	must(t, <-readDone)
	if r.Generation() != w.Generation() {
		t.Fatalf("follower at generation %d, writer at %d", r.Generation(), w.Generation())
	}
	got, err = rv.ReadStrings(ctx, all)
	must(t, err)
	if !slices.Equal(got, want) {
		t.Fatalf("after the refresh to generation %d: read %q, want %q (previous generation %q)", r.Generation(), got, want, old)
	}
}

// TestRefreshOvertakenHeader: a Refresh reads the superblock of generation
// G+1, and the writer, which has committed G+2 meanwhile, has reused the
// space of G+1's dataset header for G+2's, changed only in its index root:
// it passes the checksum G+1's catalog names (the checksum is blind to the
// index root, refresh.go). The Refresh must not adopt it as G+1's header:
// it reads the superblock again after the headers and, finding G+2, starts
// over from there. Before, the File reported G+1 and read G+2's data.
func TestRefreshOvertakenHeader(t *testing.T) {
	ctx := context.Background()
	o := newOvertaken(t, 5)
	must(t, o.r.Close(ctx))
	lag := &lagDriver{Driver: o.mem}
	r := tOpen(t, lag, &Options{ReadOnly: true})
	rds, err := r.OpenDataset(ctx, "d", nil)
	must(t, err)
	buf := make([]byte, 64*64)
	must(t, rds.Read(ctx, All(overtakenSpec.Shape), buf))
	catalog := func() format.CatalogEntry {
		f := tOpen(t, o.mem, &Options{ReadOnly: true})
		defer f.Close(ctx)
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.mu.catalog["d"]
	}
	data1 := o.rewrite()
	e1 := catalog()
	data2 := o.rewrite()
	e2 := catalog()
	if e1.HeaderSize != e2.HeaderSize || e1.HeaderSum != e2.HeaderSum || e1.HeaderAddr == e2.HeaderAddr {
		t.Fatalf("headers %+v then %+v: not the blind-checksum case this test builds", e1, e2)
	}
	hdr := make([]byte, e2.HeaderSize)
	if _, err := o.mem.ReadAt(hdr, int64(e2.HeaderAddr)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.mem.WriteAt(hdr, int64(e1.HeaderAddr)); err != nil { // the reuse
		t.Fatal(err)
	}
	// The Refresh's first look at the superblocks finds G+1 the newest.
	sb, err := readSuperblock(o.mem)
	must(t, err)
	lag.hide.Store(format.SlotFor(sb.Generation) + 1)
	must(t, r.Refresh(ctx))
	clear(buf)
	must(t, rds.Read(ctx, All(overtakenSpec.Shape), buf))
	want := map[uint64][]byte{sb.Generation - 1: data1, sb.Generation: data2}[r.Generation()]
	if want == nil || !bytes.Equal(buf, want) {
		t.Fatalf("at generation %d (writer at %d): read the data of generation %d's successor %v",
			r.Generation(), sb.Generation, sb.Generation-1, bytes.Equal(buf, data2))
	}
}

// lagDriver hides one superblock slot from the next read of it (hide holds
// the slot's offset + 1; 0 hides nothing), as if the writer's latest
// superblock had not been written yet.
type lagDriver struct {
	vfd.Driver
	hide atomic.Int64
}

func (d *lagDriver) ReadAt(p []byte, off int64) (int, error) {
	if h := d.hide.Load(); h != 0 && off == h-1 && d.hide.CompareAndSwap(h, 0) {
		clear(p)
		return len(p), nil
	}
	return d.Driver.ReadAt(p, off)
}

// TestOpenDuringRefresh: OpenDataset loads a dataset's state at generation
// G while a Refresh to G+1 has already listed the open datasets it will
// adopt. Installed before that Refresh updated the catalog, the state was
// never adopted, and the dataset read G's data while the File reported
// G+1. The install now waits for the Refresh and, the generation having
// moved, loads the state again.
//
// The Refresh is held until the open returns, which with the bug it does
// at once; an open that (correctly) waits for the Refresh is let go after
// a while instead. Either way the verdict is the read afterwards.
func TestOpenDuringRefresh(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	w := tCreate(t, mem, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}}
	a, err := w.CreateDataset(ctx, "a", spec)
	must(t, err)
	b, err := w.CreateDataset(ctx, "b", spec)
	must(t, err)
	must(t, a.Write(ctx, All([]uint64{4}), []byte{1, 1, 1, 1}))
	must(t, b.Write(ctx, All([]uint64{4}), []byte{1, 1, 1, 1}))
	must(t, w.Flush(ctx))
	r := tOpen(t, mem, &Options{ReadOnly: true})
	_, err = r.OpenDataset(ctx, "a", nil)
	must(t, err)

	loaded, goOpen := make(chan struct{}), make(chan struct{})
	openHook := func() {
		close(loaded)
		<-goOpen
	}
	testHookOpenLoaded.Store(&openHook)
	defer testHookOpenLoaded.Store(nil)
	type opened struct {
		ds  *Dataset
		err error
	}
	openDone := make(chan opened, 1)
	go func() {
		ds, err := r.OpenDataset(ctx, "b", nil)
		openDone <- opened{ds, err}
	}()
	<-loaded
	testHookOpenLoaded.Store(nil)
	must(t, b.Write(ctx, All([]uint64{4}), []byte{2, 2, 2, 2}))
	must(t, w.Flush(ctx))

	listed, goRefresh := make(chan struct{}), make(chan struct{})
	refreshHook := func() {
		close(listed)
		<-goRefresh
	}
	testHookAdoptListed.Store(&refreshHook)
	defer testHookAdoptListed.Store(nil)
	refreshDone := make(chan error, 1)
	go func() { refreshDone <- r.Refresh(ctx) }()
	<-listed
	testHookAdoptListed.Store(nil)
	close(goOpen)
	var o opened
	select {
	case o = <-openDone:
		close(goRefresh)
	case <-time.After(200 * time.Millisecond):
		close(goRefresh)
		o = <-openDone
	}
	must(t, <-refreshDone)
	must(t, o.err)
	buf := make([]byte, 4)
	must(t, o.ds.Read(ctx, All([]uint64{4}), buf))
	if r.Generation() != w.Generation() || buf[0] != 2 {
		t.Fatalf("at generation %d (writer at %d): read %v, want [2 2 2 2]", r.Generation(), w.Generation(), buf)
	}
}

// TestFollowRetryAfterOtherRefresh: a read at generation G fails on space
// the writer reused, and before the read decides what that means another
// goroutine's Refresh has moved the File to the writer's generation. The
// read must still see the race (the superblock on disk is newer than the
// generation it read at) and retry, not report ErrCorrupt because the disk
// is no newer than the File by then. Two goroutines sharing a follower
// File, one reading and one refreshing, hit this within a few runs of
// TestFollowerInterleavedLayouts under SCC_STRESS=long.
func TestFollowRetryAfterOtherRefresh(t *testing.T) {
	ctx := context.Background()
	o := newOvertaken(t, 3)
	r := o.r
	rds, err := r.OpenDataset(ctx, "d", nil)
	must(t, err)
	old, err := rds.ChunkExtents(ctx)
	must(t, err)
	data1 := o.rewrite()
	for _, e := range old { // the reuse (see TestReaderOvertakenByReuse)
		img := randomBytes(o.rng, int(e.Size)-4)
		if _, err := o.mem.WriteAt(format.AppendChunkChecksum(img), e.Off); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	hook := func() {
		once.Do(func() { must(t, r.Refresh(ctx)) })
	}
	testHookFollowFailed.Store(&hook)
	defer testHookFollowFailed.Store(nil)
	buf := make([]byte, 64*64)
	must(t, rds.Read(ctx, All(overtakenSpec.Shape), buf))
	sb, err := readSuperblock(o.mem)
	must(t, err)
	if !bytes.Equal(buf, data1) || r.Generation() != sb.Generation {
		t.Fatalf("read at generation %d: not the writer's data", r.Generation())
	}
}
