package cache

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/layout"
)

// storedChunks writes n whole chunks of d (patterns seeded by their
// coordinate) and flushes them out of the cache, so that reads miss.
func storedChunks(t *testing.T, e *env, d *Dataset, l *fakeLayout, n int) [][]byte {
	t.Helper()
	want := make([][]byte, n)
	for i := range want {
		want[i] = pattern(int(l.chunkBytes()), byte(10+i))
		must(t, e.c.Write(bg, []Request{fullReq(d, l, want[i], uint64(i))}))
	}
	must(t, d.Flush(bg, true))
	if st := e.c.Stats(); st.Chunks != 0 {
		t.Fatalf("%d chunks resident after the flush", st.Chunks)
	}
	return want
}

func readPart(t *testing.T, e *env, d *Dataset, want []byte, coord uint64) {
	t.Helper()
	got := make([]byte, 20)
	must(t, e.c.Read(bg, []Request{partReq(d, 5, got, coord)}))
	if !bytes.Equal(got, want[5:25]) {
		t.Fatalf("chunk %d: read %x, want %x", coord, got, want[5:25])
	}
}

func TestAdmitOnReread(t *testing.T) {
	for _, on := range []bool{false, true} {
		e := newEnv(t, Config{QuiescentBytes: 1 << 20, AdmitOnReread: on})
		d, l := e.dataset(1, -1, 64)
		want := storedChunks(t, e, d, l, 3)
		before := e.c.Stats()
		readPart(t, e, d, want[0], 0)
		st := e.c.Stats().Sub(before)
		if on && (st.Chunks != 0 || st.Loads != 1 || st.Bypasses != 1) {
			t.Fatalf("first read kept the chunk: %d resident, %d loads, %d bypasses", st.Chunks, st.Loads, st.Bypasses)
		}
		if !on && st.Chunks != 1 {
			t.Fatalf("default cache: first read did not keep the chunk (%d resident)", st.Chunks)
		}
		readPart(t, e, d, want[0], 0)
		if st := e.c.Stats(); st.Chunks != 1 {
			t.Fatalf("on=%v: second read did not keep the chunk (%d resident)", on, st.Chunks)
		}
		before = e.c.Stats()
		readPart(t, e, d, want[0], 0)
		if st := e.c.Stats().Sub(before); st.Hits != 1 || st.Loads != 0 {
			t.Fatalf("on=%v: third read: %d hits, %d loads", on, st.Hits, st.Loads)
		}
	}
}

// TestFullCacheAdmitsRereads: once the cache is full, a chunk read once is
// served without evicting anything, and a chunk read again is kept,
// evicting another, so that a full cache still takes in a new working set.
func TestFullCacheAdmitsRereads(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 2 * 64, MinBytes: -1, BypassBytes: 1 << 20})
	d, l := e.dataset(1, -1, 64)
	want := storedChunks(t, e, d, l, 4)
	readPart(t, e, d, want[0], 0)
	readPart(t, e, d, want[1], 1)
	before := e.c.Stats()
	if before.Chunks != 2 {
		t.Fatalf("%d chunks resident, want the 2 a cache with room keeps", before.Chunks)
	}
	readPart(t, e, d, want[2], 2)
	st := e.c.Stats()
	if d := st.Sub(before); d.Evictions != 0 || d.Loads != 1 || d.Bypasses != 1 {
		t.Fatalf("a chunk read once into a full cache: %d evictions, %d loads, %d bypasses", d.Evictions, d.Loads, d.Bypasses)
	}
	if _, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{2})); ok {
		t.Fatal("a chunk read once into a full cache was kept")
	}
	readPart(t, e, d, want[2], 2)
	if _, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{2})); !ok {
		t.Fatal("a chunk read again into a full cache was not kept")
	}
	if d := e.c.Stats().Sub(st); d.Loads != 1 || d.Bypasses != 0 {
		t.Fatalf("a chunk read again: %d loads, %d bypasses", d.Loads, d.Bypasses)
	}
}

// TestRereadsWithinTheCacheOnly: a chunk read again is kept only if it
// was missed within the last cache-size worth of misses. A loop over more
// chunks than the cache holds (repeated whole scans) would evict each
// before its next read in any order, so its chunks keep being served
// without being kept: no loads into the cache, no evictions, every read
// correct. A loop that fits is kept from its second pass on and then hits.
func TestRereadsWithinTheCacheOnly(t *testing.T) {
	for _, admit := range []bool{true, false} {
		// 4 chunks of 64 bytes fit; the full-cache rule (admit off)
		// applies once 4 are resident.
		e := newEnv(t, Config{QuiescentBytes: 4 * 64, MinBytes: -1, BypassBytes: 1 << 20, AdmitOnReread: admit})
		d, l := e.dataset(1, -1, 64)
		want := storedChunks(t, e, d, l, 12)
		if !admit {
			for i := 8; i < 12; i++ { // fill the cache with chunks outside the loop
				readPart(t, e, d, want[i], uint64(i))
			}
		}
		before := e.c.Stats()
		for pass := 0; pass < 3; pass++ {
			for i := 0; i < 8; i++ {
				readPart(t, e, d, want[i], uint64(i))
			}
		}
		st := e.c.Stats().Sub(before)
		if st.Bypasses != 24 || st.Evictions != 0 || st.Hits != 0 {
			t.Fatalf("admit=%v: a loop over twice the cache: %d of 24 reads served without keeping, %d evictions, %d hits",
				admit, st.Bypasses, st.Evictions, st.Hits)
		}
		// A loop of 3 chunks fits (with admit off, the 4 resident chunks
		// leave the cache full): kept on its second pass, hits on its
		// third.
		before = e.c.Stats()
		for pass := 0; pass < 3; pass++ {
			for i := 0; i < 3; i++ {
				readPart(t, e, d, want[i], uint64(i))
			}
		}
		st = e.c.Stats().Sub(before)
		if st.Hits != 3 {
			t.Fatalf("admit=%v: a loop within the cache: %d hits on its third pass, want 3 (%+v)", admit, st.Hits, st)
		}
	}
}

// liveLayout counts the chunks Decode made that Evict has not taken back.
type liveLayout struct {
	*fakeLayout
	live, peak atomic.Int64
	during     func() // called inside every Decode
}

func (l *liveLayout) Decode(c layout.Coord, loc layout.Location, img []byte) (layout.Chunk, error) {
	n := l.live.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	if l.during != nil {
		l.during()
	}
	ch, err := l.fakeLayout.Decode(c, loc, img)
	if err != nil {
		l.live.Add(-1)
	}
	return ch, err
}

func (l *liveLayout) Evict(c layout.Coord, ch layout.Chunk) {
	l.live.Add(-1)
	l.fakeLayout.Evict(c, ch)
}

// TestTransientDecodesOnWorkers: a read of many chunks the cache does not
// keep decodes each on a worker into a chunk of its own, scatters it and
// gives it back at once, so that no more chunks are alive than there are
// goroutines decoding (the workers, and the caller, which runs a task
// itself when they are all busy), and the budget is charged for that many
// while they decode; an error in one comes back and leaves nothing
// resident.
func TestTransientDecodesOnWorkers(t *testing.T) {
	const n, workers = 16, 2
	e := newEnv(t, Config{QuiescentBytes: 1 << 20, AdmitOnReread: true, Workers: workers})
	fl := newFakeLayout(&e.alloc, 64)
	l := &liveLayout{fakeLayout: fl}
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{MinBytes: -1})
	must(t, err)
	want := storedChunks(t, e, d, fl, n)
	l.live.Store(0)
	l.peak.Store(0)
	// The chunks decoding are charged to the budget while they live.
	var charged atomic.Int64
	l.during = func() {
		if r := e.c.Stats().ResidentBytes; r > charged.Load() {
			charged.Store(r)
		}
		time.Sleep(time.Millisecond) // room for the others to overlap
	}
	reqs := make([]Request, n)
	bufs := make([][]byte, n)
	for i := range reqs {
		bufs[i] = make([]byte, 30)
		reqs[i] = partReq(d, 7, bufs[i], uint64(i))
	}
	must(t, e.c.Read(bg, reqs))
	for i := range bufs {
		if !bytes.Equal(bufs[i], want[i][7:37]) {
			t.Fatalf("chunk %d read wrong", i)
		}
	}
	if p := l.peak.Load(); p > workers+1 {
		t.Fatalf("%d decoded chunks alive at once, want at most %d (one per decoding goroutine)", p, workers+1)
	}
	if st := e.c.Stats(); st.Chunks != 0 || l.live.Load() != 0 || st.ResidentBytes != 0 {
		t.Fatalf("%d chunks resident (%d bytes), %d not given back", st.Chunks, st.ResidentBytes, l.live.Load())
	}
	if c := charged.Load(); c < (workers+1)*fl.chunkBytes() {
		t.Fatalf("%d bytes charged while chunks decoded, want room for %d of %d bytes", c, workers+1, fl.chunkBytes())
	}
	fl.failDecode.Store(true)
	if err := e.c.Read(bg, reqs); !errors.Is(err, errFake) {
		t.Fatalf("read with a failing decode: %v", err)
	}
	fl.failDecode.Store(false)
	if st := e.c.Stats(); st.Chunks != 0 || l.live.Load() != 0 || st.ResidentBytes != 0 {
		t.Fatalf("after a failed read: %d chunks resident, %d not given back", st.Chunks, l.live.Load())
	}
}
