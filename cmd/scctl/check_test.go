package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

func TestCheckGood(t *testing.T) {
	path := makeFile(t)
	code, out, stderr := runCmd(t, "check", path)
	if code != 0 || !strings.Contains(out, "2 datasets, 4 chunks verified") || !strings.HasSuffix(out, "  OK\n") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = runCmd(t, "check", "--json", path)
	var r struct {
		OK       bool
		Datasets int
		Chunks   int
		Problems []string
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || !r.OK || r.Datasets != 2 || r.Chunks != 4 {
		t.Fatalf("exit %d %+v %v\n%s", code, r, err, out)
	}
}

// TestCheckDamaged flips bytes across the file's data region until the
// checker reports a problem, and checks the exit status and output then.
func TestCheckDamaged(t *testing.T) {
	path := makeFile(t, testfile.NoCheck("the test damages bytes of the file to see check report it"))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for off := len(orig) - 1; off >= 0 && !found; off -= 7 {
		b := append([]byte(nil), orig...)
		b[off] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := runCmd(t, "check", path)
		switch {
		case code == 0:
			continue // a byte nothing references
		case code != 1:
			t.Fatalf("flip at %d: exit %d", off, code)
		case strings.Contains(out, "PROBLEM:"):
			if !strings.Contains(stderr, "problem(s) found") {
				t.Fatalf("stderr %q", stderr)
			}
			code, out, _ = runCmd(t, "check", "--json", path)
			if code != 1 || !strings.Contains(out, `"ok": false`) {
				t.Fatalf("json: exit %d\n%s", code, out)
			}
			found = true
		default:
			// The checker could not read the file at all: also exit 1.
			if stderr == "" {
				t.Fatalf("flip at %d: exit 1 without a message", off)
			}
		}
	}
	if !found {
		t.Fatal("no flipped byte produced a reported problem")
	}
}

func TestCheckMissing(t *testing.T) {
	if code, _, _ := runCmd(t, "check", t.TempDir()+"/none.scc"); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if code, _, _ := runCmd(t, "check", "a", "b"); code != 2 {
		t.Fatalf("exit %d", code)
	}
}

// TestCheckRefusesNonRegular: a FIFO used to hang the command in open(2).
func TestCheckRefusesNonRegular(t *testing.T) { refusesNonRegular(t, "check") }

// TestCheckSparse: a sparse file checks clean, and damage to any byte of
// its stored chunks (headers, selection or value sections) is reported.
func TestCheckSparse(t *testing.T) {
	path := makeSparseFile(t, testfile.NoCheck("the test damages a selection section to see check report it"))
	if code, out, stderr := runCmd(t, "check", path); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, stderr)
	}
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := f.OpenDataset(context.Background(), "hits", nil)
	if err != nil {
		t.Fatal(err)
	}
	locs, err := ds.ChunkExtents(context.Background())
	f.Close(context.Background())
	if err != nil || len(locs) != 3 {
		t.Fatalf("%d chunk extents, %v", len(locs), err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range locs {
		for off := x.Off; off < x.Off+x.Size; off++ {
			b := append([]byte(nil), orig...)
			b[off] ^= 0x10
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if code, out, _ := runCmd(t, "check", path); code != 1 || !strings.Contains(out, "PROBLEM:") {
				t.Fatalf("flip at %d (chunk at %d+%d): exit %d\n%s", off, x.Off, x.Size, code, out)
			}
		}
	}
}
