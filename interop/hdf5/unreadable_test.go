package hdf5

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// writeBadAttr writes a file in which one attribute of dataset d has a
// datatype message libhdf5 cannot decode (its version set to 15), found by
// the attribute's name: a version 1 attribute message (h5py's default
// format) is an 8-byte header, the name padded to 8 bytes, then the
// datatype.
const writeBadAttr = `
import sys, h5py, numpy as np
p = sys.argv[1]
with h5py.File(p, "w") as f:
    f.attrs["rootok"] = 1
    d = f.create_dataset("d", data=np.arange(4, dtype="<i4"))
    d.attrs["ok"] = 2
    d.attrs["zzbadattr"] = np.arange(3, dtype="<i4")
    e = f.create_dataset("e", data=np.arange(5, dtype="<u1"))
    e.attrs["eok"] = 4
    g = f.create_group("g")
    g.attrs["gok"] = 3
b = bytearray(open(p, "rb").read())
name = b"zzbadattr\0"
i = b.find(name)
assert i >= 0 and b.find(name, i + 1) < 0
assert b[i - 8] == 1 and int.from_bytes(b[i - 6:i - 4], "little") == len(name)
dt = i + (len(name) + 7) // 8 * 8
assert b[dt] >> 4 == 1
b[dt] = (b[dt] & 0x0f) | 0xf0
open(p, "wb").write(b)
`

// TestImportUnreadableAttribute: an attribute libhdf5 cannot open leaves
// out the attributes of its object that cannot be read, named in the
// report with the library's error, and nothing else: every dataset, the
// other objects' attributes and the groups import.
func TestImportUnreadableAttribute(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "badattr.h5")
	runPython(t, writeBadAttr, src)
	out := filepath.Join(dir, "out.scc")
	rep, err := ImportFile(ctx, src, out, &Options{})
	t.Logf("report:\n%s", rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Datasets) != 2 || len(rep.Skipped) != 0 {
		t.Fatalf("datasets %d, skipped %v", len(rep.Datasets), rep.Skipped)
	}
	var d DatasetReport
	for _, r := range rep.Datasets {
		if r.Name == "d" {
			d = r
		}
	}
	if len(d.AttrNotes) != 1 || !strings.Contains(d.AttrNotes[0], "bad version number for datatype message") {
		t.Fatalf("d's attribute notes %q", d.AttrNotes)
	}
	if s := rep.String(); !strings.Contains(s, "attribute not imported: ") {
		t.Fatalf("report does not say what was left out:\n%s", s)
	}
	f, err := engine.Open(ctx, out, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	testfile.CheckAtCleanup(t, out)
	defer f.Close(ctx)
	if v, ok := attrNamed(testfile.Attrs(t, f), "rootok"); !ok || v.Kind() != engine.AttrScalar {
		t.Errorf("root attribute: %v %v", v, ok)
	}
	e, err := f.OpenDataset(ctx, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := attrNamed(testfile.Attrs(t, e), "eok"); !ok {
		t.Errorf("e's attribute left out: %v", testfile.Attrs(t, e))
	}
	g, err := f.OpenGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	ga, err := g.Attrs()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := attrNamed(ga, "gok"); !ok {
		t.Errorf("g's attribute left out: %v", ga)
	}
}

// TestImportUnreadableDatasetStrict: with Strict, a dataset libhdf5
// cannot read refuses the import, naming it and the library's error
// (ErrHDF5), and leaves no file.
func TestImportUnreadableDatasetStrict(t *testing.T) {
	var c hostileCase
	for _, h := range loadHostile(t) {
		if h.Name == "baddset" {
			c = h
		}
	}
	if c.File == "" {
		t.Fatal("no baddset case")
	}
	out := filepath.Join(t.TempDir(), "strict.scc")
	_, err := ImportFile(context.Background(), c.File, out, &Options{Strict: true})
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrHDF5) || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("strict: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("strict refusal left %s (%v)", out, err)
	}
}

func attrNamed(attrs []engine.Attr, name string) (engine.AttrValue, bool) {
	for _, a := range attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return engine.AttrValue{}, false
}
