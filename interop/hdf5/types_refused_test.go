package hdf5

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestExportRefusesUnmappedTypes: a dataset or attribute of a type the
// export does not map (float16, bfloat16, the described types) fails the
// export with ErrUnsupported naming it, before any file is made, in every
// layout, rather than being written as another type; so does a scalar or
// null dataset, whose dataspace the export does not write yet.
func TestExportRefusesUnmappedTypes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	types := []engine.Type{engine.Float16, engine.BFloat16, engine.Enum(engine.Int8, engine.EnumMember{Name: "a", Value: 1}),
		engine.Opaque(3, "x"), engine.Bitfield(2), engine.ArrayOf(engine.Float32, 2),
		engine.PackedCompound(engine.Field{Name: "a", Type: engine.Int32})}
	for i, ty := range types {
		for _, layout := range []engine.LayoutKind{engine.Chunked, engine.Contiguous} {
			name := fmt.Sprintf("%d-%v", i, layout)
			f := testfile.Create(t, filepath.Join(dir, name+".scc"), &engine.Options{NoSync: true})
			spec := engine.DatasetSpec{Type: ty, Shape: []uint64{4}, Chunk: []uint64{2}, Layout: layout}
			if layout == engine.Contiguous {
				spec.Chunk = nil
			}
			if _, err := f.CreateDataset(ctx, "d", spec); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, name+".h5")
			_, err := Export(ctx, f, out, nil)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"d"`) {
				t.Errorf("%v %v: %v, want ErrUnsupported naming the dataset", ty, layout, err)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%v: refused export left %s", ty, out)
			}
			f.Close(ctx)
		}
		f := testfile.Create(t, filepath.Join(dir, fmt.Sprintf("a%d.scc", i)), &engine.Options{NoSync: true})
		if err := f.SetAttr(ctx, "v", engine.RawAttr(engine.AttrScalar, ty, make([]byte, ty.Size()))); err != nil {
			t.Fatal(err)
		}
		if _, err := Export(ctx, f, filepath.Join(dir, fmt.Sprintf("a%d.h5", i)), nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("attribute of %v: %v, want ErrUnsupported", ty, err)
		}
		f.Close(ctx)
	}
	for _, space := range []engine.Space{engine.SpaceScalar, engine.SpaceNull} {
		f := testfile.Create(t, filepath.Join(dir, space.String()+".scc"), &engine.Options{NoSync: true})
		if _, err := f.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Int32, Space: space}); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, space.String()+".h5")
		if _, err := Export(ctx, f, out, nil); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"d"`) {
			t.Errorf("%v dataset: %v, want ErrUnsupported naming it", space, err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: refused export left %s", space, out)
		}
		f.Close(ctx)
	}
}
