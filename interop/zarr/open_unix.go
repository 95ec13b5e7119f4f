//go:build unix

package zarr

import "syscall"

// openFlags: a file swapped for a FIFO between the check and the open does
// not block the open, and a last component swapped for a symlink fails it.
const openFlags = syscall.O_NONBLOCK | syscall.O_NOFOLLOW
