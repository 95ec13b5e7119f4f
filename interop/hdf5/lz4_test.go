package hdf5

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
)

// hdf5LZ4 frames data as the H5Zlz4 plugin does, in blocks of block bytes
// (0: one block).
func hdf5LZ4(t testing.TB, data []byte, block int) []byte {
	if block == 0 || block > len(data) {
		block = len(data)
	}
	out := binary.BigEndian.AppendUint64(nil, uint64(len(data)))
	out = binary.BigEndian.AppendUint32(out, uint32(block))
	for off := 0; off < len(data); off += block {
		b := data[off:min(off+block, len(data))]
		buf := make([]byte, lz4.CompressBlockBound(len(b)))
		n, err := lz4.CompressBlock(b, buf, nil)
		require.NoError(t, err)
		if n == 0 || n >= len(b) {
			buf, n = b, len(b)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(n))
		out = append(out, buf[:n]...)
	}
	return out
}

func TestLZ4FromHDF5(t *testing.T) {
	data := make([]byte, 4000)
	for i := range data {
		data[i] = byte(i / 7)
	}
	img, err := lz4FromHDF5(hdf5LZ4(t, data, 0), len(data))
	require.NoError(t, err)
	assert.Equal(t, uint32(len(data)), binary.LittleEndian.Uint32(img))
	got := make([]byte, len(data))
	n, err := lz4.UncompressBlock(img[4:], got)
	require.NoError(t, err)
	assert.Equal(t, len(data), n)
	assert.Equal(t, data, got)

	// Not scc's form: several blocks, a block stored as it is.
	_, err = lz4FromHDF5(hdf5LZ4(t, data, 1000), len(data))
	assert.ErrorIs(t, err, engine.ErrInvalid)
	_, err = lz4FromHDF5(hdf5LZ4(t, noise(500), 0), 500)
	assert.ErrorIs(t, err, engine.ErrInvalid)
	// Framing that contradicts itself or the chunk.
	good := hdf5LZ4(t, data, 0)
	for name, img := range map[string][]byte{
		"short":     good[:10],
		"truncated": good[:len(good)-1],
		"size":      append(binary.BigEndian.AppendUint64(nil, 3999), good[8:]...),
		"block 0":   append(append(append([]byte(nil), good[:8]...), 0, 0, 0, 0), good[12:]...),
	} {
		_, err := lz4FromHDF5(img, len(data))
		assert.ErrorIs(t, err, engine.ErrCorrupt, name)
	}
}

// FuzzLZ4FromHDF5: any image gives scc's form or a typed error, never a
// panic, and never more output than the image holds.
func FuzzLZ4FromHDF5(f *testing.F) {
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(i % 5)
	}
	f.Add(hdf5LZ4(f, data, 0), 300)
	f.Add(hdf5LZ4(f, data, 100), 300)
	f.Add(hdf5LZ4(f, noise(64), 0), 64)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0)
	f.Fuzz(func(t *testing.T, img []byte, chunkBytes int) {
		out, err := lz4FromHDF5(img, chunkBytes)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalid) && !errors.Is(err, engine.ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(out) != len(img)-lz4HDF5Overhead+4 {
			t.Fatalf("%d bytes out of %d", len(out), len(img))
		}
	})
}
