package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestLayoutCalls runs every Dataset call that only some layouts serve, or
// whose result depends on the layout, on a dataset of every layout. A call
// with needs is refused on the other layouts with the one refusal
// (errWrongLayout, an ErrInvalid, from needLayouts) naming the call, the
// layouts it needs and the dataset's layout, and it succeeds on the
// layouts it needs; a call without needs succeeds on every layout with the
// result its doc gives for that layout, which run checks. A refused call
// must not panic, and must not get as far as the layout it would misuse.
func TestLayoutCalls(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	layouts := []LayoutKind{Chunked, Sparse, Vlen, Contiguous}
	spec := func(k LayoutKind) DatasetSpec {
		switch k {
		case Contiguous:
			return DatasetSpec{Type: Uint8, Shape: []uint64{8192}, Layout: Contiguous}
		case Chunked:
			// Zlib, so that the raw zlib write has the pipeline it needs.
			return DatasetSpec{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Filters: []Filter{Zlib(6)}}
		}
		return DatasetSpec{Type: Uint8, Shape: []uint64{8192}, Chunk: []uint64{4096}, Layout: k}
	}
	// A zlib image of a chunk of zeros, from a chunked dataset, so that
	// on the other layouts nothing but the layout is wrong.
	zeros := make([]byte, 4096)
	twin, err := f.CreateDataset(ctx, "twin", spec(Chunked))
	must(t, err)
	image, mask, err := twin.EncodeChunk(zeros)
	must(t, err)
	if mask != 0 || len(image) >= len(zeros) {
		t.Fatalf("zlib image of %d bytes, mask %#x", len(image), mask)
	}

	sel := Box([]uint64{0}, []uint64{2})
	// Every dataset starts with element 0 written (7) and element 1 not:
	// a sparse dataset has one defined element, the others two.
	n := 0
	newDataset := func(k LayoutKind) *Dataset {
		n++
		ds, err := f.CreateDataset(ctx, fmt.Sprintf("%v-%d", k, n), spec(k))
		must(t, err)
		if k == Vlen {
			must(t, ds.WriteVlen(ctx, Box([]uint64{0}, []uint64{1}), [][]byte{{7}}))
		} else {
			must(t, ds.Write(ctx, Box([]uint64{0}, []uint64{1}), []byte{7}))
		}
		return ds
	}
	// erased reads sel back after an Erase: the fill value everywhere.
	erased := func(ds *Dataset) error {
		if ds.Layout() == Vlen {
			got, err := ds.ReadVlen(ctx, sel)
			if err != nil || got[0] != nil || got[1] != nil {
				return fmt.Errorf("after Erase: %q, %v; want empty sequences", got, err)
			}
			return nil
		}
		got := make([]byte, 2)
		if err := ds.Read(ctx, sel, got); err != nil || string(got) != "\x00\x00" {
			return fmt.Errorf("after Erase: %v, %v; want the fill value", got, err)
		}
		return nil
	}
	// allPos is what DefinedElements returns where every element is
	// defined; sparseOnly, what it returns on the sparse dataset.
	allPos, sparseOnly := []uint64{0, 1}, []uint64{0}
	definedWant := func(k LayoutKind) []uint64 {
		if k == Sparse {
			return sparseOnly
		}
		return allPos
	}

	fixed := []LayoutKind{Chunked, Sparse, Contiguous}
	chunked := []LayoutKind{Chunked}
	vlen := []LayoutKind{Vlen}
	type call struct {
		name    string
		refusal string       // the call as the refusal names it (name if empty)
		needs   []LayoutKind // nil: every layout
		run     func(ds *Dataset) error
	}
	calls := []call{
		{name: "Write", needs: fixed, run: func(ds *Dataset) error { return ds.Write(ctx, sel, []byte{1, 2}) }},
		{name: "Read", needs: fixed, run: func(ds *Dataset) error {
			got := make([]byte, 2)
			if err := ds.Read(ctx, sel, got); err != nil {
				return err
			}
			if string(got) != "\x07\x00" {
				return fmt.Errorf("read %v, want [7 0]", got)
			}
			return nil
		}},
		{name: "WriteSlice", refusal: "Write", needs: fixed, run: func(ds *Dataset) error {
			return WriteSlice(ctx, ds, sel, []uint8{1, 2})
		}},
		{name: "ReadSlice", refusal: "Read", needs: fixed, run: func(ds *Dataset) error {
			return ReadSlice(ctx, ds, sel, make([]uint8, 2))
		}},
		{name: "ReadDefined", needs: fixed, run: func(ds *Dataset) error {
			pos, vals, err := ds.ReadDefined(ctx, sel)
			if err != nil {
				return err
			}
			want := definedWant(ds.Layout())
			wantVals := []byte{7, 0}[:len(want)]
			if !slices.Equal(pos, want) || string(vals) != string(wantVals) {
				return fmt.Errorf("ReadDefined = %v, %v; want %v, %v", pos, vals, want, wantVals)
			}
			return nil
		}},
		{name: "WriteVlen", needs: vlen, run: func(ds *Dataset) error { return ds.WriteVlen(ctx, sel, [][]byte{{1}, nil}) }},
		{name: "ReadVlen", needs: vlen, run: func(ds *Dataset) error {
			got, err := ds.ReadVlen(ctx, sel)
			if err != nil {
				return err
			}
			if len(got) != 2 || string(got[0]) != "\x07" || got[1] != nil {
				return fmt.Errorf("ReadVlen = %q, want [\"\\x07\" nil]", got)
			}
			return nil
		}},
		{name: "WriteStrings", needs: vlen, run: func(ds *Dataset) error { return ds.WriteStrings(ctx, sel, []string{"a", ""}) }},
		{name: "ReadStrings", needs: vlen, run: func(ds *Dataset) error {
			got, err := ds.ReadStrings(ctx, sel)
			if err != nil {
				return err
			}
			if !slices.Equal(got, []string{"\x07", ""}) {
				return fmt.Errorf("ReadStrings = %q", got)
			}
			return nil
		}},
		{name: "Chunks", needs: chunked, run: func(ds *Dataset) error {
			got, err := storedChunks(ctx, ds)
			if err == nil && (len(got) != 1 || !slices.Equal(got[0].Coords, []uint64{0})) {
				err = fmt.Errorf("Chunks = %+v, want chunk [0]", got)
			}
			return err
		}},
		{name: "ReadChunkRaw", needs: chunked, run: func(ds *Dataset) error {
			_, _, err := ds.ReadChunkRaw(ctx, []uint64{0})
			return err
		}},
		{name: "WriteChunkRaw", needs: chunked, run: func(ds *Dataset) error {
			return ds.WriteChunkRaw(ctx, []uint64{1}, image, 0)
		}},
		{name: "WriteChunkRawChecked", needs: chunked, run: func(ds *Dataset) error {
			return ds.WriteChunkRawChecked(ctx, []uint64{1}, image, 0, func([]byte) error { return nil })
		}},
		{name: "WriteChunkRawZlib", needs: chunked, run: func(ds *Dataset) error {
			_, err := ds.WriteChunkRawZlib(ctx, []uint64{1}, image, 0)
			return err
		}},
		{name: "DecodeChunk", needs: chunked, run: func(ds *Dataset) error {
			got, err := ds.DecodeChunk(image, 0)
			if err == nil && string(got) != string(zeros) {
				err = fmt.Errorf("DecodeChunk: not the chunk encoded")
			}
			return err
		}},
		{name: "EncodeChunk", needs: chunked, run: func(ds *Dataset) error {
			_, _, err := ds.EncodeChunk(zeros)
			return err
		}},
		// Calls every layout answers, each as its doc says.
		{name: "Erase", run: func(ds *Dataset) error {
			if err := ds.Erase(ctx, sel); err != nil {
				return err
			}
			return erased(ds)
		}},
		{name: "DefinedElements", run: func(ds *Dataset) error {
			pos, err := ds.DefinedElements(ctx, sel)
			if err == nil && !slices.Equal(pos, definedWant(ds.Layout())) {
				err = fmt.Errorf("DefinedElements = %v, want %v", pos, definedWant(ds.Layout()))
			}
			return err
		}},
		{name: "SelectionFilters", run: func(ds *Dataset) error {
			if got := ds.SelectionFilters(); (got != nil) != (ds.Layout() == Sparse) {
				return fmt.Errorf("SelectionFilters = %v (nil only for other layouts than sparse)", got)
			}
			return nil
		}},
		{name: "ChunkGrid", run: func(ds *Dataset) error {
			if got, want := ds.ChunkGrid(), []uint64{ceilDiv(8192, ds.Chunk()[0])}; !slices.Equal(got, want) {
				return fmt.Errorf("ChunkGrid = %v, want %v", got, want)
			}
			return nil
		}},
		{name: "ChunkBytes", run: func(ds *Dataset) error {
			if got, want := ds.ChunkBytes(), int(ds.Chunk()[0]); got != want {
				return fmt.Errorf("ChunkBytes = %d, want %d", got, want)
			}
			return nil
		}},
		{name: "IndexKind", run: func(ds *Dataset) error {
			if got := ds.IndexKind(); (got == "none") != (ds.Layout() == Contiguous) {
				return fmt.Errorf("IndexKind = %q (none only for a contiguous dataset)", got)
			}
			return nil
		}},
		{name: "Storage", run: func(ds *Dataset) error { _, err := ds.Storage(ctx); return err }},
		{name: "ChunkExtents", run: func(ds *Dataset) error { _, err := ds.ChunkExtents(ctx); return err }},
		{name: "SetExtent", run: func(ds *Dataset) error {
			if err := ds.SetExtent(ctx, []uint64{8192}); err != nil {
				return err
			}
			err := ds.SetExtent(ctx, []uint64{4096})
			if ds.Layout() != Contiguous {
				return err
			}
			// A contiguous extent is fixed: a rule of the layout for a
			// call it takes, not a call it does not serve.
			if !errors.Is(err, ErrInvalid) || errors.Is(err, errWrongLayout) {
				return fmt.Errorf("contiguous shrink: %v, want ErrInvalid (not the wrong-layout refusal)", err)
			}
			return nil
		}},
	}
	for _, c := range calls {
		for _, k := range layouts {
			ds := newDataset(k)
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return c.run(ds)
			}()
			if c.needs == nil || slices.Contains(c.needs, k) {
				if err != nil {
					t.Errorf("%s on %v: %v", c.name, k, err)
				}
				continue
			}
			if !errors.Is(err, errWrongLayout) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%s on %v: %v, want the wrong-layout refusal", c.name, k, err)
				continue
			}
			refusal := c.refusal
			if refusal == "" {
				refusal = c.name
			}
			msg := err.Error()
			if !strings.Contains(msg, refusal+" needs a ") || !strings.Contains(msg, "is "+k.String()) {
				t.Errorf("%s on %v: %q does not name the call and the dataset's layout", c.name, k, msg)
			}
			for _, w := range c.needs {
				if !strings.Contains(msg, w.String()) {
					t.Errorf("%s on %v: %q does not name the layout %v it needs", c.name, k, msg, w)
				}
			}
		}
	}
}
