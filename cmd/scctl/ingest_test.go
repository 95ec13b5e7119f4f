package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/scc-dev/scc/bench"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

func TestIngestSmall(t *testing.T) {
	path := t.TempDir() + "/ingest.scc"
	code, out, stderr := runCmd(t, "ingest", "--datasets", "2", "--writers", "3", "--readers", "2",
		"--frames", "12", "--frame", "16x8", "--filter", "shuffle+lz4", "--cache", "4KiB", "--file", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	testfile.CheckAtCleanup(t, path)
	for _, want := range []string{
		"scc ingest: 2 datasets × 12 frames of 256 B (uint16), shuffle+lz4, 3 writers, 2 readers",
		"written", "read+verified", "24 frames, every one checked", "hit ratio", "evictions",
		"peak resident", "vs cache limit 4.00 KiB quiescent / 8.00 KiB active", "peak Go heap", "file           " + path,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "\r") || !strings.Contains(stderr, "100%") || !strings.Contains(stderr, "written 24/24") {
		t.Errorf("progress bar: %q", stderr)
	}
	// The file is kept and consistent.
	if code, out, _ := runCmd(t, "check", path); code != 0 {
		t.Fatalf("check: %d\n%s", code, out)
	}
}

func TestIngestJSON(t *testing.T) {
	code, out, stderr := runCmd(t, "ingest", "--json", "--quiet", "--datasets", "1", "--writers", "1",
		"--readers", "0", "--frames", "3", "--frame", "4x4", "--filter", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("--quiet printed %q", stderr)
	}
	var r bench.IngestResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.BytesWritten != 3*32 || r.Readers != 0 || r.FramesVerified != 0 || r.Filters != "none" || r.Path != "" {
		t.Fatalf("%+v", r)
	}
}

// TestIngestDefaults checks that scctl ingest with no arguments (make
// demo) runs bench.Ingest's documented default, the embedded demo job.
func TestIngestDefaults(t *testing.T) {
	o, err := parseIngest(nil, io.Discard)
	if err != nil || o.json || o.quiet || o.image || o.memProfile != "" {
		t.Fatal(err)
	}
	cfg := o.cfg
	want := bench.IngestConfig{Datasets: 4, Writers: 4, Readers: 2, Frames: 512, Height: 256, Width: 256,
		Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}, CacheBytes: 32 << 20}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults %+v\nwant %+v", cfg, want)
	}
}

func TestIngestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--frame", "16"}, {"--frame", "ax4"}, {"--filter", "snappy"}, {"--cache", "lots"},
		{"--datasets", "0"}, {"--writers", "0"}, {"--frames", "0"}, {"--readers", "-1"}, {"--frame", "2x2"}, {"extra"},
		{"--filter", "zstd23"}, {"--filter", "deflate0"}, {"--filter", "zlib10"}, {"--filter", "lz4-1"},
	} {
		code, _, stderr := runCmd(t, append([]string{"ingest"}, args...)...)
		if code != 2 {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}

// cancelOnWrite cancels a context at its first write (the first progress
// line: the job is running).
type cancelOnWrite struct {
	cancel func()
}

func (c cancelOnWrite) Write(p []byte) (int, error) {
	c.cancel()
	return len(p), nil
}

// TestIngestFailureDoesNotCommit: an ingest that fails (interrupted while
// writing) leaves its file as the last commit left it — created, empty —
// instead of committing the frames it got to on close.
// With -image too: the close that writes the image commits only after
// the job's final Flush did.
func TestIngestFailureDoesNotCommit(t *testing.T) {
	for _, extra := range [][]string{nil, {"-image"}} {
		path := t.TempDir() + "/cut.scc"
		ctx, cancel := context.WithCancel(context.Background())
		var out bytes.Buffer
		err := cmdIngest(ctx, append([]string{"--datasets", "2", "--writers", "2", "--readers", "0",
			"--frames", "1000000", "--frame", "64x64", "--filter", "none", "--cache", "4MiB", "--file", path}, extra...), &out, cancelOnWrite{cancel})
		cancel()
		if err == nil {
			t.Fatalf("%v: the interrupted ingest succeeded:\n%s", extra, out.String())
		}
		bg := context.Background() // ctx ended with the ingest
		f, oerr := engine.Open(bg, path, &engine.Options{ReadOnly: true})
		if oerr != nil {
			t.Fatalf("%v: the file is not readable after the failure (%v): %v", extra, err, oerr)
		}
		testfile.CheckAtCleanup(t, path)
		ds, gen, img := testfile.DatasetNames(t, f), f.Generation(), f.ImageInfo()
		f.Close(bg)
		if len(ds) != 0 || gen != 1 || img.Exists {
			t.Fatalf("%v: after a failed ingest (%v) the file holds %v at generation %d (image %v): it was committed", extra, err, ds, gen, img.Exists)
		}
	}
}

// TestIngestImage: -image writes a cache image on close, which the
// summary reports and the next open finds and uses; the file checks clean.
func TestIngestImage(t *testing.T) {
	path := t.TempDir() + "/img.scc"
	code, out, stderr := runCmd(t, "ingest", "--quiet", "--datasets", "2", "--writers", "2", "--readers", "1",
		"--frames", "5", "--frame", "16x16", "--filter", "shuffle+zstd1", "--file", path, "-image")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	testfile.CheckAtCleanup(t, path)
	if !strings.Contains(out, "cache image    ") || !strings.Contains(out, "written on close") {
		t.Fatalf("summary does not report the image:\n%s", out)
	}
	f, err := engine.Open(context.Background(), path, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	info := f.ImageInfo()
	f.Close(context.Background())
	if !info.Exists || !info.Used || info.Entries == 0 {
		t.Fatalf("image after ingest -image: %+v", info)
	}
	if code, out, _ := runCmd(t, "check", path); code != 0 {
		t.Fatalf("check: %d\n%s", code, out)
	}

	// Without -image no image is written nor reported.
	code, out, stderr = runCmd(t, "ingest", "--quiet", "--datasets", "1", "--writers", "1", "--readers", "0",
		"--frames", "2", "--frame", "4x4", "--file", path)
	if code != 0 || strings.Contains(out, "cache image") {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	if f, err = engine.Open(context.Background(), path, &engine.Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	info = f.ImageInfo()
	f.Close(context.Background())
	if info.Exists {
		t.Fatalf("image written without -image: %+v", info)
	}
}

// TestIngestImageTempJSON: -image works on ingest's temporary file too,
// and --json reports the image beside bench's result.
func TestIngestImageTempJSON(t *testing.T) {
	code, out, stderr := runCmd(t, "ingest", "--json", "--quiet", "-image", "--datasets", "1", "--writers", "1",
		"--readers", "0", "--frames", "3", "--frame", "4x4", "--filter", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		bench.IngestResult
		Image *engine.ImageInfo `json:"image"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Image == nil || !r.Image.Exists || r.Image.Size == 0 || r.Path != "" || r.BytesWritten != 3*32 {
		t.Fatalf("%s", out)
	}
}

// allFilters is every filter the engine has, with levels at the ends of
// their ranges: ingest must take each.
var allFilters = []engine.Filter{
	engine.Shuffle(), engine.Deflate(1), engine.Deflate(9), engine.Zlib(1), engine.Zlib(9),
	engine.Zstd(-131072), engine.Zstd(-5), engine.Zstd(0), engine.Zstd(22), engine.LZ4(), engine.CRC32C(),
}

func TestParseFilters(t *testing.T) {
	str := func(fs []engine.Filter) string {
		var s []string
		for _, f := range fs {
			s = append(s, f.String())
		}
		return strings.Join(s, "+")
	}
	// What engine.Filter.String prints reads back as the same filter.
	for _, f := range allFilters {
		got, err := parseFilters(f.String())
		if err != nil || str(got) != f.String() {
			t.Errorf("parseFilters(%q) = %v, %v", f.String(), str(got), err)
		}
	}
	for in, want := range map[string][]engine.Filter{
		"shuffle+zstd1":          {engine.Shuffle(), engine.Zstd(1)},
		"zstd-5":                 {engine.Zstd(-5)},
		"ZSTD(19)":               {engine.Zstd(19)},
		"zstd":                   {engine.Zstd(1)},
		"zstd0":                  {engine.Zstd(0)},
		"zlib6, deflate9":        {engine.Zlib(6), engine.Deflate(9)},
		"zlib":                   {engine.Zlib(1)},
		"lz4,crc32c":             {engine.LZ4(), engine.CRC32C()},
		"shuffle+zstd(-7)+lz4":   {engine.Shuffle(), engine.Zstd(-7), engine.LZ4()},
		"crc32c+shuffle+zlib(3)": {engine.CRC32C(), engine.Shuffle(), engine.Zlib(3)},
	} {
		got, err := parseFilters(in)
		if err != nil || str(got) != str(want) {
			t.Errorf("parseFilters(%q) = %s, %v; want %s", in, str(got), err, str(want))
		}
	}
	for _, in := range []string{"none", ""} {
		if got, err := parseFilters(in); err != nil || got == nil || len(got) != 0 {
			t.Errorf("parseFilters(%q) = %#v, %v", in, got, err)
		}
	}
	for _, in := range []string{"snappy", "zstdx", "zstd23", "zstd-131073", "zstd(3", "deflate0", "deflate-6",
		"zlib10", "lz4-1", "shuffle2", "crc32c(1)", "shuffle+bzip2", "gzip"} {
		if got, err := parseFilters(in); err == nil {
			t.Errorf("parseFilters(%q) accepted: %s", in, str(got))
		}
	}
}

// TestIngestHelpNamesFilters: ingest's help names every filter the engine
// has, with the level ranges, and the run stores the pipeline asked for,
// negative zstd levels included.
func TestIngestHelpNamesFilters(t *testing.T) {
	code, _, stderr := runCmd(t, "ingest", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range allFilters {
		name, _, _ := strings.Cut(f.String(), "(")
		if !strings.Contains(stderr, name) {
			t.Errorf("ingest --help does not name %s:\n%s", name, stderr)
		}
	}
	for _, want := range []string{"1..9", "-131072..22"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("ingest --help does not give the levels %s", want)
		}
	}

	path := t.TempDir() + "/filters.scc"
	code, out, stderr := runCmd(t, "ingest", "--quiet", "--datasets", "1", "--writers", "1", "--readers", "1",
		"--frames", "3", "--frame", "8x8", "--filter", "shuffle+zstd-5+zlib6+crc32c", "--file", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	testfile.CheckAtCleanup(t, path)
	if !strings.Contains(out, "shuffle+zstd(-5)+zlib(6)+crc32c") {
		t.Errorf("summary does not name the pipeline:\n%s", out)
	}
	code, out, _ = runCmd(t, "ls", path)
	if code != 0 || !strings.Contains(out, "shuffle + zstd(-5) + zlib(6) + crc32c") {
		t.Fatalf("ls: %d\n%s", code, out)
	}
}
