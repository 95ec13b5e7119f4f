package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

// A chunk created for a write that does not cover it is filled only where
// the writes that follow did not go, when it is first read or encoded
// (denseChunk.unfilled): a chunk written in quarters is never filled.

// TestLazyFillQuartersFillNothing: h5perf's quarter-chunk transfers fill
// no byte of the chunks they create, and the file holds what they wrote.
func TestLazyFillQuartersFillNothing(t *testing.T) {
	ctx := context.Background()
	const side, rows, cols = 512, 1024, 1024 // 256 KiB chunks, 2×2 of them
	f, err := Create(ctx, "", &Options{Driver: vfd.NewMem()})
	require.NoError(t, err)
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, cols}, Chunk: []uint64{side, side}})
	require.NoError(t, err)
	st0, fill0 := f.Cache().Stats(), chunkFillBytes.Load()
	want := cwQuarters(t, ctx, ds, rows, cols, side, nil)
	st := f.Cache().Stats().Sub(st0)
	require.EqualValues(t, 4, st.Creates)
	assert.Zero(t, chunkFillBytes.Load()-fill0, "bytes of new chunks filled")
	assert.EqualValues(t, 4, st.CompletedChunks)
	require.NoError(t, f.Flush(ctx))
	got := make([]byte, len(want))
	require.NoError(t, ds.Read(ctx, Box([]uint64{0, 0}, []uint64{rows, cols}), got))
	assert.True(t, bytes.Equal(want, got))
}

// TestLazyFillPartialChunks: chunks written in part (boxes, overlapping
// boxes, a strided selection that is no box, more boxes than a chunk
// remembers) read back, resident and after a reopen, with the fill value
// everywhere the writes did not go; concurrent readers of one unfilled
// chunk see the same.
func TestLazyFillPartialChunks(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	const side = 128 // 64 KiB chunks of uint32
	fill := []byte{7, 0, 0, 0}
	spec := DatasetSpec{Type: Uint32, Shape: []uint64{side, 5 * side}, Chunk: []uint64{side, side}, Fill: fill}
	f, err := Create(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	ds, err := f.CreateDataset(ctx, "d", spec)
	require.NoError(t, err)
	ref := newRef(spec.Shape, 4, fill)
	put := func(sel Selection, seed byte) {
		n := sel.NumElements()
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(i)*31+uint32(seed))
		}
		require.NoError(t, ds.Write(ctx, sel, b))
		ref.write(sel, b)
	}
	// Chunk 0: one box. Chunk 1: overlapping boxes. Chunk 2: a box, then
	// a strided selection. Chunk 3: many one-element boxes. Chunk 4: two
	// disjoint boxes covering half of it.
	put(Box([]uint64{10, 20}, []uint64{30, 40}), 1)
	put(Box([]uint64{0, side}, []uint64{64, 64}), 2)
	put(Box([]uint64{32, side + 32}, []uint64{64, 64}), 3)
	put(Box([]uint64{5, 2 * side}, []uint64{3, 3}), 4)
	put(Hyperslab([]uint64{1, 2*side + 1}, []uint64{4, 8}, []uint64{20, 10}, []uint64{2, 3}), 5)
	for i := uint64(0); i < lazyFillBoxes+10; i++ {
		put(Box([]uint64{i, 3*side + 2*i}, []uint64{1, 1}), byte(i))
	}
	put(Box([]uint64{0, 4 * side}, []uint64{side / 2, side / 2}), 6)
	put(Box([]uint64{side / 2, 4*side + side/2}, []uint64{side / 2, side / 2}), 7)

	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref.verify(t, ds)
		}()
	}
	wg.Wait()
	require.NoError(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	ref.verify(t, ds)
}
