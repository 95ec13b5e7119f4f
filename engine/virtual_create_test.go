package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestVirtualCreateUnresolvedLeavesNothing: a virtual dataset whose extent
// follows sources (an unlimited mapping, plain or printf) named relative
// to a file this File, opened on a driver, cannot locate (no
// VirtualOptions.Base or Open) cannot have its extent evaluated, so
// creating it fails with ErrInvalid — and, as for any failed call, the
// file is as it was: no dataset, none committed. A bounded mapping over
// such a source is created (its extent needs no source), and with Open set
// the unlimited one is too.
func TestVirtualCreateUnresolvedLeavesNothing(t *testing.T) {
	ctx := context.Background()
	printf := []VirtualMapping{{
		Virtual: Hyperslab([]uint64{0, 0, 0}, []uint64{2, 1, 1}, []uint64{Unlimited, 1, 1}, []uint64{2, 2, 2}),
		File:    "p%b.scc", Dataset: "frames",
		Source: Box([]uint64{0, 0, 0}, []uint64{2, 2, 2}),
	}}
	for _, c := range []struct {
		name string
		ms   []VirtualMapping
	}{{"plain", roundRobin(2, 2, 2, false)}, {"printf", printf}} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfd.NewMem()
			f, err := Create(ctx, "", &Options{Driver: mem})
			if err != nil {
				t.Fatal(err)
			}
			spec := VirtualSpec{Type: Uint32, Shape: []uint64{0, 2, 2}, MaxShape: []uint64{Unlimited, 2, 2}, Mappings: c.ms}
			if _, err := f.CreateVirtualDataset(ctx, "v", spec); !errors.Is(err, ErrInvalid) {
				t.Fatalf("create: %v, want ErrInvalid", err)
			}
			if got := f.datasetNames(); len(got) != 0 {
				t.Fatalf("a failed create left datasets %v", got)
			}
			if _, err := f.CreateVirtualDataset(ctx, "fixed", VirtualSpec{Type: Uint32, Shape: []uint64{2, 2}, Mappings: []VirtualMapping{{
				Virtual: Box([]uint64{0, 0}, []uint64{2, 2}), File: "a.scc", Dataset: "x", Source: Box([]uint64{0, 0}, []uint64{2, 2})}}}); err != nil {
				t.Fatalf("create bounded: %v", err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
			missing := func(ctx context.Context, name string, opts *Options) (*File, error) {
				return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
			}
			f, err = Open(ctx, "", &Options{Driver: sharedMem{mem}, Virtual: VirtualOptions{Open: missing}})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(ctx)
			if got := f.datasetNames(); len(got) != 1 || got[0] != "fixed" {
				t.Fatalf("reopened: datasets %v, want [fixed]", got)
			}
			ds, err := f.CreateVirtualDataset(ctx, "v", spec)
			if err != nil {
				t.Fatalf("create with Open: %v", err)
			}
			if sh := ds.Shape(); sh[0] != 0 {
				t.Fatalf("no source exists, extent %v", sh)
			}
		})
	}
}

// TestVirtualCreateNameRules: CreateVirtualDataset takes names by the rule
// and the parent rules of CreateDataset: a group's path or a dataset's is
// ErrExists, a name that is not a path is ErrInvalid, and a leading "/"
// resolves from the root. Refused names change nothing: after a commit
// and reopen the groups, their attributes and the empty group are there.
func TestVirtualCreateNameRules(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	g, err := f.CreateGroup(ctx, "g")
	must(t, err)
	must(t, g.SetAttr(ctx, "units", StringAttr("m")))
	_, err = f.CreateGroup(ctx, "g/empty")
	must(t, err)
	_, err = f.CreateDataset(ctx, "d", smallSpec)
	must(t, err)
	for name, want := range map[string]error{
		"g": ErrExists, "/g": ErrExists, "g/empty": ErrExists, "d": ErrExists,
		"a//b": ErrInvalid, "g/": ErrInvalid, "//x": ErrInvalid, "g/..": ErrInvalid, ".": ErrInvalid,
		"g/./y": ErrInvalid, "a\x00b": ErrInvalid, "a\nb": ErrInvalid, "": ErrInvalid, "/": ErrInvalid,
		"d/v": ErrInvalid,
	} {
		if _, err := f.CreateVirtualDataset(ctx, name, vspec1); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", name, err, want)
		}
	}
	_, err = f.CreateVirtualDataset(ctx, "/x", vspec1)
	must(t, err)
	_, err = f.CreateVirtualDataset(ctx, "g/empty/v", vspec1)
	must(t, err)
	must(t, f.Flush(ctx))
	must(t, f.Close(ctx))

	f = tOpen(t, drv, nil)
	defer f.Close(ctx)
	if got, want := members(t, f.Group), []Member{{Name: "d", Kind: MemberDataset}, {Name: "g", Kind: MemberGroup}, {Name: "x", Kind: MemberDataset}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("root members %v, want %v", got, want)
	}
	g, err = f.OpenGroup(ctx, "g")
	must(t, err)
	if v, err := g.Attr("units"); err != nil || !v.Equal(StringAttr("m")) {
		t.Fatalf("group attribute after reopen: %v %v", v, err)
	}
	e, err := f.OpenGroup(ctx, "g/empty")
	must(t, err)
	if got := members(t, e); len(got) != 1 || got[0].Name != "v" {
		t.Fatalf("members of g/empty %v", got)
	}
}

// TestVirtualCreateFailLeavesNothing: a source name no file or dataset
// can have (NUL, a control character, a component or a name too long,
// also once %b is expanded) is ErrInvalid before anything changed, and so
// is nothing left by a creation that fails evaluating its extent (a
// source that fails to open): after a commit and reopen the name is free
// and takes a valid dataset.
func TestVirtualCreateFailLeavesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "v.scc")
	unlim := func(file, dset string) VirtualSpec {
		return VirtualSpec{Type: Uint8, Shape: []uint64{0}, MaxShape: []uint64{Unlimited}, Mappings: []VirtualMapping{{
			Virtual: Hyperslab([]uint64{0}, nil, []uint64{Unlimited}, []uint64{1}), File: file, Dataset: dset,
			Source: Hyperslab([]uint64{0}, nil, []uint64{Unlimited}, []uint64{1})}}}
	}
	printf := func(file, dset string) VirtualSpec {
		return VirtualSpec{Type: Uint8, Shape: []uint64{0}, MaxShape: []uint64{Unlimited}, Mappings: []VirtualMapping{{
			Virtual: Hyperslab([]uint64{0}, nil, []uint64{Unlimited}, []uint64{1}), File: file, Dataset: dset,
			Source: Box([]uint64{0}, []uint64{1})}}}
	}
	long := strings.Repeat("n", 256)
	f := tCreatePath(t, p, nil)
	for what, spec := range map[string]VirtualSpec{
		"NUL in file":            unlim("a\x00b.scc", "x"),
		"newline in file":        unlim("a\nb.scc", "x"),
		"NUL in dataset":         unlim("s.scc", "a\x00b"),
		"long file component":    unlim(long+".scc", "x"),
		"long file":              unlim(strings.Repeat("d/", 2100)+"s.scc", "x"),
		"long dataset":           unlim("s.scc", strings.Repeat("x", 1025)),
		"printf long component":  printf(strings.Repeat("n", 240)+"%b.scc", "x"),
		"printf long dataset":    printf("s%b.scc", strings.Repeat("x", 1010)+"%b"),
		"bounded NUL in dataset": vspecOver("s.scc", "a\x00"),
	} {
		if _, err := f.CreateVirtualDataset(ctx, "v", spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
	// A source that fails to open fails the evaluation of the extent.
	must(t, f.Close(ctx))
	failing := func(ctx context.Context, name string, opts *Options) (*File, error) {
		return nil, fmt.Errorf("%w: %s: injected", ErrIO, name)
	}
	f = tOpenPath(t, p, &Options{Virtual: VirtualOptions{Open: failing}})
	for _, spec := range []VirtualSpec{unlim("s.scc", "x"), printf("s%b.scc", "x")} {
		if _, err := f.CreateVirtualDataset(ctx, "g/v", spec); !errors.Is(err, ErrIO) {
			t.Fatalf("failing source: %v, want ErrIO", err)
		}
	}
	if got := f.datasetNames(); len(got) != 0 {
		t.Fatalf("failed creations left %v", got)
	}
	must(t, f.Flush(ctx))
	must(t, f.Close(ctx))
	f = tOpenPath(t, p, nil)
	defer f.Close(ctx)
	if got := members(t, f.Group); len(got) != 0 {
		t.Fatalf("after reopen: %v", got)
	}
	if _, err := f.CreateVirtualDataset(ctx, "g/v", unlim("s.scc", "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVirtualDataset(ctx, "v", vspecOver("s%b.scc", "x")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("%%b on a bounded mapping: %v", err)
	}
}

// vspecOver is vspec1 over another source.
func vspecOver(file, dset string) VirtualSpec {
	s := vspec1
	s.Mappings = []VirtualMapping{s.Mappings[0]}
	s.Mappings[0].File, s.Mappings[0].Dataset = file, dset
	return s
}
