package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
	"github.com/scc-dev/scc/interop/zarr"
	"github.com/scc-dev/scc/vfd/s3"
)

func init() {
	register("export", "export a file's datasets and attributes to a Zarr v2 or v3 store (or HDF5)", cmdExport)
}

// cmdExport exports all or nothing: zarr.Export writes the store into a
// temporary directory beside DIR and renames it into place; an HDF5 export
// is written under a temporary name and renamed the same way.
func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "[--format zarr2|zarr3|hdf5] [--force] [--strict] FILE DIR\n\nDIR (or OUT.h5 with --format hdf5) is a local path; an HDF5 export writes the scc files its virtual datasets map beside OUT.h5, as the mappings name them with .scc replaced by .h5.\n\n"+fileHelp, stderr)
	format := fs.String("format", "zarr2", "store format: zarr2, zarr3 or hdf5 (hdf5 runs the scc-hdf5 tool, built by make hdf5)")
	workers := fs.Int("workers", 0, "chunks processed at once (0: one per CPU)")
	force := fs.Bool("force", false, "replace DIR if it is an existing Zarr store (or OUT.h5 if it exists)")
	strict := fs.Bool("strict", false, "zarr2, zarr3: fail (and write nothing) when any dataset would be skipped because Zarr cannot hold it")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr("want FILE DIR, got %d arguments", len(pos))
	}
	src, dst := pos[0], pos[1]
	if s3.IsURL(dst) {
		return usageErr("%s: the export is written to a local path", dst)
	}
	var v int
	switch *format {
	case "zarr2":
		v = 2
	case "zarr3":
		v = 3
	case "hdf5", "h5":
		return exportHDF5(ctx, src, dst, *force, stdout, stderr)
	default:
		return usageErr("--format %q: want zarr2, zarr3 or hdf5", *format)
	}
	if err := regularFile(src); err != nil {
		return err
	}
	f, done, err := openPath(ctx, src, &engine.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer done()
	rep, err := zarr.Export(ctx, f, dst, zarr.Options{Version: v, Workers: *workers, Replace: *force, Strict: *strict})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported %s to %s (Zarr v%d)\n%s", src, dst, v, rep.Summary())
	return nil
}

// exportHDF5 runs scc-hdf5 (HDF5 needs cgo, which scctl, pure Go, leaves
// to it) on a local copy of an s3:// FILE. scc-hdf5 writes OUT under a
// temporary name beside it and renames it once complete, and writes the
// source files of FILE's virtual datasets beside OUT, where the HDF5
// virtual datasets look for them: so it is given OUT itself.
func exportHDF5(ctx context.Context, src, dst string, force bool, stdout, stderr io.Writer) error {
	if err := regularFile(src); err != nil {
		return err
	}
	if fi, err := os.Lstat(dst); err == nil {
		if !force {
			return fmt.Errorf("%w: %s exists (use --force to replace it)", engine.ErrExists, dst)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: %w (%s); not replacing it", dst, errNotRegular, fileKind(fi.Mode()))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	local, cleanup, err := localCopy(ctx, src)
	if err != nil {
		return err
	}
	defer cleanup()
	if s3.IsURL(src) {
		if err := noOtherFileSources(ctx, local); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
	}
	if err := runHDF5(ctx, hdf5ExportArgs(local, dst, force), stdout, stderr); err != nil {
		return err
	}
	if _, err := os.Stat(dst); err != nil {
		return fmt.Errorf("scc-hdf5 wrote no %s: %w", filepath.Base(dst), err)
	}
	return nil
}

// errRemoteSources: an HDF5 export of an s3:// file runs on a local copy
// of the file alone, where its virtual datasets' sources in other files
// (relative names resolve beside the copy) would look missing and export
// as fill values without a word.
var errRemoteSources = errors.New("the sources of an s3:// file's virtual datasets in other files are not exported (copy the file and its sources to local disk and export that)")

// noOtherFileSources refuses a file with a virtual dataset that maps a
// source in another file (errRemoteSources).
func noOtherFileSources(ctx context.Context, path string) error {
	f, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	names, err := tree.DatasetNames(f)
	if err != nil {
		return err
	}
	for _, name := range names {
		spec, ok, err := f.VirtualSpec(ctx, name)
		if err != nil {
			return err
		}
		for _, m := range spec.Mappings {
			if ok && m.File != "" && m.File != "." {
				return fmt.Errorf("%w: virtual dataset %q maps %s:%s", errRemoteSources, name, m.File, m.Dataset)
			}
		}
	}
	return nil
}
