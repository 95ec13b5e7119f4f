//go:build !linux

package bufpool

// prefault is Linux's madvise(MADV_POPULATE_WRITE) (prefault_linux.go);
// elsewhere a new buffer faults page by page.
func prefault([]byte) {}

// PopulateCold is PopulateCold of Linux (prefault_linux.go); elsewhere a
// read's buffer faults page by page.
func PopulateCold([]byte) {}
