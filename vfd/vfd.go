// Package vfd is scc's virtual file driver layer: positional, concurrency-safe
// block I/O beneath the container and the shared chunk cache (SCC design §5.2,
// "Multi-thread support in the VFD layer").
//
// A Driver never keeps a file offset: every call names its own position, so any
// number of goroutines may call ReadAt, WriteAt, ReadV and WriteV at once
// without coordination (pread/pwrite semantics). Writes to overlapping ranges
// from different goroutines race exactly as pwrite calls would; callers
// (the cache's serialization and allocation) never issue them.
//
// Implementations in this package:
//
//   - File: a POSIX file on pread/pwrite and preadv/pwritev.
//   - Mem: an in-memory file.
//   - Fault: a wrapper that injects errors, short and torn writes, latency.
//   - Crash: an in-memory file that remembers what was synced and can produce
//     the image a power cut would leave.
//   - Counting: a wrapper that counts operations and bytes by kind.
//
// All of them are safe for concurrent use.
//
// Fault, Crash and Counting compose: a test typically stacks
// Counting(Fault(Crash)) under the engine, loops "fail operation i" over every
// i the workload issues, and reopens the engine on a crash image.
package vfd

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Driver is the narrow file interface scc does all its I/O through.
//
// Concurrency contract: every method is safe to call from any number of
// goroutines at once. Operations on disjoint byte ranges never interfere.
// Close may be called once all other calls have returned; calls after Close
// return ErrClosed.
//
// Error contract: a read that cannot fill its buffer because the file is
// shorter returns io.ErrUnexpectedEOF (ReadAt: io.EOF when nothing was read,
// as io.ReaderAt). A write either reports success for all its bytes or an
// error; after an error the contents of the written range are unspecified
// (it may be torn), so callers never write over the only good copy of data.
// Data is durable only after a Sync that returned nil.
type Driver interface {
	// ReadAt reads len(p) bytes at off, with io.ReaderAt semantics.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes all of p at off, extending the file if needed.
	WriteAt(p []byte, off int64) (int, error)
	// ReadV reads every extent. Adjacent extents (one ends where the next
	// begins) may be coalesced into one system call; extents need not be
	// sorted. It fails if any extent cannot be read in full.
	ReadV(exts []Extent) error
	// WriteV writes every extent, coalescing adjacent ones. Extents must not
	// overlap each other.
	WriteV(exts []Extent) error
	// Sync makes every completed write durable.
	Sync() error
	// Size reports the current file size in bytes.
	Size() (int64, error)
	// Truncate sets the file size.
	Truncate(size int64) error
	// Close releases the driver. It is idempotent.
	Close() error
}

// Extent is one piece of a vector operation: Buf is read from or written to
// the file at Off.
type Extent struct {
	Off int64
	Buf []byte
}

// End reports the offset one past the extent's last byte.
func (e Extent) End() int64 { return e.Off + int64(len(e.Buf)) }

var (
	// ErrClosed is returned by any call on a closed driver.
	ErrClosed = errors.New("vfd: driver closed")
	// ErrInjected is the error a Fault driver returns for an injected failure.
	ErrInjected = errors.New("vfd: injected fault")
	// ErrLocked is returned when a file is already open for writing by
	// another process (or another File in this one).
	ErrLocked = errors.New("vfd: file is locked by another writer")
	// ErrInvalid is returned for a negative offset or size, or overlapping
	// extents in WriteV.
	ErrInvalid = errors.New("vfd: invalid argument")
)

// Op names the kind of a Driver operation, for fault injection and counting.
// Close is not an Op: it is never counted and never fails by injection.
type Op uint8

const (
	OpRead     Op = iota // ReadAt
	OpWrite              // WriteAt
	OpReadV              // ReadV
	OpWriteV             // WriteV
	OpSync               // Sync
	OpTruncate           // Truncate
	OpSize               // Size

	// NumOps is the number of operation kinds; arrays indexed by Op have
	// this length. It is not an operation.
	NumOps
)

// OpAny matches every operation kind where a kind is asked for (triggers).
const OpAny Op = 0xff

var opNames = [NumOps]string{"read", "write", "readv", "writev", "sync", "truncate", "size"}

func (o Op) String() string {
	switch {
	case o < NumOps:
		return opNames[o]
	case o == OpAny:
		return "any"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// IsWrite reports whether the operation changes file contents (WriteAt,
// WriteV). Truncate changes the size only and is not a write.
func (o Op) IsWrite() bool { return o == OpWrite || o == OpWriteV }

// matches reports whether kind o (possibly OpAny) selects operation op.
func (o Op) matches(op Op) bool { return o == OpAny || o == op }

// WriteFull writes all of p at off through d. A driver that reports fewer
// bytes than len(p) with a nil error breaks the Driver contract; WriteFull
// turns that into an error wrapping io.ErrShortWrite, so that a short write
// is never taken for success.
func WriteFull(d Driver, p []byte, off int64) error {
	n, err := d.WriteAt(p, off)
	return shortWriteErr(n, p, off, err)
}

// shortWriteErr is err, or io.ErrShortWrite when a write reported n <
// len(p) bytes without an error.
func shortWriteErr(n int, p []byte, off int64, err error) error {
	if err == nil && n < len(p) {
		return fmt.Errorf("vfd: wrote %d of %d bytes at %d: %w", n, len(p), off, io.ErrShortWrite)
	}
	return err
}
