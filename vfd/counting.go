package vfd

import "sync/atomic"

// Counting wraps a Driver and counts operations, errors, bytes and extents
// by kind, so tests and benchmarks can check how much I/O a code path did
// (for instance that a flush issued one vector write). Safe for concurrent
// use; the counters are plain atomics, which is fine for a test wrapper but
// contended under heavy parallel I/O.
type Counting struct {
	inner   Driver
	ops     [NumOps]atomic.Int64
	errs    [NumOps]atomic.Int64
	bytes   [NumOps]atomic.Int64
	extents [NumOps]atomic.Int64
}

var _ Driver = (*Counting)(nil)

// NewCounting wraps inner.
func NewCounting(inner Driver) *Counting { return &Counting{inner: inner} }

// Inner returns the wrapped driver.
func (c *Counting) Inner() Driver { return c.inner }

// Counts is a snapshot of a Counting's counters, indexed by Op.
type Counts struct {
	// Ops counts calls, successful or not.
	Ops [NumOps]int64
	// Errors counts calls that returned an error.
	Errors [NumOps]int64
	// Bytes counts bytes transferred: for ReadAt and WriteAt the n they
	// returned, for ReadV and WriteV all extents' bytes when the call
	// succeeded (nothing when it failed: how much got through is unknown).
	Bytes [NumOps]int64
	// Extents counts the extents passed to ReadV and WriteV.
	Extents [NumOps]int64
}

// Sub returns c minus o, field by field: the activity between two snapshots.
func (c Counts) Sub(o Counts) Counts {
	for i := range c.Ops {
		c.Ops[i] -= o.Ops[i]
		c.Errors[i] -= o.Errors[i]
		c.Bytes[i] -= o.Bytes[i]
		c.Extents[i] -= o.Extents[i]
	}
	return c
}

// BytesRead sums the bytes of ReadAt and ReadV.
func (c Counts) BytesRead() int64 { return c.Bytes[OpRead] + c.Bytes[OpReadV] }

// BytesWritten sums the bytes of WriteAt and WriteV.
func (c Counts) BytesWritten() int64 { return c.Bytes[OpWrite] + c.Bytes[OpWriteV] }

// Snapshot reads the counters. Each counter is read atomically, but not all
// at the same instant: a snapshot taken during I/O may count an operation in
// Ops before its Bytes.
func (c *Counting) Snapshot() Counts {
	var s Counts
	for i := range s.Ops {
		s.Ops[i] = c.ops[i].Load()
		s.Errors[i] = c.errs[i].Load()
		s.Bytes[i] = c.bytes[i].Load()
		s.Extents[i] = c.extents[i].Load()
	}
	return s
}

// Reset zeroes the counters. Operations running meanwhile may be partly
// counted; prefer Snapshot and Sub when I/O is in flight.
func (c *Counting) Reset() {
	for i := range c.ops {
		c.ops[i].Store(0)
		c.errs[i].Store(0)
		c.bytes[i].Store(0)
		c.extents[i].Store(0)
	}
}

func (c *Counting) done(op Op, n int64, err error) {
	c.ops[op].Add(1)
	if err != nil {
		c.errs[op].Add(1)
	}
	if n != 0 {
		c.bytes[op].Add(n)
	}
}

func (c *Counting) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.inner.ReadAt(p, off)
	c.done(OpRead, int64(n), err)
	return n, err
}

func (c *Counting) WriteAt(p []byte, off int64) (int, error) {
	n, err := c.inner.WriteAt(p, off)
	// A short count without an error is a failed write, not a success to
	// pass upward as one.
	err = shortWriteErr(n, p, off, err)
	c.done(OpWrite, int64(n), err)
	return n, err
}

func (c *Counting) ReadV(exts []Extent) error {
	err := c.inner.ReadV(exts)
	c.vector(OpReadV, exts, err)
	return err
}

func (c *Counting) WriteV(exts []Extent) error {
	err := c.inner.WriteV(exts)
	c.vector(OpWriteV, exts, err)
	return err
}

func (c *Counting) vector(op Op, exts []Extent, err error) {
	c.extents[op].Add(int64(len(exts)))
	var n int64
	if err == nil {
		n = extentBytes(exts)
	}
	c.done(op, n, err)
}

func (c *Counting) Sync() error {
	err := c.inner.Sync()
	c.done(OpSync, 0, err)
	return err
}

func (c *Counting) Size() (int64, error) {
	n, err := c.inner.Size()
	c.done(OpSize, 0, err)
	return n, err
}

func (c *Counting) Truncate(size int64) error {
	err := c.inner.Truncate(size)
	c.done(OpTruncate, 0, err)
	return err
}

// Close closes the inner driver. It is not counted.
func (c *Counting) Close() error { return c.inner.Close() }
