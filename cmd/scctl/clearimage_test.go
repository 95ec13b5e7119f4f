package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
)

// makeImageFile is makeFile closed once more with a cache image.
func makeImageFile(t *testing.T) string {
	t.Helper()
	path := makeFile(t)
	f, err := engine.Open(context.Background(), path, &engine.Options{Image: engine.ImageOptions{Generate: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

func imageOf(t *testing.T, path string) engine.ImageInfo {
	t.Helper()
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	return f.ImageInfo()
}

func TestClearImage(t *testing.T) {
	path := makeImageFile(t)
	if !imageOf(t, path).Exists {
		t.Fatal("no image to clear")
	}
	code, out, stderr := runCmd(t, "clear-image", path)
	if code != 0 || !strings.Contains(out, "removed the cache image") || stderr != "" {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if imageOf(t, path).Exists {
		t.Fatal("image still there")
	}
	if rep, err := engine.Check(context.Background(), path, nil); err != nil {
		t.Fatalf("%v %+v", err, rep)
	}
	// Again: nothing to remove, a warning, success, no change.
	code, out, stderr = runCmd(t, "clear-image", path)
	if code != 0 || out != "" || !strings.Contains(stderr, "has no cache image") {
		t.Fatalf("second run: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, _ := runCmd(t, "clear-image"); code != 2 {
		t.Fatalf("no file: exit %d", code)
	}
}

// TestLsImage: ls shows the image, and only when there is one.
func TestLsImage(t *testing.T) {
	path := makeImageFile(t)
	info := imageOf(t, path)
	code, out, _ := runCmd(t, "ls", path)
	if code != 0 || !strings.Contains(out, "cache image at ") || !strings.Contains(out, " entries") || !strings.Contains(out, "free-space map") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = runCmd(t, "ls", "--json", path)
	var l lsFile
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 0 || l.Image == nil || l.Image.Addr != info.Addr || l.Image.Size != info.Size || l.Image.Entries == 0 || !l.Image.FreeMap {
		t.Fatalf("exit %d %v %+v\n%s", code, err, l.Image, out)
	}
	if _, out, _ := runCmd(t, "ls", makeFile(t)); strings.Contains(out, "cache image") {
		t.Fatalf("image listed for a file without one:\n%s", out)
	}
	// check verifies the map against every index.
	if code, out, _ := runCmd(t, "check", path); code != 0 || !strings.Contains(out, "free-space map verified") {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
}
