package engine

import (
	"context"
	"errors"
	"fmt"
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
			f, err := CreateWith(mem, nil)
			if err != nil {
				t.Fatal(err)
			}
			spec := VirtualSpec{Type: Uint32, Shape: []uint64{0, 2, 2}, MaxShape: []uint64{Unlimited, 2, 2}, Mappings: c.ms}
			if _, err := f.CreateVirtualDataset(ctx, "v", spec); !errors.Is(err, ErrInvalid) {
				t.Fatalf("create: %v, want ErrInvalid", err)
			}
			if got := f.Datasets(); len(got) != 0 {
				t.Fatalf("a failed create left datasets %v", got)
			}
			if _, err := f.CreateVirtualDataset(ctx, "fixed", VirtualSpec{Type: Uint32, Shape: []uint64{2, 2}, Mappings: []VirtualMapping{{
				Virtual: Box([]uint64{0, 0}, []uint64{2, 2}), File: "a.scc", Dataset: "x", Source: Box([]uint64{0, 0}, []uint64{2, 2})}}}); err != nil {
				t.Fatalf("create bounded: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			missing := func(ctx context.Context, name string, opts *Options) (*File, error) {
				return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
			}
			f, err = OpenWith(sharedMem{mem}, &Options{Virtual: VirtualOptions{Open: missing}})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := f.Datasets(); len(got) != 1 || got[0] != "fixed" {
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
