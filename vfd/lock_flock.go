//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package vfd

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockWriter takes an exclusive, non-blocking flock on the file. flock locks
// belong to the open file description, so a second Open of the same path in
// this process conflicts just as another process would; the lock goes away
// when the descriptor is closed.
func lockWriter(rc syscall.RawConn) error {
	var err error
	ctlErr := rc.Control(func(fd uintptr) {
		for {
			err = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if err != unix.EINTR {
				return
			}
		}
	})
	if ctlErr != nil {
		return ctlErr
	}
	if err == unix.EWOULDBLOCK {
		return ErrLocked
	}
	if err != nil {
		return fmt.Errorf("vfd: flock: %w", err)
	}
	return nil
}
