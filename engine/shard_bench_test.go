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

// BenchmarkShardWriteFlush is the ingest lifecycle on a resident sharded
// chunk: a write of an 8^3 box, then a Flush, again and again. The chunk
// is 128^3 uint16 (4 MiB, shuffle+zstd) of 32^3 inner chunks; each op
// writes one inner chunk. The "memo" row re-encodes only the inner chunk
// written and copies the other 63 from the version the previous Flush
// committed; its baseline, "whole", encodes the whole chunk at every Flush
// (as every write-back after the first did). Each row reports the inner
// chunks encoded per op beside ns/op.
func BenchmarkShardWriteFlush(b *testing.B) {
	ctx := context.Background()
	const n = 128
	data := compressibleBytesSeeded(n * n * n * 2)
	for _, reuse := range []bool{true, false} {
		name := "memo"
		if !reuse {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			defer func(old bool) { shardReuse = old }(shardReuse)
			shardReuse = reuse
			f, err := Create(ctx, "", &Options{Driver: vfd.NewMem(), CacheConfig: cache.Config{QuiescentBytes: 64 << 20, PreEncodeBytes: -1}})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close(ctx)
			dims := []uint64{n, n, n}
			ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: dims, Chunk: dims, InnerChunk: []uint64{32, 32, 32}, Filters: []Filter{Shuffle(), Zstd(1)}})
			if err != nil {
				b.Fatal(err)
			}
			if err := ds.Write(ctx, All(dims), data); err != nil {
				b.Fatal(err)
			}
			if err := f.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			sh := shardOf(b, ds)
			box := make([]byte, 8*8*8*2)
			before := sh.codec.Encoded.Load()
			i := 0
			for b.Loop() {
				i++
				start := uint64(i%4) * 32
				box[0] = byte(i)
				if err := ds.Write(ctx, Box([]uint64{start, start, start}, []uint64{8, 8, 8}), box); err != nil {
					b.Fatal(err)
				}
				if err := f.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sh.codec.Encoded.Load()-before)/float64(b.N), "inner-encodes/op")
		})
	}
}
