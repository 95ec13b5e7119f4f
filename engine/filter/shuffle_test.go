package filter

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// refShuffle is the definition of HDF5's shuffle, one byte at a time.
func refShuffle(src []byte, es int) []byte {
	dst := make([]byte, len(src))
	n := len(src) / es
	for i := 0; i < n; i++ {
		for j := 0; j < es; j++ {
			dst[j*n+i] = src[i*es+j]
		}
	}
	copy(dst[n*es:], src[n*es:])
	return dst
}

func checkShuffle(t testing.TB, src []byte, es int) {
	t.Helper()
	want := refShuffle(src, es)
	got := make([]byte, len(src))
	shuffle(got, src, es)
	if !bytes.Equal(got, want) {
		t.Fatalf("shuffle(len %d, es %d) differs from the reference", len(src), es)
	}
	back := make([]byte, len(src))
	unshuffle(back, got, es)
	if !bytes.Equal(back, src) {
		t.Fatalf("unshuffle(shuffle(len %d, es %d)) is not the input", len(src), es)
	}
}

func TestShuffleMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 1000, 4096, 4099, 65536 + 13}
	for es := 1; es <= 17; es++ {
		for _, n := range lengths {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			checkShuffle(t, src, es)
		}
	}
}

// TestShuffleGroupsBytes checks the layout on a hand-made example, so the
// reference itself is pinned to HDF5's definition.
func TestShuffleGroupsBytes(t *testing.T) {
	src := []byte{0x01, 0xA1, 0x02, 0xA2, 0x03, 0xA3, 0xFF} // 3 uint16 + 1 tail byte
	want := []byte{0x01, 0x02, 0x03, 0xA1, 0xA2, 0xA3, 0xFF}
	got := make([]byte, len(src))
	shuffle(got, src, 2)
	if !bytes.Equal(got, want) {
		t.Fatalf("shuffle = %x, want %x", got, want)
	}
}

func FuzzShuffle(f *testing.F) {
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?"), uint8(2))
	f.Add([]byte{1, 2, 3}, uint8(4))
	f.Add(make([]byte, 200), uint8(8))
	f.Fuzz(func(t *testing.T, src []byte, es uint8) {
		checkShuffle(t, src, int(es%24)+1)
	})
}

func BenchmarkShuffle(b *testing.B) {
	src := detectorData(1 << 20)
	dst := make([]byte, len(src))
	for _, es := range []int{2, 4, 8, 3} {
		b.Run("es="+string(rune('0'+es))+"/shuffle", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				shuffle(dst, src, es)
			}
		})
		b.Run("es="+string(rune('0'+es))+"/unshuffle", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				unshuffle(dst, src, es)
			}
		})
	}
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
		}
	})
}
