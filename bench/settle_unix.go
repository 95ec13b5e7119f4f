//go:build unix

package bench

import "golang.org/x/sys/unix"

// settleWriteback runs sync(2) so that a timed write starts with no dirty
// pages of the previous run (scc's, HDF5's or the raw ceiling's) left for
// the kernel to write back: otherwise whichever run comes next on a real
// disk is throttled for the last one's data, and the rows measure the
// order they ran in.
func settleWriteback() { unix.Sync() }
