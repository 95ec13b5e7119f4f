package engine

import (
	"context"
	"os"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// A consistency check after every test that uses these helpers (bbolt's
// btesting pattern): the test's cleanup closes every File the helper made,
// if the test did not, and runs Check on what the file left on its driver.
// A test that injects faults leaves the checker a driver with injection
// switched off, so the check reads what really reached the file.

// long reports whether the long stress variants run (make stress).
func long() bool { return os.Getenv("SCC_STRESS") == "long" }

// tCreate creates a File on drv for t and checks it at cleanup.
func tCreate(t testing.TB, drv vfd.Driver, opts *Options) *File {
	t.Helper()
	f, err := CreateWith(drv, opts)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { closeAndCheck(t, f, drv) })
	return f
}

// tOpen opens a File on drv for t and checks it at cleanup.
func tOpen(t testing.TB, drv vfd.Driver, opts *Options) *File {
	t.Helper()
	f, err := OpenWith(drv, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { closeAndCheck(t, f, drv) })
	return f
}

// closeAndCheck closes f (a second Close is a no-op; its error is the
// test's business) and fails t if the committed state on drv is not
// consistent.
func closeAndCheck(t testing.TB, f *File, drv vfd.Driver) {
	t.Helper()
	_ = f.Close()
	if fd, ok := drv.(*vfd.Fault); ok {
		fd.SetEnabled(false)
	}
	rep, err := Check(context.Background(), drv)
	if err != nil {
		if rep != nil {
			t.Errorf("check after test: %v: %q", err, rep.Problems)
		} else {
			t.Errorf("check after test: %v", err)
		}
	}
}
