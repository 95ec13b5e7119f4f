package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// takeScratchSlots takes every free P slot (as getScratch would) and
// returns a function that gives them back.
func takeScratchSlots(t *testing.T) (release func()) {
	t.Helper()
	var taken []*scratchSlot
	for i := range ioSlots {
		s := &ioSlots[i]
		if s.busy.CompareAndSwap(0, 1) {
			taken = append(taken, s)
		}
	}
	return func() {
		for _, s := range taken {
			s.busy.Store(0)
		}
	}
}

// TestScratchFromItsP: a call's scratch is its P's while that one is
// free, and the pool's when it is taken; put gives each back where it
// came from, so no P's scratch stays taken after a read or a write.
func TestScratchFromItsP(t *testing.T) {
	sc := getScratch()
	require.NotNil(t, sc)
	home := sc.home
	// A P's scratch is not handed out twice: with every slot taken, the
	// scratch comes from the pool.
	release := takeScratchSlots(t)
	other := getScratch()
	assert.Nil(t, other.home, "a scratch from the pool while every P's is taken")
	other.put()
	release()
	sc.put()
	if home != nil {
		assert.Zero(t, home.busy.Load(), "put gives the P's scratch back")
	}

	fx := newResidentReadFixture(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, rrBox*rrBox)
			for i := 0; i < 2000; i++ {
				if err := fx.ds.Read(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf); err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					if err := fx.ds.Write(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range ioSlots {
		assert.Zero(t, ioSlots[i].busy.Load(), "P %d's scratch still taken", i)
	}
}

// TestScratchForgetsClosedFile: after File.Close no P's scratch keeps the
// closed file's cache dataset (its single-chunk plan) or chunk (its memo)
// reachable, whether the scratch was free at the Close or in use.
func TestScratchForgetsClosedFile(t *testing.T) {
	fx := newResidentReadFixture(t)
	ctx := context.Background()
	buf := make([]byte, rrBox*rrBox)
	require.NoError(t, fx.ds.Read(ctx, fx.sel, buf))
	cds := fx.ds.s.hot.Load()
	require.NotNil(t, cds)
	// kept reports whether a free P's scratch keeps cds in its plan or
	// anything in its memo, taking each as getScratch does.
	kept := func() (plan, memo bool) {
		for i := range ioSlots {
			s := &ioSlots[i]
			if !s.busy.CompareAndSwap(0, 1) {
				continue
			}
			if s.sc != nil {
				plan = plan || s.sc.plan.cds == cds || s.sc.one[0].Dataset == cds
				memo = memo || s.sc.memo != cache.Memo{}
			}
			s.busy.Store(0)
		}
		return plan, memo
	}
	plan, memo := kept()
	require.True(t, plan && memo, "the read's plan and memo are kept in its P's scratch")
	// One scratch in use across the Close: it forgets when given back.
	inUse := getScratch()
	if inUse.home != nil {
		inUse.plan.cds = cds
	}
	require.NoError(t, fx.f.Close(ctx))
	inUse.put()
	plan, memo = kept()
	assert.False(t, plan, "a P's scratch keeps the closed file's cache dataset")
	assert.False(t, memo, "a P's scratch keeps a chunk of the closed file")
}

// TestShortRowsBounds: the short-row copy checks the whole walk before
// it copies: a walk whose last row ends past the chunk or the buffer
// copies nothing and says so, one that fits copies every row.
func TestShortRowsBounds(t *testing.T) {
	chunk := make([]byte, 64)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for _, n := range []uint64{4, 8, 16} {
		rc := rowCopy{c0: 2, run: n, outer: 1}
		rc.count[0], rc.cstep[0] = 3, 20
		dst := make([]byte, 3*n)
		fits := 2+2*20+n <= uint64(len(chunk))
		require.Equal(t, fits, rc.shortRows(dst, chunk), "run %d", n)
		if fits {
			for r := uint64(0); r < 3; r++ {
				assert.Equal(t, chunk[2+r*20:2+r*20+n], dst[r*n:(r+1)*n], "run %d row %d", n, r)
			}
		}
		assert.False(t, rc.shortRows(dst[:3*n-1], chunk), "run %d: buffer one byte short", n)
		assert.False(t, rc.shortRows(dst, chunk[:2+2*20+n-1]), "run %d: chunk one byte short", n)
		huge := rc
		huge.cstep[0] = 1 << 63 // the walk's span overflows
		assert.False(t, huge.shortRows(dst, chunk), "run %d: overflowing step", n)
	}
}

// TestKeptRequestTakesEachBuffer: reads of one box repeated into
// different buffers (the request kept from one read to the next, but for
// its buffer) fill each buffer, and no P's scratch keeps a caller's
// buffer after the call.
func TestKeptRequestTakesEachBuffer(t *testing.T) {
	fx := newResidentReadFixture(t)
	ctx := context.Background()
	want := make([]byte, rrBox*rrBox)
	copyBox(want, fx.chunk)
	for i := 0; i < 50; i++ {
		buf := make([]byte, rrBox*rrBox)
		require.NoError(t, fx.ds.Read(ctx, Box([]uint64{rrAt, rrAt}, []uint64{rrBox, rrBox}), buf))
		require.Equal(t, want, buf, "read %d", i)
		for p := range ioSlots {
			s := &ioSlots[p]
			if !s.busy.CompareAndSwap(0, 1) {
				continue
			}
			if s.sc != nil {
				assert.Nil(t, s.sc.onePiece.buf, "P %d's scratch keeps the caller's buffer", p)
			}
			s.busy.Store(0)
		}
	}
}

// TestKeptRequestNotReusedAfterOtherPath: a scratch whose request was
// kept by a single-chunk read (the hit served it) and then used by a call
// that took another path writing its request (the general path's one
// chunk, of another dataset) does not serve the next single-chunk read of
// the first plan from that other request: the read gets its own
// dataset's bytes.
func TestKeptRequestNotReusedAfterOtherPath(t *testing.T) {
	fx := newResidentReadFixture(t)
	ctx := context.Background()
	other, err := fx.f.CreateDataset(ctx, "other", DatasetSpec{Type: Uint8, Shape: []uint64{rrChunk, rrChunk}, Chunk: []uint64{rrChunk, rrChunk}})
	require.NoError(t, err)
	ones := make([]byte, rrChunk*rrChunk)
	for i := range ones {
		ones[i] = 0xEE
	}
	require.NoError(t, other.Write(ctx, All([]uint64{rrChunk, rrChunk}), ones))
	require.NoError(t, other.Read(ctx, Box([]uint64{0, 0}, []uint64{1, 1}), make([]byte, 1)))

	want := make([]byte, rrBox*rrBox)
	copyBox(want, fx.chunk)
	sc := &ioScratch{home: &scratchSlot{epoch: scratchEpoch.Load()}} // a P's scratch, given back to a slot of its own
	use := func(f func()) {
		sc.home.busy.Store(1)
		f()
		sc.put()
	}
	readOne := func() []byte {
		buf := make([]byte, rrBox*rrBox)
		use(func() {
			var p prepared
			done, err := fx.ds.s.readOne(ctx, &fx.sel, buf, sc, &p)
			require.NoError(t, err)
			require.True(t, done, "the single-chunk read of a resident chunk is served by the hit")
		})
		return buf
	}
	require.Equal(t, want, readOne())
	require.True(t, sc.planReq, "the hit's request is kept")
	// The general path's single-chunk request of the other dataset, in
	// the same scratch.
	use(func() {
		reqs, err := other.s.prepare(Box([]uint64{0, 0}, []uint64{2, 2}), make([]byte, 4), sc)
		require.NoError(t, err)
		require.Len(t, reqs, 1)
	})
	assert.False(t, sc.planReq, "a request the general path wrote is not kept")
	assert.Equal(t, want, readOne(), "the single-chunk read reads its own dataset")
}
