package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestLayoutCallsRefuseOtherLayouts runs the variable-length calls on every
// layout. On a dataset of another layout each returns the one refusal of a
// layout's own call (errWrongLayout, an ErrInvalid) naming the call and the
// dataset's layout; on a variable-length dataset each succeeds. The calls
// every layout answers (Erase, DefinedElements, Layout) succeed everywhere;
// ReadDefined reads fixed-size values and refuses a variable-length dataset
// as Read does.
func TestLayoutCallsRefuseOtherLayouts(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	sel := Box([]uint64{0}, []uint64{2})
	type call struct {
		name string
		run  func(ds *Dataset) error
	}
	vlenCalls := []call{
		{"WriteVlen", func(ds *Dataset) error { return ds.WriteVlen(ctx, sel, [][]byte{{1}, nil}) }},
		{"ReadVlen", func(ds *Dataset) error { _, err := ds.ReadVlen(ctx, sel); return err }},
		{"WriteStrings", func(ds *Dataset) error { return ds.WriteStrings(ctx, sel, []string{"a", ""}) }},
		{"ReadStrings", func(ds *Dataset) error { _, err := ds.ReadStrings(ctx, sel); return err }},
	}
	anyCalls := []call{
		{"Erase", func(ds *Dataset) error { return ds.Erase(ctx, sel) }},
		{"DefinedElements", func(ds *Dataset) error { _, err := ds.DefinedElements(ctx, sel); return err }},
		{"ReadDefined", func(ds *Dataset) error { _, _, err := ds.ReadDefined(ctx, sel); return err }},
	}
	for _, spec := range []DatasetSpec{
		{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}},
		{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Layout: Sparse},
		{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Layout: Vlen},
		{Type: Uint8, Shape: []uint64{8192}, Layout: Contiguous},
	} {
		ds, err := f.CreateDataset(ctx, spec.Layout.String(), spec)
		must(t, err)
		if got := ds.Layout(); got != spec.Layout {
			t.Errorf("%s: Layout() = %s", spec.Layout, got)
		}
		for _, c := range vlenCalls {
			err := c.run(ds)
			switch {
			case spec.Layout == Vlen && err != nil:
				t.Errorf("vlen %s: %v", c.name, err)
			case spec.Layout != Vlen && (!errors.Is(err, errWrongLayout) || !errors.Is(err, ErrInvalid)):
				t.Errorf("%s %s: %v, want the wrong-layout refusal", spec.Layout, c.name, err)
			case spec.Layout != Vlen && !strings.Contains(err.Error(), "is "+spec.Layout.String()):
				t.Errorf("%s %s: %v does not name the dataset's layout", spec.Layout, c.name, err)
			}
		}
		for _, c := range anyCalls {
			err := c.run(ds)
			if spec.Layout == Vlen && c.name == "ReadDefined" {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("vlen ReadDefined: %v, want ErrInvalid", err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s: %v", spec.Layout, c.name, err)
			}
		}
	}
}
