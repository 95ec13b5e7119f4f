package s3

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// testServer is the MinIO server every test in this package talks to
// (directly, or through an s3test.Proxy). TestMain starts it and stops it.
var testServer *s3test.Server

const testBucket = "scc-test"

// TestMain runs the package's tests against a real MinIO server. A missing
// binary fails the run (it never skips): `make minio` builds it.
//
// A fuzzing run (-fuzz, whose workers re-run TestMain) runs FuzzManifest
// only, which needs no server, so it starts none.
func TestMain(m *testing.M) {
	if ChildMain != nil {
		if code, ok := ChildMain(); ok {
			os.Exit(code)
		}
	}
	flag.Parse()
	fuzzing := func(name string) bool {
		f := flag.Lookup(name)
		return f != nil && f.Value.String() != "" && f.Value.String() != "false"
	}
	if fuzzing("test.fuzz") || fuzzing("test.fuzzworker") {
		os.Exit(m.Run())
	}
	os.Exit(runWithServer(m))
}

func runWithServer(m *testing.M) int {
	dir, err := os.MkdirTemp("", "scc-minio-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := s3test.Start(filepath.Join(dir, "data"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the S3 tests need a real MinIO server:", err)
		return 1
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.MakeBucket(ctx, testBucket); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: make bucket:", err)
		return 1
	}
	testServer = srv
	return m.Run()
}

var keySeq atomic.Int64

// testKey returns a key no other test uses.
func testKey(t testing.TB) string {
	return fmt.Sprintf("%s/%d", strings.ReplaceAll(t.Name(), "/", "_"), keySeq.Add(1))
}

// testOpts are options for endpoint (the server's by default) with the test
// credentials.
func testOpts(endpoint string) Options {
	if testServer == nil {
		panic("s3 tests: no MinIO server (a -fuzz run starts none; run tests without -fuzz)")
	}
	if endpoint == "" {
		endpoint = testServer.Endpoint()
	}
	return Options{Endpoint: endpoint, Insecure: true, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey,
		RetryBase: time.Millisecond}
}

func openT(t testing.TB, key string, o Options) *Driver {
	t.Helper()
	d, err := OpenLocation(context.Background(), Location{Bucket: testBucket, Key: key}, &o)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// createT creates a new file with small pages (so tests cross page and head
// boundaries cheaply).
func createT(t testing.TB, key string, o Options) *Driver {
	o.Create = true
	if o.PageSize == 0 {
		o.PageSize = 4096
	}
	if o.HeadSize == 0 {
		o.HeadSize = 100
	}
	return openT(t, key, o)
}

// newProxy starts a fault-injecting proxy in front of the test server; the
// caller closes it (defer p.Close()) when its drivers are done with it.
func newProxy(t testing.TB) *s3test.Proxy {
	t.Helper()
	p, err := s3test.NewProxy(testServer.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	return p
}
