package cache

import (
	"context"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache/layout"
)

// sealer is a LateFramer whose SealFrame counts its calls and, while
// gate is set, waits for it to close first.
type sealer struct {
	layout.DirectWriter
	calls atomic.Int64
	gate  chan struct{}
	began chan struct{}
}

func (s *sealer) DirectFrameLate(layout.Coord, []byte) (head, tail []byte) {
	return nil, make([]byte, 4)
}

func (s *sealer) SealFrame(_ layout.Coord, src, tail []byte) uint32 {
	if s.gate != nil {
		s.began <- struct{}{}
		<-s.gate
	}
	s.calls.Add(1)
	sum := crc32.ChecksumIEEE(src)
	tail[0], tail[1], tail[2], tail[3] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
	return sum
}

// testSplit starts a splitState of one helper for checksums; stop ends it.
func testSplit(t *testing.T) (s *splitState, stop func()) {
	t.Helper()
	s = &splitState{}
	st := newCounters()
	var closed atomic.Bool
	bg := &background{}
	bg.ctx, bg.cancel = context.WithCancel(context.Background())
	s.start(Config{LateSumBytes: 1}, &st, bg, &closed)
	s.n = 1 // whatever GOMAXPROCS is
	s.sumMin = 1
	require.True(t, s.startHelpers())
	return s, func() { bg.cancel(); bg.wg.Wait() }
}

// TestSealJobTakenBack: a writer whose helper has not begun its
// checksums takes them back and computes them itself; the helper, once it
// gets to the job, leaves it alone (each checksum computed once), and the
// slot never hands the taken-back job out again. A job the helper began is
// waited for.
func TestSealJobTakenBack(t *testing.T) {
	s, stop := testSplit(t)
	defer stop()
	src := []byte("some chunk bytes")
	want := crc32.ChecksumIEEE(src)
	// Keep the helper busy in a first job, gated.
	busy := &sealer{gate: make(chan struct{}), began: make(chan struct{}, 1)}
	var slot0 sealSlot
	j0 := slot0.take()
	j0.seals = append(j0.seals, seal{lf: busy, src: src, tail: make([]byte, 4)})
	slot0.handOut(s, j0)
	require.Nil(t, slot0.job, "a job handed out is not the slot's")
	<-busy.began // the helper runs j0 and holds it
	// No helper is free for a second job: its writer computes it.
	var slot sealSlot
	lf := &sealer{}
	j1 := slot.take()
	j1.seals = append(j1.seals, seal{lf: lf, src: src, tail: make([]byte, 4)})
	slot.handOut(s, j1)
	require.Same(t, j1, slot.job, "no helper took it")
	taken := j1.finish(true)
	assert.True(t, taken)
	assert.Equal(t, want, j1.seals[0].sum)
	slot.release(j1, taken)
	assert.Same(t, j1, slot.job, "a job no helper saw is reused")
	// The busy helper's job is waited for, then the helper is free again.
	go func() { close(busy.gate) }()
	assert.False(t, j0.finish(true))
	assert.Equal(t, want, j0.seals[0].sum)
	slot0.release(j0, false)
	assert.Same(t, j0, slot0.job, "a job its helper finished is the slot's again")
	// Handed out and taken back before the helper began: the helper must
	// not compute it, and the slot must not reuse it.
	gated := &sealer{gate: make(chan struct{}), began: make(chan struct{}, 1)}
	jg := slot.take()
	jg.seals = append(jg.seals, seal{lf: gated, src: src, tail: make([]byte, 4)})
	// A helper slow to wake: handed the job (as handOut does), it has not
	// begun when the writer takes the job back.
	h := <-s.idle
	h.seal = jg
	slot.job = nil
	taken = jg.finish(false)
	require.True(t, taken)
	slot.release(jg, taken)
	assert.Nil(t, jg.seals[0].src, "the caller's bytes are dropped")
	h.work <- struct{}{} // it wakes now
	// The helper, seeing the job taken back, puts itself back on idle
	// without computing anything.
	h = <-s.idle
	s.idle <- h
	assert.Zero(t, gated.calls.Load())
	assert.NotSame(t, jg, slot.take(), "a job taken back from a helper is never reused")
}

// TestSealJobsConcurrent: many writers hand out checksums to the helpers
// and finish them (-race): every checksum is computed exactly once and
// right, whoever computed it.
func TestSealJobsConcurrent(t *testing.T) {
	s, stop := testSplit(t)
	defer stop()
	lf := &sealer{}
	const writers, jobs = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var slot sealSlot
			for i := range jobs {
				src := []byte{byte(w), byte(i), byte(i >> 8), 7}
				j := slot.take()
				j.seals = append(j.seals, seal{lf: lf, src: src, tail: make([]byte, 4)})
				slot.handOut(s, j)
				taken := j.finish(true)
				if got := j.seals[0].sum; got != crc32.ChecksumIEEE(src) {
					t.Errorf("writer %d job %d: sum %08x", w, i, got)
				}
				slot.release(j, taken)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, writers*jobs, lf.calls.Load())
}
