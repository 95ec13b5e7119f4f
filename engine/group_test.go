package engine

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/vfd"
)

var smallSpec = DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}}

// members lists g's members by name and kind (TestGroupPaths checks
// their paths).
func members(t testing.TB, g *Group) []Member {
	t.Helper()
	var ms []Member
	for m, err := range g.Members() {
		require.NoError(t, err)
		m.Path = ""
		ms = append(ms, m)
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
	if _, err := f.CreateDataset(ctx, "a/b", smallSpec); !errors.Is(err, ErrExists) {
		t.Fatalf("dataset over a group: %v, want ErrExists", err)
	}
	if _, err := f.CreateGroup(ctx, "a"); !errors.Is(err, ErrExists) {
		t.Fatalf("group twice: %v, want ErrExists", err)
	}
	// The File call takes a full path and makes its missing groups.
	if _, err := f.CreateDataset(ctx, "/p/q/r", smallSpec); err != nil {
		t.Fatal(err)
	}
	if err := b.SetAttr(ctx, "units", StringAttr("m")); err != nil {
		t.Fatal(err)
	}
	if err := f.Group.SetAttr(ctx, "title", StringAttr("t")); err != nil {
		t.Fatal(err)
	}
	want := []Member{{Name: "b", Kind: MemberGroup}, {Name: "c", Kind: MemberDataset}, {Name: "m", Kind: MemberGroup}}
	if got := members(t, a); !reflect.DeepEqual(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}

	f = tOpen(t, drv, nil)
	defer f.Close(ctx)
	wantRoot := []Member{{Name: "a", Kind: MemberGroup}, {Name: "p", Kind: MemberGroup}, {Name: "x", Kind: MemberGroup}}
	if got := members(t, f.Group); !reflect.DeepEqual(got, wantRoot) {
		t.Fatalf("root members %v, want %v", got, wantRoot)
	}
	b, err = f.OpenGroup(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := b.Attr("units"); err != nil || !v.Equal(StringAttr("m")) {
		t.Fatalf("group attribute: %v %v", v, err)
	}
	if v, err := f.Attr("title"); err != nil || !v.Equal(StringAttr("t")) {
		t.Fatalf("root attribute is the file's: %v %v", v, err)
	}
	if _, err := b.OpenDataset(ctx, "d", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OpenDataset(ctx, "/a/b/d", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OpenGroup(ctx, "p/q"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OpenGroup(ctx, "a/c"); !errors.Is(err, ErrInvalid) {
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
		if _, err := f.CreateDataset(ctx, n, smallSpec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.CreateGroup(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	dropGroupsPart(t, drv)
	want := []Member{{Name: "a", Kind: MemberGroup}, {Name: "top", Kind: MemberDataset}}
	for _, ro := range []bool{true, false} {
		f := tOpen(t, drv, &Options{ReadOnly: ro})
		if got := members(t, f.Group); !reflect.DeepEqual(got, want) {
			t.Fatalf("read-only %v: root members %v, want %v", ro, got, want)
		}
		a, err := f.OpenGroup(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if got, w := members(t, a), []Member{{Name: "b", Kind: MemberGroup}, {Name: "y", Kind: MemberDataset}}; !reflect.DeepEqual(got, w) {
			t.Fatalf("members of a %v, want %v", got, w)
		}
		if attrs, err := a.Attrs(); err != nil || len(attrs) != 0 {
			t.Fatalf("implicit group attributes %v %v", attrs, err)
		}
		if err := f.Close(ctx); err != nil {
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
		if err := f.Delete(ctx, fmt.Sprintf("g%02d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f = tOpen(t, drv, nil)
	defer f.Close(ctx)
	if ms := members(t, f.Group); len(ms) != 10 {
		t.Fatalf("members %v", ms)
	}
}

// TestWalkGroups: every group below the start, parents first and
// siblings in name order, datasets skipped; a group fn declines is not
// walked into; fn's error and a canceled context end the walk.
func TestGroupWalk(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	for _, p := range []string{"d", "a", "a/c", "a/b", "a/b/z", "d/e"} {
		if _, err := f.CreateGroup(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.CreateDataset(ctx, "a/data", smallSpec); err != nil {
		t.Fatal(err)
	}
	walk := func(g *Group) []string {
		var seen []string
		for m, err := range g.Walk() {
			require.NoError(t, err)
			seen = append(seen, m.Kind.String()[:1]+":"+m.Path)
		}
		return seen
	}
	assert.Equal(t, []string{"g:/a", "g:/a/b", "g:/a/b/z", "g:/a/c", "d:/a/data", "g:/d", "g:/d/e"}, walk(f.Group))
	a, err := f.OpenGroup(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []string{"g:/a/b", "g:/a/b/z", "g:/a/c", "d:/a/data"}, walk(a))
	var ds []string
	for m, err := range f.Datasets() {
		require.NoError(t, err)
		ds = append(ds, m.Path)
	}
	assert.Equal(t, []string{"/a/data"}, ds)
	// Breaking out stops the walk.
	n := 0
	for range f.Walk() {
		n++
		if n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n)
	// A deleted group's walk yields its error once.
	require.NoError(t, f.Delete(ctx, "d", &DeleteOptions{Recursive: true}))
	d, err := f.OpenGroup(ctx, "a/b")
	require.NoError(t, err)
	require.NoError(t, f.Delete(ctx, "a/b", &DeleteOptions{Recursive: true}))
	errs := 0
	for _, err := range d.Walk() {
		assert.ErrorIs(t, err, ErrDeleted)
		errs++
	}
	assert.Equal(t, 1, errs)
}
