package shard

import (
	"testing"

	"github.com/scc-dev/scc/engine/filter"
	"github.com/stretchr/testify/require"
)

// zarrChunkAt is chunk (p0, p1, p2), of side n, of the Zarr benchmark's
// array (bench: its values a ramp along each row, rows starting at
// g2 + g1²/32 + g0³).
func zarrChunkAt(n, p0, p1, p2 int) []byte {
	b := make([]byte, n*n*n*2)
	for l0 := range n {
		for l1 := range n {
			g0, g1 := p0*n+l0, p1*n+l1
			for l2 := range n {
				v := (p2*n + l2 + g1*g1/32 + g0*g0*g0) % 65536
				o := ((l0*n+l1)*n + l2) * 2
				b[o], b[o+1] = byte(v), byte(v>>8)
			}
		}
	}
	return b
}

// BenchmarkFrameShapes decodes one 256³ chunk of the Zarr benchmark's
// array with the codec alone (zstd 3), cut three ways: "one-frame" the
// chunk as one frame, "slab512K" 64 frames of 512 KiB runs of the chunk in
// its C order (rows of 256 elements), "inner64" the 64 inner chunks of
// 64³ a sharded chunk stores (rows of 64 elements), each into one reused
// buffer ("reused") or into its own place ("inplace").
//
// It answers why the codec decodes 64³ inner chunks at about half the
// bytes per second of 256³ chunks. Not the frames' number or size, nor a
// context set up per frame: slab512K, as many frames of the same size
// through the same calls, costs 0-15 % more CPU than one frame (runs on a
// busy 2-core machine; inner64 costs 80-100 % more). The
// data: a 64³ inner chunk's rows are 64 elements, so a match of an
// earlier row is at most 128 bytes where the whole chunk's rows give 512,
// and the frames hold some 4x as many sequences and literals (compressed,
// one frame 1.2 MB, the slabs 4.5 MB, the inner chunks 8.6 MB for the
// same 32 MiB), which a decoder pays per sequence and per literal byte.
// Any reader of 64³ pieces of this array pays it; how the frames are
// written (one frame per inner chunk, its content size recorded, the
// level's window) is not what costs.
func BenchmarkFrameShapes(b *testing.B) {
	pl, err := filter.NewPipeline([]filter.Spec{{ID: filter.Zstd, Level: 3}}, 2)
	require.NoError(b, err)
	chunk := zarrChunkAt(256, 1, 2, 1)
	g, _ := NewGrid([]uint64{256, 256, 256}, []uint64{64, 64, 64}, 2)
	type fr struct {
		img  []byte
		mask uint32
	}
	enc := func(parts [][]byte) []fr {
		var out []fr
		for _, p := range parts {
			img, m, err := pl.Encode(p)
			require.NoError(b, err)
			out = append(out, fr{img, m})
		}
		return out
	}
	var inner, slabs [][]byte
	for i := range g.N() {
		t := make([]byte, g.InnerBytes())
		g.Extract(t, chunk, i)
		inner = append(inner, t)
		slabs = append(slabs, chunk[i*g.InnerBytes():(i+1)*g.InnerBytes()])
	}
	sets := map[string][]fr{
		"one-frame": enc([][]byte{chunk}),
		"inner64":   enc(inner),
		"slab512K":  enc(slabs),
	}
	for _, name := range []string{"one-frame", "slab512K", "inner64"} {
		frames := sets[name]
		tot := 0
		for _, f := range frames {
			tot += len(f.img)
		}
		b.Logf("%s: %d frames, %d bytes compressed", name, len(frames), tot)
		dst := make([]byte, len(chunk))
		for _, mode := range []string{"reused", "inplace"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				b.SetBytes(int64(len(chunk)))
				n := len(chunk) / len(frames)
				cpu0 := cpuTime()
				defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op") }()
				for b.Loop() {
					for k, f := range frames {
						d := dst[:n]
						if mode == "inplace" {
							d = dst[k*n : (k+1)*n]
						}
						if _, err := pl.DecodeVerifiedTo(d[:0], f.img, f.mask, n); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
