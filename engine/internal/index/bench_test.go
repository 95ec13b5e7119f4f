package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Benchmarks of the extensible array (…/scc) beside the General index
// (…/baseline, the sorted paged map that plays HDF5's B-tree) on the same
// workload: one unlimited dimension, entries appended in order.

var benchSizes = []struct {
	name string
	n    uint64
}{{"10k", 10_000}, {"100k", 100_000}, {"1M", 1_000_000}}

var benchImpls = []struct {
	name string
	kind Kind
}{{"scc", KindExtensibleArray}, {"baseline", KindGeneral}}

func benchIndex(b *testing.B, kind Kind, n, room uint64) Index {
	ctx := context.Background()
	g := Geometry{Grid: []uint64{n + room}, MaxGrid: []uint64{Unlimited}}
	x, err := New(kind, g, newMemStore(b))
	if err != nil {
		b.Fatal(err)
	}
	c := []uint64{0}
	for i := uint64(0); i < n; i++ {
		c[0] = i
		if _, err := x.Put(ctx, c, Entry{Addr: i<<12 + 4096, Size: 4096}); err != nil {
			b.Fatal(err)
		}
	}
	return x
}

// BenchmarkIndexAppend: Put at the next coordinate of an index holding n
// entries. Every n appends the index is cut back to n (not timed), so the
// size stays within [n, 2n).
func BenchmarkIndexAppend(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		for _, im := range benchImpls {
			b.Run(fmt.Sprintf("n=%s/%s", sz.name, im.name), func(b *testing.B) {
				x := benchIndex(b, im.kind, sz.n, sz.n)
				g := Geometry{Grid: []uint64{2 * sz.n}, MaxGrid: []uint64{Unlimited}}
				c := []uint64{0}
				b.ReportAllocs()
				b.ResetTimer()
				next := sz.n
				for i := 0; i < b.N; i++ {
					if next == 2*sz.n {
						b.StopTimer()
						g.Grid[0] = sz.n
						if err := x.Resize(ctx, g, nil); err != nil {
							b.Fatal(err)
						}
						g.Grid[0] = 2 * sz.n
						if err := x.Resize(ctx, g, nil); err != nil {
							b.Fatal(err)
						}
						next = sz.n
						b.StartTimer()
					}
					c[0] = next
					if _, err := x.Put(ctx, c, Entry{Addr: next<<12 + 4096, Size: 4096}); err != nil {
						b.Fatal(err)
					}
					next++
				}
			})
		}
	}
}

// BenchmarkIndexLookup: Get of a random coordinate among n entries, all
// blocks in memory.
func BenchmarkIndexLookup(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		for _, im := range benchImpls {
			b.Run(fmt.Sprintf("n=%s/%s", sz.name, im.name), func(b *testing.B) {
				x := benchIndex(b, im.kind, sz.n, 0)
				r := rand.New(rand.NewPCG(1, 1))
				c := []uint64{0}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c[0] = r.Uint64N(sz.n)
					if e, err := x.Get(ctx, c); err != nil || e.Addr != c[0]<<12+4096 {
						b.Fatalf("Get(%v) = %+v, %v", c, e, err)
					}
				}
			})
		}
	}
}

// BenchmarkIndexLookupParallel: the same lookups from every P at once (the
// shared cache's miss path).
func BenchmarkIndexLookupParallel(b *testing.B) {
	ctx := context.Background()
	const n = 1_000_000
	for _, im := range benchImpls {
		b.Run(fmt.Sprintf("n=1M/%s", im.name), func(b *testing.B) {
			x := benchIndex(b, im.kind, n, 0)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 1))
				c := []uint64{0}
				for pb.Next() {
					c[0] = r.Uint64N(n)
					if _, err := x.Get(ctx, c); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkIndexAppendFlush: append one entry and flush, at n entries —
// the bytes written per flush (reported as B/flush) stay constant for the
// extensible array.
func BenchmarkIndexAppendFlush(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		for _, im := range benchImpls {
			b.Run(fmt.Sprintf("n=%s/%s", sz.name, im.name), func(b *testing.B) {
				s := newMemStore(b)
				g := Geometry{Grid: []uint64{sz.n + uint64(b.N)}, MaxGrid: []uint64{Unlimited}}
				x, err := New(im.kind, g, s)
				if err != nil {
					b.Fatal(err)
				}
				c := []uint64{0}
				for i := uint64(0); i < sz.n; i++ {
					c[0] = i
					x.Put(ctx, c, Entry{Addr: i<<12 + 4096, Size: 4096})
				}
				if _, err := x.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				s.commit()
				written := s.written.Load()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c[0] = sz.n + uint64(i)
					x.Put(ctx, c, Entry{Addr: c[0]<<12 + 4096, Size: 4096})
					if _, err := x.Flush(ctx); err != nil {
						b.Fatal(err)
					}
					s.commit()
				}
				b.ReportMetric(float64(s.written.Load()-written)/float64(b.N), "B/flush")
			})
		}
	}
}
