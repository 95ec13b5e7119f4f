package vfd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// File is a Driver over an operating-system file: ReadAt and WriteAt are
// pread and pwrite, ReadV and WriteV are preadv and pwritev over runs of
// adjacent extents (on Linux; elsewhere a loop of pread/pwrite). It keeps no
// file offset, so any number of goroutines may use it at once.
//
// A File opened for writing holds an exclusive advisory lock (flock) on the
// file until Close, so a second writer, in this process or another, fails
// with ErrLocked instead of corrupting the file. Read-only opens take no
// lock: readers may follow a writer.
type File struct {
	name string
	f    *os.File
	// rc hands out the descriptor for preadv/pwritev. Control takes only a
	// reference on the descriptor, unlike RawConn.Read, which would serialize
	// concurrent vector reads behind the file's read lock.
	rc     syscall.RawConn
	closed atomic.Bool

	// Write-behind (SetWriteBehind). writeBehind is the byte count after
	// which the kernel is asked to start writing back the file's dirty
	// pages (0: never); unhinted counts the bytes written since the last
	// such hint; hints counts them (tests). hintErr keeps the first error
	// a hint returned until Sync reports it: a write-back error is never
	// dropped for having surfaced early.
	writeBehind atomic.Int64
	unhinted    atomic.Int64
	hints       atomic.Int64
	hintErr     struct {
		sync.Mutex
		err error
	}
}

// DefaultWriteBehind is the write-behind of a file Open returns writable:
// 1 MiB (see SetWriteBehind and BenchmarkWriteBehind).
const DefaultWriteBehind = 1 << 20

var _ Driver = (*File)(nil)

// Open opens the file at path with os.OpenFile flags and permissions.
//
// A writable open (os.O_WRONLY or os.O_RDWR) takes the writer lock first and
// only then applies os.O_TRUNC, so a second writer that loses the lock race
// cannot truncate the first writer's file. os.O_APPEND is refused with
// ErrInvalid: every write of a Driver names its own offset.
func Open(path string, flag int, perm os.FileMode) (*File, error) {
	if flag&os.O_APPEND != 0 {
		return nil, fmt.Errorf("vfd: open %s: %w: O_APPEND", path, ErrInvalid)
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	truncate := writable && flag&os.O_TRUNC != 0
	osf, err := os.OpenFile(path, flag&^os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	rc, err := osf.SyscallConn()
	if err != nil {
		osf.Close()
		return nil, fmt.Errorf("vfd: open %s: %w", path, err)
	}
	f := &File{name: path, f: osf, rc: rc}
	if writable {
		f.writeBehind.Store(DefaultWriteBehind)
		if err := lockWriter(rc); err != nil {
			osf.Close()
			return nil, fmt.Errorf("vfd: open %s: %w", path, err)
		}
		if truncate && !isEmpty(osf) {
			if err := truncateFile(osf, 0); err != nil {
				osf.Close()
				return nil, err
			}
		}
	}
	return f, nil
}

// isEmpty reports whether osf is known to hold no bytes. Open leaves an
// empty file untruncated: truncating it would change nothing but its
// timestamps, and ext4 takes any truncate to size zero for the start of a
// replace-via-truncate (auto_da_alloc) and starts writing back the whole
// file when it is closed. A NoSync file's Close then waited for the
// device: 3–42 ms on 64 MiB (measured once), where writing the 64 MiB
// took 20 (timed with strace).
func isEmpty(osf *os.File) bool {
	st, err := osf.Stat()
	return err == nil && st.Mode().IsRegular() && st.Size() == 0
}

// truncateFile is (*os.File).Truncate (a variable so that tests can count
// the calls).
var truncateFile = (*os.File).Truncate

// Name reports the path the file was opened with.
func (f *File) Name() string { return f.name }

// ReadAt reads len(p) bytes at off: io.EOF if off is at or past the end,
// io.ErrUnexpectedEOF if the file ends inside p.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	if err := checkOff(off, len(p)); err != nil {
		return 0, err
	}
	// os.File.ReadAt already loops over short reads and EINTR; it reports
	// io.EOF for any short read, which the Driver contract narrows.
	n, err := f.f.ReadAt(p, off)
	if err == io.EOF && n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, f.mapErr(err)
}

// WriteAt writes all of p at off, in calls of about 1 MiB at most
// (writeCallMax, callLen).
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	if err := checkOff(off, len(p)); err != nil {
		return 0, err
	}
	n := 0
	var err error
	for n < len(p) && err == nil {
		var m int
		m, err = f.f.WriteAt(p[n:n+callLen(len(p)-n)], off+int64(n))
		n += m
		f.wrote(int64(m))
	}
	return n, f.mapErr(err)
}

// writeCallMax is about the most bytes one write system call carries:
// WriteAt and WriteV cut longer writes into calls of this size, a write a
// sixteenth longer or less going in one call (callLen; a variable only so
// that tests and BenchmarkWriteCallSize can change it).
//
// Why: Linux sizes the page-cache folios a write allocates from the
// write's length, up to 2 MiB (large folios: ext4 since 6.16, xfs, ...).
// On a virtual machine whose host takes back the guest's free memory
// (virtio-balloon free page reporting, as on Firecracker and many cloud
// VMs) the free blocks of 2 MiB and more are, as far as we can tell, the
// ones the host reclaimed, and filling one faults it back in on the host;
// smaller folios come first from the guest's free memory of smaller
// orders, which the host left alone. (The mechanism is our reading; the
// figures below are measured.) On such a VM (Linux 6.18) 2 MiB and
// larger writes into new files ran at 220–310 MB/s from the first byte,
// 1 MiB writes at 2–4 GB/s for the first few hundred MiB (then at the
// same 300: the small free blocks were used up), and the cache's
// write-back of 64 MiB of chunks, one pwritev per run of adjacent chunks,
// often took 200–290 ms where HDF5, one pwrite per chunk, took 50
// (BenchmarkWriteCallSize measures the call sizes; the flushes took
// 24–28 ms capped). Elsewhere the cap costs one system call per MiB, a
// few microseconds against copying that MiB.
var writeCallMax = 1 << 20

// callLen is how many of n bytes left to write the next write call
// carries: all of them up to writeCallMax plus a sixteenth, else
// writeCallMax. The slack keeps a chunk frame (a chunk of writeCallMax
// bytes and its 4-byte checksum trailer) in one call: cut at exactly
// writeCallMax it took a second call of 4 bytes, two system calls a chunk
// where HDF5 makes one. It asks for no larger folios: the kernel sizes
// them from the call's length rounded down to a power of two.
func callLen(n int) int {
	if n <= writeCallMax+writeCallMax/16 {
		return n
	}
	return writeCallMax
}

// ReadV reads every extent, one system call per run of up to 1024 adjacent
// extents (more if the kernel transfers less than asked). The caller's slice
// is not reordered. On error the extents' buffers hold unspecified bytes.
func (f *File) ReadV(exts []Extent) error {
	if f.closed.Load() {
		return ErrClosed
	}
	sorted, _, err := sortExtents(exts, false)
	if err != nil || len(sorted) == 0 {
		return err
	}
	return f.mapErr(f.readV(sorted))
}

// WriteV writes every extent, one system call per run of up to 1024 adjacent
// extents and 1 MiB (writeCallMax says why). Overlapping extents are refused
// with ErrInvalid before anything is written.
func (f *File) WriteV(exts []Extent) error {
	if f.closed.Load() {
		return ErrClosed
	}
	sorted, _, err := sortExtents(exts, true)
	if err != nil || len(sorted) == 0 {
		return err
	}
	return f.mapErr(f.writeV(sorted)) // which counts each call's bytes for write-behind
}

// Sync flushes the file's data and metadata to stable storage (fsync). It
// also reports an error a write-behind hint met since the last Sync.
func (f *File) Sync() error {
	if f.closed.Load() {
		return ErrClosed
	}
	err := f.f.Sync()
	return f.mapErr(errors.Join(f.takeHintErr(), err))
}

// takeHintErr returns the error a write-behind hint met since it was last
// taken, and forgets it.
func (f *File) takeHintErr() error {
	f.hintErr.Lock()
	defer f.hintErr.Unlock()
	err := f.hintErr.err
	f.hintErr.err = nil
	return err
}

// SetWriteBehind makes the file ask the kernel, after every n bytes
// written, to start writing its dirty pages back to the device (Linux:
// sync_file_range with SYNC_FILE_RANGE_WRITE, which does not wait for the
// writes; elsewhere nothing). A later Sync then finds most of the file on
// disk already: writing and the device's work overlap instead of following
// each other, as RocksDB's bytes_per_sync does. It promises nothing about
// durability; only Sync does. n <= 0 turns it off (for scratch files that
// are never synced, where it is only extra device work). Files Open
// returns writable start at DefaultWriteBehind. Safe to call at any time.
func (f *File) SetWriteBehind(n int64) { f.writeBehind.Store(max(n, 0)) }

// WriteBehind returns the current write-behind (SetWriteBehind).
func (f *File) WriteBehind() int64 { return f.writeBehind.Load() }

// wrote counts n bytes one write system call wrote and gives the kernel
// the write-behind hint when they reach the threshold. Counting each call,
// not each WriteV, matters for a large vector write (a write-back of many
// chunks, cut into 1 MiB calls by writeCallMax): the device starts on its
// first MiB while the rest is still being copied.
func (f *File) wrote(n int64) {
	if f.hintDue(n) {
		f.noteHint(f.startWriteBack())
	}
}

// hintDue counts n bytes written and reports whether they complete the
// write-behind threshold, starting the count again if so. Goroutines that
// cross it together may both hint; a hint is cheap and idempotent.
func (f *File) hintDue(n int64) bool {
	wb := f.writeBehind.Load()
	if wb <= 0 || n <= 0 || f.unhinted.Add(n) < wb {
		return false
	}
	f.unhinted.Store(0)
	f.hints.Add(1)
	return true
}

// noteHint keeps the first error a hint met, for the next Sync or Close.
func (f *File) noteHint(err error) {
	if err == nil {
		return
	}
	f.hintErr.Lock()
	if f.hintErr.err == nil {
		f.hintErr.err = fmt.Errorf("vfd: write-behind on %s: %w", f.name, err)
	}
	f.hintErr.Unlock()
}

func (f *File) Size() (int64, error) {
	if f.closed.Load() {
		return 0, ErrClosed
	}
	fi, err := f.f.Stat()
	if err != nil {
		return 0, f.mapErr(err)
	}
	return fi.Size(), nil
}

func (f *File) Truncate(size int64) error {
	if f.closed.Load() {
		return ErrClosed
	}
	if size < 0 {
		return fmt.Errorf("%w: size %d", ErrInvalid, size)
	}
	return f.mapErr(f.f.Truncate(size))
}

// Close closes the file, releasing the writer lock. It also reports an
// error a write-behind hint met that no Sync has reported. Later calls
// return nil.
func (f *File) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return nil
	}
	return errors.Join(f.takeHintErr(), f.f.Close())
}

// mapErr turns the os package's closed-file error (a call racing Close) into
// ErrClosed; other errors pass unchanged.
func (f *File) mapErr(err error) error {
	if err != nil && errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%w: %s", ErrClosed, f.name)
	}
	return err
}

// readVLoop and writeVLoop are the portable vector paths: one pread/pwrite
// per extent, in offset order. Platforms without preadv use them; Linux uses
// them in tests as the reference.
func (f *File) readVLoop(sorted []Extent) error {
	for _, e := range sorted {
		n, err := f.f.ReadAt(e.Buf, e.Off)
		if err == io.EOF || (err == nil && n < len(e.Buf)) {
			return fmt.Errorf("vfd: read %s [%d,%d): %w", f.name, e.Off, e.End(), io.ErrUnexpectedEOF)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *File) writeVLoop(sorted []Extent) error {
	for _, e := range sorted {
		for off := 0; off < len(e.Buf); {
			n, err := f.f.WriteAt(e.Buf[off:off+callLen(len(e.Buf)-off)], e.Off+int64(off))
			off += n
			f.wrote(int64(n))
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Stat returns the FileInfo of the open file (fstat): its identity, which
// os.SameFile compares with the file now at a path.
func (f *File) Stat() (os.FileInfo, error) {
	if f.closed.Load() {
		return nil, ErrClosed
	}
	return f.f.Stat()
}
