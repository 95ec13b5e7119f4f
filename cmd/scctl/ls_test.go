package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLs(t *testing.T) {
	path := makeFile(t)
	code, out, stderr := runCmd(t, "ls", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"frames               Dataset {3/Inf, 4, 5}",
		"Type:      uint16",
		"Chunks:    {1, 4, 5} 40 B",
		"Filters:   shuffle + zstd(1)",
		"Index:     extensible-array, 3 of 3 chunks stored",
		"grid                 Dataset {4, 6}",
		"Type:      float64",
		"Fill:      -1",
		"1 of 4 chunks stored",
		"2 datasets, 312 B logical",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	code, out, _ = runCmd(t, "ls", "--json", path)
	if code != 0 {
		t.Fatal(code)
	}
	var l lsFile
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Datasets) != 2 || l.Size == 0 || l.Logical != 120+192 || l.StoredLogical != 120+48 {
		t.Fatalf("%+v", l)
	}
	fr := l.Datasets[0]
	if fr.Name != "frames" || fr.MaxShape[0] != "unlimited" || fr.StoredChunks != 3 || fr.GridChunks != 3 ||
		fr.ChunkBytes != 40 || strings.Join(fr.Filters, "+") != "shuffle+zstd(1)" {
		t.Fatalf("%+v", fr)
	}
	if g := l.Datasets[1]; g.IndexKind == "extensible-array" || g.StoredChunks != 1 || g.GridChunks != 4 {
		t.Fatalf("%+v", g)
	}
}

func TestLsErrors(t *testing.T) {
	if code, _, _ := runCmd(t, "ls"); code != 2 {
		t.Fatalf("no file: %d", code)
	}
	code, _, stderr := runCmd(t, "ls", t.TempDir()+"/absent.scc")
	if code != 1 || !strings.Contains(stderr, "not found") {
		t.Fatalf("absent file: %d %q", code, stderr)
	}
}

// TestLsRefusesNonRegular: a FIFO used to hang the command in open(2).
func TestLsRefusesNonRegular(t *testing.T) { refusesNonRegular(t, "ls") }
