package bench

import "os"

// settle makes every timed h5perf run (scc's, HDF5's, the raw ceiling's)
// start from the same state of the machine:
//
//   - no dirty pages of the run before (sync(2)): otherwise whichever run
//     comes next on a real disk is throttled for the last one's data;
//   - memory a file just gave back: a scratch file of size bytes is
//     written to dir, synced and removed. On a virtual machine whose host
//     takes back the guest's free memory (virtio-balloon free page
//     reporting), filling page cache on memory the host reclaimed is many
//     times slower than on memory a removed file freed a moment ago (on such
//     a VM 220–310 MB/s against 2–4 GB/s; see vfd's writeCallMax).
//     Without this each run was as fast as the memory the run before it
//     left behind: a run right after another's file was removed wrote
//     3–4 GB/s, the first run after a pause a tenth of that, and the rows
//     measured the order they ran in.
//
// An error here (a full disk) only leaves the state unsettled; the run
// that follows reports its own.
func settle(dir string, size int64) {
	syncAll()
	if size > 0 {
		if f, err := os.CreateTemp(dir, "scc-settle-*"); err == nil {
			buf := make([]byte, 1<<20)
			for off := int64(0); off < size; off += int64(len(buf)) {
				if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
					break
				}
			}
			f.Close()
			syncAll()
			os.Remove(f.Name())
		}
	}
	syncAll()
}
