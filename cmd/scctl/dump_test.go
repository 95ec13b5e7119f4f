package main

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

func TestDump(t *testing.T) {
	path := makeFile(t)
	code, out, stderr := runCmd(t, "dump", "--dataset", "frames", "--start", "1,1,0", "--count", "2,2,5", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Element (f, r, c) holds f*20 + r*5 + c.
	want := `DATASET "frames" {
   DATATYPE  uint16
   DATASPACE  SIMPLE { ( 3, 4, 5 ) / ( H5S_UNLIMITED, 4, 5 ) }
   SUBSET {
      START ( 1, 1, 0 );
      COUNT ( 2, 2, 5 );
      DATA {
      (1,1,0): 25, 26, 27, 28, 29,
      (1,2,0): 30, 31, 32, 33, 34,
      (2,1,0): 45, 46, 47, 48, 49,
      (2,2,0): 50, 51, 52, 53, 54
      }
   }
}
`
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestDumpJSONAndFill(t *testing.T) {
	path := makeFile(t)
	// The whole grid: the first chunk was written, the rest is fill (-1).
	code, out, stderr := runCmd(t, "dump", "--json", "--dataset", "grid", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var d struct {
		Type   string
		Count  []uint64
		Values []float64
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Type != "float64" || len(d.Values) != 24 || d.Count[0] != 4 || d.Count[1] != 6 {
		t.Fatalf("%+v", d)
	}
	for i, v := range d.Values {
		r, c := i/6, i%6
		want := -1.0
		if r < 2 && c < 3 {
			want = float64(r*3+c) + 0.5
		}
		if v != want {
			t.Fatalf("(%d,%d) = %v, want %v", r, c, v, want)
		}
	}
}

func TestDumpErrors(t *testing.T) {
	path := makeFile(t)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{path}, 2, "--dataset is required"},
		{[]string{"--dataset", "nope", path}, 1, "not found"},
		{[]string{"--dataset", "frames", "--start", "1,2", path}, 2, "rank 3"},
		{[]string{"--dataset", "frames", "--start", "9,0,0", path}, 2, "outside the extent"},
		{[]string{"--dataset", "frames", "--count", "3,4,6", path}, 1, "out of range"},
		{[]string{"--dataset", "frames", "--max", "10", path}, 2, "more than 10 elements"},
	} {
		code, _, stderr := runCmd(t, append([]string{"dump"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d %q; want %d %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}

// TestDumpRefusesNonRegular: a FIFO used to hang the command in open(2).
func TestDumpRefusesNonRegular(t *testing.T) { refusesNonRegular(t, "dump", "--dataset", "frames") }

func TestDumpDefined(t *testing.T) {
	path := makeSparseFile(t)
	code, out, stderr := runCmd(t, "dump", "--defined", "--dataset", "hits", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `DATASET "hits" {
   DATATYPE  int32
   DEFINED  4 of ( 6, 8 ) from ( 0, 0 ) {
      (0, 1): 1
      (2, 2): 22
      (4, 7): 47
      (5, 0): 50
   }
}
`
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	code, out, _ = runCmd(t, "dump", "--defined", "--json", "--dataset", "hits", "--start", "2,0", "--count", "4,8", path)
	if code != 0 {
		t.Fatal(code)
	}
	var d struct {
		Coords [][]uint64
		Values []int
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Coords) != 3 || d.Coords[1][0] != 4 || d.Coords[1][1] != 7 || d.Values[2] != 50 {
		t.Fatalf("%+v", d)
	}
	// Without --defined the undefined elements read as the fill value.
	code, out, _ = runCmd(t, "dump", "--dataset", "hits", "--start", "5,4", "--count", "1,2", path)
	if code != 0 || !strings.Contains(out, "(5,4): -1, -1") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestDumpVlen(t *testing.T) {
	path := t.TempDir() + "/vlen.scc"
	f := testfile.Create(t, path, nil)
	ds, err := f.CreateDataset(context.Background(), "names", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{3}, Chunk: []uint64{2}, Layout: engine.Vlen})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.WriteStrings(context.Background(), engine.All([]uint64{3}), []string{"ab", "", `q"x`}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "dump", "--dataset", "names", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `DATASET "names" {
   DATATYPE  vlen uint8
   SUBSET ( 3 ) from ( 0 ) {
      (0): "ab"
      (1): ""
      (2): "q\"x"
   }
}
`
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	code, out, _ = runCmd(t, "dump", "--json", "--dataset", "names", path)
	var d struct{ Values []string }
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Values) != 3 || d.Values[2] != `q"x` {
		t.Fatalf("exit %d: %s", code, out)
	}
	if code, out, _ := runCmd(t, "ls", path); code != 0 || !strings.Contains(out, "Layout:    vlen") {
		t.Fatalf("ls: exit %d\n%s", code, out)
	}
	if code, out, _ := runCmd(t, "check", path); code != 0 {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
}

// TestDumpNewTypes: bool and complex datasets and attributes print as
// true/false and real±imaginary "i" in text, and as JSON booleans and
// [real, imaginary] pairs (NaN and infinities quoted) with --json.
func TestDumpNewTypes(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/types.scc"
	f := testfile.Create(t, path, nil)
	b, err := f.CreateDataset(ctx, "b", engine.DatasetSpec{Type: engine.Bool, Shape: []uint64{3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteSlice(ctx, b, engine.All([]uint64{3}), []bool{true, false, true}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetAttr(ctx, "z", engine.ScalarAttr(complex64(1-2i))); err != nil {
		t.Fatal(err)
	}
	c, err := f.CreateDataset(ctx, "c", engine.DatasetSpec{Type: engine.Complex128, Shape: []uint64{2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteSlice(ctx, c, engine.All([]uint64{2}), []complex128{1.5 + 2i, complex(math.NaN(), math.Inf(-1))}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "dump", "--dataset", "b", path)
	if code != 0 || !strings.Contains(out, "DATATYPE  bool") || !strings.Contains(out, "(0): true, false, true") ||
		!strings.Contains(out, `ATTRIBUTE "z" { complex64 1-2i }`) {
		t.Fatalf("exit %d %s:\n%s", code, stderr, out)
	}
	code, out, stderr = runCmd(t, "dump", "--dataset", "c", path)
	if code != 0 || !strings.Contains(out, "(0): 1.5+2i, NaN-Infi") {
		t.Fatalf("exit %d %s:\n%s", code, stderr, out)
	}
	code, out, _ = runCmd(t, "dump", "--json", "--dataset", "c", path)
	var d struct {
		Type   string
		Values [][2]any
	}
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if d.Type != "complex128" || d.Values[0][0] != 1.5 || d.Values[0][1] != 2.0 || d.Values[1][0] != "NaN" || d.Values[1][1] != "-Inf" {
		t.Fatalf("%+v", d)
	}
	code, out, _ = runCmd(t, "dump", "--json", "--dataset", "b", path)
	var db struct{ Values []bool }
	if err := json.Unmarshal([]byte(out), &db); code != 0 || err != nil || len(db.Values) != 3 || !db.Values[0] || db.Values[1] {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
}

// TestDumpFixedStrings: a fixed-length string dataset prints its type with
// length, padding and character set, and each element's text under the
// padding rule (quoted; JSON strings in --json), its fill value too.
func TestDumpFixedStrings(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/str.scc"
	f := testfile.Create(t, path, nil)
	typ := engine.FixedString(6, engine.SpacePad, engine.UTF8)
	fill, err := engine.EncodeString(typ, "-")
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.CreateDataset(ctx, "s", engine.DatasetSpec{Type: typ, Shape: []uint64{3}, Chunk: []uint64{1}, Fill: fill})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteStrings(ctx, engine.Box([]uint64{0}, []uint64{2}), []string{"héllo", "a\x00"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "dump", "--dataset", "s", path)
	if code != 0 || !strings.Contains(out, "DATATYPE  string(6, spacepad, utf-8)") || !strings.Contains(out, `(0): "héllo", "a\x00", "-"`) {
		t.Fatalf("exit %d %s:\n%s", code, stderr, out)
	}
	code, out, _ = runCmd(t, "dump", "--json", "--dataset", "s", path)
	var d struct {
		Type   string
		Values []string
	}
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if d.Type != "string(6, spacepad, utf-8)" || len(d.Values) != 3 || d.Values[0] != "héllo" || d.Values[1] != "a\x00" || d.Values[2] != "-" {
		t.Fatalf("%+v", d)
	}
}
