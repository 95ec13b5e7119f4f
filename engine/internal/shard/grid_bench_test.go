package shard

import "testing"

// BenchmarkGridInsert copies every 64³ inner chunk of a 256³ uint16 chunk
// into its place: the copy a whole chunk's decode makes after each inner
// chunk's (an inner chunk's rows are strided in the chunk), one inner
// chunk at a time and in groups (Grid.group).
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
	group := make([]byte, g.group*g.InnerBytes())
	for i := range group {
		group[i] = byte(i)
	}
	// one-at-a-time is the baseline: each inner chunk's strided rows
	// alone; grouped copies the inner chunks a decode takes together.
	b.Run("one-at-a-time", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			for i := range g.N() {
				g.Insert(chunk, src, i)
			}
		}
	})
	b.Run("grouped", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			for k := range g.Groups() {
				first, m := g.Group(k)
				g.InsertGroup(chunk, group, first, m)
			}
		}
	})
}
