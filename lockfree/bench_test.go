package lockfree

import (
	"sync/atomic"
	"testing"
)

// BenchmarkLookup compares the two map wrappers on the hit path (parallel
// loads of present keys) and under churn (store+delete).
func BenchmarkLookup(b *testing.B) {
	const n = 4096
	m := NewMap[uint64, int](0)
	r := NewRegistry[uint64, int]()
	for i := uint64(0); i < n; i++ {
		m.Store(i, int(i))
		r.Set(i, int(i))
	}
	b.Run("xsync", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := uint64(0)
			for pb.Next() {
				m.Load(i % n)
				i++
			}
		})
	})
	b.Run("haxmap", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := uint64(0)
			for pb.Next() {
				r.Get(i % n)
				i++
			}
		})
	})
}

func BenchmarkChurn(b *testing.B) {
	b.Run("xsync", func(b *testing.B) {
		m := NewMap[uint64, int](0)
		b.RunParallel(func(pb *testing.PB) {
			i := uint64(0)
			for pb.Next() {
				m.Store(i%1024, 1)
				m.Delete(i % 1024)
				i++
			}
		})
	})
	b.Run("haxmap", func(b *testing.B) {
		r := NewRegistry[uint64, int]()
		b.RunParallel(func(pb *testing.PB) {
			i := uint64(0)
			for pb.Next() {
				r.Set(i%1024, 1)
				r.Del(i % 1024)
				i++
			}
		})
	})
}

func BenchmarkCounter(b *testing.B) {
	b.Run("striped", func(b *testing.B) {
		c := NewCounter()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Inc()
			}
		})
	})
	b.Run("atomic", func(b *testing.B) {
		var c atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Add(1)
			}
		})
	})
}

func BenchmarkBufferRecord(b *testing.B) {
	buf := NewBuffer[int](64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ready := buf.Record(1); ready {
				buf.Drain(func([]int) {})
			}
		}
	})
}
