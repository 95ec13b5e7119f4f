package cache

import (
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
)

// Checksums beside the write. A direct write of a whole chunk
// (directwrite.go) used to compute the chunk's checksum (DirectFrame) and
// then write head, bytes and tail in one vector write, both on the
// caller's goroutine: a 1 MiB chunk cost CRC(1 MiB) + pwrite(1 MiB) on one
// core while, for a writer on one goroutine, the other cores idled. On
// tmpfs the checksum alone was a fifth of that time.
//
// For a layout whose frame can carry its checksum late
// (layout.LateFramer) and chunks of at least Config.LateSumBytes, the
// write is made in two: the caller hands the chunks' checksums to an idle
// split-read helper (splitread.go: a fixed set of goroutines, none when
// GOMAXPROCS is 1), calls Insert and writes every chunk's head and bytes
// in one vector write while the helper sums them, then writes the tails,
// which carry the checksums, in a second vector write, and publishes.
//
// The caller never waits for a helper that has not begun: once its bytes
// are written it takes back a job the helper has not started (a parked
// helper can take tens of microseconds to wake) and sums the chunks
// itself; a job no helper was free for is summed the same way. Either way
// the write is made in the same two steps, so what reaches the file, in
// which order, does not depend on the helpers.
//
// Cost and threshold. The overlap costs the helper's wake-up (a futex
// wake on the writer's side) and the extra write of the tails, some
// 10-20 µs a write on a 2-core virtual machine, against a checksum of
// about 40 µs per MiB, and it pays only where the helper's core is idle:
// the handing out is gated as a split read is (fewer requests running
// than cores), but load from other processes is not seen. engine
// BenchmarkLateSum (64 MiB of whole chunks, NoSync, tmpfs, GOMAXPROCS 2,
// beside/before) measured on a shared machine at load 2.6: 0.69-0.72x at
// 64-128 KiB chunks, 0.81-0.87x at 256-512 KiB, 0.96-1.1x at 1 MiB,
// 1.05-1.09x at 4 MiB; at load 4-5 (no idle core): 0.83-0.90x at 512 KiB,
// 0.91-0.93x at 1 MiB, 0.91-0.98x at 4 MiB. On ext4 (SCC_BENCH_DIR) in a
// moment when a core was free: 1.14-1.15x at 1 MiB, 1.15-1.20x at 4 MiB,
// the checksum's whole share of the write; the same minute with the
// helpers off (the two writes, the checksum summed between them) measured
// 0.96-1.0x, the cost of the shape. On the quiet machine (nothing else
// running): 0.75x at 64 KiB, 0.81-0.90x at 128 KiB, 0.85-0.93x at 256 KiB,
// 1.06-1.08x at 512 KiB, 1.08-1.11x at 1 MiB, 1.05-1.06x at 4 MiB, tmpfs
// and ext4 alike. Hence 1 MiB, the size from which it pays when a core is
// free. A helper polling for the next job after a seal (as after a read
// share) made it worse: see splitHelper.job.

// Write-back (writeback.go) does the same for a large chunk whose image
// borrows its buffer (layout.LateBorrower: an unfiltered dense chunk
// completed in memory by writes in parts, completed.go, or flushed):
// encodeRound leaves its trailer unsealed, and writeImages writes every
// image's bytes, has the helper seal them meanwhile, then writes the
// trailers and, with sync, syncs after them. The chunk's latch stays held
// shared until then, as for any borrowed image, so the bytes summed are
// the bytes written.
//
// A write-back pays for the overlap from a larger chunk, four times
// Config.LateSumBytes (lateWriteBackMin): the quiet machine's BenchmarkLateSum quarter rows
// (each chunk written in four parts, then written back) measured 0.84-0.85x
// at 1 MiB and 1.03-1.06x at 4 MiB, tmpfs and ext4 alike.
//
// What directwrite.go guarantees holds: the new space is Inserted first
// (copy on write) and Published only after both writes returned, with the
// sums set in the Insertions; a failed write of the bytes skips the tails
// and, like a failed write of the tails, publishes as failed and returns
// the error. The caller's bytes are only read (by the caller's write and
// the sum) and no goroutine reads them once writeFramed returns: every
// path, failures included, takes the job back or waits for the helper
// that began it.

// defaultLateSumBytes is Config.LateSumBytes's default.
const defaultLateSumBytes = 1 << 20

// lateWriteBackMin is the smallest image a write-back checksums beside
// its write, given Config.LateSumBytes: four times it (4 MiB by default;
// see above).
func lateWriteBackMin(sumMin int64) int64 { return 4 * sumMin }

// seal is one chunk's checksum to compute: lf.SealFrame(coord, src,
// tail) and its result.
type seal struct {
	lf        layout.LateFramer
	coord     layout.Coord
	src, tail []byte
	sum       uint32
}

// The states of a sealJob.
const (
	sealWaiting int32 = iota // handed out (or not yet), nobody has begun
	sealHelper               // the helper took it: it signals done when over
	sealCaller               // the caller took it back
)

// sealJob is the checksums of one direct write, owned by the write's
// scratch (directScratch) and reused while no helper can still hold it.
type sealJob struct {
	seals []seal
	state atomic.Int32
	done  chan struct{} // capacity 1: the helper finished the seals
}

func newSealJob() *sealJob { return &sealJob{done: make(chan struct{}, 1)} }

// run computes every seal of j.
func (j *sealJob) run() {
	for i := range j.seals {
		x := &j.seals[i]
		x.sum = x.lf.SealFrame(x.coord, x.src, x.tail)
	}
}

// runSeal runs the write's checksums handed to h, unless their writer took
// them back, and puts h back among the idle helpers.
func (h *splitHelper) runSeal() {
	j := h.seal
	h.seal = nil
	if j.state.CompareAndSwap(sealWaiting, sealHelper) {
		j.run()
		j.done <- struct{}{}
	}
	h.idle <- h
}

// handOut gives j to an idle helper, starting the helpers if need be; it
// reports whether one took it (false: as many requests run as there are
// cores, so none is idle to sum beside the write, as for a split read; no
// helper is free; or the cache is closed).
func (s *splitState) handOut(j *sealJob) bool {
	if s.stats.hot.Load(hotActive) >= int64(s.procs) {
		return false
	}
	if !s.started.Load() && !s.startHelpers() {
		return false
	}
	select {
	case h := <-s.idle:
		h.seal = j
		h.work <- struct{}{}
		s.seals.Add(1)
		return true
	default:
		return false
	}
}

// finish returns once nobody computes j's sums any more: a job no helper
// has begun is taken back, and its sums computed here when compute is
// set; one a helper began is waited for (its sums are then computed,
// whatever compute). It reports whether j was taken back.
func (j *sealJob) finish(compute bool) (takenBack bool) {
	if j.state.CompareAndSwap(sealWaiting, sealCaller) {
		if compute {
			j.run()
		}
		return true
	}
	<-j.done
	return false
}

// sealSlot is a scratch's sealJob, reused from write to write while no
// helper can still hold it.
type sealSlot struct{ job *sealJob }

// take returns the slot's job, emptied (a new one if the last may still
// be held).
func (s *sealSlot) take() *sealJob {
	j := s.job
	if j == nil {
		j = newSealJob()
		s.job = j
	}
	j.state.Store(sealWaiting)
	j.seals = j.seals[:0]
	return j
}

// handOut gives j, taken from s, to one of sp's helpers if one is free.
func (s *sealSlot) handOut(sp *splitState, j *sealJob) {
	if sp != nil && sp.handOut(j) {
		// The helper holds j until it is done with it or sees it taken
		// back: release gives it back to s in the first case only.
		s.job = nil
	}
}

// release is done with j, finished (takenBack: sealJob.finish's result):
// a job its helper finished is s's again; one taken back from a helper
// that may still look at its state (never at its seals) drops the
// caller's bytes now. Every seal's sum must have been read before.
func (s *sealSlot) release(j *sealJob, takenBack bool) {
	switch {
	case !takenBack:
		s.job = j
	case s.job != j:
		clear(j.seals)
	}
}

// reset drops the caller's bytes from the slot's job (its scratch is
// pooled).
func (s *sealSlot) reset() {
	if s.job != nil {
		clear(s.job.seals[:cap(s.job.seals)])
		s.job.seals = s.job.seals[:0]
	}
}
