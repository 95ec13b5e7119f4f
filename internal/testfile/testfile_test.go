package testfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// recTB records what the harness reports instead of failing the test that
// runs it, and holds its cleanups until run.
type recTB struct {
	testing.TB
	errs, logs []string
	cleanups   []func()
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

// TestCleanupChecksAndKeeps: a consistent file passes the cleanup; a
// truncated one fails the test with the path of a kept copy of its bytes;
// one opted out with NoCheck is not checked.
func TestCleanupChecksAndKeeps(t *testing.T) {
	dir := t.TempDir()
	ok := &recTB{TB: t}
	Create(ok, filepath.Join(dir, "ok.scc"), nil)
	CreateWith(ok, vfd.NewMem(), nil)
	ok.run()
	if len(ok.errs) != 0 {
		t.Fatalf("consistent files: %q", ok.errs)
	}

	for _, skip := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("bad-%v.scc", skip))
		rec := &recTB{TB: t}
		var o []Opt
		if skip {
			o = append(o, NoCheck("the test truncates the file"))
		}
		if err := Create(rec, path, nil, o...).Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 100); err != nil {
			t.Fatal(err)
		}
		rec.run()
		if skip {
			if len(rec.errs) != 0 || len(rec.logs) != 1 {
				t.Fatalf("opted out: errors %q, logs %q", rec.errs, rec.logs)
			}
			continue
		}
		if len(rec.errs) != 1 {
			t.Fatalf("truncated file: errors %q, want one", rec.errs)
		}
		m := regexp.MustCompile(`file kept at (\S+)$`).FindStringSubmatch(rec.errs[0])
		if m == nil {
			t.Fatalf("%q names no kept copy", rec.errs[0])
		}
		t.Cleanup(func() { os.Remove(m[1]) })
		if b, err := os.ReadFile(m[1]); err != nil || len(b) != 100 || !strings.HasPrefix(m[1], os.TempDir()) {
			t.Errorf("kept copy %s: %d bytes, %v", m[1], len(b), err)
		}
	}
}
