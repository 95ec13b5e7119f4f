package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/engine"
)

// tempDir makes a directory for one example and returns it with the
// function that removes it.
func tempDir() (string, func()) {
	dir, err := os.MkdirTemp("", "scc-example")
	if err != nil {
		log.Fatal(err)
	}
	return dir, func() { os.RemoveAll(dir) }
}

// Create a file, write a box of a chunked, compressed dataset, commit it,
// and read it back from the reopened file: the values come back through
// the filter pipeline and the commit, not from memory.
func ExampleCreate() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	path := filepath.Join(dir, "grid.scc")

	f, err := engine.Create(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	ds, err := f.CreateDataset(ctx, "grid", engine.DatasetSpec{
		Type:    engine.Int32,
		Shape:   []uint64{4, 6},
		Chunk:   []uint64{2, 3},
		Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(6)},
		Fill:    []byte{0xff, 0xff, 0xff, 0xff}, // unwritten elements read as -1
	})
	if err != nil {
		log.Fatal(err)
	}
	// A 2×4 box across four chunks, starting at row 1, column 1.
	box := engine.Box([]uint64{1, 1}, []uint64{2, 4})
	if err := engine.WriteSlice(ctx, ds, box, []int32{10, 11, 12, 13, 20, 21, 22, 23}); err != nil {
		log.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		log.Fatal(err)
	}

	f, err = engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "grid", nil)
	if err != nil {
		log.Fatal(err)
	}
	all := make([]int32, 4*6)
	if err := engine.ReadSlice(ctx, ds, engine.All(ds.Shape()), all); err != nil {
		log.Fatal(err)
	}
	fmt.Println(ds.Shape(), ds.Chunk(), len(ds.Filters()), "filters")
	for r := 0; r < 4; r++ {
		fmt.Println(all[r*6 : r*6+6])
	}
	// Output:
	// [4 6] [2 3] 2 filters
	// [-1 -1 -1 -1 -1 -1]
	// [-1 10 11 12 13 -1]
	// [-1 20 21 22 23 -1]
	// [-1 -1 -1 -1 -1 -1]
}

// A read-only File follows a writer on the same path: it sees the commit
// that was newest when it opened until Refresh moves it to the writer's
// latest one. The follower may live in another process; here it is the
// same one.
func ExampleFile_Refresh() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	path := filepath.Join(dir, "series.scc")

	w, err := engine.Create(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close(ctx)
	wds, err := w.CreateDataset(ctx, "series", engine.DatasetSpec{
		Type:     engine.Float64,
		Shape:    []uint64{2},
		MaxShape: []uint64{engine.Unlimited},
		Chunk:    []uint64{4},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := engine.WriteSlice(ctx, wds, engine.Box([]uint64{0}, []uint64{2}), []float64{1.5, 2.5}); err != nil {
		log.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		log.Fatal(err)
	}

	r, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	rds, err := r.OpenDataset(ctx, "series", nil)
	if err != nil {
		log.Fatal(err)
	}
	show := func(when string) {
		vals := make([]float64, rds.Shape()[0])
		if err := engine.ReadSlice(ctx, rds, engine.All(rds.Shape()), vals); err != nil {
			log.Fatal(err)
		}
		fmt.Println(when, r.Generation() == w.Generation(), vals)
	}
	show("opened:")

	// The writer appends and commits; the follower still reads its
	// commit until it refreshes.
	if err := wds.SetExtent(ctx, []uint64{5}); err != nil {
		log.Fatal(err)
	}
	if err := engine.WriteSlice(ctx, wds, engine.Box([]uint64{2}, []uint64{3}), []float64{3.5, 4.5, 5.5}); err != nil {
		log.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	show("before Refresh:")
	if err := r.Refresh(ctx); err != nil {
		log.Fatal(err)
	}
	show("after Refresh:")
	// Output:
	// opened: true [1.5 2.5]
	// before Refresh: false [1.5 2.5]
	// after Refresh: true [1.5 2.5 3.5 4.5 5.5]
}

// Attributes of every kind on a dataset: set, replaced, deleted, and read
// back after the commit that carries them.
func ExampleDataset_attributes() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	path := filepath.Join(dir, "attrs.scc")

	f, err := engine.Create(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	ds, err := f.CreateDataset(ctx, "frames", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{8, 8}, Chunk: []uint64{4, 8}})
	if err != nil {
		log.Fatal(err)
	}
	set := func(name string, v engine.AttrValue) {
		if err := ds.SetAttr(ctx, name, v); err != nil {
			log.Fatal(err)
		}
	}
	set("units", engine.StringAttr("counts"))
	set("exposure", engine.ScalarAttr(0.25))
	set("origin", engine.ArrayAttr([]int32{-4, 12}))
	set("draft", engine.StringAttr("yes"))
	set("units", engine.StringAttr("photons")) // replaces "counts"
	if err := ds.DeleteAttr(ctx, "draft"); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(ctx); err != nil { // Close commits the attributes
		log.Fatal(err)
	}

	f, err = engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "frames", nil)
	if err != nil {
		log.Fatal(err)
	}
	attrs, err := ds.Attrs()
	if err != nil {
		log.Fatal(err)
	}
	var names []string
	for _, a := range attrs {
		names = append(names, a.Name)
	}
	fmt.Println(names)
	units, err := ds.Attr("units")
	if err != nil {
		log.Fatal(err)
	}
	s, err := units.Str()
	if err != nil {
		log.Fatal(err)
	}
	exposure, err := ds.Attr("exposure")
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.Scalar[float64](exposure)
	if err != nil {
		log.Fatal(err)
	}
	origin, err := ds.Attr("origin")
	if err != nil {
		log.Fatal(err)
	}
	o, err := engine.Array[int32](origin)
	if err != nil {
		log.Fatal(err)
	}
	_, err = ds.Attr("draft")
	fmt.Println(s, e, o, errors.Is(err, engine.ErrNotFound))
	// A value read as another type is refused, not converted.
	_, err = engine.Scalar[int64](exposure)
	fmt.Println(errors.Is(err, engine.ErrAttrType))
	// Output:
	// [exposure origin units]
	// photons 0.25 [-4 12] true
	// true
}

// Walk a file's tree: every group and dataset, a group before what it
// holds, siblings in name order.
func ExampleGroup_Walk() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	f, err := engine.Create(ctx, filepath.Join(dir, "tree.scc"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	spec := engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}, Chunk: []uint64{4}}
	for _, d := range []string{"run1/raw/frames", "run1/scratch/tmp", "run2/frames"} {
		if _, err := f.CreateDataset(ctx, d, spec); err != nil { // parents are created
			log.Fatal(err)
		}
	}
	for m, err := range f.Walk() {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.Kind, m.Path)
	}
	// Output:
	// group /run1
	// group /run1/raw
	// dataset /run1/raw/frames
	// group /run1/scratch
	// dataset /run1/scratch/tmp
	// group /run2
	// dataset /run2/frames
}
