package testfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.Empty(t, ok.errs, "consistent files")

	for _, skip := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprintf("bad-%v.scc", skip))
		rec := &recTB{TB: t}
		var o []Opt
		if skip {
			o = append(o, NoCheck("the test truncates the file"))
		}
		require.NoError(t, Create(rec, path, nil, o...).Close(context.Background()))
		require.NoError(t, os.Truncate(path, 100))
		rec.run()
		if skip {
			assert.Empty(t, rec.errs, "opted out: errors")
			assert.Len(t, rec.logs, 1, "opted out: logs")
			continue
		}
		require.Len(t, rec.errs, 1, "truncated file: errors")
		m := regexp.MustCompile(`file kept at (\S+)$`).FindStringSubmatch(rec.errs[0])
		require.NotNil(t, m, "%q names no kept copy", rec.errs[0])
		t.Cleanup(func() { os.Remove(m[1]) })
		assert.True(t, strings.HasPrefix(m[1], os.TempDir()), "kept copy %s outside %s", m[1], os.TempDir())
		b, err := os.ReadFile(m[1])
		require.NoError(t, err, "kept copy")
		assert.Len(t, b, 100, "kept copy: the truncated file's bytes")
	}
}
