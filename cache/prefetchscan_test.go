package cache

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

// gridLayout is a fakeLayout whose Lookup fails for a chunk past the
// dataset's grid of chunks, as the engine's index does for a chunk past
// the extent.
type gridLayout struct {
	*fakeLayout
	grid []uint64
}

func (l *gridLayout) Lookup(ctx context.Context, coords []layout.Coord, locs []layout.Location) error {
	for _, c := range coords {
		for j := range c {
			if c[j] >= l.grid[j] {
				return fmt.Errorf("%w: chunk %v past the grid", ErrInvalid, []uint64(c))
			}
		}
	}
	return l.fakeLayout.Lookup(ctx, coords, locs)
}

// TestPrefetchScanInCOrder: one goroutine reads every chunk of a 3-D grid
// once, whole, in C order (the public Zarr benchmark's read_chunks at
// concurrency 1): the stream runs to the end of each row, where the
// prefetch's look-ups past the extent fail, and on across rows and
// planes, once the reader has shown their lengths. Only the reads that
// show the stream (the first two) and its first wrap along each
// dimension load; every other chunk was prefetched (read and decoded by
// the prefetcher on the workers) before the reader asked for it. A wrap
// chunk may be prefetched too: the reader's miss of it teaches the
// detector the row's length before the reader claims the chunk (so the
// prefetch starts a load earlier), and a job queued before, run now with
// that length, can claim it first; the reader then waits for that load.
// Either way each chunk is loaded once.
func TestPrefetchScanInCOrder(t *testing.T) {
	grid := []uint64{3, 3, 4}
	cd := []uint64{4, 4, 16}
	e := newEnv(t, Config{QuiescentBytes: 1 << 20})
	fl := newFakeLayout(&e.alloc, cd...)
	d, err := e.f.RegisterDataset(1, &gridLayout{fl, grid}, DatasetOptions{})
	must(t, err)
	var coords []layout.Coord
	for i := uint64(0); i < grid[0]; i++ {
		for j := uint64(0); j < grid[1]; j++ {
			for k := uint64(0); k < grid[2]; k++ {
				coords = append(coords, layout.Coord{i, j, k})
			}
		}
	}
	cb := int(fl.chunkBytes())
	for n, x := range coords {
		must(t, e.c.Write(bg, []Request{fullReq(d, fl, pattern(cb, byte(n)), x...)}))
	}
	must(t, e.f.Flush(bg))

	c2 := newTestCache(t, Config{QuiescentBytes: 1 << 20, Prefetch: true, PrefetchChunks: 4})
	f2, err := c2.RegisterFile(e.drv)
	must(t, err)
	l2 := &fakeLayout{cd: fl.cd, next: fl.next, index: fl.index}
	d2, err := f2.RegisterDataset(1, &gridLayout{l2, grid}, DatasetOptions{})
	must(t, err)
	misses := map[string]bool{"[0 0 0]": true, "[0 0 1]": true, "[0 1 0]": true, "[1 0 0]": true}
	const mustLoad = 2 // [0 0 0] and [0 0 1]: nothing runs ahead of them
	for n, x := range coords {
		if !misses[ckey(x)] {
			waitFor(t, fmt.Sprintf("chunk %v prefetched", x), func() bool {
				_, ok := c2.chunks.Load(makeKey(d2.serial, x))
				return ok
			})
		}
		buf := make([]byte, cb)
		must(t, c2.Read(bg, []Request{fullReq(d2, l2, buf, x...)}))
		if !bytes.Equal(buf, pattern(cb, byte(n))) {
			t.Fatalf("chunk %v: wrong bytes", x)
		}
	}
	st := c2.Stats()
	if st.Loads < mustLoad || st.Loads > int64(len(misses)) || st.Loads+st.PrefetchHits != int64(len(coords)) {
		t.Fatalf("%d loads, %d prefetch hits; want %d to %d loads and the rest of the %d chunks prefetch hits",
			st.Loads, st.PrefetchHits, mustLoad, len(misses), len(coords))
	}
	must(t, f2.Unregister(bg))
}

func TestWrapStepAndNextInStream(t *testing.T) {
	for _, tc := range []struct {
		a, b layout.Coord
		dim  int
		k    int
		ok   bool
	}{
		{layout.Coord{0, 0, 3}, layout.Coord{0, 1, 0}, 2, 1, true},
		{layout.Coord{0, 2, 3}, layout.Coord{1, 0, 0}, 2, 0, true},
		{layout.Coord{0, 2, 3}, layout.Coord{1, 0, 1}, 2, -1, false},
		{layout.Coord{0, 0, 3}, layout.Coord{0, 0, 4}, 2, -1, false}, // a plain step
		{layout.Coord{0, 0, 3}, layout.Coord{0, 2, 0}, 2, -1, false},
		{layout.Coord{2, 5, 7}, layout.Coord{3, 0, 7}, 1, 0, true}, // a stream along dim 1, dim 2 fixed
		{layout.Coord{2, 5, 7}, layout.Coord{3, 0, 0}, 1, -1, false},
		{nil, layout.Coord{0, 1}, 1, -1, false},
	} {
		if k, ok := wrapStep(tc.a, tc.b, tc.dim); k != tc.k || ok != tc.ok {
			t.Errorf("wrapStep(%v, %v, %d) = %d, %v; want %d, %v", tc.a, tc.b, tc.dim, k, ok, tc.k, tc.ok)
		}
	}
	x := layout.Coord{0, 2, 3}
	grid := []uint64{0, 3, 4}
	want := []layout.Coord{{1, 0, 0}, {1, 0, 1}}
	for _, w := range want {
		if !nextInStream(x, 2, grid) || ckey(x) != ckey(w) {
			t.Fatalf("next: %v, want %v", x, w)
		}
	}
	x = layout.Coord{0, 0, 5}
	if !nextInStream(x, 2, nil) || ckey(x) != "[0 0 6]" {
		t.Fatalf("next without a grid: %v", x)
	}
	x = layout.Coord{2, 2, 3}
	if nextInStream(x, 2, []uint64{3, 3, 4}) {
		t.Fatalf("next past the last chunk: %v", x)
	}
}

// TestPrefetchScanStaysUnderQuiescent: a one-pass scan of a dataset four
// times the cache's quiescent size, read ahead by the prefetcher: the
// prefetch makes room under the quiescent limit by evicting the scan's
// used (clean) chunks, so the cache never grows past it towards the
// active limit, and the scan is still served by prefetched chunks.
func TestPrefetchScanStaysUnderQuiescent(t *testing.T) {
	const n, chunk = 64, 256
	c, d, l, f := seqEnv(t, n, Config{QuiescentBytes: 16 * chunk, ActiveMultiplier: 4, MinBytes: -1,
		Prefetch: true, PrefetchBytes: 4 * chunk, PrefetchChunks: 4, PreEncodeBytes: -1})
	for i := 0; i < n; i++ {
		if i >= 2 {
			waitFor(t, fmt.Sprintf("chunk %d prefetched", i), func() bool {
				_, ok := c.chunks.Load(makeKey(d.serial, layout.Coord{uint64(i)}))
				return ok
			})
		}
		buf := make([]byte, chunk)
		must(t, c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}))
		if !bytes.Equal(buf, pattern(chunk, byte(i))) {
			t.Fatalf("chunk %d wrong", i)
		}
	}
	st := c.Stats()
	if st.PeakResidentBytes > 16*chunk {
		t.Fatalf("peak %d bytes, over the quiescent %d", st.PeakResidentBytes, 16*chunk)
	}
	if st.PrefetchHits < n-2 {
		t.Fatalf("%d prefetch hits of %d reads", st.PrefetchHits, n)
	}
	must(t, f.Unregister(bg))
}
