package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// vside is the frame side of the virtual test files.
const vside = 2

// vval is element e of global frame g of makeVirtual's sources.
func vval(g, e uint64) uint32 { return uint32(g*100 + e + 1) }

// makeVirtual makes dir/v.scc with two virtual datasets over source files
// beside it: "rr" maps frame g to frame g/4 of w{g%4}.scc (round robin;
// w0..w2 hold 3, 2 and 2 frames, w3 does not exist), and "blocks" maps
// block k of 1 frame to blk{k}.scc (%b; blk0 and blk1 exist).
func makeVirtual(t *testing.T) (dir, vpath string) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	frameSpec := engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{0, vside, vside},
		MaxShape: []uint64{engine.Unlimited, vside, vside}, Chunk: []uint64{1, vside, vside},
		Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(1)}}
	write := func(name string, frames []uint64) {
		f := testfile.Create(t, filepath.Join(dir, name), &engine.Options{NoSync: true})
		ds, err := f.CreateDataset(ctx, "frames", frameSpec)
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.SetExtent(ctx, []uint64{uint64(len(frames)), vside, vside}); err != nil {
			t.Fatal(err)
		}
		for j, g := range frames {
			v := make([]uint32, vside*vside)
			for e := range v {
				v[e] = vval(g, uint64(e))
			}
			if err := engine.WriteSlice(ctx, ds, engine.Box([]uint64{uint64(j), 0, 0}, []uint64{1, vside, vside}), v); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write("w0.scc", []uint64{0, 4, 8})
	write("w1.scc", []uint64{1, 5})
	write("w2.scc", []uint64{2, 6})
	write("blk0.scc", []uint64{0})
	write("blk1.scc", []uint64{1})
	vpath = filepath.Join(dir, "v.scc")
	f := testfile.Create(t, vpath, &engine.Options{NoSync: true})
	var rr []engine.VirtualMapping
	for i := 0; i < 4; i++ {
		rr = append(rr, engine.VirtualMapping{
			Virtual: engine.Hyperslab([]uint64{uint64(i), 0, 0}, []uint64{4, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, vside, vside}),
			File:    fmt.Sprintf("w%d.scc", i), Dataset: "frames",
			Source: engine.Hyperslab([]uint64{0, 0, 0}, nil, []uint64{engine.Unlimited, 1, 1}, []uint64{1, vside, vside}),
		})
	}
	spec := engine.VirtualSpec{Type: engine.Uint32, Shape: []uint64{0, vside, vside},
		MaxShape: []uint64{engine.Unlimited, vside, vside}, Mappings: rr}
	if _, err := f.CreateVirtualDataset(ctx, "rr", spec); err != nil {
		t.Fatal(err)
	}
	spec.Mappings = []engine.VirtualMapping{{
		Virtual: engine.Hyperslab([]uint64{0, 0, 0}, []uint64{1, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, vside, vside}),
		File:    "blk%b.scc", Dataset: "frames",
		Source: engine.Box([]uint64{0, 0, 0}, []uint64{1, vside, vside}),
	}}
	if _, err := f.CreateVirtualDataset(ctx, "blocks", spec); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir, vpath
}

// TestLsVirtual: ls shows a virtual dataset's layout, each mapping (the
// virtual selection, file, dataset and source selection) and each source
// as it is now: present with its extent, or missing; a printf mapping's
// blocks up to the first missing one.
func TestLsVirtual(t *testing.T) {
	dir, vpath := makeVirtual(t)
	code, out, stderr := runCmd(t, "ls", vpath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"rr                   Dataset {9/Inf, 2, 2}",
		"Layout:    virtual, 4 mappings",
		"Mapping 0: virtual {start=(0, 0, 0) stride=(4, 1, 1) count=(unlimited, 1, 1) block=(1, 2, 2)}",
		"<- w0.scc : frames {start=(0, 0, 0) stride=(1, 1, 1) count=(unlimited, 1, 1) block=(1, 2, 2)}",
		"source w0.scc (" + filepath.Join(dir, "w0.scc") + ") : frames: exists, uint32 {3, 2, 2}",
		"source w2.scc (" + filepath.Join(dir, "w2.scc") + ") : frames: exists, uint32 {2, 2, 2}",
		"source w3.scc (" + filepath.Join(dir, "w3.scc") + ") : frames: missing (reads as the fill value)",
		"blocks               Dataset {2/Inf, 2, 2}",
		"<- blk%b.scc : frames {start=(0, 0, 0) stride=(1, 2, 2) count=(1, 1, 1) block=(1, 2, 2)}",
		"source block 0: blk0.scc (" + filepath.Join(dir, "blk0.scc") + ") : frames: exists, uint32 {1, 2, 2}",
		"source block 1: blk1.scc",
		"source block 2: blk2.scc (" + filepath.Join(dir, "blk2.scc") + ") : frames: missing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "block 3") || strings.Contains(out, "Chunks:") {
		t.Errorf("listing goes past the first missing block or shows chunking:\n%s", out)
	}
	code, out, _ = runCmd(t, "ls", "--json", vpath)
	if code != 0 {
		t.Fatal(code)
	}
	var l lsFile
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	var rr *lsDataset
	for i := range l.Datasets {
		if l.Datasets[i].Name == "rr" {
			rr = &l.Datasets[i]
		}
	}
	if rr == nil || rr.Layout != "virtual" || len(rr.Mappings) != 4 {
		t.Fatalf("%+v", l.Datasets)
	}
	m := rr.Mappings[3]
	if m.File != "w3.scc" || m.Virtual.Count[0] != "unlimited" || m.Virtual.Stride[0] != 4 || m.Virtual.Start[0] != 3 ||
		len(m.Sources) != 1 || m.Sources[0].Exists || m.Sources[0].Path != filepath.Join(dir, "w3.scc") {
		t.Fatalf("%+v", m)
	}
	if s := rr.Mappings[1].Sources[0]; !s.Exists || s.Type != "uint32" || fmt.Sprint(s.Shape) != "[2 2 2]" {
		t.Fatalf("%+v", s)
	}
}

// TestDumpVirtual: dump reads a virtual dataset through its mappings:
// every frame its source holds, and the fill value where the source (w3)
// is missing.
func TestDumpVirtual(t *testing.T) {
	_, vpath := makeVirtual(t)
	code, out, stderr := runCmd(t, "dump", "--json", "--dataset", "rr", vpath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var d struct {
		Shape  []uint64
		Values []uint32
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	// Extent: up to frame 8 (w0's third frame), LastAvailable.
	if fmt.Sprint(d.Shape) != "[9 2 2]" || len(d.Values) != 9*vside*vside {
		t.Fatalf("shape %v, %d values", d.Shape, len(d.Values))
	}
	for g := uint64(0); g < 9; g++ {
		for e := uint64(0); e < vside*vside; e++ {
			want := vval(g, e)
			if g%4 == 3 || g == 7 {
				want = 0 // w3 missing; w3 would hold 3 and 7
			}
			if got := d.Values[g*vside*vside+e]; got != want {
				t.Fatalf("frame %d element %d = %d, want %d", g, e, got, want)
			}
		}
	}
	code, out, _ = runCmd(t, "dump", "--dataset", "blocks", "--start", "1,0,0", "--count", "1,1,2", vpath)
	if code != 0 || !strings.Contains(out, fmt.Sprint(vval(1, 0), ", ", vval(1, 1))) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// A start past the extent is refused as for any dataset.
	if code, _, _ := runCmd(t, "dump", "--dataset", "rr", "--start", "10,0,0", vpath); code != 2 {
		t.Fatalf("start past the extent: exit %d", code)
	}
}

// TestCheckVirtualSources: check --sources checks each source file the
// mappings name once (a printf mapping's blocks too), reports a missing
// one without failing, and fails on a damaged source, naming it and still
// checking the others.
func TestCheckVirtualSources(t *testing.T) {
	dir, vpath := makeVirtual(t)
	code, out, stderr := runCmd(t, "check", "--sources", vpath)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{
		"source w0.scc (" + filepath.Join(dir, "w0.scc") + "): generation",
		"source w3.scc (" + filepath.Join(dir, "w3.scc") + "): missing (reads as the fill value)",
		"source blk1.scc (" + filepath.Join(dir, "blk1.scc") + "): generation",
		"source blk2.scc (" + filepath.Join(dir, "blk2.scc") + "): missing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "source w0.scc"); n != 1 {
		t.Errorf("w0 checked %d times:\n%s", n, out)
	}
	code, out, _ = runCmd(t, "check", "--json", "--sources", vpath)
	var r checkOutput
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || !r.OK || len(r.Sources) != 7 {
		t.Fatalf("exit %d %v\n%s", code, err, out)
	}
	// A source that is not an scc file (garbage where its superblocks
	// were) is a problem of that source. (Zeros there would be a file
	// whose creator has not committed yet, which reads as missing.) The
	// file is rewritten valid below, before its cleanup check.
	bad := filepath.Join(dir, "w1.scc")
	if err := os.WriteFile(bad, bytes.Repeat([]byte{0xa5}, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCmd(t, "check", "--sources", vpath)
	if code != 1 || !strings.Contains(out, "source w1.scc ("+bad+")\n    PROBLEM: source frames: ") ||
		!strings.Contains(stderr, "problem(s) found") {
		t.Fatalf("damaged source: exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(out, "source w2.scc ("+filepath.Join(dir, "w2.scc")+"): generation") {
		t.Fatalf("the other sources are still checked:\n%s", out)
	}
	// Without --sources only the virtual file is checked, and it is
	// intact: a damaged source is not its damage.
	if code, out, stderr = runCmd(t, "check", vpath); code != 0 {
		t.Fatalf("the virtual file alone, with a damaged source: exit %d\n%s%s", code, out, stderr)
	}
	// ls still lists the mappings of the dataset whose extent cannot be
	// evaluated, naming the damaged source.
	code, out, _ = runCmd(t, "ls", vpath)
	if code != 0 || !strings.Contains(out, "Extent:    not evaluated") || !strings.Contains(out, "source w1.scc ("+bad+") : frames: error: ") ||
		!strings.Contains(out, "source w0.scc ("+filepath.Join(dir, "w0.scc")+") : frames: exists") {
		t.Fatalf("ls with a damaged source: exit %d\n%s", code, out)
	}
	// A source of another element type is a problem too.
	f := testfile.Create(t, bad, &engine.Options{NoSync: true})
	if _, err := f.CreateDataset(context.Background(), "frames", engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{1, vside, vside},
		MaxShape: []uint64{engine.Unlimited, vside, vside}, Chunk: []uint64{1, vside, vside}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCmd(t, "check", "--sources", vpath)
	if code != 1 || !strings.Contains(out, `dataset "rr": source frames has type int16, the virtual dataset uint32`) {
		t.Fatalf("source of another type: exit %d\n%s", code, out)
	}
}

// TestLsVirtualEscapesNames: the source file and dataset names of a
// mapping, and of each source, print escaped as ls prints every name (a
// newline or an escape sequence in a name older files may hold, or a file
// name, cannot forge or garble lines).
func TestLsVirtualEscapesNames(t *testing.T) {
	block := uint64(1)
	ms := []lsMapping{{
		File: "w\n0.scc", Dataset: "d\x1b[31m", Printf: true,
		Sources: []lsSource{
			{Block: &block, File: "w\n1.scc", Path: "/data/w\n1.scc", Dataset: "bad\xff"},
			{File: "ok.scc", Dataset: "数据", Exists: true, Shape: []uint64{2}, Type: "uint8"},
		},
	}}
	var b strings.Builder
	printMappings(&b, ms)
	out := b.String()
	for _, want := range []string{`"w\n0.scc" : "d\x1b[31m" {`, `block 1: "w\n1.scc" ("/data/w\n1.scc") : "bad\xff": missing`, `ok.scc : 数据: exists`} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %s:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 4 || strings.ContainsAny(out, "\x1b\xff") {
		t.Fatalf("raw names in the listing:\n%q", out)
	}
}
