package s3test

import (
	"errors"
	"strings"
	"testing"
)

// TestMissingBinaryNamesTheMakeTarget: without the built server, Start
// fails (tests that need it fail, never skip) and says how to build it.
func TestMissingBinaryNamesTheMakeTarget(t *testing.T) {
	t.Setenv("SCC_MINIO_BIN", "")
	t.Setenv("SCC_MINIO_DIR", t.TempDir())
	_, err := Start(t.TempDir())
	if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), "make minio") {
		t.Fatalf("Start without a binary: %v", err)
	}
}

func TestVersionIsPinned(t *testing.T) {
	if v := Version(); !strings.HasPrefix(v, "v0.0.0-") || len(v) < 30 {
		t.Fatalf("pinned version %q is not a module pseudo-version", v)
	}
}
