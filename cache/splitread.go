package cache

import (
	"runtime"
	"sync/atomic"

	"github.com/scc-dev/scc/vfd"
)

// Split direct reads (issue 10: h5perf reads, sequential reads of
// unfiltered chunks). A direct read (direct.go) is one preadv into the
// caller's buffer followed by the checksum of those bytes, both on the
// caller's goroutine: a 1 MiB chunk costs pread(1 MiB) + CRC(1 MiB) on one
// core. When the read is large (Config.SplitReadBytes) and a core is likely
// idle, the file extents are cut by bytes into shares (inside a chunk's
// extent if need be: an extent is only an offset and a buffer), helper
// goroutines read the other shares while the caller reads its own, and the
// caller waits for all of them before it verifies every chunk as before.
// The read then costs about pread/2 + CRC on two cores.
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
//     New, taken by a non-blocking receive from an idle queue, so a burst of
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

// defaultSplitReadBytes is Config.SplitReadBytes's default.
const defaultSplitReadBytes = 256 << 10

// maxSplitHelpers caps the helpers of one cache: beyond a few concurrent
// readers, a copy from the page cache is bound by memory bandwidth.
const maxSplitHelpers = 7

// splitState is the split readers' (one per cache; fixed after New).
type splitState struct {
	// min is Config.SplitReadBytes with defaults applied; 0 means off (no
	// helpers run).
	min int64
	// procs is GOMAXPROCS when the cache was made.
	procs int
	// idle holds the helpers not working for a read; capacity len(helpers).
	// A reader takes helpers by non-blocking receives and puts them back
	// once it has their results.
	idle    chan *splitHelper
	helpers []*splitHelper
	// reads counts reads split, shares the shares helpers read.
	reads, shares atomic.Int64
}

// splitHelper is one helper goroutine and its mailbox. Its fields other
// than the channels belong to the reader that took it from idle, until
// the reader has its result.
type splitHelper struct {
	drv  vfd.Driver
	exts []vfd.Extent
	// work carries a job (capacity 1: the send never blocks); done its
	// result (capacity 1).
	work chan struct{}
	done chan error
	// exited is closed when the goroutine returns (Close): a reader that
	// handed it a job it never took reads that share itself.
	exited chan struct{}
}

// startSplit starts the split helpers (from startBackground).
func (c *Cache) startSplit(cfg Config) {
	c.split.procs = runtime.GOMAXPROCS(0)
	n := min(c.split.procs-1, maxSplitHelpers)
	if cfg.SplitReadBytes <= 0 || n <= 0 {
		return
	}
	c.split.min = cfg.SplitReadBytes
	c.split.idle = make(chan *splitHelper, n)
	for range n {
		h := &splitHelper{work: make(chan struct{}, 1), done: make(chan error, 1), exited: make(chan struct{})}
		c.split.helpers = append(c.split.helpers, h)
		c.split.idle <- h
		c.bg.wg.Add(1)
		go c.splitHelper(h)
	}
}

// splitHelper reads the shares handed to h until Close.
func (c *Cache) splitHelper(h *splitHelper) {
	defer c.bg.wg.Done()
	defer close(h.exited)
	for {
		select {
		case <-h.work:
			h.done <- h.drv.ReadV(h.exts)
		case <-c.bg.ctx.Done():
			return
		}
	}
}

// splitWant is how many helpers a read of n bytes should use (0: read
// alone); see Gating above.
func (c *Cache) splitWant(n int64) int {
	s := &c.split
	if s.min <= 0 || n < s.min {
		return 0
	}
	idle := int64(s.procs) - c.st.hot.Load(hotActive)
	by := n/max(s.min/2, 1) - 1 // shares of at least min/2
	return int(max(min(idle, by, int64(len(s.helpers))), 0))
}

// readSplit is readV for the extents of a direct read (in offset order):
// split among idle helpers when splitWant says so, else one ReadV.
func (c *Cache) readSplit(f *File, exts []vfd.Extent) error {
	var total int64
	for _, x := range exts {
		total += int64(len(x.Buf))
	}
	want := c.splitWant(total)
	if want == 0 {
		return c.readV(f, exts)
	}
	var hs [maxSplitHelpers]*splitHelper
	k := 0
take:
	for k < want {
		select {
		case h := <-c.split.idle:
			hs[k] = h
			k++
		default:
			break take
		}
	}
	if k == 0 {
		return c.readV(f, exts)
	}
	// Share 0 (the lowest offsets) is the caller's, share i+1 helper i's.
	shares := int64(k + 1)
	for i := range k {
		h := hs[i]
		h.drv = f.drv
		h.exts = appendRange(h.exts[:0], exts, splitPoint(exts, total*int64(i+1)/shares), splitPoint(exts, total*int64(i+2)/shares))
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
	c.st.vectorReads.Add(shares)
	c.st.vectorReadBytes.Add(total)
	c.split.reads.Add(1)
	c.split.shares.Add(int64(k))
	err := f.drv.ReadV(own)
	if cut > 0 {
		exts[i] = keep
	}
	for i := range k {
		h := hs[i]
		herr := h.wait()
		if err == nil {
			err = herr
		}
		clear(h.exts) // drop the caller's buffers
		h.exts, h.drv = h.exts[:0], nil
		c.split.idle <- h
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
			return h.drv.ReadV(h.exts)
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

// appendRange appends to dst the extents of exts that cover bytes [lo, hi)
// of their concatenation, the end ones cut.
func appendRange(dst, exts []vfd.Extent, lo, hi int64) []vfd.Extent {
	var at int64
	for _, x := range exts {
		n := int64(len(x.Buf))
		a, b := max(lo-at, 0), min(hi-at, n)
		if a < b {
			dst = append(dst, vfd.Extent{Off: x.Off + a, Buf: x.Buf[a:b:b]})
		}
		at += n
		if at >= hi {
			break
		}
	}
	return dst
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
