package bufpool

import (
	"os"
	"runtime"
	"sync"
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

// PopulateCold prefaults a large caller's buffer that a read is about to
// fill, when it is cold: most of a few sampled pages are not mapped
// (mincore), as with memory just allocated or given back to the kernel.
// The pages are then mapped by madvise(MADV_POPULATE_WRITE), the buffer
// split among GOMAXPROCS goroutines, before the read's scatter or decode
// touches them.
//
// Why: a read of many chunks into one large buffer writes each chunk's
// rows into their places all over it, so each of its pages is first
// touched by a short row copy that takes a fault. At GOMAXPROCS 2,
// filling a new 2 GiB buffer that way cost 1.4–2.1 s, populating it
// first 0.6–0.75 s, and the one-call read of a 2 GiB uncompressed array
// (zarrbench read_all raw) went from 1.8–4.4 s to 1.2–1.4 s; at its
// quick size (32 MiB), from 21 ms to 17 ms (median of 30), 26 ms when one
// goroutine populated it all (parts of populatePart). A buffer
// whose pages are mapped is left alone: populating it anyway costs a walk
// of its page table (2.5–4 ms for 32 MiB, a third of reading one 32 MiB
// chunk), which sampling avoids. Contents are unchanged (see prefault).
//
// These figures are one-off before/after runs at GOMAXPROCS 2, not a
// benchmark here; `scctl bench zarrbench` prints the read beside its pread
// floor.
//
// The length test is all a small buffer (a read of a few elements) pays:
// it inlines into the caller, the rest is populateCold.
func PopulateCold(b []byte) {
	if len(b) >= populateMin {
		populateCold(b)
	}
}

// populateCold is PopulateCold of a buffer past populateMin.
func populateCold(b []byte) {
	ps := os.Getpagesize()
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := int((p+uintptr(ps)-1)&^uintptr(ps-1) - p)
	pages := (len(b) - start) / ps
	if pages < populateSamples {
		return
	}
	var vec [1]byte
	cold := 0
	for i := 0; i < populateSamples; i++ {
		off := start + (pages-1)*i/(populateSamples-1)*ps
		if mapped, ok := pageMapped(unsafe.Pointer(&b[off]), ps, &vec[0]); ok && !mapped {
			cold++
		}
	}
	if cold*2 < populateSamples {
		return
	}
	populateCalls.Add(1)
	parts := min(runtime.GOMAXPROCS(0), max(1, len(b)/populatePart))
	per := (len(b) + parts - 1) / parts
	var wg sync.WaitGroup
	for lo := per; lo < len(b); lo += per {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prefault(b[lo:min(lo+per, len(b))])
		}()
	}
	prefault(b[:min(per, len(b))])
	wg.Wait()
}

// populateCalls counts PopulateCold's populations (tests).
var populateCalls atomic.Int64

// pageMapped is mincore(2) on the page at p: whether it is in memory, and
// whether the call worked (x/sys/unix has no wrapper for it).
func pageMapped(p unsafe.Pointer, size int, vec *byte) (mapped, ok bool) {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(p), uintptr(size), uintptr(unsafe.Pointer(vec)))
	return *vec&1 != 0, errno == 0
}
