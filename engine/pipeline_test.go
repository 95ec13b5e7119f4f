package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestHugeRequestWithSmallOnes: a write and a read each 16× larger than the
// whole cache complete, exactly, without resident memory ever exceeding the
// active limit by more than one chunk and without deadlock, while small
// requests on another dataset keep being served.
func TestHugeRequestWithSmallOnes(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	c, err := cache.New(cache.Config{QuiescentBytes: 64 << 10})
	must(t, err)
	defer c.Close()
	f := tCreate(t, vfd.NewMem(), &Options{Cache: c})
	defer f.Close(ctx)
	const chunkSide = 64 // 64×64 uint32 = 16 KiB chunks
	big, err := f.CreateDataset(ctx, "big", DatasetSpec{Type: Uint32, Shape: []uint64{512, 512}, Chunk: []uint64{chunkSide, chunkSide}, Filters: []Filter{LZ4()}})
	must(t, err)
	small, err := f.CreateDataset(ctx, "small", DatasetSpec{Type: Uint32, Shape: []uint64{64, 64}, Chunk: []uint64{8, 8}})
	must(t, err)

	stop := make(chan struct{})
	var smallOps atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			row := uint64(g * 16)
			for {
				select {
				case <-stop:
					return
				default:
				}
				sel := Box([]uint64{row + rng.Uint64N(8), 0}, []uint64{1, 64})
				buf := bytes.Repeat([]byte{byte(g + 1)}, 64*4)
				if err := small.Write(ctx, sel, buf); err != nil {
					t.Error(err)
					return
				}
				got := make([]byte, len(buf))
				if err := small.Read(ctx, sel, got); err != nil || !bytes.Equal(got, buf) {
					t.Errorf("small read: %v", err)
					return
				}
				smallOps.Add(1)
			}
		}(g)
	}

	// 512×512 uint32 = 1 MiB, the cache is 64 KiB (active limit 128 KiB).
	all := All([]uint64{512, 512})
	want := randomBytes(rand.New(rand.NewPCG(1, 1)), 512*512*4)
	must(t, big.Write(ctx, all, want))
	got := make([]byte, len(want))
	must(t, big.Read(ctx, all, got))
	close(stop)
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Fatal("huge read differs from huge write")
	}
	st := c.Stats()
	limit := st.ActiveLimit + chunkSide*chunkSide*4
	if st.PeakResidentBytes > limit {
		t.Fatalf("peak resident %d exceeds the active limit %d plus one chunk", st.PeakResidentBytes, st.ActiveLimit)
	}
	t.Logf("peak resident %d B of active limit %d B; %d small requests ran meanwhile; %d evictions",
		st.PeakResidentBytes, st.ActiveLimit, smallOps.Load(), st.Evictions)
}

// TestOverlappingWritesLastWins: many goroutines overwrite the same region,
// each with its own value; the serializer runs overlapping writes one at a
// time in receipt order, so the region always ends as one request's value,
// never a mix of several (each request spans many chunks).
func TestOverlappingWritesLastWins(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 32 << 10}})
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, Chunk: []uint64{8, 8}})
	must(t, err)
	all := All([]uint64{64, 64})
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		for g := 1; g <= 16; g++ {
			wg.Add(1)
			go func(v byte) {
				defer wg.Done()
				if err := ds.Write(ctx, all, bytes.Repeat([]byte{v}, 64*64)); err != nil {
					t.Error(err)
				}
			}(byte(g))
		}
		// Readers in between must also see one request's value only.
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]byte, 64*64)
				if err := ds.Read(ctx, all, got); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) {
					t.Error("a read saw a mix of several writes")
				}
			}()
		}
		wg.Wait()
		got := make([]byte, 64*64)
		must(t, ds.Read(ctx, all, got))
		if got[0] == 0 || !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) {
			t.Fatalf("round %d: region holds a mix of writes", round)
		}
	}
}
