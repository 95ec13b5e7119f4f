package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
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

// lazyFillWorkload writes 128 KiB chunks of uint16 with a fill value in
// quarters (chunks completed and written back as they fill), in single
// quarters (left unfilled until Flush encodes them) and in strided
// selections, with flushes, an extent change and a close between.
var lazyFillWorkload = lazyFillWorkloadStats(nil)

// lazyFillWorkloadStats is lazyFillWorkload, storing in st the cache's
// statistics before its close when st is not nil.
func lazyFillWorkloadStats(st *cache.Stats) workload {
	return defineWorkload(46, &Options{}, func(w *wlRun) error {
		if st != nil {
			w.beforeClose = func(f *File) { *st = f.Cache().Stats() }
		}
		const side = 256
		specs := map[string]DatasetSpec{
			"q": {Type: Uint16, Shape: []uint64{side, 4 * side}, Chunk: []uint64{side, side}, Fill: []byte{3, 1}},
		}
		quarter := func(c, k uint64) func() error {
			return func() error {
				h := uint64(side / 2)
				sel := Box([]uint64{(k / 2) * h, c*side + (k%2)*h}, []uint64{h, h})
				buf := randomBytes(w.rng, int(sel.NumElements())*2)
				if err := w.sets["q"].Write(w.ctx, sel, buf); err != nil {
					return err
				}
				w.refs["q"].write(sel, buf)
				return nil
			}
		}
		random := func() error {
			sel := randomSelection(w.rng, w.refs["q"].dims)
			buf := randomBytes(w.rng, int(sel.NumElements())*2)
			if err := w.sets["q"].Write(w.ctx, sel, buf); err != nil {
				return err
			}
			w.refs["q"].write(sel, buf)
			return nil
		}
		return steps(
			func() error { return w.create(specs, "q") },
			quarter(0, 0), quarter(0, 1), quarter(0, 2), quarter(0, 3), // completed
			quarter(1, 3), // unfilled until the flush
			w.flush,
			quarter(2, 0), quarter(2, 2), random,
			quarter(2, 1), quarter(2, 3),
			w.flush,
			quarter(3, 1), random,
			func() error { return w.setExtent("q", []uint64{side - 5, 4 * side}) },
			w.flush,
			quarter(1, 0),
		)
	})
}

// TestLazyFillFaultAtEveryOperation: with the file failing from each of
// the workload's operations on, an injected error reaches the caller (a
// completed chunk's failed write-back leaves it dirty for Flush, which
// reports it), and the file holds the last committed state.
func TestLazyFillFaultAtEveryOperation(t *testing.T) {
	var st cache.Stats
	fill0 := chunkFillBytes.Load()
	_, err := lazyFillWorkloadStats(&st)(vfd.NewMem(), 1, snapshots{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.CompletedChunks, int64(2), "chunks completed and written back")
	require.Positive(t, chunkFillBytes.Load()-fill0, "chunks filled in part")
	faultSweep(t, lazyFillWorkload, 1)
}

// TestLazyFillCrashAtEveryWrite: a crash at each mutating operation
// leaves a committed state.
func TestLazyFillCrashAtEveryWrite(t *testing.T) {
	crashSweep(t, lazyFillWorkload, 1)
}
