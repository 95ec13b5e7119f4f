package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestImportZlibVerify: zlib chunks are imported without being inflated
// (the command says so), so a damaged chunk in the store is found by the
// reads of it and by `scctl check`, not by the import; `--verify` decodes
// every copied chunk first and fails the import instead.
func TestImportZlibVerify(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "z.scc")
	f := testfile.Create(t, src, nil)
	ds, err := f.CreateDataset(ctx, "z", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{4096}, Chunk: []uint64{1024},
		Filters: []engine.Filter{engine.Shuffle(), engine.Zlib(6)}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8192)
	for i := range buf {
		buf[i] = byte(i / 64)
	}
	if err := ds.Write(ctx, engine.All([]uint64{4096}), buf); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "store")
	if code, out, stderr := runCmd(t, "export", "--format", "zarr2", src, store); code != 0 || !strings.Contains(out, "all copied without re-encoding (4 not decoded at all)") {
		t.Fatalf("export: %d\n%s%s", code, out, stderr)
	}
	// Damage the Adler-32 of chunk 2 (its DEFLATE body still inflates).
	chunk := filepath.Join(store, "z", "2")
	b, err := os.ReadFile(chunk)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0x55
	if err := os.WriteFile(chunk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fast := filepath.Join(t.TempDir(), "fast.scc")
	if code, out, stderr := runCmd(t, "import", store, fast); code != 0 || !strings.Contains(out, "(4 not decoded at all)") {
		t.Fatalf("import: %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := runCmd(t, "check", fast); code == 0 {
		t.Errorf("check of a file holding a damaged zlib chunk passed:\n%s%s", out, stderr)
	}
	slow := filepath.Join(t.TempDir(), "slow.scc")
	if code, _, stderr := runCmd(t, "import", "--verify", store, slow); code == 0 || !strings.Contains(stderr, "corrupt") {
		t.Errorf("import --verify of a damaged chunk: %d %s", code, stderr)
	}
	if _, err := os.Stat(slow); err == nil {
		t.Error("a failed import left its file behind")
	}
}

// TestImportSkipsCorruptArray: an array whose metadata breaks the Zarr
// specification (a "|i1" fill value of 300) is skipped and named, the
// others are imported; --strict refuses the import and writes nothing.
func TestImportSkipsCorruptArray(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	write := func(name, data string) {
		p := filepath.Join(store, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".zgroup", `{"zarr_format":2}`)
	write("good/.zarray", `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|i1","fill_value":0,"order":"C","filters":null,"compressor":null}`)
	write("good/0", "\x01\x02")
	write("bad/.zarray", `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|i1","fill_value":300,"order":"C","filters":null,"compressor":null}`)
	dst := filepath.Join(t.TempDir(), "out.scc")
	if code, out, stderr := runCmd(t, "import", store, dst); code != 0 || !strings.Contains(out, "SKIPPED bad: ") || !strings.Contains(out, "300 is out of range") {
		t.Fatalf("import: %d\n%s%s", code, out, stderr)
	}
	f, err := engine.Open(context.Background(), dst, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := testfile.DatasetNames(t, f); len(got) != 1 || got[0] != "good" {
		t.Errorf("datasets %v", got)
	}
	f.Close(context.Background())
	strict := filepath.Join(t.TempDir(), "strict.scc")
	if code, out, stderr := runCmd(t, "import", "--strict", store, strict); code == 0 || !strings.Contains(stderr, "--strict") {
		t.Fatalf("import --strict: %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(strict); !os.IsNotExist(err) {
		t.Fatalf("import --strict left %s: %v", strict, err)
	}
}

// TestImportZarrStringsAndTimes: `scctl import` brings Zarr strings
// (vlen-utf8) onto a variable-length dataset and datetime64 as Int64 with
// its numpy type, `scctl dump` prints the strings, and `scctl export`
// writes both back with their Zarr types.
func TestImportZarrStringsAndTimes(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	write := func(rel, data string) {
		p := filepath.Join(store, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".zgroup", `{"zarr_format":2}`)
	write("s/.zarray", `{"zarr_format":2,"shape":[3],"chunks":[3],"dtype":"|O","fill_value":"","order":"C","filters":[{"id":"vlen-utf8"}],"compressor":null}`)
	write("s/0", "\x03\x00\x00\x00\x06\x00\x00\x00h\xc3\xa9llo\x00\x00\x00\x00\x01\x00\x00\x00z")
	write("t/.zarray", `{"zarr_format":2,"shape":[2],"chunks":[2],"dtype":"<M8[s]","fill_value":"NaT","order":"C","filters":null,"compressor":null}`)
	write("t/0", "\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80")
	out := filepath.Join(t.TempDir(), "o.scc")
	if code, stdout, stderr := runCmd(t, "import", store, out); code != 0 {
		t.Fatalf("import: %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runCmd(t, "dump", "--dataset", "s", out); code != 0 || !strings.Contains(stdout, `"héllo"`) || !strings.Contains(stdout, `""`) || !strings.Contains(stdout, `"z"`) {
		t.Fatalf("dump: %d\n%s%s", code, stdout, stderr)
	}
	back := filepath.Join(t.TempDir(), "back")
	if code, stdout, stderr := runCmd(t, "export", "--format", "zarr2", out, back); code != 0 {
		t.Fatalf("export: %d\n%s%s", code, stdout, stderr)
	}
	for name, want := range map[string]string{"s": "|O", "t": "<M8[s]"} {
		b, err := os.ReadFile(filepath.Join(back, name, ".zarray"))
		var meta struct{ Dtype string }
		if err == nil {
			err = json.Unmarshal(b, &meta)
		}
		if err != nil || meta.Dtype != want {
			t.Errorf("%s: .zarray %s (%v), want dtype %s", name, b, err, want)
		}
	}
}
