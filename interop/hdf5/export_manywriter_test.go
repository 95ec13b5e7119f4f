package hdf5

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
)

// writerFile makes an scc file at path with dataset "frames" of n frames
// of 2x3 int32, frame k of writer w holding w*1000+k*10+element.
func writerFile(t *testing.T, path string, w, n int) {
	t.Helper()
	ctx := context.Background()
	f, err := engine.Create(ctx, path, &engine.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "frames", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{uint64(n), 2, 3},
		MaxShape: []uint64{engine.Unlimited, 2, 3}, Chunk: []uint64{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for k := 0; k < n; k++ {
		for e := 0; e < 6; e++ {
			b = append(b, i32bytes(int32(w*1000+k*10+e))...)
		}
	}
	if n > 0 {
		if err := ds.Write(ctx, engine.Box([]uint64{0, 0, 0}, []uint64{uint64(n), 2, 3}), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func i32bytes(v int32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// virtualFile makes the virtual file at path with dataset "frames" of
// these mappings (int32 frames of 2x3, fill -7).
func virtualFile(t *testing.T, path string, maps []engine.VirtualMapping) {
	t.Helper()
	f, err := engine.Create(context.Background(), path, &engine.Options{NoSync: true, Virtual: absentURLs})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if _, err := f.CreateVirtualDataset(context.Background(), "frames", engine.VirtualSpec{Type: engine.Int32,
		Shape: []uint64{0, 2, 3}, MaxShape: []uint64{engine.Unlimited, 2, 3}, Fill: i32bytes(-7), Mappings: maps}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// absentURLs opens a source named by a URL as one that does not exist
// yet: the tests name s3:// sources that no store holds.
var absentURLs = engine.VirtualOptions{OpenURL: func(_ context.Context, url string, _ *engine.Options) (*engine.File, error) {
	return nil, fmt.Errorf("%w: %s", engine.ErrNotFound, url)
}}

// roundRobin are the mappings of the many-writer ingest: frame i of the
// virtual dataset is frame i/n of writer i%n, file names by pattern.
func roundRobin(n int, file func(i int) string) []engine.VirtualMapping {
	var maps []engine.VirtualMapping
	for i := 0; i < n; i++ {
		maps = append(maps, engine.VirtualMapping{
			Virtual: engine.Hyperslab([]uint64{uint64(i), 0, 0}, []uint64{uint64(n), 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, 2, 3}),
			File:    file(i), Dataset: "frames",
			Source: engine.Hyperslab([]uint64{0, 0, 0}, nil, []uint64{engine.Unlimited, 1, 1}, []uint64{1, 2, 3}),
		})
	}
	return maps
}

// sccView is what the engine reads of the virtual dataset "frames" of
// the file at path in a view: its shape and every element.
func sccView(t *testing.T, path string, view engine.VirtualView) map[string]any {
	t.Helper()
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true, Virtual: engine.VirtualOptions{View: view}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	ds, err := f.OpenDataset(context.Background(), "frames", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(context.Background())
	shape := ds.Shape()
	buf := make([]byte, shape[0]*shape[1]*shape[2]*4)
	if err := ds.Read(context.Background(), engine.Box([]uint64{0, 0, 0}, shape), buf); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"shape": shape, "values": hex.EncodeToString(buf)}
}

const checkViewsPy = `
import sys, json, h5py, numpy as np
want = json.load(open(sys.argv[2]))
# A dataset open twice in one file shares its extent: one open per view.
for view, w in want.items():
    with h5py.File(sys.argv[1], "r") as f:
        dapl = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
        dapl.set_virtual_view(h5py.h5d.VDS_FIRST_MISSING if view == "first_missing" else h5py.h5d.VDS_LAST_AVAILABLE)
        d = h5py.Dataset(h5py.h5d.open(f.id, b"frames", dapl))
        assert d.id.get_create_plist().get_layout() == h5py.h5d.VIRTUAL
        assert list(d.shape) == w["shape"], (view, d.shape, w["shape"])
        got = np.ascontiguousarray(d[()]).astype("<i4").ravel()
        exp = np.frombuffer(bytes.fromhex(w["values"]), dtype="<i4")
        assert got.tobytes() == exp.tobytes(), (view, got, exp)
print("ok")
`

// checkExport exports the virtual file at vpath to out and has h5py,
// run from another working directory, read the VDS in both views as the
// engine reads the virtual dataset in them.
func checkExport(t *testing.T, vpath, out string, views ...engine.VirtualView) Report {
	t.Helper()
	ctx := context.Background()
	f, err := engine.Open(ctx, vpath, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Export(ctx, f, out, nil)
	f.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if views == nil {
		views = []engine.VirtualView{engine.LastAvailable, engine.FirstMissing}
	}
	want := map[string]any{}
	for _, v := range views {
		want[map[engine.VirtualView]string{engine.LastAvailable: "last_available", engine.FirstMissing: "first_missing"}[v]] = sccView(t, vpath, v)
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	wp := filepath.Join(t.TempDir(), "want.json")
	if err := os.WriteFile(wp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Relative source names resolve against the VDS file's directory,
	// not the reader's working directory.
	cmd := exec.Command(python, "-c", checkViewsPy, out, wp)
	cmd.Dir = t.TempDir()
	// HDF5_VDS_PREFIX changes where libhdf5 looks: left out.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "HDF5_VDS_PREFIX=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	return rep
}

// TestExportManyWriters: the layout of the many-writer ingest (writers
// with different frame counts, strided unlimited mappings into their
// files) exports with the writers' files as HDF5 files beside the output,
// and h5py reads every element of both views as scc does; with a writer's
// file missing its frames read as the fill value in both.
func TestExportManyWriters(t *testing.T) {
	needReaders(t)
	for _, tc := range []struct {
		name    string
		frames  []int // per writer; -1: no file
		file    func(i int) string
		written []string
	}{
		{"relative", []int{5, 3, 4, 0}, func(i int) string { return fmt.Sprintf("w%d.scc", i) }, []string{"w0.h5", "w1.h5", "w2.h5", "w3.h5"}},
		{"subdir", []int{2, 4, 3}, func(i int) string { return fmt.Sprintf("parts/w%d.scc", i) }, []string{"parts/w0.h5", "parts/w1.h5", "parts/w2.h5"}},
		{"missing", []int{4, -1, 3}, func(i int) string { return fmt.Sprintf("w%d.scc", i) }, []string{"w0.h5", "w2.h5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outDir := t.TempDir(), t.TempDir()
			for i, n := range tc.frames {
				if n >= 0 {
					p := filepath.Join(dir, tc.file(i))
					os.MkdirAll(filepath.Dir(p), 0o755)
					writerFile(t, p, i, n)
				}
			}
			vpath := filepath.Join(dir, "v.scc")
			virtualFile(t, vpath, roundRobin(len(tc.frames), tc.file))
			var views []engine.VirtualView
			if tc.name == "missing" {
				// libhdf5 1.10 ends the first-missing view at 0 when an
				// unlimited mapping's source file is missing, scc at
				// that mapping's first element: only the last-available
				// view is the same.
				views = []engine.VirtualView{engine.LastAvailable}
			}
			rep := checkExport(t, vpath, filepath.Join(outDir, "v.h5"), views...)
			var got []string
			for _, s := range rep.Sources {
				r, _ := filepath.Rel(outDir, s.Path)
				got = append(got, r)
			}
			if strings.Join(got, ",") != strings.Join(tc.written, ",") {
				t.Fatalf("source files written %v, want %v", got, tc.written)
			}
		})
	}
}

// TestExportManyWritersAbsolute: sources named by absolute paths export
// under their base names beside the output.
func TestExportManyWritersAbsolute(t *testing.T) {
	needReaders(t)
	dir, outDir := t.TempDir(), t.TempDir()
	file := func(i int) string { return filepath.Join(dir, fmt.Sprintf("w%d.scc", i)) }
	for i, n := range []int{3, 1, 2} {
		writerFile(t, file(i), i, n)
	}
	vpath := filepath.Join(t.TempDir(), "v.scc")
	virtualFile(t, vpath, roundRobin(3, file))
	checkExport(t, vpath, filepath.Join(outDir, "v.h5"))
	if _, err := os.Stat(filepath.Join(outDir, "w1.h5")); err != nil {
		t.Fatal(err)
	}
}

// TestExportPrintfSources: a mapping whose file name carries %b (one
// writer file per block of two frames) exports as an HDF5 printf
// mapping over the block files that exist, each exported beside the
// output; h5py reads both views as scc does.
func TestExportPrintfSources(t *testing.T) {
	needReaders(t)
	dir, outDir := t.TempDir(), t.TempDir()
	for b := 0; b < 3; b++ {
		writerFile(t, filepath.Join(dir, fmt.Sprintf("blk%d.scc", b)), b, 2)
	}
	vpath := filepath.Join(dir, "v.scc")
	virtualFile(t, vpath, []engine.VirtualMapping{{
		Virtual: engine.Hyperslab([]uint64{0, 0, 0}, []uint64{2, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{2, 2, 3}),
		File:    "blk%b.scc", Dataset: "frames",
		Source: engine.Box([]uint64{0, 0, 0}, []uint64{2, 2, 3}),
	}})
	rep := checkExport(t, vpath, filepath.Join(outDir, "v.h5"))
	if len(rep.Sources) != 3 {
		t.Fatalf("source files written: %v", rep.Sources)
	}
}

// TestExportVirtualSourceRefusals: a source named by URL, a relative
// source name leaving the virtual file's directory, two sources that
// would be written under one name, and a source that would be written
// as the output itself are refused with ErrUnsupported naming
// the mapping, and nothing is written.
func TestExportVirtualSourceRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"s3", []string{"w0.scc", "s3://bucket/w1.scc"}, "mapping 1 (s3://bucket/w1.scc:frames)"},
		{"climb", []string{"../w0.scc"}, "mapping 0 (../w0.scc:frames)"},
		{"collision", []string{"a/w0.scc", "/elsewhere/a/w0.scc", "a/w0"}, "mapping 2 (a/w0:frames)"},
		{"output", []string{"a/w0.scc", "w0.scc"}, "mapping 1 (w0.scc:frames)"},
		{"input", []string{"w.h5", "w.scc"}, "mapping 1 (w.scc:frames)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outDir := t.TempDir(), t.TempDir()
			os.MkdirAll(filepath.Join(dir, "a"), 0o755)
			writerFile(t, filepath.Join(dir, "w0.scc"), 0, 2)
			writerFile(t, filepath.Join(dir, "a", "w0.scc"), 0, 2)
			writerFile(t, filepath.Join(dir, "a", "w0"), 1, 2)
			writerFile(t, filepath.Join(dir, "w.h5"), 2, 2)
			writerFile(t, filepath.Join(dir, "w.scc"), 3, 2)
			vpath := filepath.Join(dir, "v.scc")
			virtualFile(t, vpath, roundRobin(len(tc.files), func(i int) string { return tc.files[i] }))
			f, err := engine.Open(ctx, vpath, &engine.Options{ReadOnly: true, Virtual: absentURLs})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(ctx)
			out := filepath.Join(outDir, "v.h5")
			switch tc.name {
			case "output":
				out = filepath.Join(outDir, "w0.h5")
			case "input":
				// Beside the sources, replacing: w.scc's export would
				// be written over the scc file w.h5.
				out = filepath.Join(dir, "v.h5")
			}
			_, err = Export(ctx, f, out, &Options{Replace: true})
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrUnsupported naming %s", err, tc.want)
			}
			if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
				t.Fatalf("files left: %v", ents)
			}
			if g, err := engine.Open(ctx, filepath.Join(dir, "w.h5"), &engine.Options{ReadOnly: true}); err != nil {
				t.Fatalf("source file w.h5: %v", err)
			} else {
				g.Close(ctx)
			}
		})
	}
}

// TestExportSelfPrintfAndBounded: in one virtual dataset, a %b dataset
// name in the virtual file itself (HDF5 printf mapping with source "."),
// an unlimited mapping into a dataset of the same file after them, and a
// bounded mapping into another file whose source is shorter than the
// mapping (cut to the source's extent): h5py reads both views as scc.
func TestExportSelfPrintfAndBounded(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir, outDir := t.TempDir(), t.TempDir()
	writerFile(t, filepath.Join(dir, "w0.scc"), 9, 2)
	vpath := filepath.Join(dir, "v.scc")
	f, err := engine.Create(ctx, vpath, &engine.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	mk := func(name string, w, n int) {
		ds, err := f.CreateDataset(ctx, name, engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{uint64(n), 2, 3},
			MaxShape: []uint64{engine.Unlimited, 2, 3}, Chunk: []uint64{1, 2, 3}})
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		for k := 0; k < n*6; k++ {
			b = append(b, i32bytes(int32(w*1000+k))...)
		}
		if err := ds.Write(ctx, engine.Box([]uint64{0, 0, 0}, []uint64{uint64(n), 2, 3}), b); err != nil {
			t.Fatal(err)
		}
	}
	mk("blk0", 1, 1)
	mk("blk1", 2, 1)
	mk("tail", 3, 3)
	// Frames 0..3: w0 (2 of 4 present); frames 4, 6, 8, ...: blk%b, one
	// frame each; frames 5, 7, 9, ...: tail.
	if _, err := f.CreateVirtualDataset(ctx, "frames", engine.VirtualSpec{Type: engine.Int32,
		Shape: []uint64{0, 2, 3}, MaxShape: []uint64{engine.Unlimited, 2, 3}, Fill: i32bytes(-7), Mappings: []engine.VirtualMapping{
			{Virtual: engine.Box([]uint64{0, 0, 0}, []uint64{4, 2, 3}), File: "w0.scc", Dataset: "frames", Source: engine.Box([]uint64{0, 0, 0}, []uint64{4, 2, 3})},
			{Virtual: engine.Hyperslab([]uint64{4, 0, 0}, []uint64{2, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, 2, 3}), Dataset: "blk%b", Source: engine.Box([]uint64{0, 0, 0}, []uint64{1, 2, 3})},
			{Virtual: engine.Hyperslab([]uint64{5, 0, 0}, []uint64{2, 1, 1}, []uint64{engine.Unlimited, 1, 1}, []uint64{1, 2, 3}), Dataset: "tail", Source: engine.Hyperslab([]uint64{0, 0, 0}, nil, []uint64{engine.Unlimited, 1, 1}, []uint64{1, 2, 3})},
		}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep := checkExport(t, vpath, filepath.Join(outDir, "v.h5"))
	if len(rep.Sources) != 1 || filepath.Base(rep.Sources[0].Path) != "w0.h5" {
		t.Fatalf("source files written: %v", rep.Sources)
	}
}

// TestExportVirtualSourceDamaged: a source file that is not a valid scc
// file fails the export with the engine's error for it (ErrCorrupt), not
// as a mapping export cannot express, naming the mapping; nothing is
// written.
func TestExportVirtualSourceDamaged(t *testing.T) {
	dir, outDir := t.TempDir(), t.TempDir()
	writerFile(t, filepath.Join(dir, "w0.scc"), 0, 2)
	writerFile(t, filepath.Join(dir, "w1.scc"), 1, 2)
	vpath := filepath.Join(dir, "v.scc")
	// Bounded mappings: the virtual dataset's extent needs no source, so
	// opening it reads none.
	virtualFile(t, vpath, []engine.VirtualMapping{
		{Virtual: engine.Box([]uint64{0, 0, 0}, []uint64{2, 2, 3}), File: "w0.scc", Dataset: "frames", Source: engine.Box([]uint64{0, 0, 0}, []uint64{2, 2, 3})},
		{Virtual: engine.Box([]uint64{2, 0, 0}, []uint64{2, 2, 3}), File: "w1.scc", Dataset: "frames", Source: engine.Box([]uint64{0, 0, 0}, []uint64{2, 2, 3})},
	})
	if err := os.WriteFile(filepath.Join(dir, "w1.scc"), bytes.Repeat([]byte("not an scc file "), 512), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := engine.Open(context.Background(), vpath, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	_, err = Export(context.Background(), f, filepath.Join(outDir, "v.h5"), nil)
	if !errors.Is(err, engine.ErrCorrupt) || errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "mapping 1 (w1.scc:frames)") {
		t.Fatalf("got %v, want ErrCorrupt naming mapping 1", err)
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
		t.Fatalf("files left: %v", ents)
	}
}
