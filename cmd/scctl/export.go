package main

import (
	"context"
	"fmt"
	"io"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/zarr"
)

func init() {
	register("export", "export a file's datasets and attributes to a Zarr v2 or v3 store", cmdExport)
}

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "--format zarr2|zarr3 FILE DIR", stderr)
	format := fs.String("format", "zarr2", "store format: zarr2, zarr3 or hdf5 (hdf5 runs the scc-hdf5 tool, `make hdf5`)")
	workers := fs.Int("workers", 0, "chunks processed at once (0: one per CPU)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr("want FILE DIR, got %d arguments", len(pos))
	}
	var v int
	switch *format {
	case "zarr2":
		v = 2
	case "zarr3":
		v = 3
	case "hdf5", "h5":
		// HDF5 needs cgo, which scctl (pure Go) leaves to scc-hdf5.
		return runHDF5(ctx, []string{"export", pos[0], pos[1]}, stdout, stderr)
	default:
		return usageErr("--format %q: want zarr2 or zarr3", *format)
	}
	if err := regularFile(pos[0]); err != nil {
		return err
	}
	f, err := engine.Open(pos[0], &engine.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := zarr.Export(ctx, f, pos[1], zarr.Options{Version: v, Workers: *workers})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported %s to %s (Zarr v%d)\n%s", pos[0], pos[1], v, rep.Summary())
	return nil
}
