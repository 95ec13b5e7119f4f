package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"github.com/scc-dev/scc/internal/bufpool"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// imageBlocks builds n blocks of size bytes at addresses 1000+i*size, in
// one buffer, each ending in the CRC of the rest (as the engine's blocks
// do), ranked in order.
func imageBlocks(n, size int) ([]PrefetchedBlock, []byte) {
	buf := bufpool.Get(n * size)
	bs := make([]PrefetchedBlock, n)
	for i := range bs {
		b := buf[i*size : (i+1)*size : (i+1)*size]
		for j := range b[:size-4] {
			b[j] = byte(i + j)
		}
		sum := crc32.Checksum(b[:size-4], crc32.MakeTable(crc32.Castagnoli))
		binary.LittleEndian.PutUint32(b[size-4:], sum)
		bs[i] = PrefetchedBlock{Kind: 3, Rank: uint32(i), Addr: int64(1000 + i*size), Sum: sum, Image: b}
	}
	return bs, buf
}

func newImageCache(t *testing.T, quiescent int64) (*Cache, *File) {
	t.Helper()
	c, err := New(Config{QuiescentBytes: quiescent})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.RegisterFile(vfd.NewMem())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unregister(context.Background()); err != nil {
			t.Error(err)
		}
		if c.images.bytes.Load() != 0 || c.budget.resident.Load() != 0 {
			t.Errorf("after unregister: %d image bytes, %d resident", c.images.bytes.Load(), c.budget.resident.Load())
		}
		c.Close()
	})
	return c, f
}

// TestPrefetchedTake: a request for exactly an entry's address, size and
// checksum gets its bytes, once; anything else at that address drops it as
// stale and misses; the buffer is charged until the last entry leaves.
func TestPrefetchedTake(t *testing.T) {
	c, f := newImageCache(t, 1<<20)
	bs, buf := imageBlocks(4, 100)
	want := make([][]byte, len(bs))
	for i, b := range bs {
		want[i] = bytes.Clone(b.Image)
	}
	if n := f.LoadPrefetched(bs, buf); n != 4 {
		t.Fatalf("kept %d", n)
	}
	charged := c.budget.resident.Load()
	if charged < 400 || c.images.bytes.Load() != charged {
		t.Fatalf("charged %d, image bytes %d", charged, c.images.bytes.Load())
	}
	if got, ok := f.TakePrefetched(bs[0].Addr, 100, bs[0].Sum); !ok || !bytes.Equal(got, want[0]) {
		t.Fatalf("take 0: %v", ok)
	}
	if _, ok := f.TakePrefetched(bs[0].Addr, 100, bs[0].Sum); ok {
		t.Fatal("taken twice")
	}
	if _, ok := f.TakePrefetched(bs[1].Addr, 100, bs[1].Sum^1); ok { // other bytes wanted
		t.Fatal("stale entry served")
	}
	if _, ok := f.TakePrefetched(bs[2].Addr, 99, bs[2].Sum); ok { // other size
		t.Fatal("entry of another size served")
	}
	if f.HasPrefetched(bs[1].Addr) || !f.HasPrefetched(bs[3].Addr) {
		t.Fatal("HasPrefetched wrong")
	}
	st := f.PrefetchedStats()
	if st.Loaded != 4 || st.Taken != 1 || st.Stale != 2 || st.Entries != 1 || st.Bytes != charged {
		t.Fatalf("stats %+v", st)
	}
	left := f.PrefetchedBlocks()
	if len(left) != 1 || left[0].Addr != bs[3].Addr || !bytes.Equal(left[0].Image, want[3]) {
		t.Fatalf("left %+v", left)
	}
	if _, ok := f.TakePrefetched(bs[3].Addr, 100, bs[3].Sum); !ok {
		t.Fatal("take 3")
	}
	if c.budget.resident.Load() != 0 || c.images.bytes.Load() != 0 {
		t.Fatalf("set empty but %d resident", c.budget.resident.Load())
	}
}

// TestPrefetchedBudget: an image larger than the room under the quiescent
// size keeps its hottest entries that fit, copied apart; nothing is
// evicted for it.
func TestPrefetchedBudget(t *testing.T) {
	c, f := newImageCache(t, 1000)
	bs, buf := imageBlocks(20, 100)
	if n := f.LoadPrefetched(bs, buf); n != 10 {
		t.Fatalf("kept %d of 20 in 1000 bytes", n)
	}
	if st := f.PrefetchedStats(); st.Skipped != 10 || c.budget.resident.Load() > 1000 {
		t.Fatalf("stats %+v, resident %d", st, c.budget.resident.Load())
	}
	for i := range bs[:10] {
		if !f.HasPrefetched(bs[i].Addr) {
			t.Fatalf("hot entry %d not kept", i)
		}
	}
	if f.HasPrefetched(bs[10].Addr) {
		t.Fatal("cold entry kept")
	}
}

// TestPrefetchedEvictFirst: eviction frees prefetched sets before any
// chunk, and a dropped entry is a miss afterwards.
func TestPrefetchedEvictFirst(t *testing.T) {
	c, f := newImageCache(t, 1<<20)
	bs, buf := imageBlocks(8, 1000)
	f.LoadPrefetched(bs, buf)
	freed, err := c.evict(context.Background(), 1, 2)
	if err != nil || freed < 8000 {
		t.Fatalf("freed %d, %v", freed, err)
	}
	if st := f.PrefetchedStats(); st.Evicted != 8 || st.Entries != 0 || c.budget.resident.Load() != 0 {
		t.Fatalf("stats %+v resident %d", st, c.budget.resident.Load())
	}
	if _, ok := f.TakePrefetched(bs[0].Addr, 1000, bs[0].Sum); ok {
		t.Fatal("evicted entry served")
	}
}

// TestPrefetchedUnregistered: a file that left the cache gets no entries
// (nothing could release them) and Unregister releases what it had.
func TestPrefetchedUnregistered(t *testing.T) {
	c, err := New(Config{QuiescentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, _ := c.RegisterFile(vfd.NewMem())
	bs, buf := imageBlocks(3, 100)
	f.LoadPrefetched(bs, buf)
	if err := f.Unregister(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.budget.resident.Load() != 0 || len(c.images.mu.byFile) != 0 {
		t.Fatalf("resident %d, %d files with images", c.budget.resident.Load(), len(c.images.mu.byFile))
	}
	bs, buf = imageBlocks(3, 100)
	if n := f.LoadPrefetched(bs, buf); n != 0 || c.budget.resident.Load() != 0 {
		t.Fatalf("unregistered file kept %d", n)
	}
}

// TestPrefetchedConcurrent: many goroutines take, probe and evict at once
// (-race); every entry is served at most once, always with its own bytes,
// and when all is done nothing stays charged.
func TestPrefetchedConcurrent(t *testing.T) {
	c, f := newImageCache(t, 1<<22)
	const n = 512
	bs, buf := imageBlocks(n, 64)
	want := make([][]byte, n)
	for i, b := range bs {
		want[i] = bytes.Clone(b.Image)
	}
	f.LoadPrefetched(bs, buf)
	var served [n]atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < n; k++ {
				i := (k*7 + g*13) % n
				switch {
				case g == 7 && k == n/2:
					c.budget.charge(-c.images.evict(1 << 30))
				case k%5 == 0:
					f.HasPrefetched(bs[i].Addr)
					f.PrefetchedStats()
				default:
					if got, ok := f.TakePrefetched(bs[i].Addr, 64, bs[i].Sum); ok {
						served[i].Add(1)
						if !bytes.Equal(got, want[i]) {
							t.Errorf("entry %d: wrong bytes", i)
						}
						bufpool.Put(got)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	for i := range served {
		if s := served[i].Load(); s > 1 {
			t.Fatalf("entry %d served %d times", i, s)
		}
	}
	f.DropPrefetched()
	if c.budget.resident.Load() != 0 || c.images.bytes.Load() != 0 {
		t.Fatalf("resident %d image %d", c.budget.resident.Load(), c.images.bytes.Load())
	}
}

// TestHotChunksSkipUnencodable: a clean chunk whose layout refuses to
// encode it (a read-only view of another dataset's stored chunks) is left
// out of the hot chunks, and the others are still offered: an image must
// never fail the commit that writes it.
func TestHotChunksSkipUnencodable(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 20, MinBytes: -1, BypassBytes: -1})
	d1, l1 := e.dataset(1, -1, 16)
	d2, l2 := e.dataset(2, -1, 16)
	for i := 0; i < 3; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d1, l1, pattern(16, byte(i)), uint64(i)), fullReq(d2, l2, pattern(16, byte(50+i)), uint64(i))}))
	}
	must(t, e.f.Flush(bg))
	l2.failEncode.Store(true)
	addrs := map[int64]bool{}
	for _, loc := range l1.index {
		addrs[loc.Addr] = true
	}
	n := 0
	err := e.f.HotChunks(bg, func(h HotChunk) bool {
		if !addrs[h.Loc.Addr] {
			t.Errorf("hot chunk at %d is not one of the encodable dataset's", h.Loc.Addr)
		}
		n++
		return true
	})
	if err != nil || n != 3 {
		t.Fatalf("HotChunks: %d chunks, %v; want the 3 encodable ones and no error", n, err)
	}
}
