package shard

import "testing"

// BenchmarkGridInsert copies every 64³ inner chunk of a 256³ uint16 chunk
// into its place: the copy a whole chunk's decode makes after each inner
// chunk's (an inner chunk's rows are strided in the chunk).
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
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		for i := range g.N() {
			g.Insert(chunk, src, i)
		}
	}
}
