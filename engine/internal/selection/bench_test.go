package selection

import (
	"encoding/binary"
	"testing"
)

// BenchmarkScatterFullChunk: reading one whole 1 MiB chunk of uint16
// (512x1024) into the caller's buffer, against a plain copy() of 1 MiB.
func BenchmarkScatterFullChunk(b *testing.B) {
	chunkDims := []uint64{512, 1024}
	const es = 2
	h := Box([]uint64{512, 0}, chunkDims) // chunk (1, 0) of a larger dataset
	ps, err := Pieces(h, chunkDims)
	if err != nil || len(ps) != 1 {
		b.Fatal(err, len(ps))
	}
	chunk := make([]byte, 1<<20)
	dst := make([]byte, 1<<20)
	shape := h.Shape()
	b.Run("scc", func(b *testing.B) {
		b.SetBytes(1 << 20)
		for b.Loop() {
			Scatter(dst, shape, chunk, chunkDims, &ps[0], es)
		}
	})
	b.Run("baseline", func(b *testing.B) {
		b.SetBytes(1 << 20)
		for b.Loop() {
			copy(dst, chunk)
		}
	})
}

// BenchmarkScatterSubBox: a 800x400 sub-box of a 1024x512 uint16 chunk
// (800 rows of 800 bytes), against copying the same bytes contiguously.
func BenchmarkScatterSubBox(b *testing.B) {
	chunkDims := []uint64{1024, 512}
	const es = 2
	h := Box([]uint64{100, 50}, []uint64{800, 400})
	ps, err := Pieces(h, chunkDims)
	if err != nil || len(ps) != 1 {
		b.Fatal(err, len(ps))
	}
	chunk := make([]byte, 1024*512*es)
	dst := make([]byte, 800*400*es)
	shape := h.Shape()
	n := int64(len(dst))
	b.Run("scc", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			Scatter(dst, shape, chunk, chunkDims, &ps[0], es)
		}
	})
	b.Run("gather", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			Gather(chunk, chunkDims, dst, shape, &ps[0], es)
		}
	})
	b.Run("baseline-rows", func(b *testing.B) {
		// A hand-written loop copying the same 800 rows.
		b.SetBytes(n)
		for b.Loop() {
			for i := range 800 {
				c := ((100+i)*512 + 50) * es
				copy(dst[i*400*es:(i+1)*400*es], chunk[c:c+400*es])
			}
		}
	})
	b.Run("baseline", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			copy(dst, chunk[:n])
		}
	})
}

// BenchmarkScatterStrided: every other element of every other row of a
// 256x256 uint32 chunk (the worst case: one element per copy).
func BenchmarkScatterStrided(b *testing.B) {
	chunkDims := []uint64{256, 256}
	const es = 4
	h := Hyperslab{[]uint64{0, 0}, []uint64{2, 2}, []uint64{128, 128}, []uint64{1, 1}}
	ps, err := Pieces(h, chunkDims)
	if err != nil || len(ps) != 1 {
		b.Fatal(err, len(ps))
	}
	chunk := make([]byte, 256*256*es)
	dst := make([]byte, 128*128*es)
	shape := h.Shape()
	b.Run("scc", func(b *testing.B) {
		b.SetBytes(int64(len(dst)))
		for b.Loop() {
			Scatter(dst, shape, chunk, chunkDims, &ps[0], es)
		}
	})
	b.Run("baseline", func(b *testing.B) {
		// A hand-written loop over the same elements, one 4-byte load and
		// store each.
		le := binary.LittleEndian
		b.SetBytes(int64(len(dst)))
		for b.Loop() {
			o := 0
			for i := 0; i < 256; i += 2 {
				row := chunk[i*256*es : (i+1)*256*es]
				for j := 0; j < 256; j += 2 {
					le.PutUint32(dst[o:o+es], le.Uint32(row[j*es:j*es+es]))
					o += es
				}
			}
		}
	})
}

// BenchmarkSplit10k: splitting a 6400x6400 selection over 64x64 chunks
// (10 000 chunks), against a bare loop that hands a prebuilt piece to the
// same callback 10 000 times (the floor for any iteration).
func BenchmarkSplit10k(b *testing.B) {
	h := Box([]uint64{0, 0}, []uint64{6400, 6400})
	chunkDims := []uint64{64, 64}
	var sink uint64
	fn := func(p *Piece) error { sink += p.N; return nil }
	b.Run("scc", func(b *testing.B) {
		for b.Loop() {
			if err := Split(h, chunkDims, fn); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/chunk")
	})
	b.Run("baseline", func(b *testing.B) {
		p := &Piece{Coord: []uint64{0, 0}, Runs: [][]Run{{{0, 0, 64}}, {{0, 0, 64}}}, N: 4096}
		for b.Loop() {
			for i := range 10000 {
				p.Coord[1] = uint64(i)
				if err := fn(p); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/chunk")
	})
	_ = sink
}
