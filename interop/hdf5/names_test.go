package hdf5

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// nameCaseData is the 2 bytes the dataset of case i holds.
func nameCaseData(i int) []byte { return []byte{byte(i), byte(i + 100)} }

// nameCasePath is where case i of the engine's name table goes in one
// file: under a group of its own ("n07/a/b"), so that "a" and "a/b/c" do
// not collide, unless that makes a valid name longer than the rule allows
// (the longest path, which collides with nothing, stays at the root).
func nameCasePath(i int, c engine.NameCase) string {
	p := strings.TrimPrefix(c.Name, "/")
	if q := fmt.Sprintf("n%02d/%s", i, p); !c.Valid || len(q) <= engine.MaxPathBytes {
		return q
	}
	return p
}

func lastComponent(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// TestNameRulesExportRoundTrip: every name the engine's name rule accepts
// exports to HDF5 under that name (h5py finds each dataset there with its
// values and its attribute) and imports back as the same dataset.
func TestNameRulesExportRoundTrip(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	names := map[string]int{}
	for i, c := range engine.NameRuleCases() {
		if !c.Valid {
			continue
		}
		if err := engine.ValidateName(c.Name); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		p := nameCasePath(i, c)
		if _, dup := names[p]; dup {
			continue
		}
		names[p] = i
		ds, err := f.CreateDataset(ctx, p, engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{2}, Chunk: []uint64{2}})
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if err := ds.Write(ctx, engine.All([]uint64{2}), nameCaseData(i)); err != nil {
			t.Fatal(err)
		}
		if err := ds.SetAttr(ctx, lastComponent(p), engine.StringAttr("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "names.h5")
	rep, err := Export(ctx, f, out, &Options{Strict: true})
	if err != nil || len(rep.Skipped) != 0 || len(rep.Datasets) != len(names) {
		t.Fatalf("export: %v (%d datasets, skipped %v)", err, len(rep.Datasets), rep.Skipped)
	}

	// h5py sees each dataset under its name, holding its values and its
	// attribute (names and values as UTF-8 bytes, hex: JSON keeps them).
	var read map[string][2]string
	py := `import h5py, json, sys
out = {}
def visit(name, obj):
    if isinstance(obj, h5py.Dataset):
        out[name.encode("utf-8", "surrogateescape").hex()] = [obj[()].tobytes().hex(), ",".join(k for k in obj.attrs.keys())]
with h5py.File(sys.argv[1], "r") as f:
    f.visititems(visit)
json.dump(out, sys.stdout)
`
	if err := json.Unmarshal([]byte(runPython(t, py, out)), &read); err != nil {
		t.Fatal(err)
	}
	if len(read) != len(names) {
		t.Fatalf("h5py finds %d datasets, want %d", len(read), len(names))
	}
	for name, i := range names {
		got, ok := read[fmt.Sprintf("%x", name)]
		if !ok {
			t.Fatalf("h5py does not find %q", name)
		}
		if got[0] != fmt.Sprintf("%x", nameCaseData(i)) || got[1] != lastComponent(name) {
			t.Fatalf("h5py reads %q as %v", name, got)
		}
	}

	back := testfile.Create(t, filepath.Join(dir, "back.scc"), &engine.Options{NoSync: true})
	defer back.Close(ctx)
	irep, err := Import(ctx, out, back, &Options{Strict: true})
	if err != nil || len(irep.Skipped) != 0 {
		t.Fatalf("import: %v (skipped %v)", err, irep.Skipped)
	}
	var want []string
	for name := range names {
		want = append(want, name)
	}
	slices.Sort(want)
	got := testfile.DatasetNames(t, back)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("imported %q, want %q", got, want)
	}
	for name, i := range names {
		ds, err := back.OpenDataset(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		if err := ds.Read(ctx, engine.All([]uint64{2}), buf); err != nil || string(buf) != string(nameCaseData(i)) {
			t.Fatalf("%q reads % x (%v)", name, buf, err)
		}
		if v, err := ds.Attr(lastComponent(name)); err != nil {
			t.Fatalf("%q: attribute: %v", name, err)
		} else if s, _ := v.Str(); s != "v" {
			t.Fatalf("%q: attribute %q", name, s)
		}
		ds.Close(ctx)
	}
}

// h5Legal reports whether an HDF5 file can hold name as a path: no NUL,
// no empty or "." component (".." is an ordinary link name in HDF5).
func h5Legal(name string) bool {
	if strings.Contains(name, "\x00") {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." {
			return false
		}
	}
	return true
}

// TestNameRulesImportSkips: an HDF5 file (written by h5py) holding
// datasets, a group and attributes under every name the engine's name
// rule refuses and HDF5 can hold imports the rest, each refused name left
// out and named with the rule, never renamed; Strict refuses the file and
// creates nothing.
func TestNameRulesImportSkips(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "bad.h5")
	var bad []string
	for i, c := range engine.NameRuleCases() {
		if p := nameCasePath(i, c); !c.Valid && h5Legal(p) {
			bad = append(bad, p)
		}
	}
	if len(bad) < 10 {
		t.Fatalf("only %d refused names HDF5 can hold: %q", len(bad), bad)
	}
	const group = "grp\x01"
	bad = append(bad, group+"/x")
	longAttr := strings.Repeat("a", engine.MaxAttrNameBytes+1)
	var hexNames []string
	for _, b := range bad {
		hexNames = append(hexNames, fmt.Sprintf("%x", b))
	}
	py := `import h5py, sys
attrs = {b"ok": 1, b"\xff": 2, b"` + longAttr + `": 3}
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("ok", data=[7, 8], dtype="u1")
    for k, v in attrs.items():
        d.attrs[k] = v
        f.attrs[k] = v
    for h in sys.argv[2:]:
        f.create_dataset(bytes.fromhex(h), data=[1, 2], dtype="u1")
    for k, v in attrs.items():
        f[b"grp\x01"].attrs[k] = v
`
	runPython(t, py, append([]string{src}, hexNames...)...)

	g := testfile.Create(t, filepath.Join(dir, "strict.scc"), &engine.Options{NoSync: true})
	_, err := Import(ctx, src, g, &Options{Strict: true})
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("strict import: %v", err)
	}
	if len(testfile.DatasetNames(t, g)) != 0 {
		t.Fatalf("a refused strict import created %q", testfile.DatasetNames(t, g))
	}
	g.Close(ctx)

	f := testfile.Create(t, filepath.Join(dir, "out.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	rep, err := Import(ctx, src, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := testfile.DatasetNames(t, f); !slices.Equal(got, []string{"ok"}) {
		t.Fatalf("imported %q", got)
	}
	// Every refused dataset, and every group with a refused name on the
	// way to one, is named with the engine's rule.
	want := map[string]bool{}
	for _, p := range bad {
		want[p] = true
		segs := strings.Split(p, "/")
		for i := 1; i < len(segs); i++ {
			if q := strings.Join(segs[:i], "/"); engine.ValidateName(q) != nil {
				want[q] = true
			}
		}
	}
	skipped := map[string]string{}
	for _, sk := range rep.Skipped {
		skipped[strings.TrimPrefix(sk.Path, "/")] = sk.Reason
	}
	if len(skipped) != len(want) {
		t.Fatalf("skipped %d, want %d: %q", len(skipped), len(want), rep.Skipped)
	}
	for p := range want {
		why, ok := skipped[p]
		if !ok {
			t.Fatalf("%q not named in %q", p, rep.Skipped)
		}
		if !strings.Contains(why, engine.ValidateName(p).Error()) {
			t.Fatalf("%q: reason %q does not give the rule", p, why)
		}
	}
	if !strings.HasPrefix(skipped[group], "group: ") {
		t.Fatalf("group %q: %q", group, skipped[group])
	}
	// Attributes: the refused names are noted, quoted, and the rest set.
	ds, err := f.OpenDataset(ctx, "ok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close(ctx)
	if a := testfile.Attrs(t, ds); len(a) != 1 || a[0].Name != "ok" {
		t.Fatalf("attributes %v", a)
	}
	for what, notes := range map[string][]string{"dataset": rep.Datasets[0].AttrNotes, "root": rep.RootAttrNotes} {
		all := strings.Join(notes, "\n")
		if !strings.Contains(all, `"\xff": `) || !strings.Contains(all, fmt.Sprintf("%q: ", longAttr)) {
			t.Fatalf("%s attribute notes %q", what, notes)
		}
	}
	if a, err := f.Group.Attrs(); err != nil || len(a) != 1 || a[0].Name != "ok" {
		t.Fatalf("file attributes %v (%v)", a, err)
	}
}

// TestH5RefusesNULNames: a name holding NUL never reaches the C API, which
// would end it there and create or open another object ("a\x00b" as "a").
func TestH5RefusesNULNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nul.h5")
	f, err := h5.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	spec := h5.Spec{Type: h5Type(engine.Uint8), Dims: []uint64{2}, MaxDims: []uint64{2}, Chunk: []uint64{2}}
	if _, err := f.CreateDataset("a\x00b", spec); !errors.Is(err, h5.ErrName) {
		t.Fatalf("create dataset: %v", err)
	}
	if err := f.WriteGroup("g\x00h", nil); !errors.Is(err, h5.ErrName) {
		t.Fatalf("write group: %v", err)
	}
	d, err := f.CreateDataset("ok", spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAttrs([]h5.Attr{{Name: "x\x00y", Value: h5.AttrValue{Kind: h5.AttrString, Data: []byte("v")}}}); !errors.Is(err, h5.ErrName) {
		t.Fatalf("write attribute: %v", err)
	}
	d.Close()
	if _, err := f.OpenDataset("ok\x00more"); !errors.Is(err, h5.ErrName) {
		t.Fatalf("open dataset: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = h5.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ds, err := f.Datasets(); err != nil || !slices.Equal(ds, []string{"ok"}) {
		t.Fatalf("datasets %q (%v)", ds, err)
	}
	if gs, err := f.Groups(); err != nil || len(gs) != 0 {
		t.Fatalf("groups %q (%v)", gs, err)
	}
}
