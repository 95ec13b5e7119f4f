package engine

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// recTB records what the harness reports instead of failing the test
// that runs it, and holds its cleanups until run is called.
type recTB struct {
	testing.TB
	errs     []string
	logs     []string
	cleanups []func()
}

func (r *recTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recTB) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recTB) run() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestHarnessChecksAndKeepsDamagedFile: the cleanup of a test file closes
// it, runs Check, fails the test when Check does and keeps the file's
// bytes where the failure message says; a consistent file passes, and a
// file opted out with noCheck is closed and not checked.
func TestHarnessChecksAndKeepsDamagedFile(t *testing.T) {
	newFile := func(tb testing.TB, o ...tOpt) (*File, *vfd.Mem) {
		mem := vfd.NewMem()
		f := tCreate(tb, mem, nil, o...)
		d, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{16}})
		must(t, err)
		must(t, d.Write(context.Background(), All(d.Shape()), make([]byte, 64)))
		return f, mem
	}
	damage := func(f *File, mem *vfd.Mem) {
		if err := f.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := mem.Truncate(100); err != nil { // inside the superblock slots
			t.Fatal(err)
		}
	}

	ok := &recTB{TB: t}
	f, _ := newFile(ok)
	ok.run()
	if len(ok.errs) != 0 || !f.closed.Load() {
		t.Fatalf("consistent file: errors %q, closed %v", ok.errs, f.closed.Load())
	}

	bad := &recTB{TB: t}
	damage(newFile(bad))
	bad.run()
	if len(bad.errs) != 1 {
		t.Fatalf("damaged file: errors %q, want one", bad.errs)
	}
	m := regexp.MustCompile(`file kept at (\S+)$`).FindStringSubmatch(bad.errs[0])
	if m == nil {
		t.Fatalf("damaged file: %q names no kept copy", bad.errs[0])
	}
	t.Cleanup(func() { os.Remove(m[1]) })
	if !strings.HasPrefix(m[1], os.TempDir()) || !strings.Contains(m[1], "scc-check-failed-"+t.Name()) {
		t.Errorf("kept copy at %s", m[1])
	}
	if b, err := os.ReadFile(m[1]); err != nil || len(b) != 100 {
		t.Errorf("kept copy: %d bytes, %v; want the 100 damaged bytes", len(b), err)
	}

	skipped := &recTB{TB: t}
	f, mem := newFile(skipped, noCheck("the test truncates the file"))
	damage(f, mem)
	skipped.run()
	if len(skipped.errs) != 0 || len(skipped.logs) != 1 || !strings.Contains(skipped.logs[0], "truncates") {
		t.Fatalf("opted-out file: errors %q, logs %q", skipped.errs, skipped.logs)
	}
}
