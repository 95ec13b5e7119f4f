package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// TestS3URLs runs ingest, ls, dump and check on s3:// URLs against a real
// MinIO server (built by `make minio`; a missing binary fails the test),
// with the endpoint and credentials in the AWS_* environment as a user
// would set them.
func TestS3URLs(t *testing.T) {
	srv, err := s3test.Start(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.MakeBucket(ctx, "scctl"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://"+srv.Endpoint())
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	url := "s3://scctl/runs/one.scc"
	if code, _, stderr := runCmd(t, "ingest", "--quiet", "--file", url, "--datasets", "2", "--writers", "2",
		"--frames", "8", "--frame", "16x16"); code != 0 {
		t.Fatalf("ingest to %s: exit %d: %s", url, code, stderr)
	}
	code, out, stderr := runCmd(t, "ls", url)
	if code != 0 || !strings.Contains(out, "frames000") || !strings.Contains(out, "frames001") {
		t.Fatalf("ls %s: exit %d: %s%s", url, code, out, stderr)
	}
	code, out, stderr = runCmd(t, "dump", "--dataset", "frames001", url)
	if code != 0 || !strings.Contains(out, "frames001") {
		t.Fatalf("dump %s: exit %d: %s%s", url, code, out, stderr)
	}
	code, out, stderr = runCmd(t, "check", url)
	if code != 0 || !strings.Contains(out, "generation") {
		t.Fatalf("check %s: exit %d: %s%s", url, code, out, stderr)
	}
	code, _, stderr = runCmd(t, "ls", "s3://scctl/absent.scc")
	if code != 1 || !strings.Contains(stderr, "not found") {
		t.Fatalf("ls of a missing object: exit %d: %s", code, stderr)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	code, _, stderr = runCmd(t, "ls", url)
	if code != 1 || !strings.Contains(stderr, "denied") {
		t.Fatalf("ls with a wrong secret: exit %d: %s", code, stderr)
	}
}
