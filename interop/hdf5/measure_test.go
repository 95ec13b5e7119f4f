package hdf5

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
)

// The corpus measurement: every HDF5 file of a directory is read by h5py
// (the reference) and imported whole by the bridge as scctl imports it
// (ImportFile, default options), and every dataset h5py reads is compared
// with what scc holds. `make corpus-hdf5 CORPUS=dir [REPORT=file.md]` runs
// TestCorpusMeasure over a directory of public test files; it is not part
// of `make test`, which has no corpora. TestMeasureWrittenCorpus runs the
// same machinery over the corpus TestImportCorpus writes.

// describeH5 describes one file as h5py reads it, into argv[2]/desc.json:
// whether it opens (with hdf5plugin's filters registered when it is
// installed, so that h5py reads what users' h5py reads), and for every
// dataset reachable by a hard link (every path, as the bridge lists them)
// its space and its values in the normal form scc stores them:
//   - fixed-size types ("fixed"): the elements' bytes in C order,
//     little-endian, compounds with their file's offsets and size (numpy
//     keeps them) and every gap zeroed, array types spread into the shape
//     as h5py spreads them;
//   - variable-length strings, sequences and object references ("vlen"):
//     a count n, n lengths in bytes and the bytes of every element after
//     one another (uint64 little-endian); strings as their bytes,
//     sequences as their little-endian elements, references as the
//     absolute path of the object (the null one as "");
//   - null dataspaces ("null");
//   - what h5py reads but has no normal form here ("other": region
//     references, compounds with variable-length members), named.
//
// A dataset h5py cannot read is described with its error and is not one
// "h5py reads".
const describeH5 = `
import sys, os, json, h5py, numpy as np
try:
    import hdf5plugin
except Exception:
    pass
src, out = sys.argv[1], sys.argv[2]
desc = {"file": src, "opens": False, "error": "", "datasets": []}
def dump(name, b):
    p = os.path.join(out, "%d.bin" % len(desc["datasets"]))
    with open(p, "wb") as fh:
        fh.write(b)
    return p
def fixed(a):
    a = np.asarray(a)
    z = np.zeros(a.shape, dtype=a.dtype.newbyteorder("<"))
    z[...] = a
    return z.tobytes()
def vlen(vals):
    lens = [len(v) for v in vals]
    return np.array([len(vals)] + lens, dtype="<u8").tobytes() + b"".join(vals)
try:
    f = h5py.File(src, "r")
    desc["opens"] = True
except Exception as e:
    desc["error"] = "%s: %s" % (type(e).__name__, e)
if desc["opens"]:
    names = []
    def visit(name):
        try:
            if f.id.links.get_info(name.encode() if isinstance(name, str) else name).type == h5py.h5l.TYPE_HARD:
                names.append(name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name)
        except Exception:
            pass
    try:
        f.id.links.visit(visit)
    except Exception as e:
        desc["error"] = "walk: %s: %s" % (type(e).__name__, e)
    for name in names:
        try:
            obj = f[name]
        except Exception:
            continue
        if not isinstance(obj, h5py.Dataset):
            continue
        e = {"name": name, "dtype": "?", "kind": ""}
        try:
            e["dtype"] = obj.dtype.str if not obj.dtype.names else "compound %d" % obj.dtype.itemsize
            if obj.shape is None:
                e["kind"] = "null"
                desc["datasets"].append(e)
                continue
            e["shape"] = list(obj.shape)
            dt = obj.dtype
            if obj.size * dt.itemsize > (1 << 30):
                raise ValueError("larger than the measurement reads")
            a = obj[()]
            if not dt.hasobject:
                e["kind"] = "fixed"
                e["data"] = dump(name, fixed(a))
            else:
                flat = np.asarray(a, dtype=object).reshape(-1)
                ref = h5py.check_ref_dtype(dt)
                base = h5py.check_vlen_dtype(dt)
                if ref is h5py.Reference:
                    vals = []
                    for r in flat:
                        n = b""
                        if r:
                            try:
                                n = h5py.h5r.get_name(r, f.id) or b""
                            except Exception:
                                n = b""
                        vals.append(n)
                    e["kind"] = "vlen"
                    e["data"] = dump(name, vlen(vals))
                elif ref is not None:
                    e["kind"], e["what"] = "other", "region references"
                elif h5py.check_string_dtype(dt) is not None:
                    vals = [v if isinstance(v, bytes) else str(v).encode() for v in flat]
                    e["kind"] = "vlen"
                    e["data"] = dump(name, vlen(vals))
                elif base is not None and not base.hasobject:
                    # h5py 3.7 reads a sequence of big-endian numbers into
                    # an array of native type holding the file's bytes
                    # (h5dump and the values' meaning agree it is wrong):
                    # taken as the file's type here.
                    def seq(v):
                        v = np.asarray(v)
                        if v.dtype != base and v.dtype.itemsize == base.itemsize and base.byteorder == ">":
                            v = np.frombuffer(v.tobytes(), dtype=base)
                        return fixed(np.asarray(v, dtype=base))
                    e["kind"] = "vlen"
                    e["data"] = dump(name, vlen([seq(v) for v in flat]))
                elif base is not None:
                    e["kind"], e["what"] = "other", "variable-length sequences of variable-length data"
                elif dt.names:
                    e["kind"], e["what"] = "other", "compound with variable-length or reference members"
                else:
                    e["kind"], e["what"] = "other", "object dtype " + str(dt)
        except Exception as x:
            e["kind"] = ""
            e["error"] = "%s: %s" % (type(x).__name__, str(x).splitlines()[0] if str(x) else "")
        desc["datasets"].append(e)
    f.close()
json.dump(desc, open(os.path.join(out, "desc.json"), "w"))
`

// describedFile is one file as describeH5 describes it.
type describedFile struct {
	File     string             `json:"file"`
	Opens    bool               `json:"opens"`
	Error    string             `json:"error"`
	Datasets []describedDataset `json:"datasets"`
}

type describedDataset struct {
	Name  string   `json:"name"`
	Dtype string   `json:"dtype"`
	Kind  string   `json:"kind"` // fixed, vlen, null, other; "" if h5py cannot read it
	Shape []uint64 `json:"shape"`
	Data  string   `json:"data"`
	What  string   `json:"what"`
	Error string   `json:"error"`
}

// Outcomes of one dataset h5py reads.
const (
	outEqual   = "imported equal"
	outDiffer  = "imported, differs"
	outSkipped = "skipped"
	outRefused = "file refused whole"
	outOther   = "imported, not compared" // h5py's form has no normal form here
)

type measuredDataset struct {
	File, Name, Dtype, Outcome, Why string
}

type measuredFile struct {
	File    string
	Opens   bool
	Error   string // h5py's error opening it, or the bridge's refusing it whole
	Refused bool
	// Unread lists the datasets h5py cannot read, with h5py's error in
	// Why and the bridge's outcome in Outcome ("imported", or skipped
	// with its reason).
	Unread   []measuredDataset
	Datasets []measuredDataset
	// AttrNotes are the bridge's notes on attributes it left out, one
	// "object: name: reason" each.
	AttrNotes []string
}

// measurement is the outcome over a corpus.
type measurement struct {
	Root  string
	Files []measuredFile
}

// corpusFiles lists the HDF5 files under root: those whose name says so
// (.h5, .hdf5, .he5, .nc, .nc4, .h5z) — h5py then says whether they are
// HDF5 — in name order.
func corpusFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			switch strings.ToLower(filepath.Ext(p)) {
			case ".h5", ".hdf5", ".he5", ".nc", ".nc4", ".h5z", ".hdf":
				out = append(out, p)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// describe runs describeH5 on one file in a process of its own (a file
// that crashes or hangs h5py is a file h5py does not open).
func describe(ctx context.Context, src, work string) describedFile {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", describeH5, src, work)
	out, err := cmd.CombinedOutput()
	var d describedFile
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(filepath.Join(work, "desc.json")); err == nil {
			err = json.Unmarshal(b, &d)
		}
	}
	if err != nil {
		return describedFile{File: src, Error: fmt.Sprintf("h5py: %v: %s", err, lastLine(out))}
	}
	return d
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// measureFile describes src with h5py, imports it whole into work and
// compares every dataset h5py reads.
func measureFile(ctx context.Context, src, work string) (measuredFile, error) {
	if err := os.MkdirAll(work, 0o755); err != nil {
		return measuredFile{}, err
	}
	defer os.RemoveAll(work)
	d := describe(ctx, src, work)
	mf := measuredFile{File: src, Opens: d.Opens, Error: d.Error}
	if !d.Opens {
		return mf, nil
	}
	var read []describedDataset
	for _, ds := range d.Datasets {
		if ds.Kind == "" {
			mf.Unread = append(mf.Unread, measuredDataset{File: src, Name: ds.Name, Dtype: ds.Dtype, Why: ds.Error})
			continue
		}
		read = append(read, ds)
	}
	out := filepath.Join(work, "out.scc")
	rep, err := ImportFile(ctx, src, out, nil)
	if err != nil {
		if ctx.Err() != nil {
			return mf, err
		}
		mf.Refused, mf.Error = true, err.Error()
		for _, ds := range read {
			mf.Datasets = append(mf.Datasets, measuredDataset{File: src, Name: ds.Name, Dtype: ds.Dtype, Outcome: outRefused, Why: err.Error()})
		}
		return mf, nil
	}
	f, err := engine.Open(ctx, out, &engine.Options{ReadOnly: true})
	if err != nil {
		return mf, fmt.Errorf("%s: the imported file does not open: %w", src, err)
	}
	defer f.Close(ctx)
	imported := map[string]bool{}
	for _, r := range rep.Datasets {
		imported[r.Name] = true
	}
	skipped := map[string]string{}
	for _, s := range rep.Skipped {
		skipped[strings.TrimPrefix(s.Path, "/")] = s.Reason
	}
	for i, u := range mf.Unread {
		switch {
		case imported[u.Name]:
			mf.Unread[i].Outcome = "imported"
		case skipped[u.Name] != "":
			mf.Unread[i].Outcome = "skipped: " + skipped[u.Name]
		}
	}
	for _, n := range rep.RootAttrNotes {
		mf.AttrNotes = append(mf.AttrNotes, "/: "+n)
	}
	mf.AttrNotes = append(mf.AttrNotes, rep.GroupAttrNotes...)
	for _, r := range rep.Datasets {
		for _, n := range r.AttrNotes {
			mf.AttrNotes = append(mf.AttrNotes, "/"+r.Name+": "+n)
		}
	}
	for _, ds := range read {
		md := measuredDataset{File: src, Name: ds.Name, Dtype: ds.Dtype}
		switch {
		case imported[ds.Name]:
			md.Outcome, md.Why = compareDataset(ctx, f, ds)
		case skipped[ds.Name] != "":
			md.Outcome, md.Why = outSkipped, skipped[ds.Name]
		default:
			md.Outcome, md.Why = outSkipped, "neither imported nor named as skipped"
		}
		mf.Datasets = append(mf.Datasets, md)
	}
	return mf, nil
}

// compareDataset compares one imported dataset with h5py's reading.
func compareDataset(ctx context.Context, f *engine.File, want describedDataset) (outcome, why string) {
	ds, err := f.OpenDataset(ctx, want.Name, nil)
	if err != nil {
		return outDiffer, fmt.Sprintf("does not open: %v", err)
	}
	defer ds.Close(ctx)
	if want.Kind == "null" {
		if ds.Space() != engine.SpaceNull {
			return outDiffer, fmt.Sprintf("h5py reads a null dataspace, scc holds shape %v", ds.Shape())
		}
		return outEqual, ""
	}
	if want.Kind == "other" {
		return outOther, want.What
	}
	b, err := os.ReadFile(want.Data)
	if err != nil {
		return outDiffer, err.Error()
	}
	shape := ds.Shape()
	if len(shape) > len(want.Shape) || !equalU64(shape, want.Shape[:len(shape)]) {
		return outDiffer, fmt.Sprintf("shape %v, h5py reads %v", shape, want.Shape)
	}
	sel := engine.All(shape)
	if want.Kind == "vlen" {
		if ds.Layout() != engine.Vlen {
			return outDiffer, fmt.Sprintf("h5py reads variable-length data, scc holds %v (%v)", ds.Type(), ds.Layout())
		}
		vals, err := ds.ReadVlen(ctx, sel)
		if err != nil {
			return outDiffer, fmt.Sprintf("read: %v", err)
		}
		wantVals, err := splitVlen(b)
		if err != nil {
			return outDiffer, err.Error()
		}
		if len(vals) != len(wantVals) {
			return outDiffer, fmt.Sprintf("%d elements, h5py reads %d", len(vals), len(wantVals))
		}
		for i := range vals {
			if !bytes.Equal(vals[i], wantVals[i]) {
				return outDiffer, fmt.Sprintf("element %d: %q, h5py reads %q", i, trunc(vals[i]), trunc(wantVals[i]))
			}
		}
		return outEqual, ""
	}
	if ds.Layout() == engine.Vlen {
		return outDiffer, "h5py reads fixed-size elements, scc holds variable-length data"
	}
	n := uint64(1)
	for _, s := range shape {
		n *= s
	}
	size := uint64(ds.Type().Size())
	if n*size != uint64(len(b)) {
		return outDiffer, fmt.Sprintf("%d elements of %v (%d bytes), h5py reads %d bytes as %s", n, ds.Type(), n*size, len(b), want.Dtype)
	}
	got := make([]byte, len(b))
	if err := ds.Read(ctx, sel, got); err != nil {
		return outDiffer, fmt.Sprintf("read: %v", err)
	}
	if gaps := gapMask(ds.Type()); gaps != nil {
		for i := range got {
			if gaps[uint64(i)%size] {
				got[i], b[i] = 0, 0
			}
		}
	}
	if i := firstDiff(got, b); i >= 0 {
		e := uint64(i) / size
		return outDiffer, fmt.Sprintf("element %d of %v: % x, h5py reads % x", e, ds.Type(), got[e*size:(e+1)*size], b[e*size:(e+1)*size])
	}
	return outEqual, ""
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// gapMask marks the bytes of an element of t that no field covers (a
// compound's padding, nested ones too), nil when there are none: what
// they hold is no value, and h5py's copy zeroes them.
func gapMask(t engine.Type) []bool {
	covered := make([]bool, t.Size())
	var mark func(t engine.Type, off int)
	mark = func(t engine.Type, off int) {
		switch t.Class() {
		case engine.ClassCompound:
			for _, f := range t.Fields() {
				mark(f.Type, off+f.Offset)
			}
		case engine.ClassArray:
			bs := t.Base().Size()
			for i := 0; i < t.Size()/bs; i++ {
				mark(t.Base(), off+i*bs)
			}
		default:
			for i := range t.Size() {
				covered[off+i] = true
			}
		}
	}
	mark(t, 0)
	gaps := make([]bool, len(covered))
	any := false
	for i, c := range covered {
		gaps[i] = !c
		any = any || !c
	}
	if !any {
		return nil
	}
	return gaps
}

// splitVlen parses describeH5's variable-length form.
func splitVlen(b []byte) ([][]byte, error) {
	bad := errors.New("malformed variable-length description")
	if len(b) < 8 {
		return nil, bad
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8)/8 {
		return nil, bad
	}
	lens, data := b[8:8+8*n], b[8+8*n:]
	out := make([][]byte, n)
	for i := range out {
		l := binary.LittleEndian.Uint64(lens[8*i:])
		if l > uint64(len(data)) {
			return nil, bad
		}
		out[i], data = data[:l], data[l:]
	}
	return out, nil
}

// measureCorpus measures every file of files, working under work.
func measureCorpus(ctx context.Context, root string, files []string, work string, progress func(measuredFile)) (measurement, error) {
	m := measurement{Root: root}
	for i, src := range files {
		mf, err := measureFile(ctx, src, filepath.Join(work, fmt.Sprint(i)))
		if err != nil {
			return m, err
		}
		if progress != nil {
			progress(mf)
		}
		m.Files = append(m.Files, mf)
	}
	return m, nil
}

// summary is the measurement's counts.
type summary struct {
	Files, Opens, Imported, Refused   int
	Unread, Read, Equal, Differ, Skip int
	Other                             int
	// UnreadImported counts the datasets h5py cannot read that the
	// bridge imports; Attrs the attributes it leaves out.
	UnreadImported, Attrs int
	// SkipReasons and RefuseReasons count datasets by the class of their
	// reason (reasonClass); UnreadReasons the datasets h5py cannot read
	// by the bridge's outcome; AttrReasons the attributes left out.
	SkipReasons, RefuseReasons, UnreadReasons, AttrReasons map[string]int
}

func (m measurement) summary() summary {
	s := summary{SkipReasons: map[string]int{}, RefuseReasons: map[string]int{}, UnreadReasons: map[string]int{}, AttrReasons: map[string]int{}}
	for _, f := range m.Files {
		s.Files++
		if !f.Opens {
			continue
		}
		s.Opens++
		if f.Refused {
			s.Refused++
			s.RefuseReasons[reasonClass(f.Error)]++
		} else {
			s.Imported++
		}
		s.Unread += len(f.Unread)
		for _, u := range f.Unread {
			if u.Outcome == "imported" {
				s.UnreadImported++
			}
			s.UnreadReasons[reasonClass(u.Outcome)]++
		}
		s.Attrs += len(f.AttrNotes)
		for _, n := range f.AttrNotes {
			// "object: name: reason": counted by the reason.
			if parts := strings.SplitN(n, ": ", 3); len(parts) == 3 {
				n = parts[2]
			}
			s.AttrReasons[reasonClass(n)]++
		}
		for _, d := range f.Datasets {
			s.Read++
			switch d.Outcome {
			case outEqual:
				s.Equal++
			case outDiffer:
				s.Differ++
			case outOther:
				s.Other++
			case outSkipped, outRefused:
				s.Skip++
				s.SkipReasons[d.Outcome+": "+reasonClass(d.Why)]++
			}
		}
	}
	return s
}

var (
	quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	digits = regexp.MustCompile(`[0-9]+`)
	paths  = regexp.MustCompile(`(/[^ :,;()]+)+`)
)

// reasonClass is a reason with what varies from dataset to dataset taken
// out (names, paths, numbers), so that reasons count by kind.
func reasonClass(why string) string {
	s := quoted.ReplaceAllString(why, `"…"`)
	s = paths.ReplaceAllString(s, "/…")
	s = digits.ReplaceAllString(s, "N")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func pct(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
}

// markdown is the report: the summary table, the reasons by count, and
// every file refused, dataset skipped or differing.
func (m measurement) markdown() string {
	s := m.summary()
	var b strings.Builder
	rel := func(p string) string {
		if r, err := filepath.Rel(m.Root, p); err == nil {
			return r
		}
		return p
	}
	fmt.Fprintf(&b, "# HDF5 import over %s\n\n", m.Root)
	fmt.Fprintf(&b, "| | count | |\n|---|---:|---|\n")
	fmt.Fprintf(&b, "| HDF5 files (by name) | %d | |\n", s.Files)
	fmt.Fprintf(&b, "| files h5py opens | %d | |\n", s.Opens)
	fmt.Fprintf(&b, "| imported | %d | %s |\n", s.Imported, pct(s.Imported, s.Opens))
	fmt.Fprintf(&b, "| refused whole | %d | %s |\n", s.Refused, pct(s.Refused, s.Opens))
	fmt.Fprintf(&b, "| datasets h5py reads | %d | |\n", s.Read)
	fmt.Fprintf(&b, "| imported equal | %d | %s |\n", s.Equal, pct(s.Equal, s.Read))
	fmt.Fprintf(&b, "| imported, differing | %d | %s |\n", s.Differ, pct(s.Differ, s.Read))
	fmt.Fprintf(&b, "| imported, not compared | %d | %s |\n", s.Other, pct(s.Other, s.Read))
	fmt.Fprintf(&b, "| skipped (or in a refused file) | %d | %s |\n", s.Skip, pct(s.Skip, s.Read))
	fmt.Fprintf(&b, "| datasets h5py cannot read | %d | |\n", s.Unread)
	fmt.Fprintf(&b, "| of them imported by the bridge | %d | |\n", s.UnreadImported)
	fmt.Fprintf(&b, "| attributes left out (named) | %d | |\n", s.Attrs)
	counts := func(title string, c map[string]int) {
		if len(c) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n## %s\n\n| count | reason |\n|---:|---|\n", title)
		keys := slices.SortedFunc(maps.Keys(c), func(x, y string) int {
			if c[x] != c[y] {
				return c[y] - c[x]
			}
			return strings.Compare(x, y)
		})
		for _, k := range keys {
			fmt.Fprintf(&b, "| %d | %s |\n", c[k], mdEscape(k))
		}
	}
	counts("Datasets skipped, by reason", s.SkipReasons)
	counts("Files refused whole, by reason", s.RefuseReasons)
	counts("Datasets h5py cannot read, by the bridge's outcome", s.UnreadReasons)
	counts("Attributes left out, by reason", s.AttrReasons)
	fmt.Fprintf(&b, "\n## Files h5py does not open\n\n")
	for _, f := range m.Files {
		if !f.Opens {
			fmt.Fprintf(&b, "- %s: %s\n", rel(f.File), mdEscape(f.Error))
		}
	}
	fmt.Fprintf(&b, "\n## Files refused whole\n\n")
	for _, f := range m.Files {
		if f.Refused {
			fmt.Fprintf(&b, "- %s: %s\n", rel(f.File), mdEscape(f.Error))
		}
	}
	for _, o := range []string{outDiffer, outSkipped, outOther} {
		fmt.Fprintf(&b, "\n## Datasets %s\n\n", o)
		for _, f := range m.Files {
			for _, d := range f.Datasets {
				if d.Outcome == o {
					fmt.Fprintf(&b, "- %s: /%s (%s): %s\n", rel(f.File), mdEscape(d.Name), d.Dtype, mdEscape(d.Why))
				}
			}
		}
	}
	fmt.Fprintf(&b, "\n## Datasets h5py cannot read\n\n")
	for _, f := range m.Files {
		for _, d := range f.Unread {
			fmt.Fprintf(&b, "- %s: /%s (%s): %s; the bridge: %s\n", rel(f.File), mdEscape(d.Name), d.Dtype, mdEscape(d.Why), mdEscape(d.Outcome))
		}
	}
	fmt.Fprintf(&b, "\n## Attributes left out\n\n")
	for _, f := range m.Files {
		for _, n := range f.AttrNotes {
			fmt.Fprintf(&b, "- %s: %s\n", rel(f.File), mdEscape(n))
		}
	}
	return b.String()
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// TestCorpusMeasure measures the import over the directory
// SCC_HDF5_CORPUS (skipped when unset) and writes the report to
// SCC_HDF5_CORPUS_REPORT (default corpus-hdf5.md in the working
// directory). It fails only when the measurement itself cannot run.
func TestCorpusMeasure(t *testing.T) {
	root := os.Getenv("SCC_HDF5_CORPUS")
	if root == "" {
		t.Skip("SCC_HDF5_CORPUS is not set (make corpus-hdf5 CORPUS=dir)")
	}
	needReaders(t)
	out := os.Getenv("SCC_HDF5_CORPUS_REPORT")
	if out == "" {
		out = "corpus-hdf5.md"
	}
	files, err := corpusFiles(root)
	require.NoError(t, err)
	require.NotEmpty(t, files, "no HDF5 file under %s", root)
	m, err := measureCorpus(context.Background(), root, files, t.TempDir(), func(f measuredFile) {
		eq := 0
		for _, d := range f.Datasets {
			if d.Outcome == outEqual {
				eq++
			}
		}
		t.Logf("%s: opens %v refused %v, %d/%d equal", f.File, f.Opens, f.Refused, eq, len(f.Datasets))
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, []byte(m.markdown()), 0o644))
	s := m.summary()
	fmt.Printf("%d files: h5py opens %d, imported %d, refused whole %d; datasets h5py reads %d: equal %d (%s), differing %d, not compared %d, skipped %d; h5py cannot read %d\nreport: %s\n",
		s.Files, s.Opens, s.Imported, s.Refused, s.Read, s.Equal, pct(s.Equal, s.Read), s.Differ, s.Other, s.Skip, s.Unread, out)
}

// TestMeasureWrittenCorpus runs the measurement over the corpus
// TestImportCorpus writes (every file h5py opens and the bridge imports
// whole, every dataset equal) and over a file it cannot open, and checks
// the counts and the report.
func TestMeasureWrittenCorpus(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	runPython(t, writeCorpus, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "not.h5"), []byte("not HDF5"), 0o644))
	files, err := corpusFiles(dir)
	require.NoError(t, err)
	require.Len(t, files, 8)
	m, err := measureCorpus(ctx, dir, files, t.TempDir(), nil)
	require.NoError(t, err)
	s := m.summary()
	assert.Equal(t, 8, s.Files)
	assert.Equal(t, 7, s.Opens)
	assert.Equal(t, 7, s.Imported)
	assert.Zero(t, s.Refused)
	assert.Zero(t, s.Differ)
	assert.Zero(t, s.Skip, s.SkipReasons)
	assert.Zero(t, s.Unread)
	assert.Equal(t, s.Read, s.Equal)
	assert.GreaterOrEqual(t, s.Read, 60)
	md := m.markdown()
	assert.Contains(t, md, fmt.Sprintf("| imported equal | %d | 100.0 %% |", s.Equal))
	assert.Contains(t, md, "- not.h5: ")
}

// TestMeasureFindsDifferences: the comparison is not blind — a dataset
// whose scc values differ from h5py's, one the import skipped and a file
// refused whole are each counted as such.
func TestMeasureFindsDifferences(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("x", data=np.arange(10, dtype=">i4"))
    f.create_dataset("s", data=[b"ab", b"cde"], dtype=h5py.string_dtype("ascii"))
    f.create_dataset("r", data=[f["x"].regionref[1:3]], dtype=h5py.regionref_dtype)
    c = np.dtype({"names": ["a", "b", "s"], "formats": [">i2", "<f8", "S3"], "offsets": [0, 8, 16], "itemsize": 24})
    v = np.zeros(3, dtype=c)
    v["a"], v["b"], v["s"] = [1, -2, 3], [0.5, 1.5, 2.5], [b"x", b"yz", b"abc"]
    f.create_dataset("cmpd", data=v, chunks=(2,), compression="gzip")
    d = f.create_dataset("bevlen", shape=(3,), dtype=h5py.vlen_dtype(np.dtype(">u4")))
    for i in range(3):
        d[i] = np.arange(i, dtype=">u4") + 256
    f.create_dataset("scalar", data=np.float32(2.5))
    f.create_dataset("null", data=h5py.Empty("<i4"))
    f.create_dataset("refs", data=[f["x"].ref, f.ref, h5py.Reference()], dtype=h5py.ref_dtype)
    d = f.create_dataset("arr", shape=(2,), dtype=np.dtype(("<i2", (3,))))
    d[...] = np.arange(6, dtype="<i2").reshape(2, 3) - 3
`, p)
	mf, err := measureFile(ctx, p, filepath.Join(dir, "w"))
	require.NoError(t, err)
	byName := map[string]measuredDataset{}
	for _, d := range mf.Datasets {
		byName[d.Name] = d
	}
	// Every kind of normal form: numbers, strings, a compound with gaps
	// and a big-endian member, sequences of big-endian numbers (which
	// h5py 3.7 misreads), a scalar, a null dataspace, object references,
	// an array type (which h5py spreads into the shape).
	for _, n := range []string{"x", "s", "cmpd", "bevlen", "scalar", "null", "refs", "arr"} {
		assert.Equal(t, outEqual, byName[n].Outcome, "%s: %s", n, byName[n].Why)
	}
	assert.Len(t, mf.Datasets, 9)
	assert.Equal(t, outSkipped, byName["r"].Outcome)
	assert.Contains(t, byName["r"].Why, "region reference")

	// The same description against other values: differs.
	work := filepath.Join(dir, "w2")
	require.NoError(t, os.MkdirAll(work, 0o755))
	d := describe(ctx, p, work)
	require.True(t, d.Opens, d.Error)
	out := filepath.Join(dir, "a.scc")
	_, err = ImportFile(ctx, p, out, nil)
	require.NoError(t, err)
	f, err := engine.Open(ctx, out, nil)
	require.NoError(t, err)
	ds, err := f.OpenDataset(ctx, "x", nil)
	require.NoError(t, err)
	require.NoError(t, ds.Write(ctx, engine.Box([]uint64{3}, []uint64{1}), []byte{9, 9, 9, 9}))
	require.NoError(t, ds.Close(ctx))
	for _, w := range d.Datasets {
		switch w.Name {
		case "x":
			o, why := compareDataset(ctx, f, w)
			assert.Equal(t, outDiffer, o)
			assert.Contains(t, why, "element 3")
		case "s":
			o, why := compareDataset(ctx, f, w)
			assert.Equal(t, outEqual, o, why)
		}
	}
	require.NoError(t, f.Close(ctx))
}
