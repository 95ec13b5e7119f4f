package main

import (
	"bytes"
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// runCmd runs scctl in-process and returns its exit status and output.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	code, _, stderr := runCmd(t)
	if code != 2 || !strings.Contains(stderr, "usage: scctl") {
		t.Fatalf("no args: %d %q", code, stderr)
	}
	for _, name := range []string{"ingest", "ls", "dump", "check", "bench"} {
		if !strings.Contains(stderr, "  "+name+" ") {
			t.Errorf("usage does not list %s", name)
		}
	}
	if code, _, _ := runCmd(t, "help"); code != 0 {
		t.Fatalf("help: %d", code)
	}
	code, _, stderr = runCmd(t, "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Fatalf("unknown: %d %q", code, stderr)
	}
	code, _, stderr = runCmd(t, "ls", "-h")
	if code != 0 || !strings.Contains(stderr, "usage: scctl ls") {
		t.Fatalf("ls -h: %d %q", code, stderr)
	}
	code, _, stderr = runCmd(t, "ls", "--bogus")
	if code != 2 || !strings.Contains(stderr, "bogus") {
		t.Fatalf("bad flag: %d %q", code, stderr)
	}
}

// TestUsageListsEveryCommand: scctl --help (and help, -h, -help, and no
// arguments at all) lists every registered command on one line of its
// own, the summaries in one column.
func TestUsageListsEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}, {}} {
		code, out, stderr := runCmd(t, args...)
		want := 0
		if len(args) == 0 {
			want = 2
		}
		if code != want || out != "" {
			t.Fatalf("scctl %v: exit %d, stdout %q", args, code, out)
		}
		listed := map[string]int{} // command -> column of its summary
		for _, line := range strings.Split(stderr, "\n") {
			fields := strings.Fields(line)
			if !strings.HasPrefix(line, "  ") || len(fields) < 2 {
				continue
			}
			if _, ok := commands[fields[0]]; ok {
				rest := line[2+len(fields[0]):]
				listed[fields[0]] = len(line) - len(strings.TrimLeft(rest, " "))
			}
		}
		col := -1
		for name, c := range commands {
			if strings.Contains(c.summary, "\n") {
				t.Errorf("%s's summary spans lines", name)
			}
			at, ok := listed[name]
			switch {
			case !ok:
				t.Errorf("scctl %v does not list %s:\n%s", args, name, stderr)
			case at < len(name)+3 || !strings.Contains(stderr, "  "+name+strings.Repeat(" ", at-len(name)-2)+c.summary+"\n"):
				t.Errorf("scctl %v: %s's line is not its summary", args, name)
			case col >= 0 && at != col:
				t.Errorf("scctl %v: %s's summary starts at column %d, others at %d:\n%s", args, name, at, col, stderr)
			default:
				col = at
			}
		}
	}
}

// takesFile says, for every command, whether it takes a file argument, and
// so must say in its help that the file may be an s3:// URL. A command
// missing here fails TestCommandHelp until it is classified.
var takesFile = map[string]bool{
	"bench": false, "stress": false,
	"check": true, "clear-image": true, "dump": true, "export": true,
	"hdf5": true, "import": true, "ingest": true, "ls": true,
}

// TestCommandHelp: scctl COMMAND --help (and -h) works for every command:
// exit 0, the command's usage on stderr, nothing on stdout; the help of a
// command that takes a file says it takes s3:// URLs.
func TestCommandHelp(t *testing.T) {
	for name := range commands {
		if _, ok := takesFile[name]; !ok {
			t.Errorf("command %s is not classified in takesFile", name)
		}
	}
	for name, file := range takesFile {
		if _, ok := commands[name]; !ok {
			t.Errorf("takesFile names %s, which is not a command", name)
			continue
		}
		for _, flag := range []string{"--help", "-h"} {
			code, out, stderr := runCmd(t, name, flag)
			if code != 0 || out != "" || !strings.HasPrefix(stderr, "usage: scctl "+name+" ") {
				t.Errorf("scctl %s %s: exit %d, stdout %q, stderr %q", name, flag, code, out, stderr)
				continue
			}
			if file && !strings.Contains(stderr, "s3://bucket/key") {
				t.Errorf("scctl %s %s does not say FILE may be an s3:// URL:\n%s", name, flag, stderr)
			}
		}
	}
}

// TestOneFilePerCommand: each command lives in its own file, named after
// it, which registers it, beside a test file of the same name.
func TestOneFilePerCommand(t *testing.T) {
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		base := strings.ReplaceAll(name, "-", "")
		src, err := os.ReadFile(base + ".go")
		if err != nil {
			t.Errorf("command %s: %v", name, err)
			continue
		}
		if !bytes.Contains(src, []byte(`register("`+name+`",`)) {
			t.Errorf("%s.go does not register %s", base, name)
		}
		if _, err := os.Stat(base + "_test.go"); err != nil {
			t.Errorf("command %s has no test file: %v", name, err)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := newFlags("x", "", &bytes.Buffer{})
	q := fs.Bool("quick", false, "")
	o := fs.String("out", "", "")
	pos, err := parse(fs, []string{"all", "--quick", "--out", "d", "more", "--", "--notaflag"})
	if err != nil || !*q || *o != "d" || strings.Join(pos, " ") != "all more --notaflag" {
		t.Fatalf("%v %v %q %q", err, *q, *o, pos)
	}
}

// makeFile writes a small file with two datasets: "frames" (uint16,
// appendable, shuffle+zstd, 3 frames of 4×5 holding 0..59) and "grid"
// (float64 4×6, chunk 2×3, deflate, fill -1, only its first chunk written).
func makeFile(t *testing.T, o ...testfile.Opt) string {
	t.Helper()
	ctx := context.Background()
	path := t.TempDir() + "/small.scc"
	f := testfile.Create(t, path, nil, o...)
	ds, err := f.CreateDataset(ctx, "frames", engine.DatasetSpec{
		Type: engine.Uint16, Shape: []uint64{3, 4, 5}, MaxShape: []uint64{engine.Unlimited, 4, 5},
		Chunk: []uint64{1, 4, 5}, Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]uint16, 60)
	for i := range vals {
		vals[i] = uint16(i)
	}
	if err := engine.WriteSlice(ctx, ds, engine.Box([]uint64{0, 0, 0}, []uint64{3, 4, 5}), vals); err != nil {
		t.Fatal(err)
	}
	g, err := f.CreateDataset(ctx, "grid", engine.DatasetSpec{
		Type: engine.Float64, Shape: []uint64{4, 6}, Chunk: []uint64{2, 3},
		Filters: []engine.Filter{engine.Deflate(1)}, Fill: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0xbf}, // -1.0
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteSlice(ctx, g, engine.Box([]uint64{0, 0}, []uint64{2, 3}), []float64{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return path
}

// refusesNonRegular runs scctl with a FIFO, then a directory, as the last
// argument. Both must be refused before anything opens them: a plain open
// of a FIFO with no writer never returns (the command used to hang).
func refusesNonRegular(t *testing.T, args ...string) {
	t.Helper()
	fifo, release := makeFIFO(t)
	for _, path := range []string{fifo, t.TempDir()} {
		type result struct {
			code        int
			out, stderr string
		}
		done := make(chan result, 1)
		go func() {
			code, out, stderr := runCmd(t, append(append([]string(nil), args...), path)...)
			done <- result{code, out, stderr}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			release()
			<-done
			t.Fatalf("scctl %s %s: blocked opening it", strings.Join(args, " "), path)
		}
		if r.code != 1 || !strings.Contains(r.stderr, "not a regular file") || r.out != "" {
			t.Fatalf("scctl %s %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), path, r.code, r.out, r.stderr)
		}
	}
}
