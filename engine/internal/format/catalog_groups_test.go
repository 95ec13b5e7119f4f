package format

import (
	"errors"
	"reflect"
	"testing"
)

func sampleGroups() CatalogParts {
	return CatalogParts{HasGroups: true, Groups: []GroupEntry{
		{Path: "a"}, {Path: "a/b", Attrs: []byte{3, 1, 0, 0, 0}}, {Path: "z"},
	}}
}

func groupSeeds() [][]byte {
	return [][]byte{
		EncodeCatalogParts(sampleCatalog(), sampleGroups()),
		EncodeCatalogParts(nil, CatalogParts{HasGroups: true}),
		EncodeCatalogParts([]CatalogEntry{{Name: "g/d", ID: 1, HeaderAddr: DataStart, HeaderSize: headerMin}},
			CatalogParts{Attrs: []byte{1, 1, 0, 0, 0}, HasGroups: true, Groups: []GroupEntry{{Path: "g", Attrs: []byte{9}}}}),
		// A v3 catalog may not carry the groups part.
		resealAs(EncodeCatalogParts(nil, CatalogParts{HasGroups: true}), 3),
	}
}

// FuzzCatalogGroups decodes catalogs with a groups part: whatever decodes
// re-encodes to the same bytes and the same groups, and obeys the group
// rules (parents present, no dataset named like a group).
func FuzzCatalogGroups(f *testing.F) {
	for _, s := range groupSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, parts, err := DecodeCatalogParts(b)
		if err != nil {
			return
		}
		again := EncodeCatalogParts(c, parts)
		if !sameEncoding(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
		c2, parts2, err := DecodeCatalogParts(again)
		if err != nil || !reflect.DeepEqual(c, c2) || !reflect.DeepEqual(parts, parts2) {
			t.Fatalf("re-decode: %+v %+v %v, want %+v %+v", c2, parts2, err, c, parts)
		}
		if parts.HasGroups {
			if err := checkGroups(parts.Groups, c); err != nil {
				t.Fatalf("decoded groups break the rules: %v", err)
			}
		}
		if ValidateCatalogParts(parts) != nil {
			t.Fatal("decoded parts fail ValidateCatalogParts")
		}
	})
}

func TestCatalogGroupsRoundTrip(t *testing.T) {
	entries := []CatalogEntry{{Name: "a/b/c", ID: 7, HeaderAddr: DataStart, HeaderSize: headerMin}, {Name: "top", ID: 1, HeaderAddr: DataStart + 4096, HeaderSize: headerMin}}
	cp := sampleGroups()
	got, gp, err := DecodeCatalogParts(EncodeCatalogParts(entries, cp))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, entries) || !reflect.DeepEqual(gp, cp) {
		t.Fatalf("got %+v %+v", got, gp)
	}
	// No groups part: the older implicit mode.
	_, gp, err = DecodeCatalogParts(EncodeCatalogParts(entries, CatalogParts{}))
	if err != nil || gp.HasGroups {
		t.Fatalf("no part: %+v %v", gp, err)
	}
	// An empty group list is still a part (explicit mode).
	_, gp, err = DecodeCatalogParts(EncodeCatalogParts(nil, CatalogParts{HasGroups: true}))
	if err != nil || !gp.HasGroups || len(gp.Groups) != 0 {
		t.Fatalf("empty part: %+v %v", gp, err)
	}
}

// TestCatalogGroupsRules: every violation of the group rules decodes as
// corruption, and a v3 catalog may not carry the part.
func TestCatalogGroupsRules(t *testing.T) {
	e := func(name string) CatalogEntry {
		return CatalogEntry{Name: name, ID: 1, HeaderAddr: DataStart, HeaderSize: headerMin}
	}
	for name, c := range map[string]struct {
		entries []CatalogEntry
		groups  []GroupEntry
	}{
		"parent missing":    {nil, []GroupEntry{{Path: "a/b"}}},
		"dataset no parent": {[]CatalogEntry{e("x/d")}, nil},
		"collision":         {[]CatalogEntry{e("a")}, []GroupEntry{{Path: "a"}}},
		"unsorted":          {nil, []GroupEntry{{Path: "b"}, {Path: "a"}}},
		"duplicate":         {nil, []GroupEntry{{Path: "a"}, {Path: "a"}}},
		"empty component":   {nil, []GroupEntry{{Path: "a"}, {Path: "a//b"}}},
		"leading slash":     {nil, []GroupEntry{{Path: "/a"}}},
		"trailing slash":    {nil, []GroupEntry{{Path: "a/"}}},
		"dataset slash":     {[]CatalogEntry{e("/d")}, nil},
	} {
		b := EncodeCatalogParts(c.entries, CatalogParts{HasGroups: true, Groups: c.groups})
		if _, _, err := DecodeCatalogParts(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	v3 := resealAs(EncodeCatalogParts(nil, CatalogParts{HasGroups: true}), 3)
	if _, _, err := DecodeCatalogParts(v3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("v3 catalog with groups: %v, want ErrCorrupt", err)
	}
}
