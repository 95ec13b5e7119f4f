package shard

import "testing"

// BenchmarkGridInsert copies every 64³ inner chunk of a 256³ uint16 chunk
// into its place, the copy a whole chunk's decode makes after each inner
// chunk's (an inner chunk's rows are strided in the chunk): "ordinary"
// with the ordinary copy, "streamed" as Insert does it for a chunk this
// large (non-temporal stores, where the architecture has them).
func BenchmarkGridInsert(b *testing.B) {
	g, err := NewGrid([]uint64{256, 256, 256}, []uint64{64, 64, 64}, 2)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 256*256*256*2)
	src := make([]byte, g.InnerBytes())
	for i := range src {
		src[i] = byte(i)
	}
	ordinary := *g
	ordinary.streams = false
	for _, mode := range []struct {
		name string
		g    *Grid
	}{{"ordinary", &ordinary}, {"streamed", g}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				for i := range g.N() {
					mode.g.Insert(chunk, src, i)
				}
			}
		})
	}
}

// BenchmarkGridExtract gathers every 64³ inner chunk of a 256³ uint16
// chunk from its strided rows, as a whole chunk's encode does: "per-row"
// a copy per row, "gathered" Extract's.
func BenchmarkGridExtract(b *testing.B) {
	g, err := NewGrid([]uint64{256, 256, 256}, []uint64{64, 64, 64}, 2)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 256*256*256*2)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	dst := make([]byte, g.InnerBytes())
	perRow := *g
	perRow.streams = false
	for _, mode := range []struct {
		name string
		g    *Grid
	}{{"per-row", &perRow}, {"gathered", g}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				for i := range g.N() {
					mode.g.Extract(dst, chunk, i)
				}
			}
		})
	}
}
