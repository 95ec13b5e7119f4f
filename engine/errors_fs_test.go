package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"
	"testing"
)

// TestClassifyStorageErrors: a driver's missing object, refused request and
// network failure (vfd/s3 reports them as fs.ErrNotExist, fs.ErrPermission
// and a net error) map to ErrNotFound, ErrDenied and ErrIO, each exactly
// one sentinel, cause kept.
func TestClassifyStorageErrors(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		cause, want error
	}{
		{fs.ErrNotExist, ErrNotFound}, {fs.ErrPermission, ErrDenied}, {syscall.EACCES, ErrDenied},
		{netErr, ErrIO},
	} {
		err := classify(fmt.Errorf("s3: get page: %w", c.cause))
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 || !errors.Is(err, c.want) || !errors.Is(err, c.cause) {
			t.Errorf("%v: classified %v (%d sentinels), want %v with its cause", c.cause, err, n, c.want)
		}
	}
}
