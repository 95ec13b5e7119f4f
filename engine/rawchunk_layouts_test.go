package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestRawChunkRefusesOtherLayouts runs every raw chunk entry point on every
// layout. The raw chunk API moves pipeline images of dense chunks; a sparse
// or variable-length chunk is a structured chunk and a contiguous dataset
// has no chunks, so on those each call returns the one refusal
// (errWrongLayout, an ErrInvalid) instead of handing out or accepting the
// wrong bytes, or panicking on a layout it does not have
// (WriteChunkRawChecked did, on the dense layout's stored bound). On a
// chunked dataset each call succeeds.
func TestRawChunkRefusesOtherLayouts(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	chunk := make([]byte, 4096) // zeros: the zlib stream is shorter
	type call struct {
		name string
		run  func(ds *Dataset, data []byte) error
	}
	calls := []call{
		{"EncodeChunk", func(ds *Dataset, _ []byte) error { _, _, err := ds.EncodeChunk(chunk); return err }},
		{"WriteChunkRaw", func(ds *Dataset, data []byte) error { return ds.WriteChunkRaw(ctx, []uint64{0}, data, 0) }},
		{"WriteChunkRawChecked", func(ds *Dataset, data []byte) error {
			return ds.WriteChunkRawChecked(ctx, []uint64{0}, data, 0, func([]byte) error { return nil })
		}},
		{"WriteChunkRawZlib", func(ds *Dataset, data []byte) error {
			_, err := ds.WriteChunkRawZlib(ctx, []uint64{1}, data, 0)
			return err
		}},
		{"ReadChunkRaw", func(ds *Dataset, _ []byte) error { _, _, err := ds.ReadChunkRaw(ctx, []uint64{0}); return err }},
		{"ReadChunkRawStored", func(ds *Dataset, _ []byte) error { _, _, err := ds.ReadChunkRawStored(ctx, []uint64{0}); return err }},
		{"StatChunkRaw", func(ds *Dataset, _ []byte) error { _, err := ds.StatChunkRaw(ctx, []uint64{0}); return err }},
		{"StoredChunks", func(ds *Dataset, _ []byte) error { _, err := storedChunks(ctx, ds); return err }},
		{"DecodeChunk", func(ds *Dataset, data []byte) error { _, err := ds.DecodeChunk(data, 0); return err }},
	}
	for _, spec := range []DatasetSpec{
		{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Filters: []Filter{Zlib(6)}},
		{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Layout: Sparse},
		{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Layout: Vlen},
		{Type: Uint8, Shape: []uint64{8192}, Layout: Contiguous},
	} {
		ds, err := f.CreateDataset(ctx, spec.Layout.String(), spec)
		must(t, err)
		// A valid zlib image of the chunk, from a chunked twin, so that on
		// the other layouts nothing but the layout is wrong.
		twin, err := f.CreateDataset(ctx, "twin-"+spec.Layout.String(), DatasetSpec{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Filters: []Filter{Zlib(6)}})
		must(t, err)
		data, mask, err := twin.EncodeChunk(chunk)
		must(t, err)
		if mask != 0 || len(data) >= len(chunk) {
			t.Fatalf("zlib image of %d bytes, mask %#x", len(data), mask)
		}
		for _, c := range calls {
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return c.run(ds, data)
			}()
			switch {
			case spec.Layout == Chunked && err != nil:
				t.Errorf("chunked %s: %v", c.name, err)
			case spec.Layout != Chunked && (!errors.Is(err, errWrongLayout) || !errors.Is(err, ErrInvalid)):
				t.Errorf("%s %s: %v, want the raw chunk layout refusal", spec.Layout, c.name, err)
			}
		}
	}
}
