package cache

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// BenchmarkHit measures the resident-chunk hit path (table lookup, pin,
// Scatter of 64 bytes, access record) at 1, 2 and 8 goroutines, next to a
// baseline of the same lookups in a Go map behind one sync.RWMutex (the
// "one global lock" design) with a copy of the same 64 bytes.
func BenchmarkHit(b *testing.B) {
	const n = 1024
	for _, g := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("goroutines=%d/cache", g), func(b *testing.B) {
			e := newEnv(b, Config{QuiescentBytes: 64 << 20})
			d, l := e.dataset(1, -1, 8, 8)
			for i := 0; i < n; i++ {
				must(b, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i/32), uint64(i%32))}))
			}
			before := e.c.Stats()
			coords := make([]layout.Coord, n)
			for i := range coords {
				coords[i] = layout.Coord{uint64(i / 32), uint64(i % 32)}
			}
			b.ResetTimer()
			parallel(b, g, func(w, i int, buf []byte) error {
				reqs := [1]Request{{Dataset: d, Coord: coords[(i*7+w*131)%n], Full: true, Piece: &fakePiece{n: 64, buf: buf}}}
				return e.c.Read(bg, reqs[:])
			})
			b.StopTimer()
			if s := e.c.Stats().Sub(before); s.Misses != 0 {
				b.Fatalf("misses %d", s.Misses)
			}
		})
		b.Run(fmt.Sprintf("goroutines=%d/mutexmap", g), func(b *testing.B) {
			var mu sync.RWMutex
			m := map[[2]uint64][]byte{}
			for i := 0; i < n; i++ {
				m[[2]uint64{uint64(i / 32), uint64(i % 32)}] = pattern(64, byte(i))
			}
			b.ResetTimer()
			parallel(b, g, func(w, i int, buf []byte) error {
				k := (i*7 + w*131) % n
				mu.RLock()
				copy(buf, m[[2]uint64{uint64(k / 32), uint64(k % 32)}])
				mu.RUnlock()
				return nil
			})
		})
	}
}

// parallel runs b.N calls of f spread over g goroutines.
func parallel(b *testing.B, g int, f func(w, i int, buf []byte) error) {
	var wg sync.WaitGroup
	per := b.N/g + 1
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, 64)
			for i := 0; i < per; i++ {
				if err := f(w, i, buf); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
}

// BenchmarkHotRead1MiB compares reading a resident 1 MiB chunk through
// Cache.Read with a plain copy of the same bytes (the baseline).
func BenchmarkHotRead1MiB(b *testing.B) {
	const size = 1 << 20
	src := pattern(size, 1)
	dst := make([]byte, size)
	b.Run("cache", func(b *testing.B) {
		e := newEnv(b, Config{QuiescentBytes: 64 << 20})
		d, l := e.dataset(1, -1, size)
		must(b, e.c.Write(bg, []Request{fullReq(d, l, src, 0)}))
		reqs := []Request{fullReq(d, l, dst, 0)}
		b.SetBytes(size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := e.c.Read(bg, reqs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			copy(dst, src)
		}
	})
}

// BenchmarkIdleDatasetMemory reports the heap held per registered, idle
// dataset with 10,000 datasets registered (goal: < 2 KiB).
func BenchmarkIdleDatasetMemory(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		c, err := New(Config{})
		must(b, err)
		f, err := c.RegisterFile(vfd.NewMem())
		must(b, err)
		layouts := make([]*fakeLayout, n)
		for j := range layouts {
			layouts[j] = &fakeLayout{cd: []uint64{64, 64}}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ds := make([]*Dataset, n)
		for j := 0; j < n; j++ {
			ds[j], err = f.RegisterDataset(uint64(j+1), layouts[j], DatasetOptions{})
			must(b, err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/dataset")
		runtime.KeepAlive(ds)
		c.Close()
	}
}

// BenchmarkStreamingPeak streams writes from 4 goroutines through a cache of
// 64 chunks and reports the peak resident bytes next to the active limit.
func BenchmarkStreamingPeak(b *testing.B) {
	const chunk = 4096
	e := newEnv(b, Config{QuiescentBytes: 32 * chunk, MinBytes: -1, BypassBytes: -1})
	var wg sync.WaitGroup
	b.SetBytes(chunk)
	per := b.N/4 + 1
	for g := 0; g < 4; g++ {
		d, l := e.dataset(uint64(g+1), -1, chunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := pattern(chunk, 3)
			for i := 0; i < per; i++ {
				if err := e.c.Write(bg, []Request{fullReq(d, l, buf, uint64(i))}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := e.c.Stats()
	b.ReportMetric(float64(st.PeakResidentBytes), "peak-bytes")
	b.ReportMetric(float64(st.ActiveLimit), "limit-bytes")
	b.ReportMetric(float64(st.PeakResidentBytes)/float64(st.ActiveLimit), "peak/limit")
}
