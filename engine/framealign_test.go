package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Chunk frames of frameAlignFrom bytes and more start page-aligned, whether
// the chunk was written whole (straight from the caller's buffer) or
// flushed from the cache after partial writes, and whatever small blocks
// lie between; smaller frames pack. The file checks clean and reads back.
func TestChunkFramesPageAligned(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.scc")
	f, err := Create(ctx, path, &Options{NoSync: true})
	require.NoError(t, err)
	big, err := f.CreateDataset(ctx, "big", DatasetSpec{Type: Uint8, Shape: []uint64{2048, 512}, Chunk: []uint64{512, 512}})
	require.NoError(t, err)
	small, err := f.CreateDataset(ctx, "small", DatasetSpec{Type: Uint8, Shape: []uint64{64, 256}, Chunk: []uint64{16, 256}})
	require.NoError(t, err)
	whole := make([]byte, 512*512)
	for i := range whole {
		whole[i] = byte(i*7 + 1)
	}
	// Chunks 0 and 2 whole; 1 and 3 row by row (cached, flushed later),
	// with small chunks written between them.
	for c := uint64(0); c < 4; c++ {
		if c%2 == 0 {
			require.NoError(t, big.Write(ctx, Box([]uint64{c * 512, 0}, []uint64{512, 512}), whole))
		} else {
			for r := uint64(0); r < 512; r++ {
				require.NoError(t, big.Write(ctx, Box([]uint64{c*512 + r, 0}, []uint64{1, 512}), whole[r*512:(r+1)*512]))
			}
		}
		require.NoError(t, small.Write(ctx, Box([]uint64{c * 16, 0}, []uint64{16, 256}), whole[:16*256]))
		require.NoError(t, f.Flush(ctx))
	}
	ext, err := big.ChunkExtents(ctx)
	require.NoError(t, err)
	require.Len(t, ext, 4)
	for _, e := range ext {
		assert.Zero(t, e.Off%frameAlign, "chunk %v at %d", e.Coord, e.Off)
	}
	sext, err := small.ChunkExtents(ctx)
	require.NoError(t, err)
	require.Len(t, sext, 4)
	require.NoError(t, f.Close(ctx))

	rep, err := Check(ctx, path, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	g, err := Open(ctx, path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer g.Close(ctx)
	d, err := g.OpenDataset(ctx, "big", nil)
	require.NoError(t, err)
	got := make([]byte, len(whole))
	for c := uint64(0); c < 4; c++ {
		require.NoError(t, d.Read(ctx, Box([]uint64{c * 512, 0}, []uint64{512, 512}), got))
		assert.Equal(t, whole, got, "chunk %d", c)
	}
}
