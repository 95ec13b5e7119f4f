package bufpool

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// prefault maps the pages of a new buffer writable in one call
// (madvise(MADV_POPULATE_WRITE), Linux 5.14+), instead of one page fault
// per 4 KiB page when the buffer is first written.
//
// Why: a buffer getBuf makes (the pool had none) is usually fresh memory
// from the kernel, and the first write into it, typically the pread of a
// load, takes a fault for every page. For a cold read that is most of the
// cost beyond the copy: in a fresh process, 64 pread calls of 1 MiB from
// tmpfs into new 1 MiB buffers ran at 1 214–1 485 MiB/s, and at
// 1 550–1 787 with each buffer populated first. BenchmarkFreshBuffers
// prints the same comparison.
//
// Populating changes no byte: pages already present stay as they are, and
// absent ones are zero-filled, which is what they would read as. Only
// buffers whose every byte the caller writes are populated (GetFull);
// Get's and GetZeroed's are not, since an encoder's worst-case
// output or a new chunk that is only partly written would otherwise cost
// memory for pages nothing touches. The call is advice: on a kernel without it (EINVAL) or
// when it fails, the buffer faults page by page as before, so its error
// is of no use to anyone.
// prefaults counts prefault's system calls (tests).
var prefaults atomic.Int64

func prefault(b []byte) {
	if len(b) < prefaultMin {
		return
	}
	ps := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (p + ps - 1) &^ (ps - 1)
	end := (p + uintptr(len(b))) &^ (ps - 1)
	if end <= start {
		return
	}
	prefaults.Add(1)
	_ = unix.Madvise(b[start-p:end-p], unix.MADV_POPULATE_WRITE)
}
