//go:build unix

package bench

import "golang.org/x/sys/unix"

// syncAll is sync(2).
func syncAll() { unix.Sync() }
