package cache

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/layout"
)

// TestHitServedInline: a hit never goes through the runner and allocates
// nothing.
func TestHitServedInline(t *testing.T) {
	r := &countRunner{}
	e := newEnv(t, Config{QuiescentBytes: 1 << 20, Runner: r})
	d, l := e.dataset(1, -1, 64)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 1), 0)}))
	buf := make([]byte, 64)
	reqs := []Request{fullReq(d, l, buf, 0)}
	before := r.calls.Load()
	allocs := testing.AllocsPerRun(100, func() {
		if err := e.c.Read(bg, reqs); err != nil {
			t.Fatal(err)
		}
	})
	if got := r.calls.Load() - before; got != 0 {
		t.Fatalf("hits went through the runner %d times", got)
	}
	if allocs != 0 {
		t.Fatalf("hit allocates %v times", allocs)
	}
	if !bytes.Equal(buf, pattern(64, 1)) {
		t.Fatal("wrong data")
	}
	// A request list that starts with hits and then misses is served whole.
	reqs = []Request{fullReq(d, l, make([]byte, 64), 0), fullReq(d, l, make([]byte, 64), 1)}
	st0 := e.c.Stats()
	must(t, e.c.Read(bg, reqs))
	if st := e.c.Stats().Sub(st0); st.Misses != 1 || st.Hits != 1 {
		t.Fatalf("misses %d", st.Misses)
	}
}

type countRunner struct{ calls atomic.Int64 }

func (r *countRunner) Run(ctx context.Context, n int, fn func(int) error) error {
	r.calls.Add(1)
	for i := 0; i < n; i++ {
		if err := fn(i); err != nil {
			return err
		}
	}
	return nil
}

// TestSetExtentGrowthNoScan: growth does not walk the cached chunks; a
// shrink does.
func TestSetExtentGrowthNoScan(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, 4, 4)
	for i := uint64(0); i < 8; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, byte(i)), i, 0)}))
	}
	for n := uint64(32); n < 64; n += 4 {
		must(t, d.SetExtent(bg, []uint64{n, 4}, []uint64{n + 4, 4}))
	}
	if got := e.c.stats.extentScans.Load(); got != 0 {
		t.Fatalf("growth scanned %d times", got)
	}
	must(t, d.SetExtent(bg, []uint64{64, 4}, []uint64{16, 4}))
	if got := e.c.stats.extentScans.Load(); got != 1 {
		t.Fatalf("shrink scans %d", got)
	}
	if st := d.Stats(); st.Chunks != 4 {
		t.Fatalf("chunks after shrink %d", st.Chunks)
	}
}

// TestEvictionEncodesInParallel: writers short of space evict and encode
// their dirty victims concurrently, not one at a time behind one evictor.
func TestEvictionEncodesInParallel(t *testing.T) {
	const chunk = 1024
	e := newEnv(t, Config{QuiescentBytes: 8 * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1})
	d, l := e.dataset(1, -1, chunk)
	for i := 0; i < 8; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(i)), uint64(i))}))
	}
	var cur, peak atomic.Int32
	l.encodeHook = func(layout.Coord) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		// Give a second encoder the chance to overlap; if encodes were
		// serialized it never comes and the test fails below.
		deadline := time.Now().Add(200 * time.Millisecond)
		for peak.Load() < 2 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		cur.Add(-1)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				c := uint64(100 + w*10 + i)
				if err := e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(c)), c)}); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	if p := peak.Load(); p < 2 {
		t.Fatalf("at most %d encodes ran at once", p)
	}
	if st := e.c.Stats(); st.PeakResidentBytes > st.ActiveLimit {
		t.Fatalf("peak %d over limit %d", st.PeakResidentBytes, st.ActiveLimit)
	}
}

// preEnv fills a cache past its pre-encode high-water mark with dirty
// chunks and pre-encodes them.
func preEnv(t *testing.T) (*env, *Dataset, *fakeLayout) {
	const chunk = 256
	// 16 dirty chunks sit above the high-water mark (3/4 of 21 chunks),
	// and with 4 images they still fit the quiescent size (no trim).
	e := newEnv(t, Config{QuiescentBytes: 21 * chunk, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: 4 * (chunk + 6)})
	d, l := e.dataset(1, -1, chunk)
	for i := 0; i < 16; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(i)), uint64(i))}))
	}
	// The background pre-encoder may already have run; run rounds until
	// one keeps nothing. Rounds do not overlap, so the images are settled
	// then: the budget holds exactly 4, and no later round finds room.
	preEncodeNow(e.c)
	st := e.c.Stats()
	if st.PreEncoded != 4 || st.PreEncodedBytes != 4*(chunk+6) {
		t.Fatalf("pre-encoded %d images, %d bytes", st.PreEncoded, st.PreEncodedBytes)
	}
	if st.ResidentBytes != 16*chunk+st.PreEncodedBytes || st.DirtyBytes != st.ResidentBytes {
		t.Fatalf("accounting: resident %d dirty %d images %d", st.ResidentBytes, st.DirtyBytes, st.PreEncodedBytes)
	}
	return e, d, l
}

// checkStored reads every chunk back through a fresh cache on the same
// file and compares with want.
func checkStored(t *testing.T, e *env, l *fakeLayout, n int, want func(i int) []byte) {
	t.Helper()
	c2 := newTestCache(t, Config{QuiescentBytes: 1 << 20})
	f2, err := c2.RegisterFile(e.drv)
	must(t, err)
	l2 := &fakeLayout{cd: l.cd, next: l.next, index: l.index}
	d2, err := f2.RegisterDataset(1, l2, DatasetOptions{})
	must(t, err)
	for i := 0; i < n; i++ {
		buf := make([]byte, l.chunkBytes())
		must(t, c2.Read(bg, []Request{fullReq(d2, l2, buf, uint64(i))}))
		if !bytes.Equal(buf, want(i)) {
			t.Fatalf("chunk %d: stored data is not the last written", i)
		}
	}
}

func TestPreEncodeUsedByFlush(t *testing.T) {
	e, d, l := preEnv(t)
	pre := e.c.Stats().PreEncoded
	enc0 := l.encodes.Load()
	// Keep background rounds out while the flush frees image budget, so
	// every encode counted is the flush's.
	e.c.background.preEncode.round.Lock()
	err := e.f.Flush(bg)
	e.c.background.preEncode.round.Unlock()
	must(t, err)
	st := e.c.Stats()
	if st.PreEncodeHits != pre {
		t.Fatalf("flush used %d of %d kept images", st.PreEncodeHits, pre)
	}
	// The flush encodes the chunks without a kept image, and only those.
	if got := l.encodes.Load() - enc0; got != 16-pre {
		t.Fatalf("flush encoded %d chunks, want %d", got, 16-pre)
	}
	if st.PreEncodedBytes != 0 || st.DirtyBytes != 0 || st.ResidentBytes != 16*256 {
		t.Fatalf("after flush: images %d dirty %d resident %d", st.PreEncodedBytes, st.DirtyBytes, st.ResidentBytes)
	}
	checkStored(t, e, l, 16, func(i int) []byte { return pattern(256, byte(i)) })
	_ = d
}

// TestPreEncodeCountsOnlyKeptImages: the kept images' bytes (Stats
// PreEncodedBytes, the pre-encode budget) never count an attempt that has
// not yet found its chunk unchanged and the image within the budget. An
// attempt is held between its encode and that check (the test shares the
// entry's latch, so the attempt's exclusive Lock waits); meanwhile nothing
// is counted. Counting the image before the check made a settled-looking
// cache report a fifth image over a budget of four, or an image after a
// flush had left nothing dirty, whenever Stats ran during such an attempt.
func TestPreEncodeCountsOnlyKeptImages(t *testing.T) {
	const chunk = 256
	e := newEnv(t, Config{QuiescentBytes: 21 * chunk, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: chunk + 6})
	d, l := e.dataset(1, -1, chunk)
	var (
		first   atomic.Bool
		held    = make(chan *entry, 1)
		release = make(chan struct{})
	)
	l.encodeHook = func(c layout.Coord) {
		if first.CompareAndSwap(false, true) {
			// The first attempt: take a second shared hold on its latch,
			// which the test lets go of once it has looked.
			ent, ok := e.c.chunks.Load(makeKey(d.serial, c))
			if !ok {
				panic("encoded chunk not cached")
			}
			ent.latch.RLock()
			held <- ent
			return
		}
		<-release // other attempts wait until the test has looked
	}
	// The 16th write takes the cache over its pre-encode mark and wakes the
	// background pre-encoder.
	for i := 0; i < 16; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(i)), uint64(i))}))
	}
	ent := <-held
	// Wait until the attempt queues for the exclusive latch (a pending
	// writer makes TryRLock fail): it is past its encode and about to
	// check. Only the attempt can ask for it: nothing else runs.
	for {
		if !ent.latch.TryRLock() {
			break
		}
		ent.latch.RUnlock()
		runtime.Gosched()
	}
	st := e.c.Stats()
	if st.PreEncodedBytes != 0 || st.PreEncoded != 0 {
		t.Errorf("an attempt not yet checked is counted: %d images, %d bytes", st.PreEncoded, st.PreEncodedBytes)
	}
	ent.latch.RUnlock()
	close(release)
	preEncodeNow(e.c) // waits for the background round, keeps nothing more
	st = e.c.Stats()
	if st.PreEncoded != 1 || st.PreEncodedBytes != chunk+6 || st.ResidentBytes != 16*chunk+st.PreEncodedBytes {
		t.Fatalf("settled: %d images, %d bytes, resident %d", st.PreEncoded, st.PreEncodedBytes, st.ResidentBytes)
	}
	must(t, e.f.Flush(bg))
	checkStored(t, e, l, 16, func(i int) []byte { return pattern(chunk, byte(i)) })
}

// TestPreEncodePanicReleasesLatch: an Encode that panics in the
// pre-encoder is ignored (the foreground encode reports it), and the
// chunk's latch is let go, so the chunk can still be written and flushed.
func TestPreEncodePanicReleasesLatch(t *testing.T) {
	const chunk = 256
	e := newEnv(t, Config{QuiescentBytes: 21 * chunk, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: 4 * (chunk + 6)})
	d, l := e.dataset(1, -1, chunk)
	var first atomic.Bool
	l.encodeHook = func(layout.Coord) {
		if first.CompareAndSwap(false, true) {
			panic("encode fails once")
		}
	}
	for i := 0; i < 16; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(i)), uint64(i))}))
	}
	preEncodeNow(e.c) // also waits for the background round
	if !first.Load() {
		t.Fatal("nothing was pre-encoded")
	}
	for i := 0; i < 16; i++ {
		ent, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{uint64(i)}))
		if !ok {
			t.Fatalf("chunk %d not cached", i)
		}
		if !ent.latch.TryLock() {
			t.Fatalf("chunk %d: latch still held after the pre-encoder's panic", i)
		}
		ent.latch.Unlock()
	}
	for i := 0; i < 16; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(50+i)), uint64(i))}))
	}
	must(t, e.f.Flush(bg))
	checkStored(t, e, l, 16, func(i int) []byte { return pattern(chunk, byte(50+i)) })
}

func TestPreEncodeInvalidatedByWrite(t *testing.T) {
	e, d, l := preEnv(t)
	pre := e.c.Stats().PreEncoded
	for i := 0; i < 16; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(256, byte(100+i)), uint64(i))}))
	}
	st := e.c.Stats()
	if st.PreEncodeWasted < pre {
		t.Fatalf("wasted %d of %d invalidated images", st.PreEncodeWasted, pre)
	}
	// New images may have been made of the new data meanwhile; both are
	// fine as long as the file ends up with the new data.
	must(t, e.f.Flush(bg))
	checkStored(t, e, l, 16, func(i int) []byte { return pattern(256, byte(100+i)) })
	if st := e.c.Stats(); st.PreEncodedBytes != 0 || st.DirtyBytes != 0 {
		t.Fatalf("after flush: images %d dirty %d", st.PreEncodedBytes, st.DirtyBytes)
	}
}

// TestPreEncodeUsedByEviction: evicting pre-encoded victims writes the kept
// images, and releases their bytes.
func TestPreEncodeUsedByEviction(t *testing.T) {
	e, d, l := preEnv(t)
	for i := 16; i < 80; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(256, byte(i)), uint64(i))}))
	}
	st := e.c.Stats()
	if st.PreEncodeHits == 0 || st.DirtyEvictions == 0 {
		t.Fatalf("eviction used %d images (%d dirty evictions)", st.PreEncodeHits, st.DirtyEvictions)
	}
	if st.PeakResidentBytes > st.ActiveLimit {
		t.Fatalf("peak %d over limit %d", st.PeakResidentBytes, st.ActiveLimit)
	}
	must(t, e.f.Flush(bg))
	checkStored(t, e, l, 80, func(i int) []byte { return pattern(256, byte(i)) })
	must(t, e.f.Unregister(bg))
	if st := e.c.Stats(); st.ResidentBytes != 0 || st.PreEncodedBytes != 0 {
		t.Fatalf("left: resident %d images %d", st.ResidentBytes, st.PreEncodedBytes)
	}
}

// TestPreEncodeWantedOnlyWithUnencodedDirty: above the high-water mark,
// the pre-encoder is woken only while some dirty bytes have no image; a
// cache full of clean chunks (a read-only workload) or of chunks already
// pre-encoded does not wake it at every request's end.
func TestPreEncodeWantedOnlyWithUnencodedDirty(t *testing.T) {
	e, d, l := preEnv(t)
	high := e.c.Stats().ResidentBytes
	must(t, e.f.Flush(bg))
	if st := e.c.Stats(); st.DirtyBytes != 0 || st.ResidentBytes < high-4*(256+6) {
		t.Fatalf("after flush: dirty %d resident %d", st.DirtyBytes, st.ResidentBytes)
	}
	if e.c.background.preEncode.wanted(high, &e.c.sizes, &e.c.budget) {
		t.Fatal("only clean chunks above the mark: wanted")
	}
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(256, 9), 3)}))
	if !e.c.background.preEncode.wanted(high, &e.c.sizes, &e.c.budget) {
		t.Fatal("a new dirty chunk above the mark: not wanted")
	}
	if e.c.background.preEncode.wanted(e.c.sizes.current().preHigh, &e.c.sizes, &e.c.budget) {
		t.Fatal("at the mark: wanted")
	}
}

func TestPreEncodeOff(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 4096, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1})
	d, l := e.dataset(1, -1, 256)
	for i := 0; i < 64; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(256, byte(i)), uint64(i))}))
	}
	if n := preEncodeNow(e.c); n != 0 || e.c.Stats().PreEncoded != 0 {
		t.Fatalf("pre-encoded %d with pre-encode off", n)
	}
}

// TestPreEncodeConcurrentWriters races writers against the pre-encoder,
// eviction and flushes; the file must end with each chunk's last write.
func TestPreEncodeConcurrentWriters(t *testing.T) {
	const chunk, n = 256, 48
	e := newEnv(t, Config{QuiescentBytes: 12 * chunk, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: 12 * chunk})
	d, l := e.dataset(1, -1, chunk)
	var last [n]atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				preEncodeNow(e.c)
			}
		}
	}()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			// Each writer owns the chunks ≡ w mod 4 (no overlapping writes).
			for r := 0; r < 20; r++ {
				for i := w; i < n; i += 4 {
					v := int32(r*7 + i)
					if err := e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(v)), uint64(i))}); err != nil {
						t.Error(err)
						return
					}
					last[i].Store(v)
				}
				if r%5 == 4 {
					if err := e.f.Flush(bg); err != nil {
						t.Error(err)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	must(t, e.f.Flush(bg))
	checkStored(t, e, l, n, func(i int) []byte { return pattern(chunk, byte(last[i].Load())) })
	if st := e.c.Stats(); st.PeakResidentBytes > st.ActiveLimit || st.DirtyBytes != 0 {
		t.Fatalf("peak %d limit %d dirty %d", st.PeakResidentBytes, st.ActiveLimit, st.DirtyBytes)
	}
}

// seqEnv stores n chunks and returns a cold cache (with cfg) on the file.
func seqEnv(t *testing.T, n int, cfg Config) (*Cache, *Dataset, *fakeLayout, *File) {
	const chunk = 256
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	d, l := e.dataset(1, -1, chunk)
	for i := 0; i < n; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(chunk, byte(i)), uint64(i))}))
	}
	must(t, e.f.Flush(bg))
	c2 := newTestCache(t, cfg)
	f2, err := c2.RegisterFile(e.drv)
	must(t, err)
	l2 := &fakeLayout{cd: l.cd, next: l.next, index: l.index}
	d2, err := f2.RegisterDataset(1, l2, DatasetOptions{})
	must(t, err)
	return c2, d2, l2, f2
}

// waitFor polls cond (background work); the deadline only bounds a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPrefetchSequential(t *testing.T) {
	const n = 32
	c, d, l, f := seqEnv(t, n, Config{QuiescentBytes: 64 * 256, Prefetch: true, PrefetchChunks: 4})
	for i := 0; i < n; i++ {
		buf := make([]byte, 256)
		must(t, c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}))
		if !bytes.Equal(buf, pattern(256, byte(i))) {
			t.Fatalf("chunk %d wrong", i)
		}
		if i == 1 {
			waitFor(t, "first prefetch", func() bool { return c.Stats().Prefetched > 0 })
		}
		if i >= 2 {
			// Let the stream run ahead so later reads hit.
			waitFor(t, "prefetch ahead", func() bool {
				_, ok := c.chunks.Load(makeKey(d.serial, layout.Coord{uint64(min(i+1, n-1))}))
				return ok
			})
		}
	}
	st := c.Stats()
	if st.Prefetched == 0 || st.PrefetchHits == 0 {
		t.Fatalf("prefetched %d, hits %d", st.Prefetched, st.PrefetchHits)
	}
	if st.Loads+st.Prefetched < n || l.decodes.Load() != st.Loads+st.Prefetched {
		t.Fatalf("loads %d + prefetched %d, decodes %d", st.Loads, st.Prefetched, l.decodes.Load())
	}
	if st.Hits < n/2 {
		t.Fatalf("only %d of %d reads hit", st.Hits, n)
	}
	if st.PeakResidentBytes > st.ActiveLimit {
		t.Fatalf("peak %d over %d", st.PeakResidentBytes, st.ActiveLimit)
	}
	must(t, f.Unregister(bg))
}

// TestPrefetchBounded: a tiny cache with dirty chunks of another dataset:
// prefetch never evicts them and never passes the memory limit or its
// byte budget.
func TestPrefetchBounded(t *testing.T) {
	const n = 64
	c, d, l, f := seqEnv(t, n, Config{QuiescentBytes: 8 * 256, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1,
		Prefetch: true, PrefetchBytes: 2 * 256, PrefetchChunks: 8, PreEncodeBytes: -1})
	for i := 0; i < n; i++ {
		buf := make([]byte, 256)
		must(t, c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}))
		if !bytes.Equal(buf, pattern(256, byte(i))) {
			t.Fatalf("chunk %d wrong", i)
		}
		if st := c.Stats(); st.PrefetchBytes > 2*256 {
			t.Fatalf("prefetch holds %d bytes", st.PrefetchBytes)
		}
	}
	// The prefetch eviction takes clean chunks only.
	l3 := &fakeLayout{cd: l.cd, next: l.next, index: map[string]layout.Location{}}
	d3, err := f.RegisterDataset(7, l3, DatasetOptions{})
	must(t, err)
	for i := 0; i < 4; i++ {
		must(t, c.Write(bg, []Request{fullReq(d3, l3, pattern(256, 9), uint64(i))}))
	}
	waitFor(t, "prefetcher idle", func() bool {
		f.pf.Lock()
		defer f.pf.Unlock()
		return len(c.background.prefetch.jobs) == 0 && f.pf.n == 0
	})
	dirty0, n3 := c.Stats().DirtyBytes, d3.Stats().Chunks
	c.evictClean(1 << 30)
	st := c.Stats()
	if st.PeakResidentBytes > st.ActiveLimit {
		t.Fatalf("peak %d over %d", st.PeakResidentBytes, st.ActiveLimit)
	}
	// What is left of d is its unused prefetched chunks (spared).
	if got := d3.Stats().Chunks; got != n3 || n3 == 0 || st.DirtyBytes != dirty0 || d.Stats().ResidentBytes != st.PrefetchBytes {
		t.Fatalf("dirty chunks left %d, dirty bytes %d, clean bytes left %d (prefetched unused %d)", got, st.DirtyBytes, d.Stats().ResidentBytes, st.PrefetchBytes)
	}
	if st.Prefetched == 0 {
		t.Fatal("nothing prefetched")
	}
	must(t, f.Unregister(bg))
}

func TestPrefetchOffByDefault(t *testing.T) {
	const n = 16
	c, d, l, _ := seqEnv(t, n, Config{QuiescentBytes: 1 << 20})
	for i := 0; i < n; i++ {
		must(t, c.Read(bg, []Request{fullReq(d, l, make([]byte, 256), uint64(i))}))
	}
	if st := c.Stats(); st.Prefetched != 0 || st.Loads != n {
		t.Fatalf("prefetched %d loads %d", st.Prefetched, st.Loads)
	}
}

func TestStepDim(t *testing.T) {
	for _, tc := range []struct {
		a, b layout.Coord
		want int
	}{
		{layout.Coord{1, 2}, layout.Coord{1, 3}, 1},
		{layout.Coord{1, 2}, layout.Coord{2, 2}, 0},
		{layout.Coord{1, 2}, layout.Coord{2, 3}, -1},
		{layout.Coord{1, 2}, layout.Coord{1, 2}, -1},
		{layout.Coord{1, 2}, layout.Coord{1, 4}, -1},
		{nil, layout.Coord{0}, -1},
	} {
		if got := stepDim(tc.a, tc.b); got != tc.want {
			t.Errorf("stepDim(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestBackgroundConfigValidate(t *testing.T) {
	for _, c := range []Config{{PreEncodeBytes: -2}, {PrefetchBytes: -1}, {PrefetchChunks: -1}} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (Config{PreEncodeBytes: -1, Prefetch: true}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// preEncodeNow runs pre-encode rounds until one keeps nothing (tests). As
// rounds do not overlap (background.preEncode.round), the kept images are then settled: a
// background round still to come finds the same state and keeps nothing.
// Tests that read Stats after it see no attempt in flight.
func preEncodeNow(c *Cache) int {
	total := 0
	for {
		n := c.background.preEncode.encodeRound(c.background.jobs.ctx)
		if n == 0 {
			return total
		}
		total += n
	}
}
