//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package vfd

import "syscall"

// lockWriter: this platform has no flock in golang.org/x/sys/unix, so writers
// are not excluded; a second writer is the caller's responsibility here.
func lockWriter(syscall.RawConn) error { return nil }
