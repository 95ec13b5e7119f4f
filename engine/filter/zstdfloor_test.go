//go:build cgo && linux

package filter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine/filter/internal/libzstd"
	"github.com/scc-dev/scc/engine/filter/internal/zstdsys"
)

// zarrBenchChunkAt is chunk (c0, c1, c2) of the Zarr benchmark's array
// (bench/zarrbench.go's values), 256³ uint16.
func zarrBenchChunkAt(c0, c1, c2 uint64) []byte {
	const side = 256
	b := make([]byte, 0, 2*side*side*side)
	o0, o1, o2 := c0*side, c1*side, c2*side
	for l0 := uint64(0); l0 < side; l0++ {
		g0 := o0 + l0
		for l1 := uint64(0); l1 < side; l1++ {
			g1 := o1 + l1
			base := g1*g1/32 + g0*g0*g0
			for l2 := uint64(0); l2 < side; l2++ {
				v := uint16((o2 + l2 + base) % 65536)
				b = append(b, byte(v), byte(v>>8))
			}
		}
	}
	return b
}

// BenchmarkZstdFloor is the zstd decode floor: the same level-3 frames (as
// this build's libzstd writes them: 32 MiB chunks of the Zarr benchmark's
// array; "chunk" is one, "chunks" four different ones; "float32-walk", a
// 32 MiB frame that compresses little) decoded by the
// libzstd this build links (bundled-MB/s, or linked-system-MB/s under the
// build tag external_libzstd), by the system's libzstd.so.1 loaded beside it
// (system-MB/s), and by klauspost/compress (klauspost-MB/s), into the same
// warm buffer with checksums skipped, as the cache decodes. The decoders
// take turns inside every iteration, each going first in turn, so a busy
// machine's noise falls on all alike; the ratios are over the linked one.
// The fastest of them is the floor the zstd read rows are held to.
func BenchmarkZstdFloor(b *testing.B) {
	type decoder struct {
		name   string
		decode func(dst, src []byte) (int, error)
	}
	linked := "bundled"
	if !libzstd.Bundled {
		linked = "linked-system"
	}
	decs := []decoder{{linked, func(dst, src []byte) (int, error) { return libzstd.Decompress(dst, src, true) }}}
	if err := zstdsys.Open(); err != nil {
		b.Logf("no system libzstd row: %v", err)
	} else {
		d, err := zstdsys.NewDecoder()
		if err != nil {
			b.Fatal(err)
		}
		decs = append(decs, decoder{"system", d.Decompress})
		b.Logf("linked libzstd %s (%s), system libzstd %s", ZstdVersion(), linked, zstdVersionString(zstdsys.Version()))
	}
	decs = append(decs, decoder{"klauspost", func(dst, src []byte) (int, error) {
		out, err := zstdDecodeGo(dst, src, true)
		return len(out), err
	}})

	frames := func(chunks ...[3]uint64) (srcs, frames [][]byte) {
		for _, c := range chunks {
			var src []byte
			if c[0] == walk {
				src = float32Walk(32<<20, c[1])
			} else {
				src = zarrBenchChunkAt(c[0], c[1], c[2])
			}
			dst := make([]byte, len(src))
			n, err := libzstd.Compress(dst, src, 3)
			if err != nil {
				b.Fatal(err)
			}
			srcs, frames = append(srcs, src), append(frames, dst[:n])
		}
		return srcs, frames
	}
	for _, set := range []struct {
		name   string
		chunks [][3]uint64
	}{
		{"chunk", [][3]uint64{{1, 2, 3}}},
		{"chunks", [][3]uint64{{0, 0, 0}, {1, 2, 3}, {2, 0, 1}, {3, 3, 2}}},
		{"float32-walk", [][3]uint64{{walk, 1, 0}}},
	} {
		b.Run(set.name, func(b *testing.B) {
			srcs, fs := frames(set.chunks...)
			dst := make([]byte, len(srcs[0]))
			for _, d := range decs {
				for i, f := range fs {
					clear(dst)
					if n, err := d.decode(dst, f); err != nil || !bytes.Equal(dst[:n], srcs[i]) {
						b.Fatalf("%s: %v", d.name, err)
					}
				}
			}
			secs := make([]float64, len(decs))
			turn := 0
			for b.Loop() {
				for j := range decs {
					i := (turn + j) % len(decs)
					t0 := time.Now()
					for _, f := range fs {
						if _, err := decs[i].decode(dst, f); err != nil {
							b.Fatal(err)
						}
					}
					secs[i] += time.Since(t0).Seconds()
				}
				turn++
			}
			bytes := float64(len(fs)*len(srcs[0])*b.N) / 1e6
			for i, d := range decs {
				b.ReportMetric(bytes/secs[i], d.name+"-MB/s")
				if i > 0 {
					b.ReportMetric(secs[0]/secs[i], d.name+"/"+linked)
				}
			}
		})
	}
}

// walk marks a frame of float32Walk rather than a Zarr benchmark chunk.
const walk = ^uint64(0)

// float32Walk is n bytes of a float32 random walk: a frame that compresses
// about 1.3x at level 3, where the Zarr benchmark's chunks compress 20x and
// more, so its decode is mostly entropy decoding rather than match copies.
func float32Walk(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, 0, n)
	v := float32(0)
	for len(b) < n {
		v += float32(r.NormFloat64())
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func zstdVersionString(v int) string { return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100) }

// The system libzstd BenchmarkZstdFloor loads beside the linked one decodes
// the linked one's frames to the same bytes, so its row measures the same
// work.
func TestZstdSystemLibraryDecodes(t *testing.T) {
	if err := zstdsys.Open(); err != nil {
		t.Skip(err)
	}
	d, err := zstdsys.NewDecoder()
	require.NoError(t, err)
	src := float32Walk(1<<20, 7)
	frame := make([]byte, len(src))
	n, err := libzstd.Compress(frame, src, 3)
	require.NoError(t, err)
	dst := make([]byte, len(src))
	got, err := d.Decompress(dst, frame[:n])
	require.NoError(t, err)
	assert.Equal(t, src, dst[:got])
	_, err = d.Decompress(dst[:0:len(src)/2], frame[:n])
	assert.Error(t, err, "a destination too small fails, not overruns")
}

// BenchmarkZstdFloorParallel is the codec alone on every core: the 64
// chunks (64³ uint16, 512 KiB, level 3) of the Zarr benchmark's quick
// array decoded by the linked libzstd from 1, 2, 4 and 8 goroutines, each
// into its own warm buffer, as the benchmark's read_chunks rows read them.
// It reports decoded MB per CPU-second of the process (the read rows'
// metric) and, past one goroutine, its ratio to one goroutine's: the floor
// a read at that concurrency can reach on this machine, where cores share
// caches and memory bandwidth.
func BenchmarkZstdFloorParallel(b *testing.B) {
	const side = 64
	var frames [][]byte
	size := 2 * side * side * side
	for k := range 64 {
		src := make([]byte, 0, size)
		o0, o1, o2 := uint64(k/16*side), uint64(k/4%4*side), uint64(k%4*side)
		for l0 := uint64(0); l0 < side; l0++ {
			for l1 := uint64(0); l1 < side; l1++ {
				base := (o1+l1)*(o1+l1)/32 + (o0+l0)*(o0+l0)*(o0+l0)
				for l2 := uint64(0); l2 < side; l2++ {
					src = binary.LittleEndian.AppendUint16(src, uint16(o2+l2+base))
				}
			}
		}
		dst := make([]byte, size)
		n, err := libzstd.Compress(dst, src, 3)
		if err != nil {
			b.Fatal(err)
		}
		frames = append(frames, dst[:n])
	}
	var one float64
	for _, g := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("goroutines-%d", g), func(b *testing.B) {
			bufs := make([][]byte, g)
			for i := range bufs {
				bufs[i] = make([]byte, size)
				if _, err := libzstd.Decompress(bufs[i], frames[0], true); err != nil {
					b.Fatal(err)
				}
			}
			cpu := 0.0
			for b.Loop() {
				var next atomic.Int64
				var wg sync.WaitGroup
				c0 := processCPU()
				for i := range g {
					wg.Go(func() {
						for k := next.Add(1) - 1; k < int64(len(frames)); k = next.Add(1) - 1 {
							if _, err := libzstd.Decompress(bufs[i], frames[k], true); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				cpu += processCPU() - c0
			}
			rate := float64(len(frames)*size*b.N) / 1e6 / cpu
			b.ReportMetric(rate, "MB/CPU-s")
			if g == 1 {
				one = rate
			} else if one > 0 {
				b.ReportMetric(rate/one, "vs-1-goroutine")
			}
		})
	}
}

// processCPU is the process's user and system CPU time in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
