package memcopy

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStreamCopies checks Stream against copy at every alignment of both
// sides and lengths around the streaming thresholds, bytes outside the
// copy untouched.
func TestStreamCopies(t *testing.T) {
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	for _, n := range []int{0, 1, 31, 32, 63, 64, 95, 127, 128, 129, 159, 160, 191, 192, 255, 256, 257, 511, 512, 513, 1000, 2048, 3000} {
		for doff := 0; doff < 40; doff += 3 {
			for soff := 0; soff < 40; soff += 7 {
				dst := bytes.Repeat([]byte{0xA5}, 4096+80)
				want := bytes.Clone(dst)
				copy(want[doff:doff+n], src[soff:soff+n])
				got := Stream(dst[doff:doff+n], src[soff:soff+n])
				Fence()
				assert.Equal(t, n, got)
				if !bytes.Equal(dst, want) {
					t.Fatalf("n=%d dst+%d src+%d: bytes differ from copy", n, doff, soff)
				}
			}
		}
	}
}

// TestStreamShorterSide copies min(len(dst), len(src)) bytes, as copy.
func TestStreamShorterSide(t *testing.T) {
	src := bytes.Repeat([]byte{7}, 300)
	dst := make([]byte, 200)
	assert.Equal(t, 200, Stream(dst, src))
	assert.Equal(t, bytes.Repeat([]byte{7}, 200), dst)
	dst = make([]byte, 500)
	assert.Equal(t, 300, Stream(dst, src))
	Fence()
	assert.Equal(t, bytes.Repeat([]byte{7}, 300), dst[:300])
	assert.Equal(t, make([]byte, 200), dst[300:])
}

// FuzzStream compares Stream with copy on any lengths and offsets.
func FuzzStream(f *testing.F) {
	f.Add(uint16(600), uint8(3), uint8(5), uint16(512))
	f.Add(uint16(64), uint8(0), uint8(0), uint16(64))
	f.Fuzz(func(t *testing.T, n uint16, doff, soff uint8, dn uint16) {
		src := make([]byte, int(n)+int(soff))
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		dst := make([]byte, int(dn)+int(doff)+64)
		want := bytes.Clone(dst)
		wn := copy(want[doff:int(doff)+int(dn)], src[soff:])
		gn := Stream(dst[doff:int(doff)+int(dn)], src[soff:])
		Fence()
		if wn != gn || !bytes.Equal(dst, want) {
			t.Fatalf("Stream differs from copy (n=%d dn=%d doff=%d soff=%d)", n, dn, doff, soff)
		}
	})
}

// BenchmarkScatterRows scatters 512-byte rows of a cache-hot 128 KiB
// source into a 256 MiB destination, as a one-call read of 256³ uint16
// chunks into a 512³ array does, with copy and with Stream.
func BenchmarkScatterRows(b *testing.B) {
	const side, chunk, row = 512, 256, 512
	dst := make([]byte, side*side*side*2)
	for i := range dst {
		dst[i] = 1
	}
	src := make([]byte, 128<<10)
	for _, mode := range []string{"copy", "stream"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(dst)))
			for b.Loop() {
				for c := range 8 {
					cz, cy, cx := c/4, (c/2)%2, c%2
					for r := range chunk * chunk {
						z, y := r/chunk, r%chunk
						off := (((cz*chunk+z)*side+(cy*chunk+y))*side + cx*chunk) * 2
						s := src[(r*row)%len(src):][:row]
						if mode == "copy" {
							copy(dst[off:off+row], s)
						} else {
							Stream(dst[off:off+row], s)
						}
					}
					Fence()
				}
			}
		})
	}
}

// TestRowsMatchCopy: StreamRows and GatherRows move the bytes a copy per
// row moves, and decline (copying nothing) rows they cannot take: short
// or ragged rows, unaligned or out-of-range places, a short packed side.
func TestRowsMatchCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rb := range []int{64, 128, 512} {
		rows := 1 + rng.IntN(40)
		off := make([]int, rows)
		o := 16 * rng.IntN(2)
		for k := range off {
			off[k] = o
			o += rb + 16*rng.IntN(3)
		}
		strided := make([]byte, off[rows-1]+rb+48)
		packed := make([]byte, rows*rb)
		for i := range packed {
			packed[i] = byte(rng.Uint32())
		}
		want := bytes.Clone(strided)
		for k, o := range off {
			copy(want[o:o+rb], packed[k*rb:])
		}
		if !HaveStream {
			assert.False(t, StreamRows(strided, packed, off, rb))
			continue
		}
		// A heap buffer of 64 bytes or more is 16-byte aligned.
		require.True(t, StreamRows(strided, packed, off, rb))
		assert.Equal(t, want, strided)
		back := make([]byte, len(packed))
		require.True(t, GatherRows(back, strided, off, rb))
		assert.Equal(t, packed, back)

		untouched := make([]byte, len(strided))
		for _, bad := range []struct {
			name   string
			dst    []byte
			off    []int
			rb     int
			packed []byte
		}{
			{"ragged row", untouched, off, rb - 16, packed},
			{"unaligned place", untouched, append([]int{8}, off[1:]...), rb, packed},
			{"unaligned buffer", untouched[1:], off, rb, packed},
			{"row past the end", untouched[:off[rows-1]+rb-1], off, rb, packed},
			{"negative place", untouched, append([]int{-16}, off[1:]...), rb, packed},
			{"short packed side", untouched, off, rb, packed[:len(packed)-1]},
		} {
			assert.False(t, StreamRows(bad.dst, bad.packed, bad.off, bad.rb), bad.name)
			assert.False(t, GatherRows(bytes.Clone(bad.packed), bad.dst, bad.off, bad.rb), bad.name)
		}
		assert.Equal(t, make([]byte, len(untouched)), untouched, "a declined call wrote")
	}
}
