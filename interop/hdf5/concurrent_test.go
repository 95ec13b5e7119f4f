package hdf5

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/vfd"
)

// TestConcurrentExportImport: several exports of one scc file and imports
// of their results run at once (the binding serializes libhdf5; the
// per-chunk work runs on workers of each), while another goroutine keeps
// writing a dataset that is not exported. Every result equals the source.
func TestConcurrentExportImport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := testfile.Create(t, filepath.Join(dir, "src.scc"), &engine.Options{NoSync: true})
	defer src.Close(ctx)
	spec := engine.DatasetSpec{Type: engine.Int16, Shape: []uint64{64, 48}, Chunk: []uint64{8, 16},
		Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(2)}}
	ds, err := src.CreateDataset(ctx, "d", spec)
	if err != nil {
		t.Fatal(err)
	}
	want := pattern(engine.Int16, 64*48, 9)
	if err := ds.Write(ctx, engine.Box([]uint64{0, 0}, []uint64{64, 48}), want); err != nil {
		t.Fatal(err)
	}
	busy, err := src.CreateDataset(ctx, "busy", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{1 << 12}, Chunk: []uint64{256}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		buf := make([]byte, 256)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			buf[0] = byte(i)
			if err := busy.Write(ctx, engine.Box([]uint64{uint64(i%16) * 256}, []uint64{256}), buf); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			h5path := filepath.Join(dir, fmt.Sprintf("e%d.h5", g))
			if _, err := Export(ctx, src, h5path, &Options{Datasets: []string{"d"}, Workers: 1 + g%3}); err != nil {
				errs <- err
				return
			}
			path := filepath.Join(dir, fmt.Sprintf("i%d.scc", g))
			dst, err := engine.Create(ctx, path, &engine.Options{NoSync: true})
			if err != nil {
				errs <- err
				return
			}
			testfile.CheckAtCleanup(t, path)
			defer dst.Close(ctx)
			rep, err := Import(ctx, h5path, dst, &Options{Workers: 1 + g%3})
			if err != nil {
				errs <- err
				return
			}
			if r := rep.Datasets[0]; r.CopiedChunks != r.Chunks || r.Chunks != 8*3 {
				errs <- fmt.Errorf("import %d: %+v", g, r)
				return
			}
			back, err := dst.OpenDataset(ctx, "d", nil)
			if err != nil {
				errs <- err
				return
			}
			got := make([]byte, len(want))
			if err := back.Read(ctx, engine.Box([]uint64{0, 0}, []uint64{64, 48}), got); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, want) {
				errs <- fmt.Errorf("round trip %d differs", g)
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestExportIOError: a read error of the scc file reaches Export's caller
// with its cause, and the partial HDF5 file is removed.
func TestExportIOError(t *testing.T) {
	ctx := context.Background()
	fd := vfd.NewFault(vfd.NewMem())
	fd.SetEnabled(false)
	f := testfile.CreateWith(t, fd, nil)
	defer f.Close(ctx)
	ds, err := f.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Uint32, Shape: []uint64{100}, Chunk: []uint64{10},
		Filters: []engine.Filter{engine.Shuffle(), engine.Deflate(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Write(ctx, engine.Box([]uint64{0}, []uint64{100}), pattern(engine.Uint32, 100, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fd.Add(vfd.Fail(vfd.From(vfd.OpAny, fd.Ops().Total()+3)))
	fd.SetEnabled(true)
	out := filepath.Join(t.TempDir(), "x.h5")
	_, err = Export(ctx, f, out, nil)
	if !errors.Is(err, engine.ErrIO) || !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("export on a failing disk: %v", err)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Fatalf("failed export left %s", out)
	}
	fd.SetEnabled(false)
}

// TestImportIOError: a write error of the scc file reaches Import's caller
// with its cause; the datasets imported before it stay committed and
// intact (Import flushes after each dataset).
func TestImportIOError(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	h5path := filepath.Join(dir, "in.h5")
	runPython(t, `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("a", data=np.arange(4000, dtype="<u4") // 3, chunks=(500,), compression="gzip", shuffle=True)
    f.create_dataset("b", data=np.arange(4000, dtype="<u4"), chunks=(500,), compression="gzip", shuffle=True)
`, h5path)
	mem := vfd.NewMem()
	fd := vfd.NewFault(mem)
	f := testfile.CreateWith(t, fd, nil)
	// Fail every write once "a" is in: import "a" alone first, then arm
	// the fault and import "b".
	if _, err := Import(ctx, h5path, f, &Options{Datasets: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	fd.Add(vfd.Fail(vfd.From(vfd.OpWrite, 0)))
	_, err := Import(ctx, h5path, f, &Options{Datasets: []string{"b"}})
	if !errors.Is(err, engine.ErrIO) || !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("import on a failing disk: %v", err)
	}
	f.Close(ctx)
	fd.SetEnabled(false)
	if _, err := engine.Check(ctx, "", &engine.Options{Driver: mem}); err != nil {
		t.Fatalf("check after a failed import: %v", err)
	}
	g, err := engine.Open(ctx, "", &engine.Options{Driver: mem, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	ds, err := g.OpenDataset(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16000)
	if err := ds.Read(ctx, engine.Box([]uint64{0}, []uint64{4000}), got); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4000; i++ {
		if v := uint32(got[4*i]) | uint32(got[4*i+1])<<8 | uint32(got[4*i+2])<<16 | uint32(got[4*i+3])<<24; v != uint32(i/3) {
			t.Fatalf("element %d of the committed dataset is %d", i, v)
		}
	}
}
