package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStressSmall(t *testing.T) {
	code, out, stderr := runCmd(t, "stress", "--seed", "7", "--goroutines", "2", "--ops", "24", "--phases", "1",
		"--no-lin", "--no-crash-check", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"seed 7,", "mismatches 0", "wall time", "OK\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "replay with --seed 7") {
		t.Errorf("stderr %q", stderr)
	}
}

func TestStressJSON(t *testing.T) {
	code, out, stderr := runCmd(t, "stress", "--json", "--seed", "11", "--goroutines", "2", "--ops", "16",
		"--phases", "1", "--no-lin", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var r struct {
		OK         bool   `json:"ok"`
		Seed       uint64 `json:"Seed"`
		Mismatches int64  `json:"Mismatches"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !r.OK || r.Seed != 11 || r.Mismatches != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestStressRandomSeedPrinted(t *testing.T) {
	code, _, stderr := runCmd(t, "stress", "--goroutines", "1", "--ops", "8", "--phases", "1", "--no-lin",
		"--no-crash-check", "--quiet")
	if code != 0 || !strings.Contains(stderr, "scctl stress: seed ") {
		t.Fatalf("exit %d %q", code, stderr)
	}
}

func TestStressBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--cache", "lots"}, {"--goroutines", "-3"}, {"extra"}} {
		if code, _, stderr := runCmd(t, append([]string{"stress"}, args...)...); code != 2 {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}
