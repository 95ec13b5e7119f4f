package zarr

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestGroupsRoundTrip exports a nested tree to v2 and v3 and imports it
// back: every group (an empty one too) is a Zarr group node holding its
// attributes, every dataset sits at its path, and the import recreates the
// groups with their attributes.
func TestGroupsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	f := testfile.Create(t, src, nil)
	must(t, f.SetAttr(bg, "title", engine.StringAttr("run 7")))
	entry, err := f.CreateGroup(bg, "entry")
	must(t, err)
	must(t, entry.SetAttr(bg, "NX_class", engine.StringAttr("NXentry")))
	ds, err := f.CreateDataset(context.Background(), "entry/data/data", engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{2, 3}, Chunk: []uint64{1, 3}})
	must(t, err)
	must(t, engine.WriteSlice(bg, ds, engine.All([]uint64{2, 3}), []int32{1, 2, 3, 4, 5, 6}))
	must(t, ds.SetAttr(bg, "units", engine.StringAttr("counts")))
	data, err := f.OpenGroup(context.Background(), "entry/data")
	must(t, err)
	must(t, data.SetAttr(bg, "gain", engine.ArrayAttr([]float64{1.5, 2})))
	empty, err := f.CreateGroup(bg, "entry/empty")
	must(t, err)
	must(t, empty.SetAttr(bg, "note", engine.StringAttr("nothing here")))
	must(t, f.Flush(bg))

	groups := map[string][]engine.Attr{}
	for _, p := range []string{"entry", "entry/data", "entry/empty"} {
		g, err := f.OpenGroup(context.Background(), p)
		must(t, err)
		groups[p], err = g.Attrs()
		must(t, err)
	}
	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, "store"+string(rune('0'+v)))
		_, err := Export(bg, f, store, Options{Version: v})
		must(t, err)
		for p := range groups {
			doc := ".zgroup"
			if v == 3 {
				doc = "zarr.json"
			}
			b, err := os.ReadFile(filepath.Join(store, filepath.FromSlash(p), doc))
			must(t, err)
			var m map[string]any
			must(t, json.Unmarshal(b, &m))
			if v == 3 && m["node_type"] != "group" {
				t.Fatalf("v3 %s: node_type %v", p, m["node_type"])
			}
			attrDoc := filepath.Join(store, filepath.FromSlash(p), ".zattrs")
			if v == 3 {
				attrDoc = filepath.Join(store, filepath.FromSlash(p), "zarr.json")
			}
			b, err = os.ReadFile(attrDoc)
			must(t, err)
			if v == 3 {
				m = m["attributes"].(map[string]any)
			} else {
				m = nil
				must(t, json.Unmarshal(b, &m))
			}
			for _, a := range groups[p] {
				if _, ok := m[a.Name]; !ok {
					t.Fatalf("v%d %s: attribute %q missing from %v", v, p, a.Name, m)
				}
			}
			if _, ok := m[typesKey]; ok && len(m) != len(groups[p])+1 || !ok && len(m) != len(groups[p]) {
				t.Fatalf("v%d %s: attributes %v, want %d", v, p, m, len(groups[p]))
			}
		}

		back := filepath.Join(dir, "back"+string(rune('0'+v))+".scc")
		g := testfile.Create(t, back, nil)
		rep, err := Import(bg, store, g, Options{})
		must(t, err)
		if len(rep.Notes) != 0 {
			t.Errorf("v%d import notes: %q", v, rep.Notes)
		}
		sameAttrs(t, "file", testfile.Attrs(t, f), testfile.Attrs(t, g))
		for p, want := range groups {
			gg, err := g.OpenGroup(context.Background(), p)
			if err != nil {
				t.Fatalf("v%d group %s: %v", v, p, err)
			}
			got, err := gg.Attrs()
			must(t, err)
			sameAttrs(t, p, want, got)
		}
		var members []engine.Member
		for m, err := range g.Members() {
			must(t, err)
			members = append(members, m)
		}
		if len(members) != 1 || members[0].Name != "entry" || members[0].Kind != engine.MemberGroup {
			t.Fatalf("v%d root members %v", v, members)
		}
		b, err := g.OpenDataset(context.Background(), "entry/data/data", nil)
		must(t, err)
		var want []byte
		a, err := f.OpenDataset(context.Background(), "entry/data/data", nil)
		must(t, err)
		want = readAll(t, a)
		if string(readAll(t, b)) != string(want) {
			t.Errorf("v%d: elements differ", v)
		}
		sameAttrs(t, "entry/data/data", testfile.Attrs(t, a), testfile.Attrs(t, b))
		must(t, g.Close(context.Background()))
	}
	must(t, f.Close(context.Background()))
}
