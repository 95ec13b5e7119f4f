package cache

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

var bg = context.Background()

type env struct {
	t     testing.TB
	c     *Cache
	drv   *testDriver
	f     *File
	alloc atomic.Int64
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	c := newTestCache(t, cfg)
	e := &env{t: t, c: c}
	e.attach()
	return e
}

func (e *env) attach() {
	e.drv = &testDriver{Driver: vfd.NewMem()}
	f, err := e.c.RegisterFile(e.drv)
	if err != nil {
		e.t.Fatal(err)
	}
	e.f = f
}

func (e *env) dataset(id uint64, min int64, cd ...uint64) (*Dataset, *fakeLayout) {
	e.t.Helper()
	l := newFakeLayout(&e.alloc, cd...)
	d, err := e.f.RegisterDataset(id, l, DatasetOptions{MinBytes: min})
	if err != nil {
		e.t.Fatal(err)
	}
	return d, l
}

func fullReq(d *Dataset, l *fakeLayout, buf []byte, coord ...uint64) Request {
	return Request{Dataset: d, Coord: coord, Full: true, Piece: &fakePiece{off: 0, n: int(l.chunkBytes()), buf: buf}}
}

func partReq(d *Dataset, off int, buf []byte, coord ...uint64) Request {
	return Request{Dataset: d, Coord: coord, Piece: &fakePiece{off: off, n: len(buf), buf: buf}}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	d := Config{}.withDefaults()
	if d.QuiescentBytes != 256<<20 || d.ActiveMultiplier != 2 || d.MinBytes != 10<<20 || d.BypassBytes != 64<<20 || d.Workers < 1 || d.PartialSecondChance != SecondChanceOn {
		t.Fatalf("defaults %+v", d)
	}
	for _, bad := range []Config{
		{QuiescentBytes: -1}, {ActiveMultiplier: 0.5}, {MinBytes: -2}, {Policy: 99},
		{PartialSecondChance: 7}, {BypassBytes: -5}, {Workers: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
		if _, err := New(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New %+v: %v", bad, err)
		}
	}
}

func TestRoundTripAndReopenFromDisk(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(7, -1, 8, 8)
	a, b := pattern(64, 1), pattern(64, 50)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, a, 0, 0), fullReq(d, l, b, 3, 1)}))
	part := []byte{9, 9, 9}
	must(t, e.c.Write(bg, []Request{partReq(d, 10, part, 5, 5)})) // absent: created with fill
	got := make([]byte, 64)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 3, 1)}))
	if !bytes.Equal(got, b) {
		t.Fatal("read back mismatch")
	}
	must(t, e.f.Flush(bg))
	if st := e.c.Stats(); st.DirtyBytes != 0 || st.ChunksFlushed != 3 || e.drv.syncs.Load() == 0 {
		t.Fatalf("after flush %+v syncs %d", st, e.drv.syncs.Load())
	}
	if n := e.drv.writeVs.Load(); n != 1 {
		t.Fatalf("flush used %d WriteV calls, want 1", n)
	}
	if n := l.inserts.Load(); n != 1 {
		t.Fatalf("flush used %d Insert calls, want 1", n)
	}
	// A fresh cache over the same file and index reads what was written.
	c2 := newTestCache(t, Config{QuiescentBytes: 1 << 20})
	f2, err := c2.RegisterFile(e.drv)
	must(t, err)
	d2, err := f2.RegisterDataset(7, l, DatasetOptions{})
	must(t, err)
	bufs := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
	must(t, c2.Read(bg, []Request{fullReq(d2, l, bufs[0], 0, 0), fullReq(d2, l, bufs[1], 3, 1), fullReq(d2, l, bufs[2], 5, 5)}))
	want := make([]byte, 64)
	copy(want[10:], part)
	if !bytes.Equal(bufs[0], a) || !bytes.Equal(bufs[1], b) || !bytes.Equal(bufs[2], want) {
		t.Fatal("reopened contents differ")
	}
	if n := e.drv.readVs.Load(); n != 1 {
		t.Fatalf("three misses used %d ReadV calls, want 1", n)
	}
	if st := c2.Stats(); st.Loads != 3 || st.Misses != 3 || st.VectorReads != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFullOverwriteNeverLoads(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
	must(t, d.Flush(bg, true))
	if d.Stats().Chunks != 0 {
		t.Fatal("flush(evict) left chunks")
	}
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 2), 0)}))
	if l.decodes.Load() != 0 || e.drv.readVs.Load() != 0 {
		t.Fatalf("full overwrite loaded: decodes %d readV %d", l.decodes.Load(), e.drv.readVs.Load())
	}
	if l.newNoFill.Load() != 2 {
		t.Fatalf("NewChunk(fill=false) calls %d, want 2", l.newNoFill.Load())
	}
	// A partial write of a stored chunk must load it.
	must(t, d.Flush(bg, true))
	must(t, e.c.Write(bg, []Request{partReq(d, 0, []byte{1}, 0)}))
	if l.decodes.Load() != 1 {
		t.Fatal("partial write of a stored chunk did not load it")
	}
}

func TestAbsentReadDoesNoIO(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 4, 4)
	l.fill = 0x42
	buf := make([]byte, 16)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 9, 9)}))
	if !bytes.Equal(buf, bytes.Repeat([]byte{0x42}, 16)) {
		t.Fatal("absent chunk not read as fill")
	}
	st := e.c.Stats()
	if e.drv.readVs.Load() != 0 || st.Chunks != 0 || st.Creates != 0 || st.ResidentBytes != 0 || l.scatterFills.Load() != 1 {
		t.Fatalf("absent read did work: %+v readV %d", st, e.drv.readVs.Load())
	}
}

// gatedDriver blocks ReadV until released, to make misses overlap.
type gatedDriver struct {
	*testDriver
	gate chan struct{}
}

func (g *gatedDriver) ReadV(e []vfd.Extent) error {
	<-g.gate
	return g.testDriver.ReadV(e)
}

func TestMissCoalescing(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 32)
	want := pattern(32, 3)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, want, 4)}))
	must(t, d.Flush(bg, true))
	// Re-register the file on a gated driver sharing the same bytes.
	gd := &gatedDriver{testDriver: e.drv, gate: make(chan struct{})}
	f2, err := e.c.RegisterFile(gd)
	must(t, err)
	d2, err := f2.RegisterDataset(1, l, DatasetOptions{})
	must(t, err)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	bufs := make([][]byte, n)
	before := e.c.Stats()
	for i := 0; i < n; i++ {
		bufs[i] = make([]byte, 32)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- e.c.Read(bg, []Request{fullReq(d2, l, bufs[i], 4)})
		}(i)
	}
	waitFor(t, "coalesced readers", func() bool { return e.c.Stats().Sub(before).Coalesced >= n-1 })
	close(gd.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	for _, b := range bufs {
		if !bytes.Equal(b, want) {
			t.Fatal("coalesced reader got wrong data")
		}
	}
	if got := l.decodes.Load(); got != 1 {
		t.Fatalf("%d goroutines missing one chunk decoded it %d times, want 1", n, got)
	}
	if got := e.c.Stats().Sub(before).Loads; got != 1 {
		t.Fatalf("loads %d want 1", got)
	}
}

func TestFlushKeepsConcurrentWriteDirty(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
	e.drv.writeGate = make(chan struct{})
	done := make(chan error)
	go func() { done <- e.f.Flush(bg) }()
	waitFor(t, "the flush blocked in WriteV", func() bool { return e.drv.writeVs.Load() > 0 })
	second := pattern(16, 99)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, second, 0)}))
	e.drv.writeGate <- struct{}{}
	must(t, <-done)
	if e.c.Stats().DirtyBytes != 16 {
		t.Fatalf("chunk written during flush was marked clean (dirty bytes %d)", e.c.Stats().DirtyBytes)
	}
	close(e.drv.writeGate)
	must(t, e.f.Flush(bg))
	if e.c.Stats().DirtyBytes != 0 {
		t.Fatal("second flush left it dirty")
	}
	must(t, d.Flush(bg, true))
	got := make([]byte, 16)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 0)}))
	if !bytes.Equal(got, second) {
		t.Fatal("disk lost the concurrent write")
	}
}

func TestWriteErrorsSurfaceAndKeepDirty(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(e *env, l *fakeLayout, on bool)
	}{
		{"write", func(e *env, _ *fakeLayout, on bool) { e.drv.failWrite.Store(on) }},
		{"sync", func(e *env, _ *fakeLayout, on bool) { e.drv.failSync.Store(on) }},
		{"insert", func(_ *env, l *fakeLayout, on bool) { l.failInsert.Store(on) }},
		{"publish", func(_ *env, l *fakeLayout, on bool) { l.failPublish.Store(on) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{QuiescentBytes: 1 << 20})
			d, l := e.dataset(1, -1, 16)
			want := pattern(16, 5)
			must(t, e.c.Write(bg, []Request{fullReq(d, l, want, 2)}))
			tc.set(e, l, true)
			if err := e.f.Flush(bg); err == nil {
				t.Fatal("flush succeeded despite injected error")
			}
			if e.c.Stats().DirtyBytes != 16 {
				t.Fatal("failed flush made the chunk clean")
			}
			if err := d.Unregister(bg); err == nil {
				t.Fatal("unregister succeeded despite flush error")
			}
			tc.set(e, l, false)
			must(t, e.f.Flush(bg))
			must(t, d.Flush(bg, true))
			got := make([]byte, 16)
			must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 2)}))
			if !bytes.Equal(got, want) {
				t.Fatal("data lost after failed flush")
			}
		})
	}
}

func TestEvictionWriteErrorSurfaces(t *testing.T) {
	// Budget: two chunks of 64 bytes. A writer that must evict a dirty
	// victim gets the disk error, and the victim stays cached and dirty.
	e := newEnv(t, Config{QuiescentBytes: 128, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1})
	d, l := e.dataset(1, -1, 64)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 1), 0), fullReq(d, l, pattern(64, 2), 1)}))
	e.drv.failWrite.Store(true)
	err := e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 3), 2)})
	if !errors.Is(err, errDisk) {
		t.Fatalf("write needing a dirty eviction: err %v, want disk error", err)
	}
	if st := e.c.Stats(); st.DirtyBytes != 128 || d.Stats().Chunks != 2 {
		t.Fatalf("victims lost: %+v", st)
	}
	e.drv.failWrite.Store(false)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 3), 2)}))
	must(t, e.f.Flush(bg))
	for i := 0; i < 3; i++ {
		got := make([]byte, 64)
		must(t, e.c.Read(bg, []Request{fullReq(d, l, got, uint64(i))}))
		if !bytes.Equal(got, pattern(64, byte(i+1))) {
			t.Fatalf("chunk %d wrong", i)
		}
	}
}

func TestDecodeErrorSurfaces(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
	must(t, d.Flush(bg, true))
	l.failDecode.Store(true)
	if err := e.c.Read(bg, []Request{fullReq(d, l, make([]byte, 16), 0)}); !errors.Is(err, errFake) {
		t.Fatalf("decode error: %v", err)
	}
	if st := e.c.Stats(); st.Chunks != 0 || st.ResidentBytes != 0 {
		t.Fatalf("failed load left state behind: %+v", st)
	}
	e.drv.failRead.Store(true)
	l.failDecode.Store(false)
	if err := e.c.Read(bg, []Request{fullReq(d, l, make([]byte, 16), 0)}); !errors.Is(err, errDisk) {
		t.Fatalf("read error: %v", err)
	}
}

func TestMinimumProtectsDataset(t *testing.T) {
	const chunk = 256
	e := newEnv(t, Config{QuiescentBytes: 16 * chunk, MinBytes: -1, BypassBytes: -1})
	hot, hl := e.dataset(1, 4*chunk, chunk)
	stream, sl := e.dataset(2, -1, chunk)
	for i := 0; i < 4; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(hot, hl, pattern(chunk, byte(i)), uint64(i))}))
	}
	// Stream 10x the active limit through the other dataset.
	for i := 0; i < 10*32; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(stream, sl, pattern(chunk, byte(i)), uint64(i))}))
	}
	if got := hot.Stats().Chunks; got != 4 {
		t.Fatalf("protected dataset kept %d of 4 chunks", got)
	}
	before := hot.Stats()
	for i := 0; i < 4; i++ {
		must(t, e.c.Read(bg, []Request{fullReq(hot, hl, make([]byte, chunk), uint64(i))}))
	}
	if hot.Stats().Misses != before.Misses {
		t.Fatal("protected dataset missed")
	}
	if st := e.c.Stats(); st.PeakResidentBytes > st.ActiveLimit+chunk {
		t.Fatalf("peak %d over limit %d + one chunk", st.PeakResidentBytes, st.ActiveLimit)
	}
	// Without the minimum the same stream pushes the dataset out.
	e2 := newEnv(t, Config{QuiescentBytes: 16 * chunk, MinBytes: -1, BypassBytes: -1})
	hot2, hl2 := e2.dataset(1, -1, chunk)
	stream2, sl2 := e2.dataset(2, -1, chunk)
	for i := 0; i < 4; i++ {
		must(t, e2.c.Write(bg, []Request{fullReq(hot2, hl2, pattern(chunk, byte(i)), uint64(i))}))
	}
	for i := 0; i < 10*32; i++ {
		must(t, e2.c.Write(bg, []Request{fullReq(stream2, sl2, pattern(chunk, byte(i)), uint64(i))}))
	}
	if hot2.Stats().Chunks == 4 {
		t.Fatal("control: unprotected dataset kept everything; the test proves nothing")
	}
}

func TestPeakUnderLimitStreamingWriters(t *testing.T) {
	const chunk = 128
	e := newEnv(t, Config{QuiescentBytes: 8 * chunk, MinBytes: -1, BypassBytes: -1, Workers: 4})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		d, l := e.dataset(uint64(g+1), -1, chunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				reqs := []Request{fullReq(d, l, pattern(chunk, byte(i)), uint64(i)), fullReq(d, l, pattern(chunk, byte(i)), uint64(i+1000))}
				if err := e.c.Write(bg, reqs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := e.c.Stats()
	if st.PeakResidentBytes > st.ActiveLimit+chunk {
		t.Fatalf("peak %d > active limit %d + one chunk", st.PeakResidentBytes, st.ActiveLimit)
	}
	if st.DirtyEvictions == 0 {
		t.Fatal("streaming writers never evicted dirty chunks")
	}
	// Quiescent trim brings it back under the quiescent size.
	waitFor(t, "the quiescent trim", func() bool { st := e.c.Stats(); return st.ResidentBytes <= st.QuiescentLimit })
	if st := e.c.Stats(); st.ResidentBytes > st.QuiescentLimit {
		t.Fatalf("idle cache holds %d > quiescent %d", st.ResidentBytes, st.QuiescentLimit)
	}
}

func TestWarmReopen(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(5, -1, 32)
	for i := 0; i < 4; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(32, byte(i)), uint64(i))}))
	}
	must(t, d.Unregister(bg))
	if st := e.c.Stats(); st.DirtyBytes != 0 || st.Chunks != 4 || st.Datasets != 0 {
		t.Fatalf("after unregister %+v", st)
	}
	if err := e.c.Read(bg, []Request{fullReq(d, l, make([]byte, 32), 0)}); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("read on unregistered: %v", err)
	}
	l2 := newFakeLayout(&e.alloc, 32)
	l2.index = l.index
	d2, err := e.f.RegisterDataset(5, l2, DatasetOptions{})
	must(t, err)
	before := e.c.Stats()
	for i := 0; i < 4; i++ {
		got := make([]byte, 32)
		must(t, e.c.Read(bg, []Request{fullReq(d2, l2, got, uint64(i))}))
		if !bytes.Equal(got, pattern(32, byte(i))) {
			t.Fatal("warm chunk wrong")
		}
	}
	if s := e.c.Stats().Sub(before); s.Hits != 4 || s.Loads != 0 {
		t.Fatalf("warm reopen: %+v", s)
	}
	if _, err := e.f.RegisterDataset(5, l2, DatasetOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("double register: %v", err)
	}
}

func TestTwoFilesShareCache(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 4 * 64, MinBytes: -1, BypassBytes: -1})
	f1, drv1 := e.f, e.drv
	d1, l1 := e.dataset(1, -1, 64)
	e.attach()
	f2, drv2 := e.f, e.drv
	var alloc2 atomic.Int64
	l2 := newFakeLayout(&alloc2, 64)
	d2, err := f2.RegisterDataset(1, l2, DatasetOptions{}) // same id, other file
	must(t, err)
	for i := 0; i < 20; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d1, l1, pattern(64, byte(i)), uint64(i)), fullReq(d2, l2, pattern(64, byte(100+i)), uint64(i))}))
	}
	must(t, e.c.Flush(bg))
	for i := 0; i < 20; i++ {
		a, b := make([]byte, 64), make([]byte, 64)
		must(t, e.c.Read(bg, []Request{fullReq(d1, l1, a, uint64(i)), fullReq(d2, l2, b, uint64(i))}))
		if !bytes.Equal(a, pattern(64, byte(i))) || !bytes.Equal(b, pattern(64, byte(100+i))) {
			t.Fatalf("chunk %d mixed up between files", i)
		}
	}
	if drv1.writeVs.Load() == 0 || drv2.writeVs.Load() == 0 {
		t.Fatal("a file got no writes")
	}
	must(t, f2.Unregister(bg))
	if d2.Stats().Chunks != 0 {
		t.Fatal("file unregister left chunks")
	}
	if _, err := f2.RegisterDataset(3, l2, DatasetOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("register on unregistered file: %v", err)
	}
	_ = f1
}

func TestPartialSecondChance(t *testing.T) {
	run := func(sc SecondChance) (partialKept bool) {
		const chunk = 64
		e := newEnv(t, Config{QuiescentBytes: 2 * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PartialSecondChance: sc})
		d, l := e.dataset(1, -1, chunk)
		// Quiescent == active limit: the background trim never runs, so
		// exactly one eviction happens, on the third write.
		// Chunk 0 is touched partially (older), chunk 1 fully (newer).
		must(t, e.c.Write(bg, []Request{partReq(d, 3, []byte{1, 2}, 0)}))
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, 1), 1)}))
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, 2), 2)})) // needs one eviction
		_, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
		return ok
	}
	if !run(SecondChanceDefault) {
		t.Fatal("with second chance the older partial chunk was evicted")
	}
	if run(SecondChanceOff) {
		t.Fatal("without second chance the older partial chunk survived (LRU broken?)")
	}
}

func TestBypass(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20, BypassBytes: 100})
	d, l := e.dataset(1, -1, 128)
	want := pattern(128, 9)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, want, 3)}))
	if st := e.c.Stats(); st.Chunks != 0 || st.ResidentBytes != 0 || st.Bypasses != 1 || st.ChunksFlushed != 1 {
		t.Fatalf("bypassed write stayed: %+v", st)
	}
	got := make([]byte, 128)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 3)}))
	if !bytes.Equal(got, want) {
		t.Fatal("bypass read wrong")
	}
	if st := e.c.Stats(); st.Chunks != 0 || st.Bypasses != 2 || st.Loads != 1 {
		t.Fatalf("bypassed read stayed: %+v", st)
	}
	// A partial bypass write loads, applies, writes back.
	must(t, e.c.Write(bg, []Request{partReq(d, 0, []byte{7}, 3)}))
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 3)}))
	want[0] = 7
	if !bytes.Equal(got, want) {
		t.Fatal("partial bypass write lost")
	}
	// A bypass write whose write-back fails returns the error and is not
	// applied: the chunk is dropped unwritten, and the stored one, still
	// the visible version, is what reads and flushes give. (Kept dirty, the
	// write that reported failure became durable at the next flush.)
	e.drv.failWrite.Store(true)
	if err := e.c.Write(bg, []Request{partReq(d, 1, []byte{8}, 3)}); !errors.Is(err, errDisk) {
		t.Fatalf("bypass write error: %v", err)
	}
	if st := e.c.Stats(); st.DirtyBytes != 0 || st.Chunks != 0 {
		t.Fatalf("failed bypass write kept its chunk: %+v", st)
	}
	e.drv.failWrite.Store(false)
	must(t, e.f.Flush(bg))
	must(t, d.Flush(bg, true))
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 3)}))
	if !bytes.Equal(got, want) {
		t.Fatal("a failed bypass write was applied")
	}
	// Once the disk is repaired the same write succeeds.
	must(t, e.c.Write(bg, []Request{partReq(d, 1, []byte{8}, 3)}))
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 3)}))
	want[1] = 8
	if !bytes.Equal(got, want) {
		t.Fatal("bypass write lost")
	}
}

func TestSetExtent(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 4, 4)
	// 3x3 chunks of 4x4 = dims 12x12, all written and flushed; chunk (1,1)
	// then evicted, (2,2) and (0,2) stay cached.
	for i := uint64(0); i < 3; i++ {
		for j := uint64(0); j < 3; j++ {
			must(t, e.c.Write(bg, []Request{fullReq(d, l, bytes.Repeat([]byte{byte(1 + i*3 + j)}, 16), i, j)}))
		}
	}
	must(t, d.Flush(bg, true))
	for _, c := range []layout.Coord{{2, 2}, {0, 2}} {
		must(t, e.c.Read(bg, []Request{fullReq(d, l, make([]byte, 16), c...)}))
	}
	// Shrink to 6x6: row/col 2 wholly outside; chunks (0..1,1) and (1,0) cut.
	loads := e.c.Stats().Loads
	must(t, d.PrepareExtent(bg, []uint64{12, 12}, []uint64{6, 6}))
	// Preparing changes nothing visible: the cut chunks were loaded
	// (1,1 was evicted) but not trimmed, and nothing was dropped.
	if l.trims.Load() != 0 {
		t.Fatalf("PrepareExtent trimmed %d chunks", l.trims.Load())
	}
	if got := e.c.Stats().Loads - loads; got == 0 {
		t.Fatal("PrepareExtent did not load the evicted cut chunk (1,1)")
	}
	if _, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0, 2})); !ok {
		t.Fatal("PrepareExtent dropped a chunk")
	}
	l.prune([]uint64{6, 6}) // the layout's half: engine/internal/index Resize
	must(t, d.SetExtent(bg, []uint64{12, 12}, []uint64{6, 6}))
	if _, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0, 2})); ok {
		t.Fatal("wholly-outside chunk still cached")
	}
	// The cut chunks were loaded, trimmed and dirtied.
	if l.trims.Load() != 3 {
		t.Fatalf("trims %d want 3 ((0,1),(1,0),(1,1))", l.trims.Load())
	}
	got := make([]byte, 16)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 1, 1)}))
	want := make([]byte, 16)
	for r := 0; r < 2; r++ {
		for c := 0; c < 2; c++ {
			want[r*4+c] = 5
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("trimmed chunk %v want %v", got, want)
	}
	if e.c.Stats().DirtyBytes != 3*16 {
		t.Fatalf("dirty %d", e.c.Stats().DirtyBytes)
	}
}

func TestDirectReadWrite(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 8)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(8, 1), 0)}))
	img, loc, err := d.DirectRead(bg, layout.Coord{0})
	must(t, err)
	if !loc.Exists() || e.c.Stats().DirtyBytes != 0 {
		t.Fatal("direct read did not flush the dirty chunk first")
	}
	ch, err := l.Decode(layout.Coord{0}, loc, img)
	must(t, err)
	if !bytes.Equal(ch.(*fakeChunk).b, pattern(8, 1)) {
		t.Fatal("direct read image wrong")
	}
	_, loc, err = d.DirectRead(bg, layout.Coord{5})
	must(t, err)
	if loc.Exists() {
		t.Fatal("absent chunk reported stored")
	}
	enc, _ := l.Encode(layout.Coord{0}, &fakeChunk{b: pattern(8, 77)})
	must(t, d.DirectWrite(bg, layout.Coord{0}, enc))
	if d.Stats().Chunks != 0 {
		t.Fatal("cached copy not dropped by direct write")
	}
	got := make([]byte, 8)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 0)}))
	if !bytes.Equal(got, pattern(8, 77)) {
		t.Fatal("direct write not visible")
	}
}

func TestClosedCache(t *testing.T) {
	e := newEnv(t, Config{})
	d, l := e.dataset(1, -1, 8)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(8, 1), 0)}))
	must(t, e.f.Discard(bg))
	must(t, e.c.Close())
	must(t, e.c.Close())
	if err := e.c.Read(bg, []Request{fullReq(d, l, make([]byte, 8), 0)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := e.c.RegisterFile(vfd.NewMem()); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if st := e.c.Stats(); st.Chunks != 0 || st.ResidentBytes != 0 {
		t.Fatalf("close kept chunks: %+v", st)
	}
}

// TestCloseRefusesWhileFilesRegistered: Close used to drop a registered
// file's dirty chunks without a word. It now fails with ErrFilesOpen and
// leaves the cache as it was: the data is still readable, and the file
// can still flush and unregister, after which Close succeeds.
func TestCloseRefusesWhileFilesRegistered(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 5), 0)}))
	if err := e.c.Close(); !errors.Is(err, ErrFilesOpen) {
		t.Fatalf("close with a registered file: %v", err)
	}
	if st := e.c.Stats(); st.DirtyBytes != 16 || st.Chunks != 1 {
		t.Fatalf("refused close changed the cache: %+v", st)
	}
	got := make([]byte, 16)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 0)}))
	if !bytes.Equal(got, pattern(16, 5)) {
		t.Fatal("dirty data lost by a refused close")
	}
	if _, err := e.c.RegisterFile(vfd.NewMem()); err != nil {
		t.Fatalf("cache unusable after a refused close: %v", err)
	}
	e.c.registered.files.ForEach(func(_ uint64, f *File) bool {
		must(t, f.Unregister(bg))
		return true
	})
	must(t, e.c.Close())
	checkStored(t, e, l, 1, func(int) []byte { return pattern(16, 5) })
}

// TestDiscardDropsDirtyChunks: Discard is the explicit way to give a file
// up; it drops dirty chunks without writing and leaves the accounting whole.
func TestDiscardDropsDirtyChunks(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	for i := uint64(0); i < 4; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, byte(i)), i)}))
	}
	must(t, e.f.Discard(bg))
	if st := e.c.Stats(); st.DirtyBytes != 0 || st.Chunks != 0 || st.ResidentBytes != 0 {
		t.Fatalf("discard left %+v", st)
	}
	if l.encodes.Load() != 0 {
		t.Fatal("discard wrote chunks")
	}
	if err := e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("write after discard: %v", err)
	}
	must(t, e.c.Close())
}

func TestInvalidRequests(t *testing.T) {
	e := newEnv(t, Config{})
	d, l := e.dataset(1, -1, 8, 8)
	for _, r := range []Request{{}, {Dataset: d, Coord: layout.Coord{1}}} {
		if err := e.c.Read(bg, []Request{r}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	other := newEnv(t, Config{})
	if err := other.c.Read(bg, []Request{fullReq(d, l, make([]byte, 64), 0, 0)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("foreign dataset: %v", err)
	}
	if _, err := e.f.RegisterDataset(2, newFakeLayout(&e.alloc, 0, 4), DatasetOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatal("zero chunk dim accepted")
	}
}

func TestOversizeChunkIsOneIndivisibleExcess(t *testing.T) {
	// A chunk larger than the whole active limit still loads (into an
	// otherwise empty cache), and the peak stays within limit + one chunk.
	e := newEnv(t, Config{QuiescentBytes: 100, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1})
	d, l := e.dataset(1, -1, 300)
	small, sl := e.dataset(2, -1, 50)
	must(t, e.c.Write(bg, []Request{fullReq(small, sl, pattern(50, 1), 0)}))
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(300, 2), 0)}))
	st := e.c.Stats()
	if st.PeakResidentBytes > st.ActiveLimit+300 {
		t.Fatalf("peak %d", st.PeakResidentBytes)
	}
	got := make([]byte, 50)
	must(t, e.c.Read(bg, []Request{fullReq(small, sl, got, 0)}))
	if !bytes.Equal(got, pattern(50, 1)) {
		t.Fatal("small chunk lost")
	}
}

func TestWaitingForSpaceHonoursContext(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 64, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1})
	d, l := e.dataset(1, -1, 64)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 1), 0)}))
	// The next writer evicts chunk 0, whose write blocks at the disk.
	e.drv.writeGate = make(chan struct{})
	first := make(chan error)
	go func() { first <- e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 2), 1)}) }()
	waitFor(t, "the evictor blocked in WriteV", func() bool { return e.drv.writeVs.Load() > 0 })
	// A third writer finds nothing to evict and must wait: cancel it.
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if err := e.c.Write(ctx, []Request{fullReq(d, l, pattern(64, 3), 2)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked writer: %v", err)
	}
	if e.c.Stats().SpaceWaits == 0 {
		t.Fatal("writer did not wait for space")
	}
	close(e.drv.writeGate)
	must(t, <-first)
	if st := e.c.Stats(); st.PeakResidentBytes > st.ActiveLimit {
		t.Fatalf("peak %d over %d", st.PeakResidentBytes, st.ActiveLimit)
	}
}

func TestCorruptLocationRejected(t *testing.T) {
	e := newEnv(t, Config{})
	d, l := e.dataset(1, -1, 8)
	l.mu.Lock()
	l.index[ckey(layout.Coord{0})] = layout.Location{Addr: 0, Size: 1 << 40}
	l.mu.Unlock()
	if err := e.c.Read(bg, []Request{fullReq(d, l, make([]byte, 8), 0)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("huge stored size: %v", err)
	}
}

func TestStatsSub(t *testing.T) {
	a := Stats{Hits: 10, Misses: 4, ResidentBytes: 7}
	b := Stats{Hits: 3, Misses: 1, ResidentBytes: 100}
	if d := a.Sub(b); d.Hits != 7 || d.Misses != 3 || d.ResidentBytes != 7 {
		t.Fatalf("%+v", d)
	}
}

// countingRunner is a Config.Runner that runs tasks inline and counts them.
type countingRunner struct{ tasks atomic.Int64 }

func (r *countingRunner) Run(_ context.Context, n int, fn func(int) error) error {
	for i := 0; i < n; i++ {
		r.tasks.Add(1)
		if err := fn(i); err != nil {
			return err
		}
	}
	return nil
}

func TestCustomRunner(t *testing.T) {
	r := &countingRunner{}
	e := newEnv(t, Config{Runner: r})
	d, l := e.dataset(1, -1, 8)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(8, 1), 0), fullReq(d, l, pattern(8, 2), 1)}))
	must(t, e.f.Flush(bg))
	if r.tasks.Load() != 4 { // two NewChunk + two Encode
		t.Fatalf("runner ran %d tasks, want 4", r.tasks.Load())
	}
}

// panicLayout panics in Encode: the worker turns it into an error.
type panicLayout struct{ *fakeLayout }

func (panicLayout) Encode(layout.Coord, layout.Chunk) (layout.Encoded, error) { panic("boom") }

func TestCallbackPanicBecomesError(t *testing.T) {
	e := newEnv(t, Config{Workers: 2})
	var alloc atomic.Int64
	pl := panicLayout{newFakeLayout(&alloc, 8)}
	d, err := e.f.RegisterDataset(1, pl, DatasetOptions{})
	must(t, err)
	must(t, e.c.Write(bg, []Request{fullReq(d, pl.fakeLayout, pattern(8, 1), 0), fullReq(d, pl.fakeLayout, pattern(8, 1), 1)}))
	if err := e.f.Flush(bg); !errors.Is(err, ErrPanic) {
		t.Fatalf("flush: %v", err)
	}
	if e.c.Stats().DirtyBytes != 16 {
		t.Fatal("panicking encode cleaned chunks")
	}
}

func TestEvictionBatchesVectorIO(t *testing.T) {
	// Four dirty chunks fill the cache; one request for four new chunks
	// evicts all of them with one Insert and one WriteV, then reading the
	// four back loads them with one Lookup and one ReadV.
	const chunk = 32
	e := newEnv(t, Config{QuiescentBytes: 4 * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1})
	d, l := e.dataset(1, -1, chunk)
	var first, second []Request
	for i := 0; i < 4; i++ {
		first = append(first, fullReq(d, l, pattern(chunk, byte(i)), uint64(i)))
		second = append(second, fullReq(d, l, pattern(chunk, byte(10+i)), uint64(10+i)))
	}
	must(t, e.c.Write(bg, first))
	w0, i0 := e.drv.writeVs.Load(), l.inserts.Load()
	must(t, e.c.Write(bg, second))
	if w, i := e.drv.writeVs.Load()-w0, l.inserts.Load()-i0; w != 1 || i != 1 {
		t.Fatalf("evicting 4 dirty chunks took %d WriteV and %d Insert calls, want 1 and 1", w, i)
	}
	r0, lk0 := e.drv.readVs.Load(), l.lookups.Load()
	var back []Request
	for i := 0; i < 4; i++ {
		back = append(back, fullReq(d, l, make([]byte, chunk), uint64(i)))
	}
	must(t, e.c.Read(bg, back))
	if r, lk := e.drv.readVs.Load()-r0, l.lookups.Load()-lk0; r != 1 || lk != 1 {
		t.Fatalf("loading 4 chunks took %d ReadV and %d Lookup calls", r, lk)
	}
	for i, r := range back {
		if !bytes.Equal(r.Piece.(*fakePiece).buf, pattern(chunk, byte(i))) {
			t.Fatalf("chunk %d wrong", i)
		}
	}
}

func TestCondenseBeforeEvict(t *testing.T) {
	const chunk = 32
	e := newEnv(t, Config{QuiescentBytes: 4 * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1})
	fl := newFakeLayout(&e.alloc, chunk)
	fl.slack = chunk // each new chunk holds twice its payload
	l := condLayout{fl}
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{})
	must(t, err)
	must(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(chunk, 1), 0), fullReq(d, fl, pattern(chunk, 2), 1)}))
	if got := e.c.Stats().ResidentBytes; got != 4*chunk {
		t.Fatalf("resident %d", got)
	}
	// The third chunk fits once the first two give back their slack.
	must(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(chunk, 3), 2)}))
	st := e.c.Stats()
	if st.Evictions != 0 || d.Stats().Chunks != 3 {
		t.Fatalf("evicted instead of condensing: %+v", st)
	}
	if st.ResidentBytes != 4*chunk || d.Stats().ResidentBytes != 4*chunk {
		t.Fatalf("accounting after condense: %d / %d", st.ResidentBytes, d.Stats().ResidentBytes)
	}
	got := make([]byte, chunk)
	must(t, e.c.Read(bg, []Request{fullReq(d, fl, got, 0)}))
	if !bytes.Equal(got, pattern(chunk, 1)) {
		t.Fatal("condensed chunk lost data")
	}
}

func TestUnpinWakesSpaceWaiter(t *testing.T) {
	// The only chunk is pinned when a writer needs space: the writer blocks,
	// and releasing the pin (which frees no bytes) must wake it.
	e := newEnv(t, Config{QuiescentBytes: 64, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1})
	d, l := e.dataset(1, -1, 64)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 1), 0)}))
	ent, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
	if !ok {
		t.Fatal("chunk not cached")
	}
	if ok, _ := ent.pin(); !ok {
		t.Fatal("pin failed")
	}
	done := make(chan error)
	go func() { done <- e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 2), 1)}) }()
	waitFor(t, "the writer waiting for space", func() bool { return e.c.Stats().SpaceWaits > 0 })
	if e.c.Stats().SpaceWaits == 0 {
		t.Fatal("writer never waited")
	}
	e.c.budget.unpin(ent)
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("writer not woken by the unpin")
	}
}

// waitDone waits for a result the test expects to arrive; the bound only
// turns a deadlock into a failure.
func waitDone(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s is blocked", what)
		return nil
	}
}

// TestDatasetUnregisterFlushesWithoutFileLock: Dataset.Unregister used to
// hold File.mu across its flush, so registering another dataset of the
// file waited for the disk. Here the flush is held inside WriteV while
// another dataset registers.
func TestDatasetUnregisterFlushesWithoutFileLock(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 3), 0)}))
	gate := make(chan struct{})
	e.drv.writeGate = gate
	unreg := make(chan error, 1)
	go func() { unreg <- d.Unregister(bg) }()
	waitFor(t, "the flush blocked in WriteV", func() bool { return e.drv.writeVs.Load() > 0 })
	reg := make(chan error, 1)
	go func() {
		_, err := e.f.RegisterDataset(2, newFakeLayout(&e.alloc, 16), DatasetOptions{})
		reg <- err
	}()
	must(t, waitDone(t, "RegisterDataset during a flush", reg))
	close(gate)
	must(t, waitDone(t, "Unregister", unreg))
	if err := d.Unregister(bg); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("second unregister: %v", err)
	}
	checkStored(t, e, l, 1, func(int) []byte { return pattern(16, 3) })
}

// TestFileUnregisterWaitsWithoutFileLock: File.Unregister waits for chunks
// still in use. It used to wait holding File.mu and polling every 5 ms; it
// now waits unlocked for the release signal, so another dataset's
// Unregister completes meanwhile and the unpin alone ends the wait.
func TestFileUnregisterWaitsWithoutFileLock(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d1, l1 := e.dataset(1, -1, 16)
	d2, l2 := e.dataset(2, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d1, l1, pattern(16, 1), 0), fullReq(d2, l2, pattern(16, 2), 0)}))
	must(t, e.f.Flush(bg))
	ent, ok := e.c.chunks.Load(makeKey(d1.serial, layout.Coord{0}))
	if !ok {
		t.Fatal("chunk not cached")
	}
	if ok, _ := ent.pin(); !ok {
		t.Fatal("pin failed")
	}
	unreg := make(chan error, 1)
	go func() { unreg <- e.f.Unregister(bg) }()
	waitFor(t, "Unregister waiting for the pinned chunk", func() bool {
		e.f.mu.Lock()
		defer e.f.mu.Unlock()
		return e.f.mu.unreg != nil && e.c.budget.spaceWaiters.Load() > 0
	})
	other := make(chan error, 1)
	go func() { other <- d2.Unregister(bg) }()
	if err := waitDone(t, "Dataset.Unregister during File.Unregister", other); err != nil && !errors.Is(err, ErrNotRegistered) {
		t.Fatal(err)
	}
	if _, err := e.f.RegisterDataset(3, newFakeLayout(&e.alloc, 16), DatasetOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("register during unregister: %v", err)
	}
	select {
	case err := <-unreg:
		t.Fatalf("Unregister returned with a chunk pinned: %v", err)
	default:
	}
	e.c.budget.unpin(ent)
	must(t, waitDone(t, "File.Unregister after the unpin", unreg))
	if st := e.c.Stats(); st.Chunks != 0 || st.ResidentBytes != 0 {
		t.Fatalf("unregister left %+v", st)
	}
}

// TestUnregisterInUseError: a drop that gives up on a chunk still in use
// returns ErrInUse (wrapping the context's error), which the engine can
// map, and leaves the file registered; once the chunk is free it succeeds.
func TestUnregisterInUseError(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
	ent, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
	if !ok {
		t.Fatal("chunk not cached")
	}
	if ok, _ := ent.pin(); !ok {
		t.Fatal("pin failed")
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- e.f.Discard(ctx) }()
	waitFor(t, "Discard waiting for the pinned chunk", func() bool { return e.c.budget.spaceWaiters.Load() > 0 })
	cancel()
	if err := waitDone(t, "Discard", done); !errors.Is(err, ErrInUse) || !errors.Is(err, context.Canceled) {
		t.Fatalf("discard of a file in use: %v", err)
	}
	if err := e.c.Close(); !errors.Is(err, ErrFilesOpen) {
		t.Fatalf("close after a failed discard: %v", err)
	}
	e.c.budget.unpin(ent)
	must(t, e.f.Discard(bg))
	must(t, e.c.Close())
}
