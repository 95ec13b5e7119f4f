package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// BenchmarkShardRead reads a 128^3 uint16 chunk (4 MiB, shuffle+zstd)
// stored unsharded (the baseline) and sharded in 32^3 inner chunks: whole
// (a cold load: one zstd frame on one core against 64 inner chunks on the
// worker pool) and a 32^3 box of it (the whole chunk decoded against one
// inner chunk). Each row reports MB/s of elements delivered; compare the
// sharded row with its unsharded baseline.
func BenchmarkShardRead(b *testing.B) {
	ctx := context.Background()
	const n = 128
	data := compressibleBytesSeeded(n * n * n * 2)
	for _, inner := range [][]uint64{nil, {32, 32, 32}} {
		mem := vfd.NewMem()
		f, err := Create(ctx, "", &Options{Driver: mem, CacheConfig: cache.Config{QuiescentBytes: 64 << 20, BypassBytes: 1 << 20}})
		if err != nil {
			b.Fatal(err)
		}
		dims := []uint64{n, n, n}
		ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: dims, Chunk: dims, InnerChunk: inner, Filters: []Filter{Shuffle(), Zstd(1)}})
		if err != nil {
			b.Fatal(err)
		}
		if err := ds.Write(ctx, All(dims), data); err != nil {
			b.Fatal(err)
		}
		if err := f.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		name := "unsharded"
		if inner != nil {
			name = "sharded"
		}
		for _, box := range []uint64{n, 32} {
			b.Run(fmt.Sprintf("%s/box%d", name, box), func(b *testing.B) {
				sel := Box([]uint64{0, 0, 0}, []uint64{box, box, box})
				buf := make([]byte, box*box*box*2)
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					if err := ds.Evict(ctx); err != nil {
						b.Fatal(err)
					}
					if err := ds.Read(ctx, sel, buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		if err := f.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// compressibleBytesSeeded is compressible data of n bytes (runs of a
// slowly changing value).
func compressibleBytesSeeded(n int) []byte {
	b := make([]byte, n)
	x := uint32(1)
	for i := range b {
		if i%64 == 0 {
			x = x*1664525 + 1013904223
		}
		b[i] = byte(x>>24) & 0x0f
	}
	return b
}
