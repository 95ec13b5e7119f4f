package cache

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/scc-dev/scc/cache/layout"
)

// TestLightReadersAgainstWriter: reads of one resident chunk run as light
// readers (no latch) while writers overwrite the whole chunk with one byte
// value; every read sees one value throughout. Without the writer bit and
// the drain in lockChunk a read would see a half-written chunk, and the
// race detector reports the unsynchronized copy.
func TestLightReadersAgainstWriter(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 256)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, bytes.Repeat([]byte{1}, 256), 0)}))
	before := e.c.Stats()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256)
			for !stop.Load() {
				if err := e.c.Read(bg, []Request{fullReq(d, l, buf, 0)}); err != nil {
					t.Error(err)
					return
				}
				for _, b := range buf {
					if b != buf[0] {
						t.Errorf("torn read: %v", buf)
						return
					}
				}
				reads.Add(1)
			}
		}()
	}
	for v := byte(2); v < 60; v++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, bytes.Repeat([]byte{v}, 256), 0)}))
		runtime.Gosched()
	}
	for reads.Load() < 100 && !t.Failed() {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	if s := e.c.Stats().Sub(before); s.Misses != 0 {
		t.Fatalf("%d misses: the chunk should have stayed resident", s.Misses)
	}
}

// residentEntry is a cache holding one resident 16-byte chunk (coordinate
// 0, pattern 1) and that chunk's entry.
func residentEntry(t *testing.T) (*env, *Dataset, *fakeLayout, *entry) {
	t.Helper()
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
	en, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
	if !ok {
		t.Fatal("chunk not resident")
	}
	return e, d, l, en
}

// TestLightPinHoldsEntry: a light reader's pin keeps the entry from being
// evicted (the word is not resident|0), and lockChunk waits until the
// light reader leaves.
func TestLightPinHoldsEntry(t *testing.T) {
	_, _, _, en := residentEntry(t)
	if !en.tryPinRead() {
		t.Fatal("tryPinRead failed on an idle resident entry")
	}
	if en.state() != stateResident {
		t.Fatalf("state %v with a light reader", en.state())
	}
	if en.tryStartEvict() {
		t.Fatal("evicting an entry a light reader holds")
	}
	if !en.tryPin() {
		t.Fatal("a heavy pin must still work beside light readers")
	}
	locked := make(chan struct{})
	go func() {
		en.lockChunk()
		close(locked)
	}()
	// The writer bit is set before the drain: new light readers fall back.
	for en.word.Load()&writerBit == 0 {
		runtime.Gosched()
	}
	if en.tryPinRead() {
		t.Fatal("light pin taken while a writer waits")
	}
	select {
	case <-locked:
		t.Fatal("lockChunk returned while a light reader was in")
	case <-time.After(20 * time.Millisecond):
	}
	en.unpinRead()
	<-locked
	en.unlockChunk()
	en.unpin()
	if !en.tryPinRead() {
		t.Fatal("light pin refused after the writer left")
	}
	en.unpinRead()
	if !en.tryStartEvict() {
		t.Fatal("idle entry not evictable")
	}
	en.settle(stateResident, false)
}

// TestSlotReaderHoldsChunk: a slot reader (latch.go) writes nothing to
// the entry, yet eviction and lockChunk both wait until it leaves, and
// while either is under way no new slot reader gets in. With all slots
// taken a read still succeeds through a light pin.
func TestSlotReaderHoldsChunk(t *testing.T) {
	e, d, l, en := residentEntry(t)
	rs := &e.c.access.slots
	w0 := en.word.Load()
	slot := rs.enter(en)
	if slot == nil {
		t.Fatal("enter refused an idle resident entry")
	}
	if en.word.Load() != w0 {
		t.Fatalf("a slot reader changed the entry's word: %#x -> %#x", w0, en.word.Load())
	}
	waitsFor := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
			t.Fatalf("%s returned while a slot reader was in", what)
		case <-time.After(20 * time.Millisecond):
		}
		if rs.enter(en) != nil {
			t.Fatalf("a new slot reader got in during %s", what)
		}
		slot.release()
		<-done
	}
	// Eviction: the entry goes to evicting at once, the caller waits.
	var evicted bool
	waitsFor("tryStartEvict", func() { evicted = en.tryStartEvict() })
	if !evicted || en.state() != stateEvicting {
		t.Fatalf("evict %v, state %v", evicted, en.state())
	}
	en.settle(stateResident, false)
	// A writer: the writer bit goes up at once, lockChunk waits.
	if slot = rs.enter(en); slot == nil {
		t.Fatal("enter refused after the eviction was reverted")
	}
	if !en.tryPin() {
		t.Fatal("pin beside a slot reader")
	}
	waitsFor("lockChunk", func() { en.lockChunk() })
	en.unlockChunk()
	en.unpin()
	// Every slot taken: reads fall back to light pins and still hit.
	// (Stats waits for slot holders, so it is read with the slots free.)
	before := e.c.Stats()
	for i := range rs.slots {
		rs.slots[i].e.Store(slotAddr(slotHeld))
	}
	buf := make([]byte, 16)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 0)}))
	for i := range rs.slots {
		rs.slots[i].release()
	}
	if !bytes.Equal(buf, pattern(16, 1)) || e.c.Stats().Sub(before).Hits != 1 {
		t.Fatalf("read %v with every slot taken", buf)
	}
}

// TestServeResident: leading resident chunks are served and counted as
// hits; it stops at the first miss without loading anything.
func TestServeResident(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0), fullReq(d, l, pattern(16, 2), 1)}))
	before := e.c.Stats()
	a, b, c := make([]byte, 16), make([]byte, 16), make([]byte, 16)
	reqs := []Request{fullReq(d, l, a, 0), fullReq(d, l, b, 5), fullReq(d, l, c, 1)}
	n, err := e.c.ServeResident(bg, false, reqs)
	must(t, err)
	if n != 1 {
		t.Fatalf("served %d, want 1 (stop at the miss)", n)
	}
	if !bytes.Equal(a, pattern(16, 1)) {
		t.Fatalf("read %v", a)
	}
	s := e.c.Stats().Sub(before)
	if s.Hits != 1 || s.Misses != 0 || s.Loads != 0 || s.Creates != 0 {
		t.Fatalf("stats %+v", s)
	}
	if ds := d.Stats(); ds.Hits < 1 {
		t.Fatalf("dataset hits %d", ds.Hits)
	}
	// A write hit is applied and dirties the chunk.
	must(t, e.c.Flush(bg))
	n, err = e.c.ServeResident(bg, true, []Request{fullReq(d, l, pattern(16, 9), 1)})
	must(t, err)
	if n != 1 || e.c.Stats().DirtyBytes == 0 {
		t.Fatalf("write hit: served %d, dirty %d", n, e.c.Stats().DirtyBytes)
	}
	must(t, e.c.Read(bg, []Request{fullReq(d, l, c, 1)}))
	if !bytes.Equal(c, pattern(16, 9)) {
		t.Fatalf("after write hit read %v", c)
	}
}

// blockingLayout makes Scatter wait until released.
type blockingLayout struct {
	*fakeLayout
	in, out chan struct{}
}

func (l *blockingLayout) Scatter(ch layout.Chunk, p layout.Piece) error {
	if l.in != nil {
		l.in <- struct{}{}
		<-l.out
	}
	return l.fakeLayout.Scatter(ch, p)
}

// TestHitsAreNotRunningRequests: a request served entirely by hits does
// not count as running (the background trim's quiescence test), so hits
// write no cache-wide count; the count is back at zero after a miss.
func TestHitsAreNotRunningRequests(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	fl := newFakeLayout(&e.alloc, 16)
	bl := &blockingLayout{fakeLayout: fl}
	d, err := e.f.RegisterDataset(7, bl, DatasetOptions{MinBytes: -1})
	must(t, err)
	must(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(16, 1), 0)}))
	bl.in, bl.out = make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- e.c.Read(bg, []Request{fullReq(d, fl, make([]byte, 16), 0)}) }()
	<-bl.in // inside the hit's Scatter
	if n := e.c.stats.hot.Load(hotActive); n != 0 {
		t.Errorf("running requests during a hit: %d, want 0", n)
	}
	bl.out <- struct{}{}
	must(t, <-done)
	// A read of a chunk that exists nowhere goes the slow way and counts.
	go func() { done <- e.c.Read(bg, []Request{fullReq(d, fl, make([]byte, 16), 3)}) }()
	must(t, <-done)
	if n := e.c.stats.hot.Load(hotActive); n != 0 {
		t.Fatalf("running requests after the miss: %d", n)
	}
}

// inlineCountRunner runs tasks inline and counts Run calls.
type inlineCountRunner struct{ calls atomic.Int64 }

func (r *inlineCountRunner) Run(_ context.Context, n int, fn func(int) error) error {
	r.calls.Add(1)
	for i := 0; i < n; i++ {
		if err := fn(i); err != nil {
			return err
		}
	}
	return nil
}

// TestSingleMissDecodesInline: a miss of one chunk is decoded on the
// caller's goroutine without a hand-off to the runner; several missing
// chunks still go through it (in parallel on the pool).
func TestSingleMissDecodesInline(t *testing.T) {
	r := &inlineCountRunner{}
	e := newEnv(t, Config{QuiescentBytes: 1 << 20, Runner: r})
	d, l := e.dataset(1, -1, 16)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0), fullReq(d, l, pattern(16, 2), 1), fullReq(d, l, pattern(16, 3), 2)}))
	must(t, e.c.Flush(bg))
	e.c.drop(d, false)
	before := r.calls.Load()
	buf := make([]byte, 16)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 0)}))
	if !bytes.Equal(buf, pattern(16, 1)) {
		t.Fatalf("read %v", buf)
	}
	if n := r.calls.Load() - before; n != 0 {
		t.Fatalf("one missing chunk went through the runner (%d calls)", n)
	}
	b1, b2 := make([]byte, 16), make([]byte, 16)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, b1, 1), fullReq(d, l, b2, 2)}))
	if n := r.calls.Load() - before; n != 1 {
		t.Fatalf("two missing chunks: %d runner calls, want 1", n)
	}
	if !bytes.Equal(b1, pattern(16, 2)) || !bytes.Equal(b2, pattern(16, 3)) {
		t.Fatalf("read %v %v", b1, b2)
	}
	if s := e.c.Stats(); s.Loads < 3 {
		t.Fatalf("loads %d", s.Loads)
	}
}

// TestIdleDatasetHasNoStripes: a registered dataset that was never read
// or written holds no per-P counter stripes (idle open datasets stay
// small); its first request makes them and is counted.
func TestIdleDatasetHasNoStripes(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 16)
	if d.hot.Load() != nil {
		t.Fatal("idle dataset has counter stripes")
	}
	if s := d.Stats(); s.Hits != 0 || s.Misses != 0 {
		t.Fatalf("idle stats %+v", s)
	}
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
	must(t, e.c.Read(bg, []Request{fullReq(d, l, make([]byte, 16), 0)}))
	if s := d.Stats(); s.Hits != 1 || s.Misses != 1 {
		t.Fatalf("stats %+v, want 1 hit and 1 miss", s)
	}
}

// TestSlotCountsExact: read hits counted in read slots (latch.go) reach
// Stats and Dataset.Stats exactly, also while other goroutines fold the
// slots (Stats) and drain them (the replayer) under the readers, and when
// a slot switches between datasets on every hit. Without foldSlots in
// Stats the counts fall short by what the slots hold.
func TestSlotCountsExact(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 16 << 20})
	const chunks = 64
	ds := make([]*Dataset, 3)
	ls := make([]*fakeLayout, 3)
	for i := range ds {
		ds[i], ls[i] = e.dataset(uint64(i+1), -1, 16)
		for c := 0; c < chunks; c++ {
			must(t, e.c.Write(bg, []Request{fullReq(ds[i], ls[i], pattern(16, byte(c)), uint64(c))}))
		}
	}
	must(t, e.f.Flush(bg))
	// Two rounds: the first checks the cache's count first, the second
	// the datasets' first (each Stats folds every slot).
	for round := 0; round < 2; round++ {
		before := e.c.Stats()
		dsBefore := make([]DatasetStats, len(ds))
		for i := range ds {
			dsBefore[i] = ds[i].Stats()
		}
		perDS := slotReadRound(t, e, ds, ls, chunks)
		checkCache := func() {
			t.Helper()
			want := int64(slotReaders*slotReads + len(ds))
			if s := e.c.Stats().Sub(before); s.Hits != want || s.Misses != 0 {
				t.Fatalf("round %d: hits %d misses %d, want %d hits", round, s.Hits, s.Misses, want)
			}
		}
		if round == 0 {
			checkCache()
		}
		for i := range ds {
			if got := ds[i].Stats().Hits - dsBefore[i].Hits; got != perDS[i] {
				t.Fatalf("round %d: dataset %d: %d hits, want %d", round, i, got, perDS[i])
			}
		}
		checkCache()
	}
}

const slotReaders, slotReads = 8, 3000

// slotReadRound reads resident chunks of ds from slotReaders goroutines,
// a different dataset on every read, while another goroutine calls
// Stats, then one chunk of each dataset after the last Stats; it returns
// the reads per dataset.
func slotReadRound(t *testing.T, e *env, ds []*Dataset, ls []*fakeLayout, chunks int) []int64 {
	var stop atomic.Bool
	var wg, folder sync.WaitGroup
	folder.Add(1)
	go func() {
		defer folder.Done()
		for !stop.Load() {
			_ = e.c.Stats()
			runtime.Gosched()
		}
	}()
	perDS := make([]atomic.Int64, len(ds))
	for r := 0; r < slotReaders; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			buf := make([]byte, 16)
			for k := 0; k < slotReads; k++ {
				i := (r + k) % len(ds)
				c := uint64((r*7 + k*13) % chunks)
				if err := e.c.Read(bg, []Request{fullReq(ds[i], ls[i], buf, c)}); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(buf, pattern(16, byte(c))) {
					t.Errorf("reader %d: chunk %d read %v", r, c, buf)
					return
				}
				perDS[i].Add(1)
			}
		}(r)
	}
	wg.Wait()
	stop.Store(true)
	folder.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// A read of each dataset after the last fold, left in the slots.
	buf := make([]byte, 16)
	for i := range ds {
		must(t, e.c.Read(bg, []Request{fullReq(ds[i], ls[i], buf, 0)}))
		perDS[i].Add(1)
	}
	out := make([]int64, len(ds))
	for i := range out {
		out[i] = perDS[i].Load()
	}
	return out
}

// TestReadSlotLines: a read slot fills whole cache lines, so a holder's
// plain writes never share a line with another P's slot.
func TestReadSlotLines(t *testing.T) {
	if sz := unsafe.Sizeof(readSlot{}); sz%64 != 0 {
		t.Fatalf("readSlot is %d bytes, not whole cache lines", sz)
	}
}
