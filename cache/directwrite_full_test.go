package cache

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

// The direct-write rule's second half (intake.worthIt): chunks below the
// bypass threshold go direct once admitting them would take the cache past
// its quiescent limit.

// fullEnv is a 4 KiB cache (bypass 1 KiB, active 8 KiB) with a direct
// dataset of 512-byte chunks: eight fit.
func fullEnv(t *testing.T) (*env, *Dataset, *fakeLayout) {
	e := newEnv(t, Config{QuiescentBytes: 4 << 10})
	d, l := e.directDataset(1, 16, 32)
	return e, d, l
}

// A stream of whole chunks twice the cache's size fills the cache to its
// quiescent limit, then goes straight to the file: nothing is evicted,
// resident bytes never pass the quiescent limit, and every chunk reads
// back equal.
func TestDirectWriteStreamThroughFullCache(t *testing.T) {
	e, d, l := fullEnv(t)
	const n = 16
	for i := range n {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(512, byte(i)), uint64(i), 0)}))
	}
	st := e.c.Stats()
	if st.Creates != 8 || st.DirectWrites != n-8 || st.Evictions != 0 || st.PeakResidentBytes > st.QuiescentLimit {
		t.Fatalf("stream of %d chunks through an 8-chunk cache: %d created, %d direct, %d evictions, peak %d (quiescent %d)",
			n, st.Creates, st.DirectWrites, st.Evictions, st.PeakResidentBytes, st.QuiescentLimit)
	}
	must(t, e.f.Flush(bg))
	got := make([]byte, 512)
	for i := range n {
		must(t, e.c.Read(bg, []Request{fullReq(d, l, got, uint64(i), 0)}))
		if !bytes.Equal(got, pattern(512, byte(i))) {
			t.Fatalf("chunk %d read back wrong", i)
		}
	}
}

// One write of many whole chunks into an empty cache keeps as many as fit
// under the quiescent limit and writes the rest directly, with one vector
// write.
func TestDirectWriteOneRequestFillsCache(t *testing.T) {
	e, d, l := fullEnv(t)
	var reqs []Request
	for i := range 12 {
		reqs = append(reqs, fullReq(d, l, pattern(512, byte(i+40)), uint64(i), 0))
	}
	w0 := e.drv.writeVs.Load()
	must(t, e.c.Write(bg, reqs))
	st := e.c.Stats()
	if st.Creates != 8 || st.DirectWrites != 4 || st.Evictions != 0 || e.drv.writeVs.Load()-w0 != 1 {
		t.Fatalf("12 chunks in one write: %d created, %d direct, %d evictions, %d WriteV", st.Creates, st.DirectWrites, st.Evictions, e.drv.writeVs.Load()-w0)
	}
	got := make([]byte, 512)
	for i := range 12 {
		must(t, e.c.Read(bg, []Request{fullReq(d, l, got, uint64(i), 0)}))
		if !bytes.Equal(got, pattern(512, byte(i+40))) {
			t.Fatalf("chunk %d read back wrong", i)
		}
	}
}

// A small hot chunk rewritten again and again in a cache with room stays
// cached (no direct write, one write at Flush); once the cache is full a
// chunk with a resident copy is still written through it (the resident
// copy wins), while a chunk without one goes direct.
func TestDirectWriteHotChunkStaysCached(t *testing.T) {
	e, d, l := fullEnv(t)
	for i := range 10 {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(512, byte(i)), 0, 0)}))
	}
	if st := e.c.Stats(); st.DirectWrites != 0 || st.Chunks != 1 || st.Creates != 1 || e.drv.writeVs.Load() != 0 {
		t.Fatalf("hot chunk: %d direct, %d resident, %d created, %d WriteV", st.DirectWrites, st.Chunks, st.Creates, e.drv.writeVs.Load())
	}
	for i := 1; i < 12; i++ { // 7 more fit, then 4 go direct
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(512, byte(i+100)), uint64(i), 0)}))
	}
	if st := e.c.Stats(); st.DirectWrites != 4 || st.Chunks != 8 {
		t.Fatalf("filling: %d direct, %d resident", st.DirectWrites, st.Chunks)
	}
	hot := pattern(512, 77)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, hot, 0, 0)}))
	if st := e.c.Stats(); st.DirectWrites != 4 || st.DirtyBytes == 0 {
		t.Fatalf("a whole write of a resident chunk in a full cache went direct: %d direct", st.DirectWrites)
	}
	cold := pattern(512, 88)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, cold, 9, 0)}))
	if st := e.c.Stats(); st.DirectWrites != 5 {
		t.Fatalf("a whole write of a non-resident chunk in a full cache: %d direct", st.DirectWrites)
	}
	must(t, e.f.Flush(bg))
	got := make([]byte, 512)
	for c, want := range map[uint64][]byte{0: hot, 9: cold, 3: pattern(512, 103)} {
		must(t, e.c.Read(bg, []Request{fullReq(d, l, got, c, 0)}))
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d read back wrong", c)
		}
	}
}

// A failed direct write of a full cache leaves the old contents visible
// and nothing resident for the chunk; the next write succeeds.
func TestDirectWriteFullCacheFailure(t *testing.T) {
	e, d, l := fullEnv(t)
	for i := range 8 {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(512, byte(i)), uint64(i), 0)}))
	}
	old := pattern(512, 50)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, old, 8, 0)})) // direct
	loc, _ := l.stored(layout.Coord{8, 0})
	e.drv.failWrite.Store(true)
	err := e.c.Write(bg, []Request{fullReq(d, l, pattern(512, 51), 8, 0)})
	e.drv.failWrite.Store(false)
	if !errors.Is(err, errDisk) {
		t.Fatalf("failing direct write: %v", err)
	}
	if now, _ := l.stored(layout.Coord{8, 0}); now != loc || e.c.Stats().DirectWrites != 1 || e.c.Stats().Chunks != 8 {
		t.Fatalf("after the failure: index %+v (was %+v), %d direct, %d resident", now, loc, e.c.Stats().DirectWrites, e.c.Stats().Chunks)
	}
	got := make([]byte, 512)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 8, 0)}))
	if !bytes.Equal(got, old) {
		t.Fatal("old contents not visible after a failed direct write")
	}
}

// Goroutines own disjoint chunks of a cache far smaller than the data and
// write them whole (direct once the cache is full, cached while it has
// room) and in part (always cached), read them whole and in part, while
// another goroutine flushes: every read equals the reference model (each
// goroutine's own record of its chunks), both paths run, and the cache's
// invariants hold.
func TestDirectWriteFullCacheConcurrentModel(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 2 << 10}) // four 512-byte chunks
	d, l := e.directDataset(1, 16, 32)
	const workers, per = 6, 4
	var wg sync.WaitGroup
	errc := make(chan error, workers+1)
	stop := make(chan struct{})
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() {
		defer fwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := e.f.Flush(bg); err != nil {
				errc <- err
				return
			}
		}
	}()
	for g := range workers {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			model := make([][]byte, per) // chunk g+workers*k
			for k := range model {
				model[k] = make([]byte, 512)
			}
			for i := range 300 {
				k := r.IntN(per)
				c := uint64(g + workers*k)
				var err error
				switch r.IntN(4) {
				case 0, 1:
					b := pattern(512, byte(r.Uint32()))
					err = e.c.Write(bg, []Request{fullReq(d, l, b, c, 0)})
					if err == nil {
						copy(model[k], b)
					}
				case 2:
					off, b := r.IntN(400), pattern(1+r.IntN(100), byte(i))
					err = e.c.Write(bg, []Request{partReq(d, off, b, c, 0)})
					if err == nil {
						copy(model[k][off:], b)
					}
				default:
					got := make([]byte, 512)
					if r.IntN(2) == 0 {
						err = e.c.Read(bg, []Request{fullReq(d, l, got, c, 0)})
					} else {
						got = got[:100]
						err = e.c.Read(bg, []Request{partReq(d, 300, got, c, 0)})
						if err == nil && !bytes.Equal(got, model[k][300:400]) {
							err = fmt.Errorf("chunk %d: partial read differs from the model", c)
						}
						got = nil
					}
					if err == nil && got != nil && !bytes.Equal(got, model[k]) {
						err = fmt.Errorf("chunk %d: read differs from the model", c)
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	fwg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	st := e.c.Stats()
	if st.DirectWrites == 0 || st.Creates == 0 {
		t.Fatalf("both paths should run: %d direct, %d created", st.DirectWrites, st.Creates)
	}
	must(t, e.f.Flush(bg))
}

// Config.DirectWriteBytes: a whole write of a non-resident chunk at least
// that large goes direct although the cache has room; a smaller one, or
// any with the rule off (-1), is cached; a resident copy still takes the
// write; and the threshold can not change under a running cache.
func TestDirectWriteBytesThreshold(t *testing.T) {
	for _, tc := range []struct {
		min    int64
		direct bool
	}{{256, true}, {512, true}, {513, false}, {-1, false}} {
		t.Run(fmt.Sprint(tc.min), func(t *testing.T) {
			e := newEnv(t, Config{QuiescentBytes: 64 << 10, DirectWriteBytes: tc.min})
			d, l := e.directDataset(1, 16, 32) // 512-byte chunks
			for i := range 4 {
				must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(512, byte(i)), uint64(i), 0)}))
			}
			st := e.c.Stats()
			if tc.direct && (st.DirectWrites != 4 || st.Creates != 0 || st.Chunks != 0) {
				t.Fatalf("min %d: %d direct, %d created, %d resident; want all direct", tc.min, st.DirectWrites, st.Creates, st.Chunks)
			}
			if !tc.direct && (st.DirectWrites != 0 || st.Creates != 4) {
				t.Fatalf("min %d: %d direct, %d created; want all cached", tc.min, st.DirectWrites, st.Creates)
			}
			// A partial write makes chunk 0 resident; the next whole write
			// of it goes through the resident copy.
			must(t, e.c.Write(bg, []Request{partReq(d, 0, pattern(16, 9), 0, 0)}))
			before := e.c.Stats().DirectWrites
			must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(512, 50), 0, 0)}))
			if st := e.c.Stats(); st.DirectWrites != before || st.DirtyBytes == 0 {
				t.Fatalf("min %d: a whole write of a resident chunk went direct", tc.min)
			}
			must(t, e.f.Flush(bg))
			got := make([]byte, 512)
			for i := range 4 {
				want := pattern(512, byte(i))
				if i == 0 {
					want = pattern(512, 50)
				}
				must(t, e.c.Read(bg, []Request{fullReq(d, l, got, uint64(i), 0)}))
				if !bytes.Equal(got, want) {
					t.Fatalf("min %d: chunk %d read back wrong", tc.min, i)
				}
			}
			next := Config{QuiescentBytes: 64 << 10, DirectWriteBytes: tc.min + 1}
			if err := e.c.SetConfig(bg, next); !errors.Is(err, ErrImmutableConfig) {
				t.Fatalf("changing DirectWriteBytes: %v", err)
			}
		})
	}
	if err := (Config{DirectWriteBytes: -2}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("DirectWriteBytes -2: %v", err)
	}
}
