package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
)

// TestVirtualS3SourceUnreachable: every command resolves a virtual
// dataset's s3:// source the same way. With the endpoint unreachable, ls
// and check --sources report the connection error, and dump and the Zarr
// export fail naming the source, instead of opening the URL as a local
// path, finding nothing, and printing or exporting the fill value with
// exit 0.
func TestVirtualS3SourceUnreachable(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	ctx := context.Background()
	dir := t.TempDir()
	vpath := filepath.Join(dir, "v.scc")
	// A closed local port: nothing listens there.
	const url = "s3://bucket/src.scc?endpoint=http://127.0.0.1:1&region=us-east-1"
	// Made while the source "does not exist", so the creation accepts it.
	f, err := engine.Create(ctx, vpath, &engine.Options{NoSync: true, Virtual: engine.VirtualOptions{
		OpenURL: func(context.Context, string, *engine.Options) (*engine.File, error) {
			return nil, fmt.Errorf("%w: not yet", engine.ErrNotFound)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVirtualDataset(ctx, "v", engine.VirtualSpec{Type: engine.Uint32, Shape: []uint64{2, 2}, Fill: []byte{9, 0, 0, 0},
		Mappings: []engine.VirtualMapping{{Virtual: engine.Box([]uint64{0, 0}, []uint64{2, 2}), File: url, Dataset: "frames",
			Source: engine.Box([]uint64{0, 0}, []uint64{2, 2})}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"dump", "--dataset", "v", vpath},
		{"dump", "--json", "--dataset", "v", vpath},
		{"export", "--format", "zarr2", vpath, filepath.Join(dir, "v.zarr")},
		{"check", "--sources", vpath},
	} {
		code, out, stderr := runCmd(t, args...)
		if code == 0 || !strings.Contains(stderr+out, "s3://bucket/src.scc") {
			t.Fatalf("%v: exit %d, want a failure naming the source:\n%s\n%s", args, code, stderr, out)
		}
		t.Logf("%v: exit %d: %s", args, code, strings.TrimSpace(stderr))
		if strings.Contains(out, "9, 9") || strings.Contains(out, "[9,9") {
			t.Fatalf("%v printed the fill value:\n%s", args, out)
		}
	}
}

// TestVirtualS3SourceDump: a local virtual file over a source in MinIO
// dumps and exports the source's values, as ls lists the source there:
// every command opens an s3:// source through the S3 driver.
func TestVirtualS3SourceDump(t *testing.T) {
	ctx := minioBucket(t, "vsrc", 60*time.Second)
	const url = "s3://vsrc/src.scc"
	src, done, err := createPath(ctx, url, nil) // synced: an object is published by its sync
	if err != nil {
		t.Fatal(err)
	}
	ds, err := src.CreateDataset(ctx, "frames", engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{2, 2}, Chunk: []uint64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteSlice(ctx, ds, engine.All([]uint64{2, 2}), []uint32{11, 12, 13, 14}); err != nil {
		t.Fatal(err)
	}
	if err := done(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	vpath := filepath.Join(dir, "v.scc")
	f, err := engine.Create(ctx, vpath, &engine.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVirtualDataset(ctx, "v", engine.VirtualSpec{Type: engine.Uint32, Shape: []uint64{2, 2}, Fill: []byte{9, 0, 0, 0},
		Mappings: []engine.VirtualMapping{{Virtual: engine.Box([]uint64{0, 0}, []uint64{2, 2}), File: url, Dataset: "frames",
			Source: engine.Box([]uint64{0, 0}, []uint64{2, 2})}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "dump", "--json", "--dataset", "v", vpath)
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), ""), "[11,12,13,14]") {
		t.Fatalf("dump of a virtual dataset over an s3:// source: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := runCmd(t, "export", "--format", "zarr2", vpath, filepath.Join(dir, "v.zarr")); code != 0 {
		t.Fatalf("zarr2 export of a virtual dataset over an s3:// source: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runCmd(t, "ls", vpath)
	if code != 0 || !strings.Contains(out, "frames: exists") {
		t.Fatalf("ls: exit %d\n%s%s", code, out, stderr)
	}
}
