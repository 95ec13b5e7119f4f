package engine

import (
	"errors"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestRawChunkRefusesOtherLayouts: the raw chunk API moves pipeline
// images of dense chunks; a sparse or variable-length chunk is a structured
// chunk and a contiguous dataset has no chunks, so all three are refused
// with ErrInvalid instead of handing out (or accepting) the wrong bytes.
func TestRawChunkRefusesOtherLayouts(t *testing.T) {
	f := tCreate(t, vfd.NewMem(), nil)
	for _, spec := range []DatasetSpec{
		{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}, Layout: Sparse},
		{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}, Layout: Vlen},
		{Type: Uint8, Shape: []uint64{8}, Layout: Contiguous},
	} {
		ds, err := f.CreateDataset(spec.Layout.String(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ds.StoredChunks(t.Context()); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s StoredChunks: %v, want ErrInvalid", spec.Layout, err)
		}
		if _, _, err := ds.ReadChunkRaw(t.Context(), []uint64{0}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s ReadChunkRaw: %v, want ErrInvalid", spec.Layout, err)
		}
		if err := ds.WriteChunkRaw(t.Context(), []uint64{0}, []byte{1, 2, 3, 4}, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s WriteChunkRaw: %v, want ErrInvalid", spec.Layout, err)
		}
	}
}
