package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

var smallSpec = DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}}

func members(t *testing.T, g *Group) []Member {
	t.Helper()
	ms, err := g.Members()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestGroupsTree: groups nest, a member's missing parent groups are
// created, a name is a group or a dataset (ErrExists), members list
// sorted with their kinds, group attributes and the tree survive a
// reopen, and paths resolve from the root.
func TestGroupsTree(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	a, err := f.CreateGroup(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateGroup(ctx, "x/y"); err != nil {
		t.Fatalf("group in a missing group: %v", err)
	}
	if _, err := a.CreateDataset(ctx, "m/d", smallSpec); err != nil {
		t.Fatalf("dataset in a missing group: %v", err)
	}
	b, err := a.CreateGroup(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Path() != "/a/b" {
		t.Fatalf("path %q", b.Path())
	}
	if _, err := b.CreateDataset(ctx, "d", smallSpec); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateDataset(ctx, "c", smallSpec); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateGroup(ctx, "a/c"); !errors.Is(err, ErrExists) {
		t.Fatalf("group over a dataset: %v, want ErrExists", err)
	}
	if _, err := f.CreateDataset("a/b", smallSpec); !errors.Is(err, ErrExists) {
		t.Fatalf("dataset over a group: %v, want ErrExists", err)
	}
	if _, err := f.CreateGroup(ctx, "a"); !errors.Is(err, ErrExists) {
		t.Fatalf("group twice: %v, want ErrExists", err)
	}
	// The File call takes a full path and makes its missing groups.
	if _, err := f.CreateDataset("/p/q/r", smallSpec); err != nil {
		t.Fatal(err)
	}
	if err := b.SetAttr(ctx, "units", StringAttr("m")); err != nil {
		t.Fatal(err)
	}
	if err := f.Root().SetAttr(ctx, "title", StringAttr("t")); err != nil {
		t.Fatal(err)
	}
	want := []Member{{"b", MemberGroup}, {"c", MemberDataset}, {"m", MemberGroup}}
	if got := members(t, a); !reflect.DeepEqual(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f = tOpen(t, drv, nil)
	defer f.Close()
	wantRoot := []Member{{"a", MemberGroup}, {"p", MemberGroup}, {"x", MemberGroup}}
	if got := members(t, f.Root()); !reflect.DeepEqual(got, wantRoot) {
		t.Fatalf("root members %v, want %v", got, wantRoot)
	}
	b, err = f.OpenGroup("a/b")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := b.Attr("units"); err != nil || !v.Equal(StringAttr("m")) {
		t.Fatalf("group attribute: %v %v", v, err)
	}
	if v, err := f.Attr("title"); err != nil || !v.Equal(StringAttr("t")) {
		t.Fatalf("root attribute is the file's: %v %v", v, err)
	}
	if _, err := b.OpenDataset("d"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OpenDataset("/a/b/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OpenGroup("p/q"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OpenGroup("a/c"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("open a dataset as a group: %v", err)
	}
	if _, err := f.CreateGroup(ctx, "a//z"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty component: %v", err)
	}
}

// dropGroupsPart rewrites the file's catalog without its groups part, as
// a writer before groups left it, and commits that in place.
func dropGroupsPart(t *testing.T, drv vfd.Driver) {
	t.Helper()
	sb := mustSuperblock(t, drv)
	cat, parts, _, err := readCatalog(drv, sb)
	if err != nil {
		t.Fatal(err)
	}
	if !parts.HasGroups {
		t.Fatal("the file has no groups part to drop")
	}
	b := format.EncodeCatalogParts(cat, format.CatalogParts{Attrs: parts.Attrs})
	addr := sb.EOF
	if _, err := drv.WriteAt(b, int64(addr)); err != nil {
		t.Fatal(err)
	}
	sb.CatalogAddr, sb.CatalogSize, sb.CatalogSum = addr, uint64(len(b)), format.Trailer(b)
	sb.EOF = addr + uint64(len(b))
	if _, err := drv.WriteAt(format.EncodeSuperblock(sb), format.SlotFor(sb.Generation)); err != nil {
		t.Fatal(err)
	}
}

// TestGroupsImplicitInOlderFile: a file without a groups part reads the
// parents of its datasets' names as groups without attributes, read-only
// and writable, and a writable open lists them from its next commit on.
func TestGroupsImplicitInOlderFile(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	for _, n := range []string{"a/b/x", "a/y", "top"} {
		if _, err := f.CreateDataset(n, smallSpec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.CreateGroup(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dropGroupsPart(t, drv)
	want := []Member{{"a", MemberGroup}, {"top", MemberDataset}}
	for _, ro := range []bool{true, false} {
		f := tOpen(t, drv, &Options{ReadOnly: ro})
		if got := members(t, f.Root()); !reflect.DeepEqual(got, want) {
			t.Fatalf("read-only %v: root members %v, want %v", ro, got, want)
		}
		a, err := f.OpenGroup("a")
		if err != nil {
			t.Fatal(err)
		}
		if got, w := members(t, a), []Member{{"b", MemberGroup}, {"y", MemberDataset}}; !reflect.DeepEqual(got, w) {
			t.Fatalf("members of a %v, want %v", got, w)
		}
		if attrs, err := a.Attrs(); err != nil || len(attrs) != 0 {
			t.Fatalf("implicit group attributes %v %v", attrs, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, parts, _, err := readCatalog(drv, mustSuperblock(t, drv))
	if err != nil || !parts.HasGroups || len(parts.Groups) != 2 {
		t.Fatalf("after a writable open the groups are listed: %+v %v", parts, err)
	}
}

func mustSuperblock(t *testing.T, drv vfd.Driver) format.Superblock {
	t.Helper()
	sb, err := readSuperblock(drv)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// TestGroupsPartLimit: groups whose attributes outgrow the catalog's one
// part fail the commit (ErrInvalid) instead of writing a catalog no reader
// decodes; deleting some lets the next commit through.
func TestGroupsPartLimit(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	big := BytesAttr(bytes.Repeat([]byte{7}, 60<<10))
	for i := range 20 {
		g, err := f.CreateGroup(ctx, fmt.Sprintf("g%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetAttr(ctx, "blob", big); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Flush(ctx); !errors.Is(err, ErrInvalid) {
		t.Fatalf("flush of an oversized groups part: %v, want ErrInvalid", err)
	}
	for i := range 10 {
		if err := f.Delete(ctx, fmt.Sprintf("g%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, drv, nil)
	defer f.Close()
	if ms := members(t, f.Root()); len(ms) != 10 {
		t.Fatalf("members %v", ms)
	}
}

// TestWalkGroups: every group below the start, parents first and
// siblings in name order, datasets skipped; a group fn declines is not
// walked into; fn's error and a canceled context end the walk.
func TestWalkGroups(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	for _, p := range []string{"d", "a", "a/c", "a/b", "a/b/z", "d/e"} {
		if _, err := f.CreateGroup(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.CreateDataset("a/data", smallSpec); err != nil {
		t.Fatal(err)
	}
	walk := func(g *Group, skip string) []string {
		var seen []string
		err := g.WalkGroups(ctx, func(sub *Group, p string) (bool, error) {
			if sub.Path() != "/"+p {
				t.Fatalf("group %q walked as %q", sub.Path(), p)
			}
			seen = append(seen, p)
			return p != skip, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return seen
	}
	if got, want := walk(f.Root(), ""), []string{"a", "a/b", "a/b/z", "a/c", "d", "d/e"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("walk %v, want %v", got, want)
	}
	if got, want := walk(f.Root(), "a/b"), []string{"a", "a/b", "a/c", "d", "d/e"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("walk not into a/b: %v, want %v", got, want)
	}
	a, err := f.OpenGroup("a")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := walk(a, ""), []string{"a/b", "a/b/z", "a/c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("walk from a: %v, want %v", got, want)
	}
	stop := errors.New("stop")
	n := 0
	err = f.Root().WalkGroups(ctx, func(*Group, string) (bool, error) {
		n++
		if n == 2 {
			return false, stop
		}
		return true, nil
	})
	if err != stop || n != 2 {
		t.Fatalf("fn's error: %v after %d groups", err, n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.Root().WalkGroups(cctx, func(*Group, string) (bool, error) { return true, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}
