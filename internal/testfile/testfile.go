// Package testfile is the test harness for every scc file a test outside
// the engine makes (bbolt's internal/btesting pattern): Create and
// CreateWith register a cleanup that closes the file if the test did not
// and runs engine.Check on it. A file Check rejects fails the test, and its
// bytes are kept at os.TempDir()/scc-check-failed-<test>-<n> (the test's
// TempDir is removed when it ends) so the failure can be examined with
// scctl check. A test that damages its file on purpose opts out with
// NoCheck(reason).
//
// The engine's own tests have the same functions in engine/testfile_test.go:
// they are in package engine, which this package imports.
package testfile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
	"github.com/scc-dev/scc/vfd"
)

// Opt adjusts the cleanup of one test file.
type Opt func(*file)

// NoCheck skips the check at cleanup for a file the test leaves damaged or
// cut on purpose; why names what the test does to it.
func NoCheck(why string) Opt { return func(tf *file) { tf.skip = why } }

type file struct {
	f    *engine.File // nil when the test does not hold the file
	drv  vfd.Driver   // nil for a file made from a path
	path string
	skip string
}

// Create creates the file at path for t and checks it at cleanup.
func Create(t testing.TB, path string, opts *engine.Options, o ...Opt) *engine.File {
	t.Helper()
	f, err := engine.Create(context.Background(), path, opts)
	require.NoError(t, err, "create %s", path)
	track(t, &file{f: f, path: path}, o)
	return f
}

// CreateWith creates a file on drv for t and checks it at cleanup.
func CreateWith(t testing.TB, drv vfd.Driver, opts *engine.Options, o ...Opt) *engine.File {
	t.Helper()
	f, err := engine.Create(context.Background(), "", WithDriver(opts, drv))
	require.NoError(t, err, "create")
	track(t, &file{f: f, drv: drv}, o)
	return f
}

// CheckAtCleanup checks the file at path at cleanup: for a file that a
// command or another process under test writes.
func CheckAtCleanup(t testing.TB, path string, o ...Opt) {
	t.Helper()
	track(t, &file{path: path}, o)
}

func track(t testing.TB, tf *file, o []Opt) {
	t.Helper()
	for _, fn := range o {
		fn(tf)
	}
	t.Cleanup(func() { tf.cleanup(t) })
}

func (tf *file) cleanup(t testing.TB) {
	t.Helper()
	if tf.f != nil {
		_ = tf.f.Close(context.Background()) // a second Close is a no-op; its error is the test's business
	}
	if tf.skip != "" {
		t.Logf("file not checked: %s", tf.skip)
		return
	}
	ctx := context.Background()
	if tf.drv != nil {
		if fd, ok := tf.drv.(*vfd.Fault); ok {
			fd.SetEnabled(false) // check what really reached the file
		}
		rep, err := engine.Check(ctx, "", &engine.Options{Driver: tf.drv})
		if err != nil {
			failed(t, rep, err, func() ([]byte, error) { return driverBytes(tf.drv) })
		}
		return
	}
	rep, err := engine.Check(ctx, tf.path, nil)
	if err != nil {
		failed(t, rep, err, func() ([]byte, error) { return os.ReadFile(tf.path) })
	}
}

// kept numbers the copies kept by one test binary.
var kept atomic.Int64

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func failed(t testing.TB, rep *engine.CheckReport, err error, bytes func() ([]byte, error)) {
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
	path := filepath.Join(os.TempDir(), fmt.Sprintf("scc-check-failed-%s-%d", unsafeName.ReplaceAllString(t.Name(), "_"), kept.Add(1)))
	if werr := os.WriteFile(path, b, 0o644); werr != nil {
		t.Errorf("%s (file not kept: %v)", msg, werr)
		return
	}
	t.Errorf("%s; file kept at %s", msg, path)
}

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

// JSNumbers turns the json.Number values of a JSON value decoded with
// UseNumber into float64s, as a JavaScript reader holds them (an int64
// beyond 2^53 rounds), so that a test compares what zarrita read with
// what scc wrote. It changes v in place and returns it.
func JSNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = JSNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = JSNumbers(x[k])
		}
	}
	return v
}

// Attrs lists x's attributes (a File, Group or Dataset), failing the test
// on an error.
func Attrs(t testing.TB, x interface{ Attrs() ([]engine.Attr, error) }) []engine.Attr {
	t.Helper()
	as, err := x.Attrs()
	if err != nil {
		t.Fatalf("attributes: %v", err)
	}
	return as
}

// DatasetNames lists the paths of every dataset in the file, without the
// leading '/', sorted: the names a test compares against.
func DatasetNames(t testing.TB, f *engine.File) []string {
	t.Helper()
	names, err := tree.DatasetNames(f)
	if err != nil {
		t.Fatalf("datasets: %v", err)
	}
	return names
}

// StoredChunks collects ds.Chunks.
func StoredChunks(ctx context.Context, ds *engine.Dataset) ([]engine.StoredChunk, error) {
	var out []engine.StoredChunk
	for c, err := range ds.Chunks(ctx) {
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// WithDriver is opts (nil: the defaults) with Driver set to drv.
func WithDriver(opts *engine.Options, drv vfd.Driver) *engine.Options {
	o := engine.Options{}
	if opts != nil {
		o = *opts
	}
	o.Driver = drv
	return &o
}
