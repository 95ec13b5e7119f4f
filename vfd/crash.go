package vfd

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// CrashMode selects what a simulated crash keeps of the writes that were not
// yet synced.
type CrashMode uint8

const (
	// KeepSynced keeps exactly the file as of the last successful Sync: a
	// power cut that lost every unsynced write.
	KeepSynced CrashMode = iota
	// RandomUnsynced keeps the synced file plus a seeded random part of the
	// unsynced operations, replayed in the order they completed: each write
	// is applied fully, not at all, or torn (a random subset of its 512-byte
	// sectors, by file offset); each truncate is applied or not.
	RandomUnsynced
	// KeepAll keeps every completed write: a process crash where the
	// operating system survives and flushes its page cache.
	KeepAll
)

func (m CrashMode) String() string {
	switch m {
	case KeepSynced:
		return "keep-synced"
	case RandomUnsynced:
		return "random-unsynced"
	case KeepAll:
		return "keep-all"
	}
	return fmt.Sprintf("crash-mode(%d)", uint8(m))
}

// Crash is an in-memory Driver that remembers which writes a Sync made
// durable, so a test can ask what a power cut at this instant would leave
// (CrashImage) and reopen on it (CrashClone). Like pebble's crash-cloned
// memory file systems, but for one file. Safe for concurrent use; the image
// functions may be called at any time, also after Close.
//
// Reads are served from the current contents (what the page cache would
// show). Memory: the current file, the synced file, and a copy of every
// write since the last Sync.
type Crash struct {
	closed atomic.Bool

	mu struct {
		sync.RWMutex
		// cur is the file as readers see it.
		cur []byte
		// synced is the file as of the last successful Sync.
		synced []byte
		// pending lists the writes and truncates since the last Sync in the
		// order they were applied to cur.
		// INVARIANT: replaying pending over synced yields cur.
		pending []crashOp
	}
}

var _ Driver = (*Crash)(nil)

// crashOp is one unsynced change: a write of data at off, or a truncate to
// size.
type crashOp struct {
	truncate bool
	off      int64
	data     []byte
	size     int64
}

// NewCrash returns an empty crash-simulating file; the empty file counts as
// synced.
func NewCrash() *Crash { return &Crash{} }

func (c *Crash) ReadAt(p []byte, off int64) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return readFrom(c.mu.cur, p, off)
}

func (c *Crash) WriteAt(p []byte, off int64) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if err := checkOff(off, len(p)); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writeLocked(p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeLocked applies and records one write. c.mu must be held for writing.
func (c *Crash) writeLocked(p []byte, off int64) error {
	cur, err := writeInto(c.mu.cur, p, off)
	c.mu.cur = cur
	if err != nil {
		return err
	}
	if len(p) > 0 {
		c.mu.pending = append(c.mu.pending, crashOp{off: off, data: append([]byte(nil), p...)})
	}
	return nil
}

func (c *Crash) ReadV(exts []Extent) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return readVFrom(c.mu.cur, exts)
}

// WriteV records each extent as its own write: a crash may keep some extents
// of a vector and lose others, as a real pwritev may.
func (c *Crash) WriteV(exts []Extent) error {
	if c.closed.Load() {
		return ErrClosed
	}
	sorted, _, err := sortExtents(exts, true)
	if err != nil || len(sorted) == 0 {
		return err
	}
	if end := sorted[len(sorted)-1].End(); end > MaxMemSize {
		return fmt.Errorf("%w: size %d exceeds the in-memory limit %d", ErrInvalid, end, int64(MaxMemSize))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range sorted {
		if err := c.writeLocked(e.Buf, e.Off); err != nil {
			return err
		}
	}
	return nil
}

// Sync makes every completed write durable: later crash images keep them.
func (c *Crash) Sync() error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Replaying (O(unsynced bytes)) rather than copying cur (O(file)) keeps
	// frequent syncs of a large file cheap. Replay cannot fail: every op
	// passed the size limit when it ran on cur.
	for _, op := range c.mu.pending {
		c.mu.synced = applyCrashOp(c.mu.synced, op)
	}
	clear(c.mu.pending) // drop references to the copies
	c.mu.pending = c.mu.pending[:0]
	return nil
}

func (c *Crash) Size() (int64, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return int64(len(c.mu.cur)), nil
}

func (c *Crash) Truncate(size int64) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := resizeImage(c.mu.cur, size)
	c.mu.cur = cur
	if err != nil {
		return err
	}
	c.mu.pending = append(c.mu.pending, crashOp{truncate: true, size: size})
	return nil
}

// Close marks the file closed. The crash image functions keep working.
func (c *Crash) Close() error {
	c.closed.Store(true)
	return nil
}

// Pending reports how many writes and truncates are not yet synced.
func (c *Crash) Pending() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.mu.pending)
}

// CrashImage returns the file a crash right now would leave, per mode. With
// RandomUnsynced the result is a function of the recorded history and seed
// only, so a failing seed reproduces.
func (c *Crash) CrashImage(mode CrashMode, seed uint64) []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch mode {
	case KeepAll:
		return append([]byte(nil), c.mu.cur...)
	case RandomUnsynced:
		img := append([]byte(nil), c.mu.synced...)
		rng := rand.New(rand.NewPCG(seed, 0x5cc_c2a5_4))
		for _, op := range c.mu.pending {
			img = replayUnsynced(img, op, rng)
		}
		return img
	default:
		return append([]byte(nil), c.mu.synced...)
	}
}

// CrashClone returns a new Crash whose contents, all synced, are
// CrashImage(mode, seed): the file a test reopens after the simulated crash.
func (c *Crash) CrashClone(mode CrashMode, seed uint64) *Crash {
	img := c.CrashImage(mode, seed)
	n := &Crash{}
	n.mu.cur = img
	n.mu.synced = append([]byte(nil), img...)
	return n
}

// replayUnsynced applies one unsynced op to img the way a crash might have
// left it: a truncate applied or not; a write applied fully, not at all, or
// torn, keeping each sector it touches with probability one half.
func replayUnsynced(img []byte, op crashOp, rng *rand.Rand) []byte {
	if op.truncate {
		if rng.IntN(2) == 0 {
			return img
		}
		return applyCrashOp(img, op)
	}
	switch rng.IntN(3) {
	case 0:
		return img
	case 1:
		return applyCrashOp(img, op)
	}
	var bits uint64
	for pos, i := op.off, 0; pos < op.end(); i++ {
		next := min((pos/SectorSize+1)*SectorSize, op.end())
		if i%64 == 0 {
			bits = rng.Uint64()
		}
		if bits&(1<<(i%64)) != 0 {
			// Growth cannot fail: the full write already fit the limit.
			img, _ = writeInto(img, op.data[pos-op.off:next-op.off], pos)
		}
		pos = next
	}
	return img
}

// applyCrashOp applies a recorded op to img. Sizes were validated when the op
// first ran on the current file, so growth cannot fail here.
func applyCrashOp(img []byte, op crashOp) []byte {
	if op.truncate {
		img, _ = resizeImage(img, op.size)
	} else {
		img, _ = writeInto(img, op.data, op.off)
	}
	return img
}

// end reports the offset one past the op's written data.
func (op crashOp) end() int64 { return op.off + int64(len(op.data)) }
