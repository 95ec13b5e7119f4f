package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestVirtualSpecStored: File.VirtualSpec returns the mappings a virtual
// dataset was created with, read from its header alone: also when a
// source is damaged, which makes opening the dataset (its extent) fail.
func TestVirtualSpecStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := vcache(t)
	for i := 0; i < 2; i++ {
		var o []tOpt
		if i == 1 {
			o = append(o, noCheck("the test overwrites it with zeros"))
		}
		f := tCreatePath(t, filepath.Join(dir, "w"+string(rune('0'+i))+".scc"), &Options{Cache: c, NoSync: true}, o...)
		if _, err := f.CreateDataset(ctx, "frames", DatasetSpec{Type: Uint32, Shape: []uint64{1, 4, 4},
			MaxShape: []uint64{Unlimited, 4, 4}, Chunk: []uint64{1, 4, 4}}); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	vpath := filepath.Join(dir, "v.scc")
	vf := tCreatePath(t, vpath, &Options{Cache: c, NoSync: true})
	spec := VirtualSpec{Type: Uint32, Shape: []uint64{0, 4, 4}, MaxShape: []uint64{Unlimited, 4, 4}, Fill: []byte{1, 0, 0, 0},
		Mappings: roundRobin(3, 4, 4, false)}
	if _, err := vf.CreateVirtualDataset(ctx, "v", spec); err != nil {
		t.Fatal(err)
	}
	if err := vf.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Damaged, not unborn: a file of zeros has never had a superblock
	// written, and reads as a source being created (missing).
	if err := os.WriteFile(filepath.Join(dir, "w1.scc"), bytes.Repeat([]byte{0xa5}, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	r := tOpenPath(t, vpath, &Options{Cache: c, ReadOnly: true})
	defer r.Close(ctx)
	if _, err := r.OpenDataset(ctx, "v", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a damaged source: %v", err)
	}
	got, ok, err := r.VirtualSpec(ctx, "v")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got.Type != Uint32 || !reflect.DeepEqual(got.MaxShape, spec.MaxShape) || !reflect.DeepEqual(got.Fill, spec.Fill) || len(got.Mappings) != 3 {
		t.Fatalf("%+v", got)
	}
	for i, m := range got.Mappings {
		w := spec.Mappings[i]
		a1, b1, c1, d1 := m.Virtual.Parts()
		a2, b2, c2, d2 := w.Virtual.Parts()
		s1, s2, s3, s4 := m.Source.Parts()
		t1, t2, t3, t4 := w.Source.Parts()
		if m.File != w.File || m.Dataset != w.Dataset || !reflect.DeepEqual([][]uint64{a1, b1, c1, d1, s1, s2, s3, s4}, [][]uint64{a2, b2, c2, d2, t1, t2, t3, t4}) {
			t.Fatalf("mapping %d: %+v, want %+v", i, m, w)
		}
	}
	if name, self, err := r.VirtualSource("w2.scc"); err != nil || self || name != filepath.Join(dir, "w2.scc") {
		t.Fatal(name, self, err)
	}
	if _, self, err := r.VirtualSource("."); err != nil || !self {
		t.Fatal(self, err)
	}
	if _, _, err := r.VirtualSpec(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

// ExpandBlock names block sources as reads do: the read of block 2 of a
// printf mapping opens the file ExpandBlock gives for 2.
func TestExpandBlock(t *testing.T) {
	for _, c := range []struct {
		name string
		want string
		has  bool
	}{
		{"w%b.scc", "w12.scc", true},
		{"w%%b.scc", "w%b.scc", false},
		{"frames", "frames", false},
		{"a%b/%b", "a12/12", true},
	} {
		got, has := ExpandBlock(c.name, 12)
		if got != c.want || has != c.has {
			t.Errorf("ExpandBlock(%q, 12) = %q, %v; want %q, %v", c.name, got, has, c.want, c.has)
		}
	}
}

// A virtual dataset created since the last commit has no header in the
// file yet: VirtualSpec answers from the open dataset, not with a
// corruption error.
func TestVirtualSpecBeforeCommit(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	if _, err := f.CreateDataset(ctx, "own", DatasetSpec{Type: Uint32, Shape: []uint64{2, 6}, Chunk: []uint64{2, 6}}); err != nil {
		t.Fatal(err)
	}
	spec := VirtualSpec{Type: Uint32, Shape: []uint64{4, 6}, Mappings: []VirtualMapping{
		{Virtual: Box([]uint64{1, 0}, []uint64{2, 6}), Dataset: "own", Source: Box([]uint64{0, 0}, []uint64{2, 6})},
	}}
	if _, err := f.CreateVirtualDataset(ctx, "v", spec); err != nil {
		t.Fatal(err)
	}
	got, ok, err := f.VirtualSpec(ctx, "v")
	if err != nil || !ok || len(got.Mappings) != 1 || got.Mappings[0].Dataset != "own" || got.Type != Uint32 {
		t.Fatalf("before the commit: %+v %v %v", got, ok, err)
	}
	if _, ok, err := f.VirtualSpec(ctx, "own"); ok || err != nil {
		t.Fatalf("a dense dataset: %v %v", ok, err)
	}
}

// A nil driver is bad input, not a panic.
func TestNilDriver(t *testing.T) {
	if _, err := Create(context.Background(), "", &Options{Driver: nil}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Create with no path and no driver: %v", err)
	}
	if _, err := Open(context.Background(), "", &Options{Driver: nil}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with no path and no driver: %v", err)
	}
	if _, err := Check(context.Background(), "", &Options{Driver: nil}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Check(nil): %v", err)
	}
}
