package vfd

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// readV reads sorted extents with one preadv per run of adjacent extents.
func (f *File) readV(sorted []Extent) error {
	return f.vector(sorted, false)
}

// writeV writes sorted, disjoint extents with one pwritev per run.
func (f *File) writeV(sorted []Extent) error {
	return f.vector(sorted, true)
}

// The write system calls, variables so that tests can watch and shorten
// them.
var (
	pwriteSys  = unix.Pwrite
	pwritevSys = unix.Pwritev
)

// syncFileRange is unix.SyncFileRange (a variable so that tests can make
// it fail).
var syncFileRange = unix.SyncFileRange

// startWriteBack asks the kernel to start writing back every dirty page of
// the file (SetWriteBehind) without waiting for it. A file closed
// meanwhile is not an error here: the caller's next operation reports it.
func (f *File) startWriteBack() error {
	var err error
	if cerr := f.rc.Control(func(fd uintptr) { err = startWriteBackFd(int(fd)) }); cerr != nil {
		return nil
	}
	return err
}

// startWriteBackFd is startWriteBack on a descriptor the caller holds.
func startWriteBackFd(fd int) error {
	err := syncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	if err == unix.ENOSYS || err == unix.ESPIPE {
		return nil // not supported for this file: the hint is only a hint
	}
	return err
}

// wroteFd is wrote for a write system call on fd, inside the caller's
// RawConn.Control.
func (f *File) wroteFd(fd int, n int) {
	if f.hintDue(int64(n)) {
		f.noteHint(startWriteBackFd(fd))
	}
}

// iovScratch is the iovec list of one run, pooled so that a vector call in
// steady state allocates nothing of its own.
type iovScratch struct{ bufs [][]byte }

var iovPool = sync.Pool{New: func() any { return new(iovScratch) }}

func (f *File) vector(sorted []Extent, write bool) error {
	var opErr error
	scratch := iovPool.Get().(*iovScratch)
	ctlErr := f.rc.Control(func(fd uintptr) {
		opErr = forRuns(sorted, iovMax, func(run []Extent) error {
			if len(run) == 1 {
				// A lone extent needs no iovec list.
				if write {
					return f.pwriteFull(int(fd), run[0].Buf, run[0].Off)
				}
				return f.preadFull(int(fd), run[0].Buf, run[0].Off)
			}
			// The elements are copies of the callers' slice headers, which
			// the transfer loop advances without touching the callers'
			// extents.
			bufs := scratch.bufs[:0]
			for _, e := range run {
				bufs = append(bufs, e.Buf)
			}
			scratch.bufs = bufs
			if write {
				return f.pwritevFull(int(fd), bufs, run[0].Off)
			}
			return f.preadvFull(int(fd), bufs, run[0].Off)
		})
	})
	// Drop the references to the callers' buffers before pooling.
	clear(scratch.bufs[:cap(scratch.bufs)])
	scratch.bufs = scratch.bufs[:0]
	iovPool.Put(scratch)
	if ctlErr != nil {
		return ctlErr
	}
	return opErr
}

// preadFull fills p from off, repeating pread after short transfers and EINTR.
func (f *File) preadFull(fd int, p []byte, off int64) error {
	start := off
	for len(p) > 0 {
		n, err := unix.Pread(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "pread", Path: f.name, Err: err}
		}
		if n == 0 {
			return fmt.Errorf("vfd: pread %s: extent at %d ends at end of file %d: %w", f.name, start, off, io.ErrUnexpectedEOF)
		}
		off += int64(n)
		p = p[n:]
	}
	return nil
}

// pwriteFull writes all of p at off in calls of callLen bytes, repeating pwrite after short transfers and EINTR.
func (f *File) pwriteFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := pwriteSys(fd, p[:callLen(len(p))], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "pwrite", Path: f.name, Err: err}
		}
		if n == 0 {
			return &os.PathError{Op: "pwrite", Path: f.name, Err: io.ErrShortWrite}
		}
		f.wroteFd(fd, n)
		off += int64(n)
		p = p[n:]
	}
	return nil
}

// preadvFull fills bufs from off, repeating preadv after short transfers and
// EINTR. It consumes bufs.
func (f *File) preadvFull(fd int, bufs [][]byte, off int64) error {
	start := off
	for {
		bufs = dropEmpty(bufs)
		if len(bufs) == 0 {
			return nil
		}
		n, err := unix.Preadv(fd, bufs, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "preadv", Path: f.name, Err: err}
		}
		if n == 0 {
			return fmt.Errorf("vfd: preadv %s: run at %d ends at end of file %d: %w", f.name, start, off, io.ErrUnexpectedEOF)
		}
		off += int64(n)
		bufs = advance(bufs, n)
	}
}

// pwritevFull writes all of bufs at off in calls of callLen bytes, repeating pwritev after short transfers and EINTR. It consumes
// bufs.
func (f *File) pwritevFull(fd int, bufs [][]byte, off int64) error {
	for {
		bufs = dropEmpty(bufs)
		if len(bufs) == 0 {
			return nil
		}
		// This call takes bufs[:k], the last of them cut to its first cut
		// bytes; the cut is undone before advance, which counts from the
		// whole buffers.
		total := 0
		for _, b := range bufs {
			total += len(b)
		}
		k, cut := callPrefix(bufs, callLen(total))
		last := bufs[k-1]
		bufs[k-1] = last[:cut]
		n, err := pwritevSys(fd, bufs[:k], off)
		bufs[k-1] = last
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "pwritev", Path: f.name, Err: err}
		}
		if n == 0 {
			// A regular file never accepts zero bytes of a non-empty write
			// without an error; stop rather than spin.
			return &os.PathError{Op: "pwritev", Path: f.name, Err: io.ErrShortWrite}
		}
		f.wroteFd(fd, n)
		off += int64(n)
		bufs = advance(bufs, n)
	}
}

// callPrefix returns how many leading buffers of bufs (none empty) one
// write call of at most max bytes takes, and how many bytes of the last of
// them.
func callPrefix(bufs [][]byte, max int) (k, cut int) {
	sum := 0
	for i, b := range bufs {
		if sum+len(b) >= max {
			return i + 1, max - sum
		}
		sum += len(b)
	}
	return len(bufs), len(bufs[len(bufs)-1])
}

func dropEmpty(bufs [][]byte) [][]byte {
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}

// advance drops the first n bytes of bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for n > 0 {
		k := min(n, len(bufs[0]))
		bufs[0] = bufs[0][k:]
		n -= k
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return bufs
}
