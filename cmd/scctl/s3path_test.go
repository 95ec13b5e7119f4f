package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/vfd/s3/s3test"
)

// minioBucket starts a MinIO server (built by `make minio`; a missing
// binary fails the test) holding an empty bucket, points the AWS_*
// environment at it as a user would, and returns a context that ends
// after timeout; both end with the test.
func minioBucket(t *testing.T, bucket string, timeout time.Duration) context.Context {
	t.Helper()
	srv, err := s3test.Start(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://"+srv.Endpoint())
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	return ctx
}

// TestS3URLs runs ingest, ls, dump and check on s3:// URLs against a real
// MinIO server (built by `make minio`; a missing binary fails the test),
// with the endpoint and credentials in the AWS_* environment as a user
// would set them.
func TestS3URLs(t *testing.T) {
	minioBucket(t, "scctl", 30*time.Second)
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

// TestS3ImportExportClearImage: import writes an object all or nothing
// (refused over an existing one without --force; a failed --force import
// leaves it as it was), export and clear-image read an object, and ingest
// reports an object's stored bytes.
func TestS3ImportExportClearImage(t *testing.T) {
	ctx := minioBucket(t, "scctl", 60*time.Second)

	code, out, stderr := runCmd(t, "ingest", "--quiet", "--file", "s3://scctl/ingest.scc", "--datasets", "1", "--writers", "1",
		"--frames", "4", "--frame", "16x16")
	if code != 0 || !strings.Contains(out, "written/stored =") {
		t.Fatalf("ingest: exit %d, no stored bytes:\n%s%s", code, out, stderr)
	}

	url := "s3://scctl/imported.scc"
	store := goodStore(t)
	if code, out, stderr := runCmd(t, "import", store, url); code != 0 {
		t.Fatalf("import to %s: exit %d\n%s%s", url, code, out, stderr)
	}
	if code, out, _ := runCmd(t, "dump", "--dataset", "a", url); code != 0 || !strings.Contains(out, "1, 2, 0, 0") {
		t.Fatalf("dump of the imported object: exit %d\n%s", code, out)
	}
	if code, _, stderr := runCmd(t, "import", store, url); code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("import over an object without --force: exit %d %s", code, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	put(t, filepath.Join(bad, ".zgroup"), zgroup)
	put(t, filepath.Join(bad, "b", ".zarray"), zarrayT)
	put(t, filepath.Join(bad, "b", "0"), "short")
	if code, _, _ := runCmd(t, "import", "--force", bad, url); code != 1 {
		t.Fatalf("failing --force import: exit %d", code)
	}
	datasets := func() []string {
		f, done, err := openPath(ctx, url, &engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		return testfile.DatasetNames(t, f)
	}
	if ds := datasets(); len(ds) != 1 || ds[0] != "a" {
		t.Fatalf("a failed --force import changed the object: %v", ds)
	}
	replacement := filepath.Join(t.TempDir(), "r")
	put(t, filepath.Join(replacement, ".zgroup"), zgroup)
	put(t, filepath.Join(replacement, "r", ".zarray"), zarrayT)
	if code, _, stderr := runCmd(t, "import", "--force", replacement, url); code != 0 {
		t.Fatalf("--force import: %s", stderr)
	}
	if ds := datasets(); len(ds) != 1 || ds[0] != "r" {
		t.Fatalf("after --force: %v", ds)
	}

	exported := filepath.Join(t.TempDir(), "e.zarr")
	if code, out, stderr := runCmd(t, "export", "s3://scctl/ingest.scc", exported); code != 0 || !strings.Contains(out, "frames000") {
		t.Fatalf("export of an object: exit %d\n%s%s", code, out, stderr)
	}

	// hdf5 export from an object and import into one, through a stand-in
	// scc-hdf5 that copies its input to its output: it must be given
	// local files, and the import's output must land in the object.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "scc-hdf5"), []byte("#!/bin/sh\nfor a; do prev=$last; last=$a; done\ncp \"$prev\" \"$last\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SCC_HDF5", filepath.Join(bin, "scc-hdf5"))
	h5 := filepath.Join(t.TempDir(), "out.h5")
	if code, out, stderr := runCmd(t, "hdf5", "export", url, h5); code != 0 {
		t.Fatalf("hdf5 export of an object: exit %d\n%s%s", code, out, stderr)
	}
	h5URL := "s3://scctl/from-h5.scc"
	if code, out, stderr := runCmd(t, "hdf5", "import", h5, h5URL); code != 0 {
		t.Fatalf("hdf5 import to an object: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := runCmd(t, "ls", h5URL); code != 0 || !strings.Contains(out, "r") {
		t.Fatalf("the object hdf5 import wrote: exit %d\n%s", code, out)
	}
	if code, _, stderr := runCmd(t, "hdf5", "import", h5, h5URL); code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("hdf5 import over an object without -force: exit %d %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "hdf5", "import", "-force", h5, h5URL); code != 0 {
		t.Fatalf("hdf5 import -force over an object: exit %d %s", code, stderr)
	}

	// An HDF5 export of an object whose virtual datasets map other files
	// is refused: only the object itself is copied down, so its sources
	// would read as fill.
	_, vpath := makeVirtual(t)
	if err := upload(ctx, vpath, "s3://scctl/v.scc"); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCmd(t, "export", "--format", "hdf5", "s3://scctl/v.scc", filepath.Join(t.TempDir(), "v.h5")); code == 0 || !strings.Contains(stderr, "not exported") {
		t.Fatalf("hdf5 export of an object with sources in other files: exit %d %s", code, stderr)
	}

	// clear-image: an object with an image (uploaded from a local file).
	imgURL := "s3://scctl/image.scc"
	if err := upload(ctx, makeImageFile(t), imgURL); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCmd(t, "clear-image", imgURL); code != 0 || !strings.Contains(out, "removed the cache image") {
		t.Fatalf("clear-image %s: exit %d\n%s%s", imgURL, code, out, stderr)
	}
	if code, _, stderr := runCmd(t, "clear-image", imgURL); code != 0 || !strings.Contains(stderr, "has no cache image") {
		t.Fatalf("clear-image again: exit %d %s", code, stderr)
	}
}
