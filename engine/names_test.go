package engine

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// vspec1 is a bounded one-dimensional virtual dataset over a source that
// need not exist.
var vspec1 = VirtualSpec{Type: Uint8, Shape: []uint64{4}, Mappings: []VirtualMapping{{
	Virtual: Box([]uint64{0}, []uint64{4}), File: "absent.scc", Dataset: "x", Source: Box([]uint64{0}, []uint64{4})}}}

// creators are the calls that create a named member, each on a fresh
// file: the name rule and the parent rule are the same for all of them.
var creators = []struct {
	what   string
	create func(ctx context.Context, f *File, name string) error
}{
	{"File.CreateDataset", func(_ context.Context, f *File, name string) error {
		_, err := f.CreateDataset(context.Background(), name, smallSpec)
		return err
	}},
	{"File.CreateGroup", func(ctx context.Context, f *File, name string) error {
		_, err := f.CreateGroup(ctx, name)
		return err
	}},
	{"Group.CreateDataset", func(ctx context.Context, f *File, name string) error {
		_, err := f.Group.CreateDataset(ctx, name, smallSpec)
		return err
	}},
	{"Group.CreateGroup", func(ctx context.Context, f *File, name string) error {
		_, err := f.Group.CreateGroup(ctx, name)
		return err
	}},
	{"File.CreateVirtualDataset", func(ctx context.Context, f *File, name string) error {
		_, err := f.CreateVirtualDataset(ctx, name, vspec1)
		return err
	}},
}

// TestNameRule: ValidateName follows the shared table, every create call
// applies it (ErrInvalid naming the rule, nothing created), and every
// name it accepts survives a commit and reopen under its canonical path.
func TestNameRule(t *testing.T) {
	ctx := t.Context()
	for _, c := range NameRuleCases() {
		err := ValidateName(c.Name)
		if c.Valid != (err == nil) || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateName(%q): %v, want valid %v", c.Name, err, c.Valid)
		}
		for _, cr := range creators {
			drv := vfd.NewMem()
			f := tCreate(t, drv, nil)
			err := cr.create(ctx, f, c.Name)
			switch {
			case c.Valid && err != nil:
				t.Errorf("%s(%q): %v", cr.what, c.Name, err)
			case !c.Valid && !errors.Is(err, ErrInvalid) && !(c.Name == "/" || c.Name == ""):
				t.Errorf("%s(%q): %v, want ErrInvalid", cr.what, c.Name, err)
			case !c.Valid && err == nil:
				t.Errorf("%s(%q) accepted", cr.what, c.Name)
			}
			if !c.Valid {
				if ms := members(t, f.Group); len(ms) != 0 {
					t.Errorf("%s(%q) refused but left %v", cr.what, c.Name, ms)
				}
			}
			must(t, f.Close(ctx))
			if c.Valid {
				f = tOpen(t, drv, nil)
				p := strings.TrimPrefix(c.Name, "/")
				_, derr := f.OpenDataset(ctx, p, nil)
				_, gerr := f.OpenGroup(ctx, p)
				if derr != nil && gerr != nil {
					t.Errorf("%s(%q): after reopen neither a dataset (%v) nor a group (%v)", cr.what, c.Name, derr, gerr)
				}
				must(t, f.Close(ctx))
			}
		}
	}
	// The error names the rule broken.
	for name, rule := range map[string]string{
		"a//b": "empty component", "g/..": `".."`, "a\x00b": "NUL", "a\nb": "control character",
		strings.Repeat("x", 256): "at most 255", "a\xff": "UTF-8",
	} {
		if err := ValidateName(name); err == nil || !strings.Contains(err.Error(), rule) {
			t.Errorf("ValidateName(%q): %v, want it to say %q", name, err, rule)
		}
	}
}

// TestNameRuleParents: every create call makes the missing groups above
// the name (HDF5's create-intermediate-groups), File and Group calls
// alike, Group calls resolving from the group; an ancestor that is a
// dataset is ErrInvalid, and a name taken by a group or a dataset is
// ErrExists.
func TestNameRuleParents(t *testing.T) {
	ctx := t.Context()
	for _, cr := range creators {
		t.Run(cr.what, func(t *testing.T) {
			drv := vfd.NewMem()
			f := tCreate(t, drv, nil)
			must(t, cr.create(ctx, f, "p/q/m"))
			if _, err := f.CreateDataset(ctx, "d", smallSpec); err != nil {
				t.Fatal(err)
			}
			if err := cr.create(ctx, f, "d/x"); !errors.Is(err, ErrInvalid) {
				t.Fatalf("under a dataset: %v, want ErrInvalid", err)
			}
			for _, taken := range []string{"p", "/p/q", "d"} {
				if err := cr.create(ctx, f, taken); !errors.Is(err, ErrExists) {
					t.Fatalf("%q taken: %v, want ErrExists", taken, err)
				}
			}
			must(t, f.Close(ctx))
			f = tOpen(t, drv, nil)
			defer f.Close(ctx)
			q, err := f.OpenGroup(ctx, "p/q")
			if err != nil {
				t.Fatal(err)
			}
			if got := members(t, q); len(got) != 1 || got[0].Name != "m" {
				t.Fatalf("members of p/q %v", got)
			}
			if got := members(t, f.Group); !reflect.DeepEqual(got, []Member{{Name: "d", Kind: MemberDataset}, {Name: "p", Kind: MemberGroup}}) {
				t.Fatalf("root members %v", got)
			}
		})
	}
	// A Group call resolves inside the group, or from the root with "/".
	f := tCreate(t, vfd.NewMem(), nil)
	defer f.Close(ctx)
	g, err := f.CreateGroup(ctx, "g")
	must(t, err)
	_, err = g.CreateDataset(ctx, "a/b", smallSpec)
	must(t, err)
	_, err = g.CreateGroup(ctx, "/top/sub")
	must(t, err)
	for _, p := range []string{"g/a", "top"} {
		if _, err := f.OpenGroup(ctx, p); err != nil {
			t.Fatalf("group %q: %v", p, err)
		}
	}
	if _, err := f.OpenDataset(ctx, "g/a/b", nil); err != nil {
		t.Fatal(err)
	}
}
