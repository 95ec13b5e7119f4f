package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// imgLayoutSpecs is one dataset per storage layout.
var imgLayoutSpecs = map[LayoutKind]DatasetSpec{
	Chunked:    {Type: Uint16, Shape: []uint64{40, 10}, Chunk: []uint64{4, 5}, Filters: []Filter{Shuffle(), Zstd(1)}},
	Sparse:     {Type: Uint16, Shape: []uint64{40, 10}, Chunk: []uint64{4, 5}, Layout: Sparse},
	Contiguous: {Type: Uint16, Shape: []uint64{40, 10}, Layout: Contiguous},
	Vlen:       {Type: Uint8, Shape: []uint64{40}, Chunk: []uint64{4}, Layout: Vlen},
}

// readEverything calls every read call a dataset has (those its layout
// refuses return ErrInvalid or ErrNotFound), DefinedElements first, so that
// a sparse dataset's selection view reads stored chunks the cache does not
// hold whole.
func readEverything(t *testing.T, ds *Dataset) {
	t.Helper()
	ctx := context.Background()
	ok := func(call string, err error) {
		t.Helper()
		if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s %s: %v", ds.Layout(), call, err)
		}
	}
	all := All(ds.Shape())
	_, err := ds.DefinedElements(ctx, all)
	ok("DefinedElements", err)
	_, _, err = ds.ReadDefined(ctx, Box(make([]uint64, len(ds.Shape())), ds.Chunk()))
	ok("ReadDefined", err)
	if ds.Layout() == Vlen {
		_, err = ds.ReadVlen(ctx, all)
		ok("ReadVlen", err)
		_, err = ds.ReadStrings(ctx, all)
		ok("ReadStrings", err)
	} else {
		ok("Read", ds.Read(ctx, all, make([]byte, int(all.NumElements())*ds.Type().Size())))
		ok("ReadSlice", ReadSlice(ctx, ds, all, make([]uint16, all.NumElements())))
	}
	_, err = ds.DefinedElements(ctx, all)
	ok("DefinedElements", err)
	_, _, err = ds.ReadDefined(ctx, all)
	ok("ReadDefined", err)
	_, err = storedChunks(ctx, ds)
	ok("StoredChunks", err)
	_, _, err = ds.ReadChunkRaw(ctx, make([]uint64, len(ds.Shape())))
	ok("ReadChunkRaw", err)
	_, err = ds.ChunkExtents(ctx)
	ok("ChunkExtents", err)
	_, err = ds.Storage(ctx)
	ok("Storage", err)
}

// TestImageAfterEveryRead: for every layout, a writable File that
// generates a cache image reads its dataset through every read call, then
// writes, then closes: the closing commit (which writes the image) must
// succeed, and the next open, read-only with the image and writable without
// one, holds every write; Check passes. Several cycles: each open finds
// the previous one's image and does the same again.
func TestImageAfterEveryRead(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []LayoutKind{Chunked, Sparse, Contiguous, Vlen} {
		t.Run(kind.String(), func(t *testing.T) {
			sp := imgLayoutSpecs[kind]
			mem := vfd.NewMem()
			rng := rand.New(rand.NewPCG(uint64(kind), 27))
			es := sp.Type.Size()
			var ref *refArray
			if kind == Vlen {
				ref = newVlenRef(sp.Shape, es)
			} else {
				ref = newRef(sp.Shape, es, sp.Fill)
			}
			// defined[i]: element i of a sparse dataset holds a value.
			defined := make([]bool, prod(sp.Shape))
			write := func(ds *Dataset, sel Selection) {
				t.Helper()
				if kind == Vlen {
					vals := make([][]byte, sel.NumElements())
					for i := range vals {
						vals[i] = randomBytes(rng, rng.IntN(9))
					}
					must(t, ds.WriteVlen(ctx, sel, vals))
					ref.writeVlen(sel, vals)
					return
				}
				buf := randomBytes(rng, int(sel.NumElements())*es)
				must(t, ds.Write(ctx, sel, buf))
				ref.write(sel, buf)
				points(sel, func(c []uint64, _ uint64) { defined[ref.linear(c)] = true })
			}
			verify := func(f *File) {
				t.Helper()
				ds, err := f.OpenDataset(ctx, "d", nil)
				must(t, err)
				defer ds.Close(ctx)
				ref.verify(t, ds)
				if kind == Sparse {
					var want []uint64
					for i, d := range defined {
						if d {
							want = append(want, uint64(i))
						}
					}
					got, err := ds.DefinedElements(ctx, All(sp.Shape))
					must(t, err)
					if !slices.Equal(got, want) {
						t.Fatalf("defined elements %v, model %v", got, want)
					}
				}
			}
			opts := &Options{Image: ImageOptions{Generate: true}}
			f := tCreate(t, mem, opts)
			ds, err := f.CreateDataset(ctx, "d", sp)
			must(t, err)
			// Every chunk stored, with gaps a sparse dataset leaves
			// undefined.
			for i := uint64(0); i < sp.Shape[0]; i += 3 {
				start := make([]uint64, len(sp.Shape))
				count := slices.Clone(sp.Shape)
				start[0], count[0] = i, min(2, sp.Shape[0]-i)
				write(ds, Box(start, count))
			}
			ds.Close(ctx)
			must(t, f.Close(ctx))
			for cycle := 0; cycle < 3; cycle++ {
				f, err := Open(ctx, "", withDriver(opts, mem))
				must(t, err)
				ds, err := f.OpenDataset(ctx, "d", nil)
				must(t, err)
				readEverything(t, ds)
				must(t, ds.SetAttr(ctx, "cycle", ScalarAttr(int64(cycle))))
				write(ds, randomSelection(rng, sp.Shape))
				ds.Close(ctx)
				if err := f.Close(ctx); err != nil {
					t.Fatalf("cycle %d: close: %v", cycle, err)
				}
				if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
					t.Fatalf("cycle %d: %v", cycle, err)
				}
				r := tOpen(t, mem, &Options{ReadOnly: true})
				if !r.ImageInfo().Used {
					t.Fatalf("cycle %d: no image used: %+v", cycle, r.ImageInfo())
				}
				verify(r)
				must(t, r.Close(ctx))
			}
			f = tOpen(t, mem, nil)
			verify(f)
		})
	}
}
