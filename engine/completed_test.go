package engine

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// Write-back of completed chunks (cache/completed.go): a large unfiltered chunk written
// whole in several requests is written back and dropped by the request
// that completes it, as a whole-chunk write would have gone straight to the
// file, instead of waiting dirty in the cache for Flush.

// cwQuarters writes a rows×cols dataset of side×side chunks of bytes in
// quarter-chunk boxes, row-major like h5perf's -x 512 -c 1K, each box
// holding a pattern of its position; it returns the whole array.
func cwQuarters(t *testing.T, ctx context.Context, ds *Dataset, rows, cols, side uint64, after func(box int)) []byte {
	t.Helper()
	h := side / 2
	want := make([]byte, rows*cols)
	box := make([]byte, h*h)
	n := 0
	for r := uint64(0); r < rows; r += h {
		for c := uint64(0); c < cols; c += h {
			for i := range box {
				box[i] = byte(uint64(i)*7 + r*3 + c)
			}
			require.NoError(t, ds.Write(ctx, Box([]uint64{r, c}, []uint64{h, h}), box))
			for i := uint64(0); i < h; i++ {
				copy(want[(r+i)*cols+c:], box[i*h:(i+1)*h])
			}
			if after != nil {
				after(n)
			}
			n++
		}
	}
	return want
}

func TestCompletedWriteBackCompletedChunks(t *testing.T) {
	ctx := context.Background()
	const side, rows, cols = 512, 1024, 2048 // 256 KiB chunks, 2×4 of them
	cnt := vfd.NewCounting(vfd.NewMem())
	f, err := Create(ctx, "", &Options{Driver: cnt})
	require.NoError(t, err)
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, cols}, Chunk: []uint64{side, side}})
	require.NoError(t, err)
	c := f.Cache()
	st0, w0 := c.Stats(), cnt.Snapshot()
	var resident []int64
	want := cwQuarters(t, ctx, ds, rows, cols, side, func(int) {
		resident = append(resident, c.Stats().ResidentBytes)
	})
	st := c.Stats().Sub(st0)
	// Every chunk was completed by its last quarter and written then.
	assert.EqualValues(t, 8, st.CompletedChunks)
	assert.Zero(t, st.DirectWrites)
	w := cnt.Snapshot().Sub(w0)
	assert.GreaterOrEqual(t, w.BytesWritten(), int64(8*side*side), "the chunks are in the file before Flush")
	// Boxes go row by row, so a row of chunks (four) is open at once and
	// each leaves when its last quarter lands: the cache never holds the
	// whole array's 2 MiB.
	assert.LessOrEqual(t, slicesMax(resident), int64(4*side*side)+64<<10)
	// Flush writes metadata only.
	w1 := cnt.Snapshot()
	require.NoError(t, f.Flush(ctx))
	assert.Less(t, cnt.Snapshot().Sub(w1).BytesWritten(), int64(side*side))
	got := make([]byte, len(want))
	require.NoError(t, ds.Read(ctx, Box([]uint64{0, 0}, []uint64{rows, cols}), got))
	assert.True(t, bytes.Equal(want, got))
}

func slicesMax(v []int64) int64 {
	m := int64(0)
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// TestCompletedWriteBackKeeps: chunks that are not completed, small chunks,
// chunks loaded from the file (rewritten in parts) and caches with direct
// writes off stay dirty in the cache as before.
func TestCompletedWriteBackKeeps(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		side       uint64
		cfg        cache.Config
		rewrite    bool // write the array, Flush, drop the cache, write it again
		halfChunks bool // write only the first quarter of each chunk
	}{
		{name: "small", side: 128},                                               // 16 KiB chunks
		{name: "incomplete", side: 512, halfChunks: true},                        // never completed
		{name: "stored", side: 512, rewrite: true},                               // loaded, not created
		{name: "no-direct", side: 512, cfg: cache.Config{NoDirectWrites: true}},  // off with direct writes
		{name: "no-bypass", side: 512, cfg: cache.Config{BypassBytes: -1}},       // and with the bypass
		{name: "direct-min", side: 512, cfg: cache.Config{DirectWriteBytes: -1}}, // only above the bypass size
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.QuiescentBytes = 64 << 20
			c, err := cache.New(cfg)
			require.NoError(t, err)
			defer c.Close()
			mem := vfd.NewMem()
			f, err := Create(ctx, "", &Options{Driver: mem, Cache: c})
			require.NoError(t, err)
			rows, cols := 2*tc.side, 4*tc.side
			ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, cols}, Chunk: []uint64{tc.side, tc.side}})
			require.NoError(t, err)
			if tc.rewrite {
				cwQuarters(t, ctx, ds, rows, cols, tc.side, nil)
				require.NoError(t, f.Close(ctx))
				f, err = Open(ctx, "", &Options{Driver: mem, Cache: c})
				require.NoError(t, err)
				ds, err = f.OpenDataset(ctx, "d", nil)
				require.NoError(t, err)
			}
			defer f.Close(ctx)
			st0 := c.Stats()
			if tc.halfChunks {
				q := make([]byte, tc.side*tc.side/4)
				for r := uint64(0); r < rows; r += tc.side {
					for col := uint64(0); col < cols; col += tc.side {
						require.NoError(t, ds.Write(ctx, Box([]uint64{r, col}, []uint64{tc.side / 2, tc.side / 2}), q))
					}
				}
			} else {
				cwQuarters(t, ctx, ds, rows, cols, tc.side, nil)
			}
			st := c.Stats().Sub(st0)
			assert.Zero(t, st.CompletedChunks)
			assert.GreaterOrEqual(t, c.Stats().DirtyBytes, int64(8*tc.side*tc.side), "every chunk dirty in the cache")
		})
	}
}

// TestCompletedWriteBackRace: many goroutines write quarters of the same chunks
// (each chunk's quarters by different goroutines, in any order) and read
// them back meanwhile; every chunk ends written exactly as the last writes
// left it.
func TestCompletedWriteBackRace(t *testing.T) {
	ctx := context.Background()
	const side, rows, cols = 256, 1024, 1024 // 64 KiB chunks, 16 of them
	f, err := Create(ctx, "", &Options{Driver: vfd.NewMem()})
	require.NoError(t, err)
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, cols}, Chunk: []uint64{side, side}})
	require.NoError(t, err)
	const h = side / 2
	var boxes [][2]uint64
	for r := uint64(0); r < rows; r += h {
		for c := uint64(0); c < cols; c += h {
			boxes = append(boxes, [2]uint64{r, c})
		}
	}
	fill := func(b []byte, r, c uint64) {
		for i := range b {
			b[i] = byte(uint64(i) + r*5 + c*3)
		}
	}
	const workers = 8
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf, back := make([]byte, h*h), make([]byte, h*h)
			for round := 0; round < 3; round++ {
				for i := w; i < len(boxes); i += workers {
					b := boxes[(i+round*5)%len(boxes)]
					fill(buf, b[0], b[1])
					if !assert.NoError(t, ds.Write(ctx, Box([]uint64{b[0], b[1]}, []uint64{h, h}), buf)) {
						return
					}
					if !assert.NoError(t, ds.Read(ctx, Box([]uint64{b[0], b[1]}, []uint64{h, h}), back)) {
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	require.NoError(t, f.Flush(ctx))
	got, want := make([]byte, h*h), make([]byte, h*h)
	for _, b := range boxes {
		fill(want, b[0], b[1])
		require.NoError(t, ds.Read(ctx, Box([]uint64{b[0], b[1]}, []uint64{h, h}), got))
		assert.True(t, bytes.Equal(want, got), "box %v", b)
	}
	assert.Positive(t, f.Cache().Stats().CompletedChunks)
}

// TestCompletedWriteBackFails: a write-back of a completed chunk that
// fails is not the writer's error (its bytes are in the cache): the chunk
// stays resident and dirty, and Flush writes it, or reports the failure.
func TestCompletedWriteBackFails(t *testing.T) {
	ctx := context.Background()
	const side, rows, cols = 512, 512, 512 // one 256 KiB chunk
	flt := vfd.NewFault(vfd.NewMem())
	f, err := Create(ctx, "", &Options{Driver: flt})
	require.NoError(t, err)
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{rows, cols}, Chunk: []uint64{side, side}})
	require.NoError(t, err)
	flt.Add(vfd.Fail(vfd.Every(vfd.OpWriteV)))
	st0 := f.Cache().Stats()
	want := cwQuarters(t, ctx, ds, rows, cols, side, nil) // no error
	st := f.Cache().Stats().Sub(st0)
	assert.Positive(t, flt.Injected(), "the completed chunk was written back")
	assert.Zero(t, st.CompletedChunks)
	assert.GreaterOrEqual(t, f.Cache().Stats().DirtyBytes, int64(side*side), "still dirty in the cache")
	err = f.Flush(ctx)
	assert.ErrorIs(t, err, ErrIO)
	flt.SetEnabled(false)
	require.NoError(t, f.Flush(ctx))
	got := make([]byte, len(want))
	require.NoError(t, ds.Read(ctx, Box([]uint64{0, 0}, []uint64{rows, cols}), got))
	assert.True(t, bytes.Equal(want, got))
}
