package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/vfd"
)

// Checksums beside the write (cache/latesum.go): a whole chunk written
// directly, at least cache.Config.LateSumBytes large, has its checksum
// computed while its bytes are written and its trailer written after
// them; smaller ones keep the one vector write.

// lateOpts is dwOpts with checksums beside the write from late bytes on.
func lateOpts(late int64) *Options {
	o := dwOpts()
	o.CacheConfig.LateSumBytes = late
	return o
}

// TestLateSumChecksums: for chunks at and below the threshold, of both
// layouts with a direct writer (dense chunks, contiguous pieces), the
// checksum the index records (and a dense chunk's trailer on disk) is the
// checksum of the bytes written, the file checks clean and reads back
// after reopening. At the threshold a dense chunk's trailers go in a
// vector write of their own after the bytes; below it, beside them.
func TestLateSumChecksums(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		spec  DatasetSpec
		chunk int // bytes per chunk (piece)
	}{
		{"dense", DatasetSpec{Type: Uint8, Shape: []uint64{dwRows, dwRow}, Chunk: []uint64{1, dwRow}}, dwRow},
		{"contig", DatasetSpec{Type: Uint8, Shape: []uint64{32, 8192}, Layout: Contiguous}, contigPieceBytes},
	} {
		for _, above := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/late=%v", tc.name, above), func(t *testing.T) {
				late := int64(tc.chunk)
				if !above {
					late++
				}
				mem := vfd.NewMem()
				rec := &recDriver{Driver: mem}
				f := tCreate(t, rec, lateOpts(late))
				ds, err := f.CreateDataset(ctx, "d", tc.spec)
				require.NoError(t, err)
				rows := tc.spec.Shape[0]
				perChunk := uint64(tc.chunk) / tc.spec.Shape[1]
				ref := newRef(tc.spec.Shape, 1, nil)
				rec.record(true)
				for r := uint64(0); r < rows; r += 2 * perChunk { // two chunks a write
					sel := Box([]uint64{r, 0}, []uint64{2 * perChunk, tc.spec.Shape[1]})
					buf := pattern(2*tc.chunk, byte(r+1))
					require.NoError(t, ds.Write(ctx, sel, buf))
					ref.write(sel, buf)
				}
				calls := rec.record(false)
				st := f.Cache().Stats()
				require.EqualValues(t, rows/perChunk, st.DirectWrites, "every chunk written directly")
				if above && runtime.GOMAXPROCS(0) > 1 {
					assert.Positive(t, st.LateSums, "checksums handed to a helper")
				} else {
					assert.Zero(t, st.LateSums)
				}
				if tc.name == "dense" {
					// Trailers apart from the bytes at the threshold,
					// beside them below it.
					var tailsOnly int
					for _, c := range calls {
						only := true
						for _, x := range c {
							only = only && len(x.Buf) == 4
						}
						if only {
							tailsOnly++
						}
					}
					if above {
						assert.Equal(t, len(calls)/2, tailsOnly, "one trailer write per write of bytes")
					} else {
						assert.Zero(t, tailsOnly)
					}
					checkDenseSums(t, ds, mem)
				}
				ref.verify(t, ds)
				require.NoError(t, f.Flush(ctx))
				if tc.name == "dense" {
					checkDenseSums(t, ds, mem)
				}
				require.NoError(t, f.Close(ctx))
				checkReopen(t, mem, "d", ref)
			})
		}
	}
}

// checkDenseSums compares every stored chunk's index checksum with the
// checksum of its bytes in the file and with its trailer there.
func checkDenseSums(t *testing.T, ds *Dataset, mem vfd.Driver) {
	t.Helper()
	ix, err := ds.s.idx.get(t.Context())
	require.NoError(t, err)
	n := 0
	require.NoError(t, ix.Range(t.Context(), func(c []uint64, e index.Entry) bool {
		frame := make([]byte, e.Size)
		_, err := mem.ReadAt(frame, int64(e.Addr))
		require.NoError(t, err)
		body := frame[:len(frame)-4]
		assert.Equal(t, ds.s.csum.Sum(c, body), e.Sum, "chunk %v: index checksum", c)
		assert.Equal(t, e.Sum, binary.LittleEndian.Uint32(frame[len(body):]), "chunk %v: trailer", c)
		n++
		return true
	}))
	require.Positive(t, n)
}

// TestLateSumWriteFails: a direct write whose bytes or whose trailers
// (the second vector write) fail with EIO returns the error (ErrIO and
// the cause), publishes nothing: the previous contents stay what reads
// see, and after reopening the file checks clean and holds them.
func TestLateSumWriteFails(t *testing.T) {
	ctx := context.Background()
	for _, which := range []struct {
		name string
		nth  int64 // the write's WriteV that fails
	}{{"bytes", 0}, {"trailers", 1}} {
		t.Run(which.name, func(t *testing.T) {
			defer verifyNoLeaks(t)
			mem := vfd.NewMem()
			fd := vfd.NewFault(mem)
			f := tCreate(t, fd, lateOpts(dwRow))
			ds, err := f.CreateDataset(ctx, "d", dwSpec)
			require.NoError(t, err)
			ref := newRef(dwSpec.Shape, 1, nil)
			all := pattern(dwRows*dwRow, 13)
			require.NoError(t, ds.Write(ctx, All(dwSpec.Shape), all))
			ref.write(All(dwSpec.Shape), all)
			require.NoError(t, f.Flush(ctx))
			before := f.Cache().Stats()
			at := fd.Ops()[vfd.OpWriteV] + which.nth
			fd.Add(vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
				if info.Op != vfd.OpWriteV || info.Index != at {
					return vfd.Effect{}
				}
				return vfd.Effect{Err: fmt.Errorf("%w: %w", vfd.ErrInjected, syscall.EIO)}
			}))
			err = ds.Write(ctx, Box([]uint64{2, 0}, []uint64{2, dwRow}), pattern(2*dwRow, 14))
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.EIO), "cause kept: %v", err)
			assert.True(t, errors.Is(err, ErrIO), "ErrIO: %v", err)
			assert.EqualValues(t, 1, fd.Injected())
			assert.Equal(t, at+1, fd.Ops()[vfd.OpWriteV], "no write after the failed one")
			st := f.Cache().Stats().Sub(before)
			assert.Zero(t, st.DirectWrites)
			ref.verify(t, ds)
			// The same write once the disk is repaired.
			require.NoError(t, ds.Write(ctx, Box([]uint64{2, 0}, []uint64{2, dwRow}), pattern(2*dwRow, 15)))
			ref.write(Box([]uint64{2, 0}, []uint64{2, dwRow}), pattern(2*dwRow, 15))
			ref.verify(t, ds)
			checkDenseSums(t, ds, mem)
			require.NoError(t, f.Close(ctx))
			checkReopen(t, mem, "d", ref)
		})
	}
}

// TestDirectWriteLateSumCrashAndFault runs the crash and the fault sweeps
// over directWorkload with every direct write's checksums computed beside
// it: a cut or a failure at the write of the bytes, or at the write of
// the trailers after them, loses nothing acknowledged, and the error
// reaches the caller.
func TestDirectWriteLateSumCrashAndFault(t *testing.T) {
	defer verifyNoLeaks(t)
	// The workload's direct writes are made in two (more vector writes
	// than with the checksums first).
	var st cache.Stats
	late, early := vfd.NewFault(vfd.NewMem()), vfd.NewFault(vfd.NewMem())
	_, err := directWorkloadOpts(&st, dwRow, lateOpts(1))(late, 5, snapshots{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.DirectWrites, int64(4), "direct writes of the workload")
	_, err = directWorkloadOpts(nil, dwRow, lateOpts(-1))(early, 5, snapshots{})
	require.NoError(t, err)
	require.Greater(t, late.Ops()[vfd.OpWriteV], early.Ops()[vfd.OpWriteV], "trailers written apart")
	crashSweep(t, directWorkloadOpts(nil, dwRow, lateOpts(1)), 5)
	faultSweep(t, directWorkloadOpts(nil, dwRow, lateOpts(1)), 6)
}

// TestDirectWriteLateSumConcurrentDifferential is
// TestDirectWriteConcurrentDifferential with every direct write's
// checksums computed beside it, on the one helper many writers share,
// while another goroutine flushes.
func TestDirectWriteLateSumConcurrentDifferential(t *testing.T) {
	directConcurrentDifferential(t, dwRow, lateOpts(1))
}

// tailsOnly counts the vector writes of calls made only of 4-byte
// extents: the trailers written after their chunks' bytes.
func tailsOnly(calls [][]vfd.Extent) int {
	n := 0
	for _, c := range calls {
		only := true
		for _, x := range c {
			only = only && len(x.Buf) == 4
		}
		if only {
			n++
		}
	}
	return n
}

// TestLateSumWriteBack: a chunk completed in memory by quarter-chunk
// writes (cache/completed.go), at or above the threshold, is written back
// with its checksum computed beside the write, its trailer written after
// its bytes; below, in one write. The index's checksums are the bytes',
// the file checks clean and reads back. A failed trailer write keeps the
// chunk dirty (the Write still succeeds: its bytes are in the cache), and
// the next Flush writes it.
func TestLateSumWriteBack(t *testing.T) {
	ctx := context.Background()
	const side, rows, cols = 64, 128, 256 // 4 KiB chunks, 2×4 of them
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{rows, cols}, Chunk: []uint64{side, side}}
	opts := func(late int64) *Options {
		return &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20, DirectWriteBytes: side * side, LateSumBytes: late}}
	}
	for _, above := range []bool{true, false} {
		t.Run(fmt.Sprintf("late=%v", above), func(t *testing.T) {
			// A write-back overlaps from four times LateSumBytes.
			late := int64(side * side / 4)
			if !above {
				late++
			}
			mem := vfd.NewMem()
			rec := &recDriver{Driver: mem}
			f := tCreate(t, rec, opts(late))
			ds, err := f.CreateDataset(ctx, "d", spec)
			require.NoError(t, err)
			rec.record(true)
			want := cwQuarters(t, ctx, ds, rows, cols, side, nil)
			calls := rec.record(false)
			st := f.Cache().Stats()
			require.EqualValues(t, 8, st.ChunksFlushed, "every chunk written back once complete")
			if above {
				assert.Equal(t, 8, tailsOnly(calls), "a trailer write per write-back")
			} else {
				assert.Zero(t, tailsOnly(calls))
				assert.Zero(t, st.LateSums)
			}
			checkDenseSums(t, ds, mem)
			got := make([]byte, rows*cols)
			require.NoError(t, ds.Read(ctx, All(spec.Shape), got))
			assert.Equal(t, want, got)
			require.NoError(t, f.Close(ctx))
			ref := newRef(spec.Shape, 1, nil)
			ref.write(All(spec.Shape), want)
			checkReopen(t, mem, "d", ref)
		})
	}
	t.Run("trailer write fails", func(t *testing.T) {
		defer verifyNoLeaks(t)
		mem := vfd.NewMem()
		fd := vfd.NewFault(mem)
		f := tCreate(t, fd, opts(side*side/4))
		ds, err := f.CreateDataset(ctx, "d", spec)
		require.NoError(t, err)
		// Fail the second WriteV from the fourth box on: the trailers of
		// the first chunk's write-back.
		var at atomic.Int64
		at.Store(-1)
		fd.Add(vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
			if info.Op != vfd.OpWriteV || info.Index != at.Load() {
				return vfd.Effect{}
			}
			return vfd.Effect{Err: fmt.Errorf("%w: %w", vfd.ErrInjected, syscall.EIO)}
		}))
		want := cwQuarters(t, ctx, ds, rows, cols, side, func(box int) {
			if box == 2 { // the next box completes chunk 0
				at.Store(fd.Ops()[vfd.OpWriteV] + 1)
			}
		})
		require.EqualValues(t, 1, fd.Injected())
		st := f.Cache().Stats()
		assert.EqualValues(t, 7, st.ChunksFlushed, "the failed write-back is not counted")
		assert.Positive(t, st.DirtyBytes, "the chunk whose trailer failed stays dirty")
		got := make([]byte, rows*cols)
		require.NoError(t, ds.Read(ctx, All(spec.Shape), got))
		assert.Equal(t, want, got)
		require.NoError(t, f.Flush(ctx))
		checkDenseSums(t, ds, mem)
		require.NoError(t, f.Close(ctx))
		ref := newRef(spec.Shape, 1, nil)
		ref.write(All(spec.Shape), want)
		checkReopen(t, mem, "d", ref)
	})
}

// TestLateSumManyWritersFlushing: many goroutines write whole chunks
// directly, each chunk's checksum computed beside its write by the
// helper they share (or by the writer that finds it busy), while another
// goroutine flushes: every chunk reads back as last written, its index
// checksum is its bytes', and the file reopens and checks clean. Run
// under -race.
func TestLateSumManyWritersFlushing(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const writers, rowsEach, writes = 8, 2, 40
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{writers * rowsEach, dwRow}, Chunk: []uint64{1, dwRow}}
	mem := vfd.NewMem()
	f := tCreate(t, mem, lateOpts(1))
	ds, err := f.CreateDataset(ctx, "d", spec)
	require.NoError(t, err)
	last := make([][]byte, writers*rowsEach)
	stop := make(chan struct{})
	flushed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				flushed <- nil
				return
			default:
			}
			if err := f.Flush(ctx); err != nil {
				flushed <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				r := uint64(w*rowsEach + i%rowsEach)
				n := uint64(1 + i%2) // one chunk, or both of this writer's
				if n == 2 {
					r = uint64(w * rowsEach)
				}
				buf := pattern(int(n)*dwRow, byte(w*writes+i))
				if err := ds.Write(ctx, Box([]uint64{r, 0}, []uint64{n, dwRow}), buf); err != nil {
					errs <- err
					return
				}
				for k := range n {
					last[r+k] = buf[k*dwRow : (k+1)*dwRow]
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-flushed)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := f.Cache().Stats()
	require.EqualValues(t, writers*writes*3/2, st.DirectWrites, "every chunk written directly")
	ref := newRef(spec.Shape, 1, nil)
	for r, b := range last {
		ref.write(Box([]uint64{uint64(r), 0}, []uint64{1, dwRow}), b)
	}
	ref.verify(t, ds)
	require.NoError(t, f.Flush(ctx))
	checkDenseSums(t, ds, mem)
	require.NoError(t, f.Close(ctx))
	checkReopen(t, mem, "d", ref)
}
