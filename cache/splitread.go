package cache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// Split direct reads (for h5perf reads and sequential reads of
// unfiltered chunks). A direct read (direct.go) is one preadv into the
// caller's buffer followed by the checksum of those bytes, both on the
// caller's goroutine: a 1 MiB chunk costs pread(1 MiB) + CRC(1 MiB) on one
// core. When the read is large (Config.SplitReadBytes) and a core is likely
// idle, the file extents are cut by bytes into shares (inside a chunk's
// extent if need be: an extent is only an offset and a buffer), helper
// goroutines read the other shares while the caller reads its own, and the
// caller waits for all of them before it verifies every chunk.
//
// Verification by pieces. Verifying on the caller the bytes a helper read
// costs about three times the checksum of bytes the caller read itself
// (the helper's half sits in the other core's cache and every line
// crosses over), which ate the whole gain of reading
// in parallel. So for layouts whose check is a checksum that combines
// (DirectSummer: CRC32C, format.CombineChecksum), each goroutine sums the
// pieces of chunks it read, on the core that read them, and the caller
// combines the sums of each chunk in byte order and checks the result
// (VerifyDirectSum); other layouts are verified by VerifyDirect as before.
// The read then costs about (pread + CRC)/2 per core.
//
// Wake-up. A parked helper handed a share waits in the run queue of the
// reader's P until another P steals it: 50-100 µs measured with
// GOMAXPROCS 2, most of a 1 MiB read. So a helper that finished a share polls for
// the next one for splitLinger (yielding its P at every poll) before it
// parks: a sequential reader hands out its next share within that time,
// and its helper starts at once (engine BenchmarkSplitRead, 1 MiB chunks:
// 1.1-1.3x one pass without the linger, 1.4x with it, in runs of both
// variants while building it; the one without is not kept, so no
// benchmark prints that pair now).
//
// Gating. Splitting only pays when the helper runs on a core that would
// otherwise idle: a share handed to a busy machine waits for a core and
// makes the read slower (cutting reads into shares verified on the worker
// pool measured 5-10 % slower with busy cores, direct.go). So a read is
// split only when
//   - it is at least SplitReadBytes (each share at least SplitReadBytes/2:
//     below that the wake-up of a helper costs more than the half read
//     saves);
//   - the count of running requests (Cache.begin/end, summed over its
//     stripes; it includes this one) is below GOMAXPROCS, the cores not
//     running a request being the ones a helper may use;
//   - a helper is idle: helpers are a fixed set of goroutines started by
//     the first read that splits, taken by a non-blocking receive from an idle queue, so a burst of
//     large reads never creates goroutines nor waits for a helper (a read
//     that finds none reads everything itself).
//
// The hand-off allocates nothing: a helper's extents slice is reused from
// read to read, and its work and done channels are buffered. A helper's
// I/O error fails the read with that error, as the caller's own would; the
// caller always waits for every share it handed out (the helpers write
// into the caller's buffer), so a context cancelled meanwhile is seen, as
// before, by the request's next step. Coherence is unchanged: the split
// only decides which goroutine issues which part of the same extents.

// defaultSplitReadBytes is Config.SplitReadBytes's default: below it
// the wake-up of a helper (tens of microseconds) costs
// more than the shared read saves (engine BenchmarkSplitRead).
const defaultSplitReadBytes = 512 << 10

// pieceSum is the checksum of one piece of a share: extent ext of the
// share, part of the bytes of the whole chunk ds[x].
type pieceSum struct {
	s   layout.DirectSummer
	ext int32
	x   int32
	sum uint32
}

// maxSplitHelpers caps the helpers of one cache: beyond a few concurrent
// readers, a copy from the page cache is bound by memory bandwidth.
const maxSplitHelpers = 7

// splitState is the split readers' (one per cache).
type splitState struct {
	// min is Config.SplitReadBytes with defaults applied; 0 means off (no
	// helpers run). procs is GOMAXPROCS when the cache was made, n the
	// helpers to run: min(procs-1, maxSplitHelpers), 0 when off. Fixed
	// after New.
	min      int64
	procs, n int
	// sumMin is Config.LateSumBytes with defaults applied (0: off): the
	// helpers also compute the checksums of large direct writes
	// (latesum.go). Fixed after New.
	sumMin int64
	// started is set once the helpers run. They start with the first
	// read that splits (startHelpers), so a cache that never reads large
	// chunks directly runs none.
	started atomic.Bool
	// mu serializes startHelpers, and Close takes it once after setting
	// closed: no helper starts after Close has begun waiting for the
	// background goroutines.
	mu sync.Mutex
	// idle holds the helpers not working for a read; capacity len(helpers).
	// A reader takes helpers by non-blocking receives and puts them back
	// once it has their results. idle and helpers are set before started
	// and never change after.
	idle    chan *splitHelper
	helpers []*splitHelper
	// reads counts reads split, shares the shares helpers read.
	reads, shares atomic.Int64
	// seals counts direct writes whose checksums a helper took (latesum.go).
	seals atomic.Int64
	// The rest of the cache that split reads use, set by start: the
	// counters (vector reads, requests running), the background jobs'
	// lifetime the helpers run in, and the cache's closed flag.
	stats  *counters
	jobs   *background
	closed *atomic.Bool
}

// splitHelper is one helper goroutine and its mailbox. Its fields other
// than the channels belong to the reader that took it from idle, until
// the reader has its result.
type splitHelper struct {
	drv  vfd.Driver
	exts []vfd.Extent
	sums []pieceSum // pieces of exts to sum once read
	// seal, when set, is a direct write's checksums to compute instead
	// of a share to read (latesum.go); such a job is not answered on
	// done, and the helper puts itself back on idle once it is over.
	seal *sealJob
	idle chan *splitHelper
	// work carries a job (capacity 1: the send never blocks); done its
	// result (capacity 1).
	work chan struct{}
	done chan error
	// exited is closed when the goroutine returns (Close): a reader that
	// handed it a job it never took reads that share itself.
	exited chan struct{}
}

// start sets up split reads from cfg (from startBackground); the
// helpers start later (startHelpers).
func (s *splitState) start(cfg Config, st *counters, jobs *background, closed *atomic.Bool) {
	s.stats, s.jobs, s.closed = st, jobs, closed
	s.procs = runtime.GOMAXPROCS(0)
	n := min(s.procs-1, maxSplitHelpers)
	if n <= 0 {
		return
	}
	if cfg.SplitReadBytes > 0 {
		s.min, s.n = cfg.SplitReadBytes, n
	}
	if cfg.LateSumBytes > 0 {
		s.sumMin, s.n = cfg.LateSumBytes, n
	}
}

// startHelpers starts the helpers unless they run or the cache is closed;
// it reports whether they run.
func (s *splitState) startHelpers() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started.Load() {
		return true
	}
	if s.closed.Load() {
		return false
	}
	s.idle = make(chan *splitHelper, s.n)
	for range s.n {
		h := &splitHelper{work: make(chan struct{}, 1), done: make(chan error, 1), exited: make(chan struct{}), idle: s.idle}
		s.helpers = append(s.helpers, h)
		s.idle <- h
		s.jobs.wg.Add(1)
		go h.serve(s.jobs)
	}
	s.started.Store(true)
	return true
}

// serve reads the shares handed to h until Close (jobs ends).
func (h *splitHelper) serve(jobs *background) {
	defer jobs.wg.Done()
	defer close(h.exited)
	for {
		select {
		case <-h.work:
			for h.job() && h.linger() {
			}
		case <-jobs.ctx.Done():
			return
		}
	}
}

// splitLinger is how long a helper that finished a share polls for the
// next one before it parks (see linger).
const splitLinger = 100 * time.Microsecond

// linger polls h.work for splitLinger and reports whether a job came. A
// sequential reader hands out its next share within a chunk's checksum
// time of the last; a parked helper takes tens of microseconds to wake
// (its goroutine waits in the handing P's run queue until another P
// steals it), a polling one none. It yields the P at every poll, so any
// other goroutine that wants the core gets it.
func (h *splitHelper) linger() bool {
	deadline := time.Now().Add(splitLinger)
	for {
		select {
		case <-h.work:
			return true
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
}

// job runs the job handed to h: a direct write's checksums, or a share
// to read, answered on done. It reports whether h should linger for the
// next job: after a share, not after checksums (latesum.go: a writer
// never waits for a helper to wake, and a helper polling with Gosched
// while the writer is in a long pwrite keeps a run queue busy, so the
// runtime hands the writer's P away and the writer, back from the
// system call, queues for one: 10-30 % slower writes of 1-4 MiB chunks
// measured with the linger, engine BenchmarkLateSum).
func (h *splitHelper) job() bool {
	if h.seal != nil {
		h.runSeal()
		return false
	}
	h.done <- h.run()
	return true
}

// run reads h's share and sums its pieces.
func (h *splitHelper) run() error {
	if err := h.drv.ReadV(h.exts); err != nil {
		return err
	}
	for i := range h.sums {
		p := &h.sums[i]
		p.sum = p.s.SumDirect(h.exts[p.ext].Buf)
	}
	return nil
}

// want is how many helpers a read of n bytes should use (0: read
// alone); see Gating above.
func (s *splitState) want(n int64) int {
	if s.min <= 0 || n < s.min {
		return 0
	}
	idle := int64(s.procs) - s.stats.hot.Load(hotActive)
	by := n/max(s.min/2, 1) - 1 // shares of at least min/2
	return int(max(min(idle, by, int64(s.n)), 0))
}

// read is readV for the extents of a direct read (in offset order):
// split among idle helpers when want says so, else one ReadV. tags[i]
// is the index in ds of the whole chunk whose bytes are exts[i], if its
// layout is a DirectSummer, else -1. When the read is split, the chunks so
// tagged are summed by pieces and left with summed set and their sum.
func (s *splitState) read(f *File, exts []vfd.Extent, tags []int32, ds []directRead) error {
	var total int64
	for _, x := range exts {
		total += int64(len(x.Buf))
	}
	want := s.want(total)
	if want == 0 || (!s.started.Load() && !s.startHelpers()) {
		return f.readV(exts)
	}
	var hs [maxSplitHelpers]*splitHelper
	k := 0
take:
	for k < want {
		select {
		case h := <-s.idle:
			hs[k] = h
			k++
		default:
			break take
		}
	}
	if k == 0 {
		return f.readV(exts)
	}
	// Share 0 (the lowest offsets) is the caller's, share i+1 helper i's.
	shares := int64(k + 1)
	for i := range k {
		h := hs[i]
		h.drv = f.drv
		h.exts, h.sums = appendShare(h.exts[:0], h.sums[:0], exts, tags, ds,
			splitPoint(exts, total*int64(i+1)/shares), splitPoint(exts, total*int64(i+2)/shares))
		h.work <- struct{}{}
	}
	// The caller's share: a prefix of exts, its last extent cut for the
	// call and restored after it.
	i, cut := prefixAt(exts, splitPoint(exts, total/shares))
	own := exts[:i]
	var keep vfd.Extent
	if cut > 0 {
		keep = exts[i]
		exts[i].Buf = keep.Buf[:cut]
		own = exts[:i+1]
	}
	s.stats.vectorReads.Add(shares)
	s.stats.vectorReadBytes.Add(total)
	s.reads.Add(1)
	s.shares.Add(int64(k))
	err := f.drv.ReadV(own)
	if err == nil {
		// The first piece of every tagged chunk in this share (share 0
		// holds the start of any chunk it touches).
		for j := range own {
			if t := tags[j]; t >= 0 {
				x := &ds[t]
				x.sum, x.summed = x.summer.SumDirect(own[j].Buf), true
			}
		}
	}
	if cut > 0 {
		exts[i] = keep
	}
	for i := range k {
		h := hs[i]
		herr := h.wait()
		if err == nil {
			err = herr
		}
		if err == nil {
			// Combined in byte order: shares in order, pieces in order.
			for _, p := range h.sums {
				x := &ds[p.x]
				if x.summed {
					x.sum = x.summer.CombineDirect(x.sum, p.sum, int64(len(h.exts[p.ext].Buf)))
				} else {
					x.sum, x.summed = p.sum, true
				}
			}
		}
		clear(h.exts) // drop the caller's buffers
		clear(h.sums)
		h.exts, h.sums, h.drv = h.exts[:0], h.sums[:0], nil
		s.idle <- h
	}
	return err
}

// wait returns the result of the job handed to h; if h's goroutine
// returned (Close) without taking it, wait reads the share itself.
func (h *splitHelper) wait() error {
	select {
	case err := <-h.done:
		return err
	case <-h.exited:
		select {
		case err := <-h.done:
			return err
		default:
			<-h.work // never taken: take it back
			return h.run()
		}
	}
}

// splitAlign is the file-offset granularity of a cut inside an extent: a
// page, so that no page of the file is copied by two goroutines.
const splitAlign = 4096

// splitPoint returns the byte position, in the concatenation of exts, of
// the cut nearest below p that falls on an extent boundary or on a
// splitAlign multiple of the file.
func splitPoint(exts []vfd.Extent, p int64) int64 {
	var at int64
	for _, x := range exts {
		n := int64(len(x.Buf))
		if p < at+n {
			d := p - at
			d -= (x.Off + d) % splitAlign
			return at + max(d, 0)
		}
		at += n
	}
	return at
}

// appendShare appends to dst the extents of exts that cover bytes [lo,
// hi) of their concatenation, the end ones cut, and to sums a pieceSum for
// each of them that comes from a tagged extent (tags, ds: see splitState.read).
func appendShare(dst []vfd.Extent, sums []pieceSum, exts []vfd.Extent, tags []int32, ds []directRead, lo, hi int64) ([]vfd.Extent, []pieceSum) {
	var at int64
	for i, x := range exts {
		n := int64(len(x.Buf))
		a, b := max(lo-at, 0), min(hi-at, n)
		if a < b {
			dst = append(dst, vfd.Extent{Off: x.Off + a, Buf: x.Buf[a:b:b]})
			if t := tags[i]; t >= 0 {
				sums = append(sums, pieceSum{s: ds[t].summer, ext: int32(len(dst) - 1), x: t})
			}
		}
		at += n
		if at >= hi {
			break
		}
	}
	return dst, sums
}

// prefixAt locates byte p of the concatenation of exts: the first p bytes
// are exts[:i] and the first cut bytes of exts[i] (cut 0: none of it).
func prefixAt(exts []vfd.Extent, p int64) (i, cut int) {
	var at int64
	for i := range exts {
		n := int64(len(exts[i].Buf))
		if p < at+n {
			return i, int(p - at)
		}
		at += n
	}
	return len(exts), 0
}
