package zarr

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestExportOtherLayouts: sparse and contiguous datasets have no pipeline
// images, so their values are read and encoded; a sparse dataset's chunks
// holding only the fill value are left out of the store; the import reads
// back the same elements. A variable-length dataset is refused.
func TestExportOtherLayouts(t *testing.T) {
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "src.scc"), nil)
	defer f.Close(context.Background())
	sp, err := f.CreateDataset(context.Background(), "sparse", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{100, 100},
		Chunk: []uint64{10, 10}, Layout: engine.Sparse, Fill: []byte{7, 0}})
	must(t, err)
	must(t, sp.Write(bg, engine.Box([]uint64{3, 4}, []uint64{1, 2}), []byte{1, 2, 3, 4}))
	must(t, sp.Write(bg, engine.Box([]uint64{95, 99}, []uint64{1, 1}), []byte{5, 6}))
	ct, err := f.CreateDataset(context.Background(), "contig", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{30, 40}, Layout: engine.Contiguous})
	must(t, err)
	buf := make([]byte, 30*40)
	for i := range buf {
		buf[i] = byte(i * 3)
	}
	must(t, ct.Write(bg, engine.All([]uint64{30, 40}), buf))
	must(t, f.Flush(bg))
	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, "store"+string(rune('0'+v)))
		rep, err := Export(bg, f, store, Options{Version: v})
		must(t, err)
		for _, dr := range rep.Datasets {
			if dr.Copied+dr.Rewrapped != 0 {
				t.Fatalf("v%d %s: %d chunks copied from a layout without pipeline images", v, dr.Name, dr.Copied+dr.Rewrapped)
			}
			if dr.Name == "sparse" && dr.Chunks != 2 {
				t.Fatalf("v%d sparse: %d chunks written, want the 2 holding defined elements", v, dr.Chunks)
			}
		}
		g := testfile.Create(t, filepath.Join(dir, "back"+string(rune('0'+v))+".scc"), nil)
		_, err = Import(bg, store, g, Options{})
		must(t, err)
		for _, name := range []string{"sparse", "contig"} {
			a, err := f.OpenDataset(context.Background(), name, nil)
			must(t, err)
			b, err := g.OpenDataset(context.Background(), name, nil)
			must(t, err)
			if string(readAll(t, a)) != string(readAll(t, b)) {
				t.Fatalf("v%d %s: elements differ after export and import", v, name)
			}
		}
		must(t, g.Close(context.Background()))
	}
	// Variable-length sequences of numbers have no Zarr v3 data type
	// (strings do: TestVlenStringsRoundTrip; v2 has numcodecs' vlen-array:
	// TestZarrObjectCodecs).
	vl, err := f.CreateDataset(context.Background(), "vlen", engine.DatasetSpec{Type: engine.Float64, Shape: []uint64{4}, Chunk: []uint64{4}, Layout: engine.Vlen})
	must(t, err)
	_ = vl
	if _, err := Export(bg, f, filepath.Join(dir, "vlen-store"), Options{Version: 3, Strict: true}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("strict export of a variable-length dataset: %v, want ErrUnsupported", err)
	}
	rep, err := Export(bg, f, filepath.Join(dir, "vlen-store"), Options{Version: 3})
	must(t, err)
	if len(rep.Skipped) != 1 || rep.Skipped[0].Name != "vlen" || !strings.Contains(rep.Skipped[0].Reason, "variable-length") {
		t.Fatalf("export: skipped %+v", rep.Skipped)
	}
}
