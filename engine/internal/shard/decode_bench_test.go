package shard

import (
	"context"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/internal/bufpool"
	"github.com/stretchr/testify/require"
)

// BenchmarkShardDecodeZarr decodes the Zarr benchmark's sharded chunk (a
// 256³ uint16 chunk of 64³ inner chunks, zstd 3, its values the
// benchmark's ramp) on one goroutine into a chunk buffer: "sharded" is
// the codec's whole-chunk decode (each inner chunk decoded into a scratch
// buffer of one inner chunk and copied into place, Grid.Insert), beside
// two baselines: "inner-frames", the codec alone on the same 64 inner
// frames, each decoded into one reused buffer (the floor `scctl bench
// zarrbench` prints), and "one-frame", the same chunk as one zstd frame
// decoded straight into the buffer (BenchmarkFrameShapes says why that
// one is faster). cpu-ms/op is the figure to compare (wall time is at the
// mercy of a busy machine).
//
// Decoding each inner chunk a piece at a time and copying the pieces into
// place while they are in the core's cache (filter.DecodeVerifiedStream,
// as a transient decode of a large chunk does) was measured slower than
// the copy, 5-8 % more CPU with pieces of 8-128 KiB: libzstd streams a
// frame through a window buffer of its content's size (512 KiB here)
// anyway, so the stream adds a copy rather than saving one.
func BenchmarkShardDecodeZarr(b *testing.B) {
	specs := []filter.Spec{{ID: filter.Zstd, Level: 3}}
	c := testCodec(b, []uint64{256, 256, 256}, []uint64{64, 64, 64}, 2, specs, nil)
	chunk := make([]byte, 256*256*256*2)
	for l0 := range 256 {
		for l1 := range 256 {
			for l2 := range 256 {
				v := (l2 + l1*l1/32 + l0*l0*l0) % 65536
				o := ((l0*256+l1)*256 + l2) * 2
				chunk[o], chunk[o+1] = byte(v), byte(v>>8)
			}
		}
	}
	img, err := c.Encode(context.Background(), nil, []uint64{0, 0, 0}, chunk)
	require.NoError(b, err)
	one, mask, err := c.Pipe.Encode(chunk)
	require.NoError(b, err)
	got := make([]byte, len(chunk))
	g := c.Grid
	frames := make([][]byte, g.n)
	masks := make([]uint32, g.n)
	for i := range frames {
		in := make([]byte, g.innerBytes)
		g.Extract(in, chunk, i)
		frames[i], masks[i], err = c.Pipe.Encode(in)
		require.NoError(b, err)
	}
	b.Logf("sharded image %d bytes, one frame %d", len(img), len(one))
	for _, mode := range []struct {
		name   string
		decode func() error
	}{
		{"one-frame", func() error {
			_, err := c.Pipe.DecodeTo(got[:0], one, mask, len(chunk))
			return err
		}},
		{"inner-frames", func() error {
			for i, f := range frames {
				if _, err := c.Pipe.DecodeVerifiedTo(got[:0:g.innerBytes], f, masks[i], g.innerBytes); err != nil {
					return err
				}
			}
			return nil
		}},
		{"sharded", func() error { return c.Decode(context.Background(), nil, []uint64{0, 0, 0}, img, got) }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			cpu0 := cpuTime()
			for b.Loop() {
				if err := mode.decode(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
			if mode.name != "inner-frames" {
				require.Equal(b, chunk, got)
			}
		})
	}
}

// cpuTime is the process's user and system time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkShardEncodeZarr encodes the Zarr benchmark's sharded chunk (as
// BenchmarkShardDecodeZarr) on one goroutine: "sharded" is the codec's
// whole-chunk encode (each inner chunk gathered from its strided rows,
// encoded, checksummed, the frames closed up and the index appended),
// "inner-frames" its baseline, the codec alone encoding the same inner
// chunks already gathered into one buffer each.
func BenchmarkShardEncodeZarr(b *testing.B) {
	specs := []filter.Spec{{ID: filter.Zstd, Level: 3}}
	c := testCodec(b, []uint64{256, 256, 256}, []uint64{64, 64, 64}, 2, specs, nil)
	chunk := zarrChunkAt(256, 1, 2, 1)
	g := c.Grid
	inner := make([][]byte, g.n)
	for i := range inner {
		inner[i] = make([]byte, g.innerBytes)
		g.Extract(inner[i], chunk, i)
	}
	out := make([]byte, 0, c.MaxFrame())
	for _, mode := range []struct {
		name   string
		encode func() error
	}{
		{"inner-frames", func() error {
			for _, in := range inner {
				if _, _, err := c.Pipe.EncodeTo(out, in); err != nil {
					return err
				}
			}
			return nil
		}},
		{"sharded", func() error {
			img, err := c.Encode(context.Background(), nil, []uint64{0, 0, 0}, chunk)
			bufpool.Put(img)
			return err
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(chunk)))
			cpu0 := cpuTime()
			for b.Loop() {
				if err := mode.encode(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
