package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// The tasks the README shows, each a runnable example.

// Append frames along the unlimited dimension, the commonest ingest step.
func ExampleDataset_Append() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	f, err := engine.Create(ctx, filepath.Join(dir, "frames.scc"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "detector/frames", engine.DatasetSpec{
		Type:     engine.Uint16,
		Shape:    []uint64{0, 2, 3}, // no frames yet, 2×3 pixels each
		MaxShape: []uint64{engine.Unlimited, 2, 3},
		Chunk:    []uint64{8, 2, 3},
		Filters:  []engine.Filter{engine.Shuffle(), engine.Zstd(1)},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		frame := []uint16{1, 2, 3, 4, 5, 6}
		for j := range frame {
			frame[j] += uint16(10 * i)
		}
		n, err := engine.AppendSlice(ctx, ds, frame)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("frame", n)
	}
	if err := f.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	last := make([]uint16, 6)
	if err := engine.ReadSlice(ctx, ds, engine.Box([]uint64{2, 0, 0}, []uint64{1, 2, 3}), last); err != nil {
		log.Fatal(err)
	}
	fmt.Println(ds.Path(), ds.Shape(), last)
	// Output:
	// frame 0
	// frame 1
	// frame 2
	// /detector/frames [3 2 3] [21 22 23 24 25 26]
}

// A reader follows a writer: Follow yields each commit the writer makes,
// with no polling in the reader's code. The writer would be another
// process; here it is a goroutine.
func ExampleFile_Follow() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	path := filepath.Join(dir, "live.scc")
	w, err := engine.Create(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close(ctx)
	wds, err := w.CreateDataset(ctx, "counts", engine.DatasetSpec{
		Type: engine.Int64, Shape: []uint64{0}, MaxShape: []uint64{engine.Unlimited}, Chunk: []uint64{64},
	})
	if err != nil {
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
	rds, err := r.OpenDataset(ctx, "counts", nil)
	if err != nil {
		log.Fatal(err)
	}
	step := make(chan struct{})
	go func() { // the writer: one commit per step
		for i := range int64(3) {
			<-step
			if _, err := engine.AppendSlice(ctx, wds, []int64{i * i}); err != nil {
				log.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}()
	step <- struct{}{}
	seen := 0
	for _, err := range r.Follow(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		vals := make([]int64, rds.Shape()[0])
		if err := engine.ReadSlice(ctx, rds, engine.All(rds.Shape()), vals); err != nil {
			log.Fatal(err)
		}
		fmt.Println(vals)
		if seen++; seen == 3 {
			break
		}
		step <- struct{}{}
	}
	// Output:
	// [0]
	// [0 1]
	// [0 1 4]
}

// Groups and attributes: the File is its root group; every create call
// makes the missing groups above the name; attribute values print as
// h5py prints them.
func ExampleGroup_attributes() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	f, err := engine.Create(ctx, filepath.Join(dir, "run.scc"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	cal, err := f.CreateGroup(ctx, "instrument/calibration")
	if err != nil {
		log.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	must(f.SetAttr(ctx, "title", engine.StringAttr("run 42")))
	must(cal.SetAttr(ctx, "gain", engine.ScalarAttr(1.5)))
	must(cal.SetAttr(ctx, "bad_pixels", engine.ArrayAttr([]uint32{3, 17, 40})))
	if _, err := cal.CreateDataset(ctx, "dark", engine.DatasetSpec{Type: engine.Float32, Shape: []uint64{4}}); err != nil {
		log.Fatal(err)
	}
	for _, g := range []*engine.Group{f.Group, cal} {
		attrs, err := g.Attrs()
		if err != nil {
			log.Fatal(err)
		}
		for _, a := range attrs {
			fmt.Printf("%s %s = %v\n", g.Path(), a.Name, a.Value)
		}
	}
	for m, err := range f.Walk() {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.Kind, m.Path)
	}
	// Output:
	// / title = run 42
	// /instrument/calibration bad_pixels = [3 17 40]
	// /instrument/calibration gain = 1.5
	// group /instrument
	// group /instrument/calibration
	// dataset /instrument/calibration/dark
}

// Strings: fixed-length ones in a dense dataset, variable-length ones in a
// vlen dataset.
func ExampleDataset_WriteStrings() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	f, err := engine.Create(ctx, filepath.Join(dir, "names.scc"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	fixed, err := f.CreateDataset(ctx, "codes", engine.DatasetSpec{
		Type: engine.FixedString(4, engine.NullPad, engine.ASCII), Shape: []uint64{3}, Chunk: []uint64{3},
	})
	if err != nil {
		log.Fatal(err)
	}
	vlen, err := f.CreateDataset(ctx, "comments", engine.DatasetSpec{
		Type: engine.Uint8, Layout: engine.Vlen, Shape: []uint64{3}, Chunk: []uint64{3},
	})
	if err != nil {
		log.Fatal(err)
	}
	all := engine.All([]uint64{3})
	if err := fixed.WriteStrings(ctx, all, []string{"AB", "CDEF", "G"}); err != nil {
		log.Fatal(err)
	}
	if err := vlen.WriteStrings(ctx, all, []string{"calibrated", "", "beam lost at 12:03"}); err != nil {
		log.Fatal(err)
	}
	if err := fixed.WriteStrings(ctx, engine.Box([]uint64{0}, []uint64{1}), []string{"TOOLONG"}); errors.Is(err, engine.ErrInvalid) {
		fmt.Println("a string longer than the type is refused")
	}
	for _, ds := range []*engine.Dataset{fixed, vlen} {
		s, err := ds.ReadStrings(ctx, all)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %q\n", ds.Name(), s)
	}
	// Output:
	// a string longer than the type is refused
	// codes ["AB" "CDEF" "G"]
	// comments ["calibrated" "" "beam lost at 12:03"]
}

// Typed reads convert numbers as HDF5 does: saturating by default, or
// refusing what the target cannot hold with ConvertOptions.Strict.
func ExampleReadAs() {
	ctx := context.Background()
	f, err := engine.Create(ctx, "", &engine.Options{Driver: vfd.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "t", engine.DatasetSpec{Type: engine.Float64, Shape: []uint64{4}})
	if err != nil {
		log.Fatal(err)
	}
	all := engine.All(ds.Shape())
	if err := engine.WriteSlice(ctx, ds, all, []float64{-1.5, 20.25, 300, 7}); err != nil {
		log.Fatal(err)
	}
	f32 := make([]float32, 4)
	u8 := make([]uint8, 4)
	if err := engine.ReadSlice(ctx, ds, all, f32); err != nil {
		log.Fatal(err)
	}
	if err := engine.ReadAs(ctx, ds, all, u8, engine.ConvertOptions{}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(f32, u8)
	err = engine.ReadAs(ctx, ds, all, u8, engine.ConvertOptions{Strict: true})
	fmt.Println(errors.Is(err, engine.ErrOutOfRange))
	// Output:
	// [-1.5 20.25 300 7] [0 20 255 7]
	// true
}

// Delete and move datasets and groups: paths resolve inside the group the
// call is made on, or from the root with a leading '/'; open handles
// follow a move, and fail with ErrDeleted after a delete.
func ExampleGroup_Move() {
	ctx := context.Background()
	f, err := engine.Create(ctx, "", &engine.Options{Driver: vfd.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	spec := engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4}}
	ds, err := f.CreateDataset(ctx, "scratch/run1/raw", spec)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := f.CreateDataset(ctx, "scratch/tmp", spec); err != nil {
		log.Fatal(err)
	}
	scratch, err := f.OpenGroup(ctx, "scratch")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := f.CreateGroup(ctx, "archive"); err != nil { // a move's target parent must exist
		log.Fatal(err)
	}
	if err := scratch.Move(ctx, "run1", "/archive/run1"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(ds.Path())
	err = f.Delete(ctx, "scratch", nil)
	fmt.Println(errors.Is(err, engine.ErrInvalid)) // not empty
	if err := f.Delete(ctx, "scratch", &engine.DeleteOptions{Recursive: true}); err != nil {
		log.Fatal(err)
	}
	for m, err := range f.Walk() {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.Path)
	}
	// Output:
	// /archive/run1/raw
	// true
	// /archive
	// /archive/run1
	// /archive/run1/raw
}

// A virtual dataset stitches the files of several writer processes into
// one array: writer i appends frames i, i+2, i+4 ... to its own file, and
// the virtual dataset interleaves them. A reader of the virtual file sees
// each writer's commits at its next Refresh (or through Follow).
func ExampleGroup_CreateVirtualDataset() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	const writers = 2
	spec := engine.DatasetSpec{Type: engine.Int32, Shape: []uint64{0}, MaxShape: []uint64{engine.Unlimited}, Chunk: []uint64{16}}
	var files []*engine.File
	for i := range writers {
		w, err := engine.Create(ctx, filepath.Join(dir, fmt.Sprintf("w%d.scc", i)), nil)
		if err != nil {
			log.Fatal(err)
		}
		defer w.Close(ctx)
		if _, err := w.CreateDataset(ctx, "frames", spec); err != nil {
			log.Fatal(err)
		}
		files = append(files, w)
	}
	v, err := engine.Create(ctx, filepath.Join(dir, "all.scc"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close(ctx)
	var maps []engine.VirtualMapping
	for i := range writers {
		maps = append(maps, engine.VirtualMapping{
			// Every writers-th element from i, as far as the source reaches.
			Virtual: engine.Hyperslab([]uint64{uint64(i)}, []uint64{writers}, []uint64{engine.Unlimited}, []uint64{1}),
			File:    fmt.Sprintf("w%d.scc", i), // beside the virtual file
			Dataset: "frames",
			Source:  engine.Box([]uint64{0}, []uint64{engine.Unlimited}),
		})
	}
	all, err := v.CreateVirtualDataset(ctx, "frames", engine.VirtualSpec{
		Type: engine.Int32, Shape: []uint64{0}, MaxShape: []uint64{engine.Unlimited}, Mappings: maps,
	})
	if err != nil {
		log.Fatal(err)
	}
	for frame := range int32(5) {
		w := files[frame%writers]
		ds, err := w.OpenDataset(ctx, "frames", nil)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := engine.AppendSlice(ctx, ds, []int32{100 + frame}); err != nil {
			log.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := v.Refresh(ctx); err != nil {
		log.Fatal(err)
	}
	vals := make([]int32, all.Shape()[0])
	if err := engine.ReadSlice(ctx, all, engine.All(all.Shape()), vals); err != nil {
		log.Fatal(err)
	}
	fmt.Println(vals)
	// Output:
	// [100 101 102 103 104]
}

// Iterate over the chunks a dataset stores: chunks never written are not
// stored and read as the fill value.
func ExampleDataset_Chunks() {
	ctx := context.Background()
	f, err := engine.Create(ctx, "", &engine.Options{Driver: vfd.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "grid", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{4, 4}, Chunk: []uint64{2, 2}})
	if err != nil {
		log.Fatal(err)
	}
	if err := ds.Write(ctx, engine.Box([]uint64{1, 1}, []uint64{2, 1}), []byte{7, 8}); err != nil {
		log.Fatal(err)
	}
	for c, err := range ds.Chunks(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.Coords, c.Size)
	}
	// Output:
	// [0 0] 4
	// [1 0] 4
}

// Open and Create take a local path, an s3:// URL (endpoint, region and
// credentials from the URL's query, Options.S3 or the AWS_* environment),
// or any vfd.Driver through Options.Driver. This example needs an S3
// server, so go test compiles it without running it; `make minio-run`
// starts one.
func ExampleOpen_s3() {
	ctx := context.Background()
	url := "s3://scc/frames.scc?endpoint=http://127.0.0.1:9000&region=us-east-1"
	f, err := engine.Create(ctx, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	ds, err := f.CreateDataset(ctx, "frames", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{0}, MaxShape: []uint64{engine.Unlimited}, Chunk: []uint64{1 << 20}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ds.Append(ctx, make([]byte, 4<<20)); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(ctx); err != nil { // commits: one conditional PUT
		log.Fatal(err)
	}
	rep, err := engine.Check(ctx, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Datasets, "dataset")
}

// Check verifies a file without changing it, and names what is wrong.
func ExampleCheck() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	path := filepath.Join(dir, "c.scc")
	f, err := engine.Create(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	ds, err := f.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{1024}, Chunk: []uint64{256}})
	if err != nil {
		log.Fatal(err)
	}
	if err := engine.WriteSlice(ctx, ds, engine.All(ds.Shape()), make([]uint32, 1024)); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		log.Fatal(err)
	}
	rep, err := engine.Check(ctx, path, nil)
	fmt.Println(rep.Datasets, rep.Chunks, err)
	// Damage one byte of the last stored chunk.
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	r, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	rds, err := r.OpenDataset(ctx, "d", nil)
	if err != nil {
		log.Fatal(err)
	}
	var last engine.StoredChunk
	for c, err := range rds.Chunks(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		last = c
	}
	r.Close(ctx)
	b[last.Addr+last.Size/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Fatal(err)
	}
	_, err = engine.Check(ctx, path, nil)
	fmt.Println(errors.Is(err, engine.ErrCorrupt))
	// Output:
	// 1 4 <nil>
	// true
}
