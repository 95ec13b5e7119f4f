package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

// h5perfCalls writes n whole 256 KiB chunks of one dataset, one chunk a
// call as h5perf's whole-chunk transfers do (NoSync), and returns the
// driver's counts over the writes and over the Flush and Close after them.
func h5perfCalls(t *testing.T, n uint64) (writes, commit vfd.Counts) {
	t.Helper()
	ctx := context.Background()
	const side = 512
	cnt := vfd.NewCounting(vfd.NewMem())
	f, err := Create(ctx, "", &Options{Driver: cnt, NoSync: true})
	require.NoError(t, err)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{side, n * side}, Chunk: []uint64{side, side}})
	require.NoError(t, err)
	buf := make([]byte, side*side)
	w0 := cnt.Snapshot()
	for i := range n {
		require.NoError(t, ds.Write(ctx, Box([]uint64{0, i * side}, []uint64{side, side}), buf))
	}
	w1 := cnt.Snapshot()
	require.NoError(t, f.Flush(ctx))
	require.NoError(t, f.Close(ctx))
	return w1.Sub(w0), cnt.Snapshot().Sub(w1)
}

// TestWholeChunkWriteCalls: a whole-chunk write costs one vector write of
// two extents (the caller's bytes and the frame's trailer, which the file
// driver issues as one pwritev) and nothing else: no read, no other write,
// no sync. The index those writes change is committed by the Flush after
// them, in as many calls whatever the number of chunks.
func TestWholeChunkWriteCalls(t *testing.T) {
	const side = 512
	few, fewCommit := h5perfCalls(t, 8)
	many, manyCommit := h5perfCalls(t, 64)
	for _, c := range []struct {
		n int64
		w vfd.Counts
	}{{8, few}, {64, many}} {
		assert.Equal(t, c.n, c.w.Ops[vfd.OpWriteV], "vector writes for %d chunks", c.n)
		assert.Equal(t, 2*c.n, c.w.Extents[vfd.OpWriteV], "extents for %d chunks", c.n)
		assert.Equal(t, c.n*(side*side+format.ChunkFrameOverhead), c.w.BytesWritten())
		for _, op := range []vfd.Op{vfd.OpRead, vfd.OpReadV, vfd.OpWrite, vfd.OpSync} {
			assert.Zero(t, c.w.Ops[op], "%v calls for %d chunks", op, c.n)
		}
	}
	t.Logf("commit of 8 chunks: %v; of 64: %v", fewCommit.Ops, manyCommit.Ops)
	for _, op := range []vfd.Op{vfd.OpWrite, vfd.OpWriteV, vfd.OpSync} {
		assert.Equal(t, fewCommit.Ops[op], manyCommit.Ops[op], "%v calls to commit 8 and 64 chunks", op)
	}
}

// TestWholeChunkWriteAllocs: a stream of whole-chunk writes makes little
// garbage per chunk: the direct write's lists are pooled (18 allocations a
// chunk when they were not). What is left is the request's grouping and
// lookup, its claim, its admission and the allocator's records of the new
// space.
func TestWholeChunkWriteAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	const side, n = 512, 4096
	f, err := Create(ctx, "", &Options{Driver: vfd.NewMem(), NoSync: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{side, n * side}, Chunk: []uint64{side, side}})
	require.NoError(t, err)
	buf := make([]byte, side*side)
	i := uint64(0)
	st0 := f.Cache().Stats()
	allocs := testing.AllocsPerRun(1000, func() {
		require.NoError(t, ds.Write(ctx, Box([]uint64{0, i * side}, []uint64{side, side}), buf))
		i++
	})
	require.EqualValues(t, i, f.Cache().Stats().Sub(st0).DirectWrites)
	t.Logf("%.1f allocations per whole-chunk write", allocs)
	assert.LessOrEqual(t, allocs, 13.0)
}
