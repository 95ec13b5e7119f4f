//go:build unix

package bench

import "golang.org/x/sys/unix"

// cpuSeconds is the CPU time (user + system) the process has used, 0 if
// unknown.
func cpuSeconds() float64 {
	var u unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e9
}
