package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

// A consistency check after every test that makes a file (bbolt's btesting
// pattern): tCreate, tOpen and their path forms register a cleanup that
// closes the File if the test did not and runs Check on what the file left
// behind. A file Check rejects fails the test, and its bytes are kept under
// os.TempDir() (t.TempDir and a Mem driver are gone once the test ends) so
// the failure can be examined with scctl check. A test that injects faults
// leaves the checker a driver with injection switched off, so the check
// reads what really reached the file.
//
// A test that damages or cuts its file on purpose opts out with
// noCheck(reason): the reason is the record of why that file is not checked.

// long reports whether the long stress variants run (make stress).
func long() bool { return os.Getenv("SCC_STRESS") == "long" }

// tOpt adjusts the cleanup of one test file.
type tOpt func(*tFile)

// noCheck skips the check at cleanup for a file the test leaves damaged,
// truncated or crash-cut on purpose; why names what the test does to it.
func noCheck(why string) tOpt {
	return func(tf *tFile) { tf.skip = why }
}

// tFile is a test file's cleanup: where its bytes are and why, if at all,
// they are not checked.
type tFile struct {
	f    *File      // nil for a file another process writes
	drv  vfd.Driver // nil for a file made from a path
	path string
	skip string
}

// tCreate creates a File on drv for t and checks it at cleanup.
func tCreate(t testing.TB, drv vfd.Driver, opts *Options, o ...tOpt) *File {
	t.Helper()
	f, err := Create(context.Background(), "", withDriver(opts, drv))
	require.NoError(t, err, "create")
	track(t, &tFile{f: f, drv: drv}, o)
	return f
}

// tOpen opens a File on drv for t and checks it at cleanup.
func tOpen(t testing.TB, drv vfd.Driver, opts *Options, o ...tOpt) *File {
	t.Helper()
	f, err := Open(context.Background(), "", withDriver(opts, drv))
	require.NoError(t, err, "open")
	track(t, &tFile{f: f, drv: drv}, o)
	return f
}

// tCreatePath creates the file at path for t and checks it at cleanup.
func tCreatePath(t testing.TB, path string, opts *Options, o ...tOpt) *File {
	t.Helper()
	f, err := Create(context.Background(), path, opts)
	require.NoError(t, err, "create %s", path)
	track(t, &tFile{f: f, path: path}, o)
	return f
}

// tOpenPath opens the file at path for t and checks it at cleanup.
func tOpenPath(t testing.TB, path string, opts *Options, o ...tOpt) *File {
	t.Helper()
	f, err := Open(context.Background(), path, opts)
	require.NoError(t, err, "open %s", path)
	track(t, &tFile{f: f, path: path}, o)
	return f
}

// tCheckPath checks at cleanup the file at path, which something other
// than this test process (a child process) writes.
func tCheckPath(t testing.TB, path string, o ...tOpt) {
	t.Helper()
	track(t, &tFile{path: path}, o)
}

func track(t testing.TB, tf *tFile, o []tOpt) {
	t.Helper()
	for _, fn := range o {
		fn(tf)
	}
	t.Cleanup(func() { tf.cleanup(t) })
}

func (tf *tFile) cleanup(t testing.TB) {
	t.Helper()
	if tf.drv != nil && tf.skip == "" {
		closeAndCheck(t, tf.f, tf.drv)
		return
	}
	if tf.f != nil {
		_ = tf.f.Close(context.Background())
	}
	if tf.skip != "" {
		t.Logf("file not checked: %s", tf.skip)
		return
	}
	rep, err := Check(context.Background(), tf.path, nil)
	if err != nil {
		checkFailed(t, rep, err, func() ([]byte, error) { return os.ReadFile(tf.path) })
	}
}

// closeAndCheck closes f (a second Close is a no-op; its error is the
// test's business) and fails t if the committed state on drv is not
// consistent, keeping a copy of drv's bytes.
func closeAndCheck(t testing.TB, f *File, drv vfd.Driver) {
	t.Helper()
	_ = f.Close(context.Background())
	if fd, ok := drv.(*vfd.Fault); ok {
		fd.SetEnabled(false)
	}
	rep, err := Check(context.Background(), "", &Options{Driver: drv})
	if err != nil {
		checkFailed(t, rep, err, func() ([]byte, error) { return driverBytes(drv) })
	}
}

// keptFiles numbers the copies kept in one test binary, so that two files
// of one test do not overwrite each other.
var keptFiles atomic.Int64

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// checkFailed fails t with Check's findings and writes the file's bytes to
// os.TempDir()/scc-check-failed-<test>-<n>.
func checkFailed(t testing.TB, rep *CheckReport, err error, bytes func() ([]byte, error)) {
	t.Helper()
	msg := fmt.Sprintf("check after test: %v", err)
	if rep != nil {
		msg += fmt.Sprintf(": %q", rep.Problems)
	}
	b, rerr := bytes()
	if rerr != nil {
		t.Errorf("%s (file not kept: %v)", msg, rerr)
		return
	}
	name := fmt.Sprintf("scc-check-failed-%s-%d", unsafeName.ReplaceAllString(t.Name(), "_"), keptFiles.Add(1))
	path := filepath.Join(os.TempDir(), name)
	if werr := os.WriteFile(path, b, 0o644); werr != nil {
		t.Errorf("%s (file not kept: %v)", msg, werr)
		return
	}
	t.Errorf("%s; file kept at %s", msg, path)
}

// driverBytes reads every byte of drv.
func driverBytes(drv vfd.Driver) ([]byte, error) {
	if m, ok := drv.(*vfd.Mem); ok {
		return m.Bytes(), nil
	}
	size, err := drv.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if n, err := drv.ReadAt(b, 0); n < len(b) {
		return nil, err
	}
	return b, nil
}
