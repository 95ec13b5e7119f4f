package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memoSpec is the sharded dataset of the write-back memo's tests: 2x2
// chunks of 4x4 inner chunks of 16x16 elements.
var memoSpec = DatasetSpec{Type: Uint16, Shape: []uint64{128, 128}, MaxShape: []uint64{Unlimited, 128},
	Chunk: []uint64{64, 64}, InnerChunk: []uint64{16, 16}, Filters: []Filter{Shuffle(), Zstd(1)}}

// memoFile creates memoSpec's dataset on drv, written whole (no byte is
// zero, so no inner chunk is all fill) and flushed, and its model.
func memoFile(t *testing.T, drv vfd.Driver, opts *Options) (*File, *Dataset, *refArray) {
	ctx := context.Background()
	f := tCreate(t, drv, opts)
	ds, err := f.CreateDataset(ctx, "d", memoSpec)
	require.NoError(t, err)
	ref := newRef(memoSpec.Shape, 2, nil)
	b := nonzero(rand.New(rand.NewPCG(7, 7)), len(ref.data))
	require.NoError(t, ds.Write(ctx, All(memoSpec.Shape), b))
	ref.write(All(memoSpec.Shape), b)
	require.NoError(t, f.Flush(ctx))
	return f, ds, ref
}

// nonzero returns n random bytes none of which is zero (the fill value's).
func nonzero(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + rng.IntN(255))
	}
	return b
}

// memoWrite writes a random box of up to 20x20 elements of ds and the
// model, and adds the inner chunks it touches (their coordinates in the
// dataset's grid of inner chunks) to touched.
func memoWrite(t *testing.T, rng *rand.Rand, ds *Dataset, ref *refArray, touched map[[2]uint64]bool) {
	start := []uint64{rng.Uint64N(ref.dims[0]), rng.Uint64N(ref.dims[1])}
	count := []uint64{1 + rng.Uint64N(min(20, ref.dims[0]-start[0])), 1 + rng.Uint64N(min(20, ref.dims[1]-start[1]))}
	b := nonzero(rng, int(count[0]*count[1]*2))
	require.NoError(t, ds.Write(context.Background(), Box(start, count), b))
	ref.write(Box(start, count), b)
	for r := start[0] / 16; r <= (start[0]+count[0]-1)/16; r++ {
		for c := start[1] / 16; c <= (start[1]+count[1]-1)/16; c++ {
			touched[[2]uint64{r, c}] = true
		}
	}
}

// TestShardRepeatedFlushEncodesTouched: a sharded chunk that stays
// resident through cycles of small writes and flushes encodes at each
// flush only the inner chunks written since the previous one (its memo
// follows the version each write-back commits), and the values equal the
// model's after every cycle, after an eviction, a shrink that trims the
// resident chunks, and a reopen.
func TestShardRepeatedFlushEncodesTouched(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	// Nothing is encoded ahead of the flush: every encode is counted.
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20, PreEncodeBytes: -1}}
	f, ds, ref := memoFile(t, mem, opts)
	sh := shardOf(t, ds)
	rng := rand.New(rand.NewPCG(1, 2))
	for cycle := range 16 {
		touched := map[[2]uint64]bool{}
		for range 1 + rng.IntN(3) {
			memoWrite(t, rng, ds, ref, touched)
		}
		before := sh.codec.Encoded.Load()
		require.NoError(t, f.Flush(ctx))
		assert.Equal(t, int64(len(touched)), sh.codec.Encoded.Load()-before, "cycle %d: inner chunks encoded (touched %v)", cycle, touched)
		ref.verify(t, ds)
		switch cycle {
		case 5:
			// From the file: the next cycle's chunks are decoded again.
			require.NoError(t, ds.Evict(ctx))
			ref.verify(t, ds)
		case 10:
			// A shrink trims the resident chunks of the last row (every
			// inner chunk may change: encoded whole once), a grow brings
			// the rows back as the fill value.
			require.NoError(t, ds.SetExtent(ctx, []uint64{100, 128}))
			ref.resize([]uint64{100, 128})
			require.NoError(t, ds.SetExtent(ctx, []uint64{128, 128}))
			ref.resize([]uint64{128, 128})
			require.NoError(t, f.Flush(ctx))
			ref.verify(t, ds)
		}
	}
	require.NoError(t, f.Close(ctx))
	_, err := Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	f = tOpen(t, mem, opts)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	ref.verify(t, ds)
}

// TestShardWriteDuringWriteBack: a write that lands between a write-back's
// encode and its commit (here, while the image is being written) is marked
// for the next write-back, which encodes only the inner chunks it touched
// and stores its values.
func TestShardWriteDuringWriteBack(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	var during atomic.Pointer[func()]
	fd := vfd.NewFault(mem, vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		if info.Op == vfd.OpWriteV {
			if fn := during.Swap(nil); fn != nil {
				(*fn)()
			}
		}
		return vfd.Effect{}
	}))
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20, PreEncodeBytes: -1}}
	f, ds, ref := memoFile(t, fd, opts)
	sh := shardOf(t, ds)
	rng := rand.New(rand.NewPCG(3, 4))
	for cycle := range 6 {
		touched, late := map[[2]uint64]bool{}, map[[2]uint64]bool{}
		for range 2 {
			memoWrite(t, rng, ds, ref, touched)
		}
		// The write-back's vector write runs after its encodes: a write
		// from another goroutine, waited for there, lands in between.
		fn := func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				memoWrite(t, rng, ds, ref, late)
			}()
			<-done
		}
		during.Store(&fn)
		before := sh.codec.Encoded.Load()
		require.NoError(t, f.Flush(ctx))
		require.Nil(t, during.Load(), "cycle %d: the flush wrote no vector", cycle)
		assert.Equal(t, int64(len(touched)), sh.codec.Encoded.Load()-before, "cycle %d: inner chunks encoded by the flush", cycle)
		before = sh.codec.Encoded.Load()
		require.NoError(t, f.Flush(ctx))
		assert.Equal(t, int64(len(late)), sh.codec.Encoded.Load()-before, "cycle %d: inner chunks written during the write-back, encoded by the next", cycle)
		ref.verify(t, ds)
	}
	require.NoError(t, f.Close(ctx))
	_, err := Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	f = tOpen(t, mem, opts)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	ref.verify(t, ds)
}

// TestShardFailedWriteBackReencodes: a write-back whose vector write
// fails (EIO) leaves the chunk dirty and its memo on the version stored
// before: the next write-back encodes the union of the inner chunks
// written before the failure and since, and nothing written is lost,
// then or after a reopen.
func TestShardFailedWriteBackReencodes(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	var arm atomic.Bool
	fd := vfd.NewFault(mem, vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		if info.Op != vfd.OpWriteV || !arm.CompareAndSwap(true, false) {
			return vfd.Effect{}
		}
		return vfd.Effect{Err: fmt.Errorf("%w: %w", vfd.ErrInjected, syscall.EIO)}
	}))
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20, PreEncodeBytes: -1}}
	f, ds, ref := memoFile(t, fd, opts)
	sh := shardOf(t, ds)
	rng := rand.New(rand.NewPCG(5, 6))
	for cycle := range 6 {
		touched := map[[2]uint64]bool{}
		for range 2 {
			memoWrite(t, rng, ds, ref, touched)
		}
		arm.Store(true)
		err := f.Flush(ctx)
		require.ErrorIs(t, err, syscall.EIO, "cycle %d: flush with a failing write-back", cycle)
		require.ErrorIs(t, err, ErrIO)
		ref.verify(t, ds)
		for range 2 {
			memoWrite(t, rng, ds, ref, touched)
		}
		before := sh.codec.Encoded.Load()
		require.NoError(t, f.Flush(ctx))
		assert.Equal(t, int64(len(touched)), sh.codec.Encoded.Load()-before, "cycle %d: inner chunks encoded after the failure", cycle)
		ref.verify(t, ds)
		require.NoError(t, ds.Evict(ctx))
		ref.verify(t, ds)
	}
	require.NoError(t, f.Close(ctx))
	_, err := Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	f = tOpen(t, mem, opts)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	ref.verify(t, ds)
}

// TestShardWritersRaceFlush: writers of different inner chunks of the
// same sharded chunks race flushes (and the pre-encoder, whose kept
// images a later write supersedes); afterwards the values equal every
// writer's last writes, resident, from the file and reopened.
func TestShardWritersRaceFlush(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20}}
	f, ds, ref := memoFile(t, mem, opts)
	const writers = 8
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	// Writer w owns the inner chunks (r, c) of the 8x8 grid with
	// (r*8+c)%writers == w: every chunk has inner chunks of every writer.
	var wg sync.WaitGroup
	var stop atomic.Bool
	models := make([]*refArray, writers)
	for w := range writers {
		models[w] = ref.clone()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for range rounds {
				k := w + writers*rng.IntN(64/writers)
				r, c := uint64(k/8), uint64(k%8)
				start := []uint64{r*16 + rng.Uint64N(16), c*16 + rng.Uint64N(16)}
				count := []uint64{1 + rng.Uint64N(r*16+16-start[0]), 1 + rng.Uint64N(c*16+16-start[1])}
				b := nonzero(rng, int(count[0]*count[1]*2))
				if err := ds.Write(ctx, Box(start, count), b); err != nil {
					t.Error(err)
					return
				}
				models[w].write(Box(start, count), b)
			}
		}()
	}
	flushed := make(chan error)
	go func() {
		var err error
		for !stop.Load() && err == nil {
			err = f.Flush(ctx)
		}
		flushed <- err
	}()
	wg.Wait()
	stop.Store(true)
	require.NoError(t, <-flushed)
	// Every element's value is its owner's model's.
	for w, m := range models {
		for k := w; k < 64; k += writers {
			box := Box([]uint64{uint64(k/8) * 16, uint64(k%8) * 16}, []uint64{16, 16})
			ref.write(box, m.read(box))
		}
	}
	ref.verify(t, ds)
	require.NoError(t, f.Flush(ctx))
	require.NoError(t, ds.Evict(ctx))
	ref.verify(t, ds)
	require.NoError(t, f.Close(ctx))
	_, err := Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	f = tOpen(t, mem, opts)
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	ref.verify(t, ds)
}

// shardMemoCrashWorkload is shardCrashWorkload with chunks that stay
// resident: several write-backs of each chunk, each re-encoding the
// inner chunks written since the one before and copying the others from
// the version it committed, a shrink that trims them and a close.
var shardMemoCrashWorkload = defineWorkload(11, &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 10}}, func(w *wlRun) error {
	specs := map[string]DatasetSpec{
		"s": {Type: Uint16, Shape: []uint64{12, 16}, MaxShape: []uint64{Unlimited, 16}, Chunk: []uint64{4, 16}, InnerChunk: []uint64{2, 4}, Filters: []Filter{Shuffle(), Zstd(1)}},
	}
	write := func() error { return w.writeRandom(3) }
	return steps(
		func() error { return w.create(specs, "s") },
		write, w.flush,
		write, w.flush,
		write, w.flush,
		func() error { return w.setExtent("s", []uint64{7, 16}) },
		write, w.flush,
		write,
	)
})

// TestShardMemoCrashAtEveryWrite is TestCrashAtEveryWrite over
// shardMemoCrashWorkload.
func TestShardMemoCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, shardMemoCrashWorkload, 1)
}

// TestShardMemoFaultAtEveryOperation is TestFaultAtEveryOperation over
// shardMemoCrashWorkload.
func TestShardMemoFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	faultSweep(t, shardMemoCrashWorkload, 2)
}

// TestShardMemoMoveDeleteImage: a moved dataset's resident chunks keep
// following their write-backs; a dataset deleted and created again under
// its name starts from its own chunks (nothing of the deleted one's
// memos); a file reopened from its cache image, whose chunks load from
// the image's copies, encodes only what is written since. Each flush
// encodes the inner chunks written before it, and the values are the
// model's, resident and reopened.
func TestShardMemoMoveDeleteImage(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20, PreEncodeBytes: -1}, Image: ImageOptions{Generate: true}}
	f, ds, ref := memoFile(t, mem, opts)
	rng := rand.New(rand.NewPCG(8, 9))
	cycle := func(label string, ds *Dataset, ref *refArray) {
		t.Helper()
		sh := shardOf(t, ds)
		for k := range 3 {
			touched := map[[2]uint64]bool{}
			memoWrite(t, rng, ds, ref, touched)
			before := sh.codec.Encoded.Load()
			require.NoError(t, f.Flush(ctx))
			assert.Equal(t, int64(len(touched)), sh.codec.Encoded.Load()-before, "%s, flush %d: inner chunks encoded", label, k)
			ref.verify(t, ds)
		}
	}
	cycle("written", ds, ref)
	require.NoError(t, f.Move(ctx, "d", "e"))
	ds, err := f.OpenDataset(ctx, "e", nil)
	require.NoError(t, err)
	cycle("moved", ds, ref)
	require.NoError(t, ds.Close(ctx))
	require.NoError(t, f.Delete(ctx, "e", nil))
	ds, err = f.CreateDataset(ctx, "e", memoSpec)
	require.NoError(t, err)
	ref = newRef(memoSpec.Shape, 2, nil)
	b := nonzero(rng, len(ref.data))
	require.NoError(t, ds.Write(ctx, All(memoSpec.Shape), b))
	ref.write(All(memoSpec.Shape), b)
	require.NoError(t, f.Flush(ctx))
	cycle("created again", ds, ref)
	require.NoError(t, f.Close(ctx))
	f = tOpen(t, mem, opts)
	require.True(t, f.ImageInfo().Used, "the reopen uses the cache image")
	ds, err = f.OpenDataset(ctx, "e", nil)
	require.NoError(t, err)
	ref.verify(t, ds)
	cycle("reopened from the image", ds, ref)
	require.NoError(t, f.Close(ctx))
	_, err = Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
	f = tOpen(t, mem, &Options{})
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "e", nil)
	require.NoError(t, err)
	ref.verify(t, ds)
}

// TestShardFailedPublishDropsBases: a Publish of the dataset that fails
// after its images were written (here, an insertion the index refuses)
// may have named images the cache does not report, so every chunk's next
// write-back encodes whole; the ones after it copy again.
func TestShardFailedPublishDropsBases(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 64 << 20, PreEncodeBytes: -1}}
	f, ds, ref := memoFile(t, mem, opts)
	sh := shardOf(t, ds)
	l, ok := asLayout[*shardLayout](ds.s)
	require.True(t, ok)
	rng := rand.New(rand.NewPCG(10, 11))
	// fresh holds the chunks written back since the failure.
	fresh := map[[2]uint64]bool{}
	cycle := func(label string) {
		t.Helper()
		touched := map[[2]uint64]bool{}
		memoWrite(t, rng, ds, ref, touched)
		want, whole := int64(0), map[[2]uint64]bool{}
		for k := range touched {
			if c := [2]uint64{k[0] / 4, k[1] / 4}; fresh[c] {
				want++
			} else if !whole[c] {
				whole[c] = true
				want += 16
			}
		}
		before := sh.codec.Encoded.Load()
		require.NoError(t, f.Flush(ctx))
		assert.Equal(t, want, sh.codec.Encoded.Load()-before, "%s: inner chunks encoded", label)
		ref.verify(t, ds)
		for c := range whole {
			fresh[c] = true
		}
	}
	for c := range 4 {
		fresh[[2]uint64{uint64(c / 2), uint64(c % 2)}] = true
	}
	cycle("before")
	ins := []layout.Insertion{{Coord: layout.Coord{99, 99}, Size: 64}}
	require.NoError(t, l.Insert(ctx, ins))
	require.Error(t, l.Publish(ctx, ins, nil), "an insertion outside the index")
	clear(fresh)
	for k := range 12 {
		cycle(fmt.Sprintf("after the failed publish, flush %d", k))
	}
	require.NoError(t, f.Close(ctx))
	_, err := Check(ctx, "", &Options{Driver: mem})
	require.NoError(t, err)
}
