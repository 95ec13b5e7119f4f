package hdf5

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

var shuffleZstd = []h5.Filter{{ID: h5.FilterShuffle}, {ID: h5.FilterZstd}}

func TestDecodeChunkGo(t *testing.T) {
	data := noise(400)
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	defer enc.Close()
	img := enc.EncodeAll(zarrmap.Shuffle(data, 4, false), nil)
	got, err := decodeChunkGo(shuffleZstd, 0, img, len(data), 4)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	// zstd skipped (mask bit 1): the image is the shuffled chunk.
	got, err = decodeChunkGo(shuffleZstd, 2, zarrmap.Shuffle(data, 4, false), len(data), 4)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	// Deflate inside zstd, as the pipeline allows.
	fs := []h5.Filter{{ID: h5.FilterDeflate}, {ID: h5.FilterZstd}}
	got, err = decodeChunkGo(fs, 0, enc.EncodeAll(stdZlib(t, data, 6), nil), len(data), 4)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	// A chunk of another size, a bomb past the bound: corrupt.
	_, err = decodeChunkGo(shuffleZstd, 0, img, len(data)+4, 4)
	assert.ErrorIs(t, err, engine.ErrCorrupt)
	_, err = decodeChunkGo(shuffleZstd, 0, enc.EncodeAll(make([]byte, 1<<20), nil), 400, 4)
	assert.ErrorIs(t, err, engine.ErrCorrupt)
}

// FuzzDecodeChunkGo: any image decodes to exactly the chunk or fails with
// ErrCorrupt, never a panic, never past the bound.
func FuzzDecodeChunkGo(f *testing.F) {
	enc, _ := zstd.NewWriter(nil)
	f.Add(enc.EncodeAll(bytes.Repeat([]byte{1, 2, 3, 4}, 50), nil), uint32(0), 200, true)
	f.Add(enc.EncodeAll(make([]byte, 1<<16), nil), uint32(0), 64, false)
	f.Add([]byte{0x78, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01}, uint32(1), 0, false)
	f.Fuzz(func(t *testing.T, img []byte, mask uint32, chunkBytes int, deflate bool) {
		if chunkBytes < 0 || chunkBytes > 1<<20 {
			return
		}
		fs := shuffleZstd
		if deflate {
			fs = []h5.Filter{{ID: h5.FilterShuffle}, {ID: h5.FilterDeflate}, {ID: h5.FilterZstd}}
		}
		out, err := decodeChunkGo(fs, mask, img, chunkBytes, 4)
		if err != nil {
			if !errors.Is(err, engine.ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if len(out) != chunkBytes {
			t.Fatalf("%d bytes, want %d", len(out), chunkBytes)
		}
	})
}
