package engine

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/vfd"
)

// residentReadFixture is a dataset whose one 256x256 uint8 chunk is
// resident, and the 8x8 box (64 bytes) every benchmark read selects.
type residentReadFixture struct {
	f     *File
	ds    *Dataset
	sel   Selection
	chunk []byte // the chunk's bytes, for the baseline
}

const (
	rrChunk = 256
	rrBox   = 8
	rrAt    = 10 // the box starts at (rrAt, rrAt)
)

func newResidentReadFixture(tb testing.TB) *residentReadFixture {
	tb.Helper()
	ctx := context.Background()
	c, err := cache.New(cache.Config{QuiescentBytes: 64 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	f, err := Create(ctx, "", &Options{Driver: vfd.NewMem(), Cache: c})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close(ctx) })
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rrChunk, rrChunk}, Chunk: []uint64{rrChunk, rrChunk}})
	if err != nil {
		tb.Fatal(err)
	}
	chunk := make([]byte, rrChunk*rrChunk)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{rrChunk, rrChunk}), chunk); err != nil {
		tb.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
	// The whole-chunk write went straight to the file, and a whole-chunk
	// read would too: a read of part of it makes it resident, so that
	// every call measured here is a hit whatever the order of the calls.
	if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{1, 1}), make([]byte, 1)); err != nil {
		tb.Fatal(err)
	}
	if st := c.Stats(); st.Chunks != 1 {
		tb.Fatalf("the fixture's chunk is not resident (%d chunks)", st.Chunks)
	}
	return &residentReadFixture{f: f, ds: ds, sel: Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), chunk: chunk}
}

// copyBox is the baseline's copy: the box's rows out of a chunk.
func copyBox(dst, chunk []byte) {
	for r := 0; r < rrBox; r++ {
		copy(dst[r*rrBox:(r+1)*rrBox], chunk[(rrAt+r)*rrChunk+rrAt:])
	}
}

// runGoroutines runs n calls of f spread over g goroutines and returns the
// wall time.
func runGoroutines(g, n int, f func(buf []byte) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, g)
	start := time.Now()
	for w := 0; w < g; w++ {
		k := n / g
		if w == 0 {
			k += n % g
		}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			buf := make([]byte, rrBox*rrBox)
			for i := 0; i < k; i++ {
				if err := f(buf); err != nil {
					errs <- err
					return
				}
			}
		}(k)
	}
	wg.Wait()
	el := time.Since(start)
	select {
	case err := <-errs:
		return el, err
	default:
		return el, nil
	}
}

// BenchmarkResidentRead is Dataset.Read of an 8x8 uint8 box (64 bytes)
// inside one resident chunk by 1, 2 and 8 goroutines (GOMAXPROCS as the
// machine has it, printed in the name's -N suffix), beside the baseline of
// the same bytes copied out of a Go map behind one sync.RWMutex, in the
// same run: b.N is cut into rounds, and each round runs its share through
// scc and then through the baseline, so that a machine whose load changes
// during the run slows both sides alike. Metrics: scc-Mreads/s and
// rwmap-Mreads/s (over all rounds), ratio (the median of the rounds'
// scc/rwmap: one round disturbed by another process moves it little) and
// scc-allocs/op (heap allocations per scc read, from runtime.MemStats).
func BenchmarkResidentRead(b *testing.B) {
	ctx := context.Background()
	for _, g := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			fx := newResidentReadFixture(b)
			var mu sync.RWMutex
			m := map[[2]uint64][]byte{{0, 0}: fx.chunk}
			rounds := min(b.N, 15)
			var sccT, mapT time.Duration
			var mallocs uint64
			ratios := make([]float64, 0, rounds)
			b.ResetTimer()
			for k := 0; k < rounds; k++ {
				n := b.N / rounds
				if k == 0 {
					n += b.N % rounds
				}
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				st, err := runGoroutines(g, n, func(buf []byte) error {
					// The selection is built in the call, as a user writes it.
					return fx.ds.Read(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf)
				})
				runtime.ReadMemStats(&ms1)
				if err != nil {
					b.Fatal(err)
				}
				mt, _ := runGoroutines(g, n, func(buf []byte) error {
					mu.RLock()
					copyBox(buf, m[[2]uint64{0, 0}])
					mu.RUnlock()
					return nil
				})
				sccT += st
				mapT += mt
				mallocs += ms1.Mallocs - ms0.Mallocs
				ratios = append(ratios, mt.Seconds()/st.Seconds())
			}
			b.StopTimer()
			slices.Sort(ratios)
			b.ReportMetric(float64(b.N)/sccT.Seconds()/1e6, "scc-Mreads/s")
			b.ReportMetric(float64(b.N)/mapT.Seconds()/1e6, "rwmap-Mreads/s")
			b.ReportMetric(ratios[len(ratios)/2], "ratio")
			b.ReportMetric(float64(mallocs)/float64(b.N), "scc-allocs/op")
		})
	}
}

// TestResidentReadAllocs: a read of a small box inside a resident chunk
// allocates nothing (the data path's scratch is pooled, the single-chunk
// split needs no selection.Split, the serializer's fast hold and the
// cache's hit path allocate nothing).
func TestResidentReadAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation count (the race detector makes sync.Pool drop items)")
	}
	fx := newResidentReadFixture(t)
	ctx := context.Background()
	buf := make([]byte, rrBox*rrBox)
	want := make([]byte, rrBox*rrBox)
	copyBox(want, fx.chunk)
	if err := fx.ds.Read(ctx, fx.sel, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != string(want) {
		t.Fatalf("read %v, want %v", buf, want)
	}
	n := testing.AllocsPerRun(200, func() {
		if err := fx.ds.Read(ctx, fx.sel, buf); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per resident read, want 0", n)
	}
}

// TestBoxInTheCallAllocs: the call a user writes, with its selection
// built in the call, allocates nothing in the steady state, for a Read
// and a Write of a small box in a resident chunk and for All.
func TestBoxInTheCallAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation count (the race detector makes sync.Pool drop items)")
	}
	fx := newResidentReadFixture(t)
	ctx := context.Background()
	buf := make([]byte, rrBox*rrBox)
	calls := map[string]func() error{
		"Read": func() error {
			return fx.ds.Read(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf)
		},
		"Write": func() error {
			return fx.ds.Write(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf)
		},
		"Read All": func() error {
			return fx.ds.Read(ctx, All([]uint64{rrChunk, rrChunk}), fx.chunk)
		},
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatal(err)
		}
		// AllocsPerRun counts the whole process's allocations, and a
		// goroutine an earlier test left winding down once made a run of
		// this count 10; an allocation on the path shows in every run, so
		// the least of three is taken.
		n := math.Inf(1)
		for range 3 {
			n = min(n, testing.AllocsPerRun(200, func() {
				if err := call(); err != nil {
					t.Fatal(err)
				}
			}))
		}
		if n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
	// The box read what the chunk holds (the Write above wrote buf's own
	// bytes back).
	want := make([]byte, rrBox*rrBox)
	copyBox(want, fx.chunk)
	if err := fx.ds.Read(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf); err != nil || string(buf) != string(want) {
		t.Fatalf("read %v (%v), want %v", buf, err, want)
	}
}

// TestInlineBoxIsTheBox: an inline Box, its expansion and selection.Box
// describe the same hyperslab, for every rank up to the inline bound and
// beyond it, zero counts included.
func TestInlineBoxIsTheBox(t *testing.T) {
	for r := 0; r <= maxInlineRank+1; r++ {
		start, count := make([]uint64, r), make([]uint64, r)
		for d := range start {
			start[d], count[d] = uint64(d*3+1), uint64(d%3)
		}
		want := selection.Box(start, count)
		sel := Box(start, count)
		if sel.box != (r <= maxInlineRank) {
			t.Fatalf("rank %d: inline %v", r, sel.box)
		}
		if r > 0 {
			start[0] = 999 // Box copied its arguments
		}
		var a selArrays
		for _, got := range []selection.Hyperslab{sel.hyper(), sel.in(&a), *sel.normal().slab} {
			if !slices.Equal(got.Start, want.Start) || !slices.Equal(got.Stride, want.Stride) ||
				!slices.Equal(got.Count, want.Count) || !slices.Equal(got.Block, want.Block) {
				t.Fatalf("rank %d: %+v, want %+v", r, got, want)
			}
		}
		if !slices.Equal(sel.Shape(), want.Shape()) || sel.NumElements() != want.NumElements() {
			t.Fatalf("rank %d: shape %v n %d, want %v %d", r, sel.Shape(), sel.NumElements(), want.Shape(), want.NumElements())
		}
	}
	if err := Box([]uint64{1}, []uint64{1, 2}).hyper().Validate([]uint64{4, 4}); err == nil {
		t.Fatal("a Box whose start and count differ in rank validates")
	}
}

// TestFastReadsAgainstWritesAndExtent runs reads of resident chunks (the
// fast path) beside writes of the same rows and extent changes, under the
// race detector: every read sees one write's bytes whole, and the extent
// the data path reads without the dataset mutex is never read while it
// changes (the detector would report it).
func TestFastReadsAgainstWritesAndExtent(t *testing.T) {
	ctx := context.Background()
	c, err := cache.New(cache.Config{QuiescentBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := Create(ctx, "", &Options{Driver: vfd.NewMem(), Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{4, 64}, MaxShape: []uint64{Unlimited, 64}, Chunk: []uint64{1, 64}})
	if err != nil {
		t.Fatal(err)
	}
	row := func(v byte) []byte {
		b := make([]byte, 64)
		for i := range b {
			b[i] = v
		}
		return b
	}
	for r := uint64(0); r < 4; r++ {
		if err := ds.Write(ctx, Box([]uint64{r, 0}, []uint64{1, 64}), row(1)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			buf := make([]byte, 8)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := uint64((i + g) % 4)
				if err := ds.Read(ctx, Box([]uint64{r, 8}, []uint64{1, 8}), buf); err != nil {
					t.Error(err)
					return
				}
				for _, b := range buf {
					if b != buf[0] {
						t.Errorf("row %d: torn read %v", r, buf)
						return
					}
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			if err := ds.SetExtent(ctx, []uint64{uint64(5 + i%3), 64}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for v := byte(2); v < 250; v++ {
		if err := ds.Write(ctx, Box([]uint64{uint64(v % 4), 0}, []uint64{1, 64}), row(v)); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched() // let readers in between writes
	}
	close(stop)
	wg.Wait()
}

// TestResidentWriteAllocs: a small write into a resident chunk takes the
// locked serializer path and the cache's write hit; it allocates nothing
// either.
func TestResidentWriteAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation count (the race detector makes sync.Pool drop items)")
	}
	fx := newResidentReadFixture(t)
	ctx := context.Background()
	buf := make([]byte, rrBox*rrBox)
	for i := range buf {
		buf[i] = byte(i)
	}
	if err := fx.ds.Write(ctx, fx.sel, buf); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(200, func() {
		if err := fx.ds.Write(ctx, fx.sel, buf); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per resident write, want 0", n)
	}
	got := make([]byte, len(buf))
	if err := fx.ds.Read(ctx, fx.sel, got); err != nil || string(got) != string(buf) {
		t.Fatalf("read back %v, %v", got, err)
	}
}
