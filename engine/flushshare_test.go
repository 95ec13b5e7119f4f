package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

// holdCommit makes the next commit wait, after its write-back, until the
// returned release is called; entered is closed when it waits.
func holdCommit(t *testing.T) (entered chan struct{}, release func()) {
	entered = make(chan struct{})
	gate := make(chan struct{})
	var once sync.Once
	hook := func() {
		once.Do(func() {
			close(entered)
			<-gate
		})
	}
	testHookWroteBack.Store(&hook)
	t.Cleanup(func() { testHookWroteBack.Store(nil) })
	return entered, func() { close(gate) }
}

// waitAsked waits until n Flush calls of f have taken their number.
func waitAsked(t *testing.T, f *File, n uint64) {
	deadline := time.Now().Add(10 * time.Second)
	for f.flushes.asked.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Flush calls started", f.flushes.asked.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Eight goroutines each write a chunk and Flush while a commit is under
// way: the seven that wait are answered by one commit begun after they
// all called (the file's generation moves by two, not eight), and a
// crash after every Flush returned keeps every write.
func TestConcurrentFlushesShareCommits(t *testing.T) {
	ctx := context.Background()
	crash := vfd.NewCrash()
	f := tCreate(t, crash, nil)
	const n = 8
	ds, err := f.CreateDataset(ctx, "a", DatasetSpec{Type: Uint8, Shape: []uint64{n, 64}, Chunk: []uint64{1, 64}})
	require.NoError(t, err)
	row := func(k int) []byte { return bytes.Repeat([]byte{byte(1 + k)}, 64) }
	gen0 := f.Generation()
	entered, release := holdCommit(t)
	errs := make([]error, n)
	var wg sync.WaitGroup
	flush := func(k int) {
		defer wg.Done()
		if errs[k] = ds.Write(ctx, Box([]uint64{uint64(k), 0}, []uint64{1, 64}), row(k)); errs[k] == nil {
			errs[k] = f.Flush(ctx)
		}
	}
	wg.Add(1)
	go flush(0)
	<-entered
	for k := 1; k < n; k++ {
		wg.Add(1)
		go flush(k)
	}
	waitAsked(t, f, n)
	release()
	wg.Wait()
	for k, err := range errs {
		require.NoError(t, err, "writer %d", k)
	}
	assert.Equal(t, gen0+2, f.Generation(), "commits for eight concurrent Flush calls")

	got := readSyncedA(t, crash, n, 64)
	for k := range n {
		assert.Equal(t, row(k), got[k*64:(k+1)*64], "row %d after a crash", k)
	}
}

// A commit that fails answers only its own caller: a Flush that waited
// behind it commits for itself, and its write is durable.
func TestSharedFlushFailureIsOwn(t *testing.T) {
	ctx := context.Background()
	crash := vfd.NewCrash()
	fd := &failWriteOnce{Driver: crash}
	f := tCreate(t, fd, nil)
	ds, err := f.CreateDataset(ctx, "a", DatasetSpec{Type: Uint8, Shape: []uint64{2, 64}, Chunk: []uint64{1, 64}})
	require.NoError(t, err)
	require.NoError(t, f.Flush(ctx))
	entered, release := holdCommit(t)
	var first, second error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if first = ds.Write(ctx, Box([]uint64{0, 0}, []uint64{1, 64}), bytes.Repeat([]byte{5}, 64)); first == nil {
			first = f.Flush(ctx)
		}
	}()
	<-entered
	go func() {
		defer wg.Done()
		if second = ds.Write(ctx, Box([]uint64{1, 0}, []uint64{1, 64}), bytes.Repeat([]byte{6}, 64)); second == nil {
			second = f.Flush(ctx)
		}
	}()
	waitAsked(t, f, 3)
	fd.armed.Store(true) // the held commit's next write (its catalog or a header) fails
	release()
	wg.Wait()
	assert.ErrorIs(t, first, syscall.EIO, "the failed commit's caller")
	require.NoError(t, second, "the Flush that waited behind the failed commit commits for itself")

	got := readSyncedA(t, crash, 2, 64)
	assert.Equal(t, bytes.Repeat([]byte{6}, 64), got[64:], "the second writer's row after a crash")
}

// failWriteOnce fails the first write after armed is set with EIO.
type failWriteOnce struct {
	vfd.Driver
	armed atomic.Bool
}

func (d *failWriteOnce) WriteAt(p []byte, off int64) (int, error) {
	if d.armed.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("test: %w", syscall.EIO)
	}
	return d.Driver.WriteAt(p, off)
}

func (d *failWriteOnce) WriteV(e []vfd.Extent) error {
	if d.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("test: %w", syscall.EIO)
	}
	return d.Driver.WriteV(e)
}

// Many goroutines write rows and Flush, over and over, while the file is
// closed under them: every Flush returns nil or ErrClosed, and after a
// crash every row version whose Flush returned nil (or a later one) is in
// the file (run under -race).
func TestConcurrentFlushesRaceClose(t *testing.T) {
	ctx := context.Background()
	crash := vfd.NewCrash()
	f := tCreate(t, crash, nil, noCheck("closed under its writers"))
	const writers, rounds = 8, 40
	ds, err := f.CreateDataset(ctx, "a", DatasetSpec{Type: Uint8, Shape: []uint64{writers, 32}, Chunk: []uint64{1, 32}})
	require.NoError(t, err)
	require.NoError(t, f.Flush(ctx))
	durable := make([]int, writers) // last round whose Flush returned nil, -1 none
	var wg sync.WaitGroup
	for w := range writers {
		durable[w] = -1
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				err := ds.Write(ctx, Box([]uint64{uint64(w), 0}, []uint64{1, 32}), bytes.Repeat([]byte{byte(1 + r)}, 32))
				if err == nil {
					err = f.Flush(ctx)
				}
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("writer %d round %d: %v", w, r, err)
					}
					return
				}
				durable[w] = r
			}
		}()
	}
	time.Sleep(2 * time.Millisecond)
	closeErr := f.Close(ctx)
	wg.Wait()
	require.NoError(t, closeErr)
	t.Logf("rounds made durable by each writer before Close: %v", durable)
	got := readSyncedA(t, crash, writers, 32)
	for w := range writers {
		v := int(got[w*32]) - 1 // the round the file holds, -1 none
		assert.GreaterOrEqual(t, v, durable[w], "writer %d: file holds round %d, Flush acknowledged round %d", w, v, durable[w])
		assert.Equal(t, bytes.Repeat([]byte{got[w*32]}, 32), got[w*32:(w+1)*32], "writer %d: a torn row", w)
	}
}

// readSyncedA opens what a crash would leave of crash's file (only its
// synced bytes) read-only and returns the whole of its rows × cols
// uint8 dataset "a".
func readSyncedA(t *testing.T, crash *vfd.Crash, rows, cols int) []byte {
	t.Helper()
	g := tOpen(t, vfd.NewMemFrom(crash.CrashImage(vfd.KeepSynced, 1)), &Options{ReadOnly: true})
	ds, err := g.OpenDataset(t.Context(), "a", nil)
	require.NoError(t, err)
	got := make([]byte, rows*cols)
	require.NoError(t, ds.Read(t.Context(), All([]uint64{uint64(rows), uint64(cols)}), got))
	return got
}
