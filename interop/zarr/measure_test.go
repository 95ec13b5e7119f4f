package zarr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
)

// The corpus measurement: every Zarr array under a directory of public
// stores is read by a reference reader (zarr-python 2 for v2 metadata,
// zarrita for v3), imported alone with the bridge, and its elements
// compared in scc's normal form (little-endian, C order, structured
// padding zeroed; strings and other variable-length elements one byte
// string each). `make corpus-zarr CORPUS=dir` runs it
// (TestZarrCorpusMeasure); the corpora are never part of the repository
// nor of `make test`.

// Outcomes of one array.
const (
	outEqual   = "imported equal"
	outDiffer  = "imported, values differ"
	outRefused = "refused"
	outFailed  = "import failed"
)

type corpusArray struct {
	Dir, Rel string
	Version  int
	// The reference reading.
	Readable    bool
	RefErr      string
	Dtype, Form string
	Dump        string
	// The bridge's.
	Outcome, Reason string
}

type corpusResult struct {
	Root   string
	Arrays []corpusArray
	// NotMeasured names the stores neither format's discovery counts
	// (the draft of v3 zarr-python 2 writes, N5), with why.
	NotMeasured []string
}

// findCorpusArrays lists every array directory under root as the bridge's
// discovery sees it: a directory with .zarray is a v2 array (also when a
// zarr.json describes it too), one whose zarr.json is a v3 array is a v3
// array; nothing below an array is looked at.
func findCorpusArrays(root string) ([]corpusArray, []string, error) {
	var arrays []corpusArray
	var not []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if _, err := os.Stat(filepath.Join(path, ".zarray")); err == nil {
			arrays = append(arrays, corpusArray{Dir: path, Rel: rel, Version: 2})
			return fs.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "attributes.json")); err == nil && strings.HasSuffix(path, ".n5") {
			not = append(not, rel+": N5, not Zarr")
			return fs.SkipDir
		}
		b, err := os.ReadFile(filepath.Join(path, "zarr.json"))
		if err != nil {
			return nil
		}
		var m struct {
			Format   any    `json:"zarr_format"`
			NodeType string `json:"node_type"`
		}
		if json.Unmarshal(b, &m) != nil {
			not = append(not, rel+": zarr.json is not JSON")
			return fs.SkipDir
		}
		if f, ok := m.Format.(float64); !ok || f != 3 {
			not = append(not, fmt.Sprintf("%s: zarr_format %v (the draft of v3 that zarr-python 2 wrote)", rel, m.Format))
			return fs.SkipDir
		}
		if m.NodeType == "array" {
			arrays = append(arrays, corpusArray{Dir: path, Rel: rel, Version: 3})
			return fs.SkipDir
		}
		return nil
	})
	return arrays, not, err
}

// referenceRead reads every array with its format's reference reader,
// in one process per format.
func referenceRead(t *testing.T, arrays []corpusArray, out string) {
	var v2, v3 []int
	for i, a := range arrays {
		if a.Version == 2 {
			v2 = append(v2, i)
		} else {
			v3 = append(v3, i)
		}
	}
	run := func(idx []int, sub string, cmd func(dirs []string) *exec.Cmd) {
		if len(idx) == 0 {
			return
		}
		dir := filepath.Join(out, sub)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		var dirs []string
		for _, i := range idx {
			dirs = append(dirs, arrays[i].Dir)
		}
		c := cmd(append([]string{dir}, dirs...))
		b, err := c.Output()
		require.NoError(t, err, "%s: %s", c, stderr(err))
		var recs []struct {
			Dir, Dtype, Form, Dump, Error string
			OK                            bool
		}
		require.NoError(t, json.Unmarshal(b, &recs))
		require.Len(t, recs, len(idx))
		for k, i := range idx {
			r := recs[k]
			a := &arrays[i]
			a.Readable, a.RefErr, a.Dtype, a.Form, a.Dump = r.OK, r.Error, r.Dtype, r.Form, r.Dump
		}
	}
	run(v2, "v2", func(args []string) *exec.Cmd {
		zarrPython(t)
		return exec.Command(python, append([]string{filepath.Join(testdata(t), "corpus.py"), "dump"}, args...)...)
	})
	run(v3, "v3", func(args []string) *exec.Cmd {
		node := zarrita(t)
		return exec.Command("node", append([]string{filepath.Join(node, "zarr3.mjs"), "dump"}, args...)...)
	})
}

// importCompare imports one array alone into a new scc file under work and
// compares it with the reference reading.
func importCompare(ctx context.Context, a corpusArray, work string) (outcome, reason string) {
	f, err := engine.Create(ctx, filepath.Join(work, "a.scc"), &engine.Options{NoSync: true})
	if err != nil {
		return outFailed, err.Error()
	}
	defer func() {
		f.Close(ctx)
		os.Remove(filepath.Join(work, "a.scc"))
	}()
	rep, err := Import(ctx, a.Dir, f, Options{})
	if rep != nil && len(rep.Skipped) > 0 && len(rep.Datasets) == 0 {
		return outRefused, rep.Skipped[0].Reason
	}
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return outRefused, err.Error()
		}
		return outFailed, err.Error()
	}
	if len(rep.Datasets) != 1 {
		return outFailed, fmt.Sprintf("%d datasets imported from one array", len(rep.Datasets))
	}
	if !a.Readable {
		return outEqual, "" // nothing to compare with
	}
	ds, err := f.OpenDataset(ctx, rep.Datasets[0].Name, nil)
	if err != nil {
		return outFailed, err.Error()
	}
	defer ds.Close(ctx)
	if d := compareNormal(ctx, ds, a.Form, a.Dump); d != "" {
		return outDiffer, d
	}
	return outEqual, ""
}

// compareNormal compares ds with a reference dump in form "bytes" or
// "vlen"; "" when equal, else what differs.
func compareNormal(ctx context.Context, ds *engine.Dataset, form, dump string) string {
	want, err := os.ReadFile(dump)
	if err != nil {
		return err.Error()
	}
	sel := engine.All(ds.Shape())
	if ds.Space() == engine.SpaceNull {
		sel = engine.All([]uint64{0})
	}
	if form == "vlen" {
		if ds.Layout() != engine.Vlen {
			return fmt.Sprintf("variable-length elements imported as %v", ds.Type())
		}
		got, err := ds.ReadVlen(ctx, sel)
		if err != nil {
			return "read: " + err.Error()
		}
		var ref [][]byte
		sc := bufio.NewScanner(bytes.NewReader(want))
		sc.Buffer(nil, 1<<30)
		for sc.Scan() {
			b, err := base64.StdEncoding.DecodeString(sc.Text())
			if err != nil {
				return "dump: " + err.Error()
			}
			ref = append(ref, b)
		}
		if len(ref) != len(got) {
			return fmt.Sprintf("%d elements, the reference reads %d", len(got), len(ref))
		}
		for i := range ref {
			if !bytes.Equal(ref[i], got[i]) {
				return fmt.Sprintf("element %d: %q, the reference reads %q", i, got[i], ref[i])
			}
		}
		return ""
	}
	if ds.Layout() == engine.Vlen {
		return "fixed-size elements imported as variable-length"
	}
	buf := make([]byte, sel.NumElements()*uint64(ds.Type().Size()))
	if err := ds.Read(ctx, sel, buf); err != nil {
		return "read: " + err.Error()
	}
	got := zeroPad(ds.Type(), buf)
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes as %v, the reference reads %d", len(got), ds.Type(), len(want))
	}
	if i := firstDiff(got, want); i >= 0 {
		return fmt.Sprintf("byte %d of %d differs (%v)", i, len(got), ds.Type())
	}
	return ""
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// measureCorpus runs the whole measurement over root, working in work.
func measureCorpus(t *testing.T, root, work string) corpusResult {
	ctx := context.Background()
	arrays, not, err := findCorpusArrays(root)
	require.NoError(t, err)
	referenceRead(t, arrays, filepath.Join(work, "ref"))
	imp := filepath.Join(work, "imp")
	require.NoError(t, os.MkdirAll(imp, 0o755))
	for i := range arrays {
		arrays[i].Outcome, arrays[i].Reason = importCompare(ctx, arrays[i], imp)
	}
	return corpusResult{Root: root, Arrays: arrays, NotMeasured: not}
}

// reasonClass is a refusal's reason without the array's own names, so
// that refusals of the same kind count together.
func reasonClass(a corpusArray) string {
	r := a.Reason
	name := strings.TrimSuffix(filepath.Base(a.Dir), ".zarr")
	for _, s := range []string{a.Dir, fmt.Sprintf("%q", name)} {
		r = strings.ReplaceAll(r, s, "…")
	}
	if i := strings.Index(r, " (ZARR"); i > 0 {
		r = r[:i]
	}
	return r
}

type corpusCounts struct {
	Arrays, Readable, Equal, Differ, Refused, Failed int
	// Of the arrays no reference reader reads, how many the bridge
	// imports (unchecked) and refuses.
	UnreadImported, UnreadRefused int
	Reasons                       map[string]int // refusals and failures of readable arrays
}

func (r corpusResult) counts() corpusCounts {
	c := corpusCounts{Arrays: len(r.Arrays), Reasons: map[string]int{}}
	for _, a := range r.Arrays {
		if !a.Readable {
			if a.Outcome == outEqual {
				c.UnreadImported++
			} else {
				c.UnreadRefused++
			}
			continue
		}
		c.Readable++
		switch a.Outcome {
		case outEqual:
			c.Equal++
		case outDiffer:
			c.Differ++
		case outRefused:
			c.Refused++
			c.Reasons[reasonClass(a)]++
		default:
			c.Failed++
			c.Reasons["failed: "+reasonClass(a)]++
		}
	}
	return c
}

// markdown is the measurement's report.
func (r corpusResult) markdown() string {
	c := r.counts()
	var b strings.Builder
	fmt.Fprintf(&b, "# Zarr corpus measurement\n\nCorpus: `%s`, %d arrays (v2 read by zarr-python, v3 by zarrita).\n\n", r.Root, c.Arrays)
	pct := func(n int) string {
		if c.Readable == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(c.Readable))
	}
	b.WriteString("| | arrays | of readable |\n|---|---:|---:|\n")
	fmt.Fprintf(&b, "| read by the reference reader | %d | |\n", c.Readable)
	fmt.Fprintf(&b, "| imported, values equal | %d | %s |\n", c.Equal, pct(c.Equal))
	fmt.Fprintf(&b, "| imported, values differ | %d | %s |\n", c.Differ, pct(c.Differ))
	fmt.Fprintf(&b, "| refused | %d | %s |\n", c.Refused, pct(c.Refused))
	fmt.Fprintf(&b, "| import failed | %d | %s |\n", c.Failed, pct(c.Failed))
	fmt.Fprintf(&b, "| not read by the reference reader | %d | (imported %d, refused %d) |\n", c.Arrays-c.Readable, c.UnreadImported, c.UnreadRefused)
	if len(c.Reasons) > 0 {
		b.WriteString("\n## Refused or failed, readable arrays, by reason\n\n| arrays | reason |\n|---:|---|\n")
		type kv struct {
			k string
			n int
		}
		var rs []kv
		for k, n := range c.Reasons {
			rs = append(rs, kv{k, n})
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].n > rs[j].n || rs[i].n == rs[j].n && rs[i].k < rs[j].k })
		for _, x := range rs {
			fmt.Fprintf(&b, "| %d | %s |\n", x.n, mdCell(x.k))
		}
	}
	b.WriteString("\n## Every array\n\n| array | v | dtype | reference | bridge | why |\n|---|---|---|---|---|---|\n")
	for _, a := range r.Arrays {
		ref := "reads"
		if !a.Readable {
			ref = "refuses: " + a.RefErr
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", mdCell(a.Rel), a.Version, mdCell(a.Dtype), mdCell(ref), a.Outcome, mdCell(a.Reason))
	}
	if len(r.NotMeasured) > 0 {
		b.WriteString("\n## Stores not measured\n\n")
		for _, s := range r.NotMeasured {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	return b.String()
}

func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// TestZarrCorpusMeasure measures the corpus in $SCC_ZARR_CORPUS (`make
// corpus-zarr CORPUS=dir`), writing the markdown report to
// $SCC_ZARR_CORPUS_REPORT when set. It skips without a corpus: the public
// corpora are not part of the repository.
func TestZarrCorpusMeasure(t *testing.T) {
	root := os.Getenv("SCC_ZARR_CORPUS")
	if root == "" {
		t.Skip("SCC_ZARR_CORPUS names no corpus directory (make corpus-zarr CORPUS=dir)")
	}
	res := measureCorpus(t, root, t.TempDir())
	md := res.markdown()
	if p := os.Getenv("SCC_ZARR_CORPUS_REPORT"); p != "" {
		require.NoError(t, os.WriteFile(p, []byte(md), 0o644))
	}
	c := res.counts()
	t.Logf("%d arrays, %d read by the reference reader: %d imported equal, %d differ, %d refused, %d failed; %d unreadable (%d of them imported)",
		c.Arrays, c.Readable, c.Equal, c.Differ, c.Refused, c.Failed, c.Arrays-c.Readable, c.UnreadImported)
	summary, _, _ := strings.Cut(md, "\n## Every array")
	fmt.Println(summary)
}

// TestZarrCorpusMeasureLogic runs the measurement over stores the tests
// write: corpus.py's (zarr-python 2, v2, every codec and the odd types),
// zarrita's v3 store, an array of a codec neither side has and one of a
// codec only scc reads; every outcome must be counted where it belongs.
func TestZarrCorpusMeasureLogic(t *testing.T) {
	zarrPython(t)
	node := zarrita(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "corpus")
	out, err := exec.Command(python, filepath.Join(testdata(t), "corpus.py"), filepath.Join(root, "py.zarr"), t.TempDir()).Output()
	require.NoError(t, err, stderr(err))
	var made []struct{ Path string }
	require.NoError(t, json.Unmarshal(out, &made))
	if b, err := exec.Command("node", filepath.Join(node, "zarr3.mjs"), "write", filepath.Join(root, "js.zarr"), t.TempDir()).CombinedOutput(); err != nil {
		t.Fatalf("zarrita write: %v: %s", err, b)
	}
	// A codec no reader knows: refused by both.
	writeFile(t, filepath.Join(root, "odd", "nocodec", ".zarray"), `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<i4","compressor":{"id":"nosuchcodec"},"fill_value":0,"filters":null,"order":"C"}`)
	// bz2 in v3: zarrita has no numcodecs.bz2, scc reads it.
	writeFile(t, filepath.Join(root, "odd", "bz2v3", "zarr.json"), `{"zarr_format":3,"node_type":"array","shape":[3],"data_type":"uint8",
		"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3]}},"chunk_key_encoding":{"name":"default"},"fill_value":5,
		"codecs":[{"name":"bytes"},{"name":"numcodecs.bz2","configuration":{"level":1}}]}`)
	// bz2.compress(bytes([1, 2, 3])), Python's.
	writeFile(t, filepath.Join(root, "odd", "bz2v3", "c", "0"), string([]byte{66, 90, 104, 57, 49, 65, 89, 38, 83, 89, 228, 242, 150, 174, 0, 0, 0, 64, 0, 56, 0, 32, 0, 33, 152, 25, 132, 97, 119, 36, 83, 133, 9, 14, 79, 41, 106, 224}))
	writeFile(t, filepath.Join(root, "draft", "zarr.json"), `{"zarr_format":"https://purl.org/zarr/spec/protocol/core/3.0","metadata_encoding":"x"}`)

	res := measureCorpus(t, root, t.TempDir())
	c := res.counts()
	// corpus.py's arrays, zarrita's three, and the two odd ones.
	assert.Equal(t, len(made)+3+2, c.Arrays)
	assert.Equal(t, len(made)+3, c.Readable, res.markdown())
	assert.Equal(t, 0, c.Differ, res.markdown())
	assert.Equal(t, 0, c.Failed, res.markdown())
	assert.Equal(t, c.Readable, c.Equal+c.Refused)
	if bloscDecode != nil {
		assert.Equal(t, c.Readable, c.Equal, res.markdown())
	}
	assert.Equal(t, 1, c.UnreadImported, "bz2 in v3")
	assert.Equal(t, 1, c.UnreadRefused, "a codec nobody has")
	require.Len(t, res.NotMeasured, 1)
	assert.Contains(t, res.NotMeasured[0], "draft")
	md := res.markdown()
	assert.Contains(t, md, "| imported, values equal |")
	assert.Contains(t, md, "nosuchcodec")

	// A reference reading that differs is counted as a difference.
	for _, a := range res.Arrays {
		if a.Readable && a.Form == "bytes" && a.Outcome == outEqual {
			b, err := os.ReadFile(a.Dump)
			require.NoError(t, err)
			b[len(b)-1] ^= 1
			require.NoError(t, os.WriteFile(a.Dump, b, 0o644))
			o, why := importCompare(context.Background(), a, t.TempDir())
			assert.Equal(t, outDiffer, o)
			assert.Contains(t, why, "differs")
			break
		}
	}
}
