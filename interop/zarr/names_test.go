package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// nameCaseData is the 2 bytes the dataset of case i holds.
func nameCaseData(i int) []byte { return []byte{byte(i), byte(i + 100)} }

// validNameDatasets is where each valid case of the engine's name table
// goes in one file: under a group of its own ("n07/a/b") so that "a" and
// "a/b/c" do not collide, or at the root when the group would make the
// path longer than the rule allows (the longest path, which collides
// with nothing).
func validNameDatasets(t *testing.T) map[string]int {
	out := map[string]int{}
	for i, c := range engine.NameRuleCases() {
		if !c.Valid {
			continue
		}
		check.NoError(t, engine.ValidateName(c.Name), "case %d", i)
		p := strings.TrimPrefix(c.Name, "/")
		if q := fmt.Sprintf("n%02d/%s", i, p); len(q) <= engine.MaxPathBytes {
			p = q
		}
		if _, dup := out[p]; !dup {
			out[p] = i
		}
	}
	return out
}

// TestNameRulesExportRoundTrip: every name the engine's name rule accepts
// exports to Zarr v2 and v3 under that name, reads back from the store
// under it (zarr-python for v2, zarrita for v3), and imports back as the
// same dataset with the same values; the only names left out are those
// Zarr itself reserves or its readers misread, each skipped and named.
func TestNameRulesExportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), nil)
	defer f.Close(context.Background())
	names := validNameDatasets(t)
	var zarrOnly []string
	for name, i := range names {
		ds, err := f.CreateDataset(context.Background(), name, engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{2}, Chunk: []uint64{2}})
		check.NoError(t, err, "%q", name)
		check.NoError(t, ds.Write(bg, engine.All([]uint64{2}), nameCaseData(i)))
		check.NoError(t, ds.SetAttr(bg, name[strings.LastIndex(name, "/")+1:], engine.StringAttr("v")))
		if err := nameErr(name); err != nil {
			check.NotErrorIs(t, err, engine.ErrInvalid)
			zarrOnly = append(zarrOnly, name[4:])
		}
	}
	// Every name the engine accepts, Zarr holds as it is.
	check.Empty(t, zarrOnly)
	check.NoError(t, f.Flush(bg))

	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, fmt.Sprintf("v%d.zarr", v))
		rep, err := Export(bg, f, store, Options{Version: v})
		check.NoError(t, err, "v%d", v)
		check.Empty(t, rep.Skipped, "v%d", v)
		check.Len(t, rep.Datasets, len(names), "v%d", v)

		back := testfile.Create(t, filepath.Join(dir, fmt.Sprintf("back%d.scc", v)), nil)
		irep, err := Import(bg, store, back, Options{})
		check.NoError(t, err, "v%d", v)
		check.Empty(t, irep.Skipped, "v%d", v)
		want := slices.Sorted(maps.Keys(names))
		got := testfile.DatasetNames(t, back)
		slices.Sort(got)
		check.Equal(t, want, got, "v%d", v)
		for _, name := range want {
			ds, err := back.OpenDataset(context.Background(), name, nil)
			check.NoError(t, err)
			check.Equal(t, nameCaseData(names[name]), readAll(t, ds), "v%d %q", v, name)
			base := name[strings.LastIndex(name, "/")+1:]
			a, err := ds.Attr(base)
			check.NoError(t, err, "v%d %q attribute", v, name)
			s, _ := a.Str()
			check.Equal(t, "v", s)
			ds.Close(context.Background())
		}
		check.NoError(t, back.Close(context.Background()))
	}

	// The readers people use find each array under its name.
	want := slices.Sorted(maps.Keys(names))
	zarrPython(t)
	py := `import json, sys, zarr
g = zarr.open_group(sys.argv[1], mode="r")
out = {}
def visit(name, obj):
    if isinstance(obj, zarr.Array):
        out[name] = list(obj[:].tobytes())
g.visititems(visit)
json.dump(out, sys.stdout)
`
	b, err := exec.Command(python, "-c", py, filepath.Join(dir, "v2.zarr")).Output()
	check.NoError(t, err, "zarr-python: %s", stderr(err))
	var read map[string][]byte
	var raw map[string][]int
	check.NoError(t, json.Unmarshal(b, &raw))
	read = map[string][]byte{}
	for k, v := range raw {
		for _, x := range v {
			read[k] = append(read[k], byte(x))
		}
	}
	check.Len(t, read, len(want))
	for _, name := range want {
		check.Equal(t, nameCaseData(names[name]), read[name], "zarr-python %q", name)
	}

	node := zarrita(t)
	out := t.TempDir()
	// zarrita resolves every path as a URL and decodes its escapes, so
	// it cannot open a node whose name holds "%" (it throws on "a%b", and
	// would open "aA" for "a%41"): a limit of that reader, not of the
	// store, which zarr-python reads. Those names are left to it.
	args := []string{filepath.Join(node, "zarr3.mjs"), "read", filepath.Join(dir, "v3.zarr"), out}
	var zw []string
	for _, name := range want {
		if !strings.Contains(name, "%") {
			zw = append(zw, name)
		}
	}
	check.Equal(t, len(want)-1, len(zw))
	args = append(args, zw...)
	cmd := exec.Command("node", args...)
	b, err = cmd.Output()
	check.NoError(t, err, "zarrita: %s %s", b, stderr(err))
	for i, name := range zw {
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.bin", i)))
		check.NoError(t, err)
		check.Equal(t, nameCaseData(names[name]), got, "zarrita %q", name)
	}
}

// fsLegal reports whether a directory tree can hold name as a key: no NUL,
// no empty, "." or ".." component, none longer than a file name may be,
// none a metadata key's name (a store keeps a file there), no backslash
// (the store refuses such a key as one leading outside it on Windows).
func fsLegal(name string) bool {
	if strings.Contains(name, "\x00") {
		return false
	}
	for _, c := range strings.Split(strings.TrimPrefix(name, "/"), "/") {
		if c == "" || c == "." || c == ".." || len(c) > 255 || strings.HasPrefix(c, ".z") || c == "zarr.json" || strings.Contains(c, "\\") {
			return false
		}
	}
	return true
}

// TestNameRulesImportSkips: a store holding arrays, a group and
// attributes under every name the engine's name rule refuses and a
// directory tree can hold (v2 and v3) imports the rest, each refused name
// left out and named with the rule, never renamed; Strict refuses the
// store and writes nothing.
func TestNameRulesImportSkips(t *testing.T) {
	var bad []string
	for _, c := range engine.NameRuleCases() {
		if !c.Valid && fsLegal(c.Name) {
			bad = append(bad, strings.TrimPrefix(c.Name, "/"))
		}
	}
	check.GreaterOrEqual(t, len(bad), 8)
	const group = "grp\x01"
	longAttr := strings.Repeat("a", engine.MaxAttrNameBytes+1)
	attrs := `{"ok": 1, "": 2, "a\u0000b": 3, "` + longAttr + `": 4}`
	for _, v := range []int{2, 3} {
		dir := t.TempDir()
		store := filepath.Join(dir, "s.zarr")
		array := func(key string) {
			p := filepath.Join(store, filepath.FromSlash(key))
			if v == 2 {
				writeFile(t, filepath.Join(p, ".zarray"), `{"zarr_format":2,"shape":[2],"chunks":[2],"dtype":"|u1","fill_value":0,"order":"C","filters":null,"compressor":null}`)
				writeFile(t, filepath.Join(p, ".zattrs"), attrs)
				writeFile(t, filepath.Join(p, "0"), "\x07\x08")
				return
			}
			writeFile(t, filepath.Join(p, "zarr.json"), `{"zarr_format":3,"node_type":"array","shape":[2],"data_type":"uint8",
"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},
"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
"fill_value":0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}],"attributes":`+attrs+`}`)
			writeFile(t, filepath.Join(p, "c", "0"), "\x07\x08")
		}
		groupDoc := func(key string) {
			p := filepath.Join(store, filepath.FromSlash(key))
			if v == 2 {
				writeFile(t, filepath.Join(p, ".zgroup"), `{"zarr_format":2}`)
				writeFile(t, filepath.Join(p, ".zattrs"), attrs)
				return
			}
			writeFile(t, filepath.Join(p, "zarr.json"), `{"zarr_format":3,"node_type":"group","attributes":`+attrs+`}`)
		}
		groupDoc("")
		array("ok")
		groupDoc(group)
		array(group + "/x")
		for _, name := range bad {
			array(name)
		}

		f := testfile.Create(t, filepath.Join(dir, "strict.scc"), nil)
		_, err := Import(bg, store, f, Options{Strict: true})
		check.ErrorIs(t, err, ErrUnsupported, "v%d strict", v)
		check.ErrorIs(t, err, engine.ErrInvalid, "v%d strict", v)
		check.Empty(t, testfile.DatasetNames(t, f), "v%d: a refused strict import wrote datasets", v)
		check.NoError(t, f.Close(context.Background()))

		f = testfile.Create(t, filepath.Join(dir, "out.scc"), nil)
		rep, err := Import(bg, store, f, Options{})
		check.NoError(t, err, "v%d", v)
		check.Equal(t, []string{"ok"}, testfile.DatasetNames(t, f), "v%d", v)
		ds, err := f.OpenDataset(context.Background(), "ok", nil)
		check.NoError(t, err)
		check.Equal(t, []byte{7, 8}, readAll(t, ds))
		got := testfile.Attrs(t, ds)
		check.Len(t, got, 1, "v%d: attributes %v", v, got)
		check.Equal(t, "ok", got[0].Name)
		notes := strings.Join(rep.Datasets[0].Notes, "\n")
		for _, n := range []string{`"" (`, `"a\x00b" (`, fmt.Sprintf("%q (", longAttr)} {
			check.Contains(t, notes, n, "v%d: attribute %q not named", v, n)
		}
		check.Contains(t, strings.Join(rep.Notes, "\n"), `"a\x00b" (`, "v%d: file attribute not named", v)
		skipped := map[string]string{}
		for _, sk := range rep.Skipped {
			skipped[sk.Name] = sk.Reason
		}
		want := append([]string{group, group + "/x"}, bad...)
		check.Len(t, skipped, len(want), "v%d: %v", v, rep.Skipped)
		for _, name := range want {
			why, ok := skipped[name]
			check.True(t, ok, "v%d: %q not named in %v", v, name, rep.Skipped)
			check.Contains(t, why, engine.ValidateName(name).Error(), "v%d: %q", v, name)
		}
		check.True(t, strings.HasPrefix(skipped[group], "group: "), "v%d: %q", v, skipped[group])
		check.Contains(t, rep.Summary(), `SKIPPED "a\nb": `, "v%d summary", v)
		check.NoError(t, f.Close(context.Background()))
	}
}

// check is the few assertions these tests make, each failing the test
// at once with what it saw.
var check = struct {
	NoError        func(t *testing.T, err error, msg ...any)
	Equal          func(t *testing.T, want, got any, msg ...any)
	ErrorIs        func(t *testing.T, err, target error, msg ...any)
	NotErrorIs     func(t *testing.T, err, target error, msg ...any)
	Len            func(t *testing.T, v any, n int, msg ...any)
	Empty          func(t *testing.T, v any, msg ...any)
	Contains       func(t *testing.T, s, sub string, msg ...any)
	True           func(t *testing.T, ok bool, msg ...any)
	GreaterOrEqual func(t *testing.T, a, b int, msg ...any)
}{
	NoError: func(t *testing.T, err error, msg ...any) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", say(msg), err)
		}
	},
	Equal: func(t *testing.T, want, got any, msg ...any) {
		t.Helper()
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%s: got %q, want %q", say(msg), got, want)
		}
	},
	ErrorIs: func(t *testing.T, err, target error, msg ...any) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("%s: %v, want %v", say(msg), err, target)
		}
	},
	NotErrorIs: func(t *testing.T, err, target error, msg ...any) {
		t.Helper()
		if errors.Is(err, target) {
			t.Fatalf("%s: %v matches %v", say(msg), err, target)
		}
	},
	Len: func(t *testing.T, v any, n int, msg ...any) {
		t.Helper()
		if l := reflect.ValueOf(v).Len(); l != n {
			t.Fatalf("%s: %d elements, want %d: %q", say(msg), l, n, v)
		}
	},
	Empty: func(t *testing.T, v any, msg ...any) {
		t.Helper()
		if l := reflect.ValueOf(v).Len(); l != 0 {
			t.Fatalf("%s: %d elements, want none: %q", say(msg), l, v)
		}
	},
	Contains: func(t *testing.T, s, sub string, msg ...any) {
		t.Helper()
		if !strings.Contains(s, sub) {
			t.Fatalf("%s: %q does not contain %q", say(msg), s, sub)
		}
	},
	True: func(t *testing.T, ok bool, msg ...any) {
		t.Helper()
		if !ok {
			t.Fatalf("%s", say(msg))
		}
	},
	GreaterOrEqual: func(t *testing.T, a, b int, msg ...any) {
		t.Helper()
		if a < b {
			t.Fatalf("%s: %d < %d", say(msg), a, b)
		}
	},
}

func say(msg []any) string {
	if len(msg) == 0 {
		return "assertion"
	}
	if f, ok := msg[0].(string); ok {
		return fmt.Sprintf(f, msg[1:]...)
	}
	return fmt.Sprint(msg...)
}
