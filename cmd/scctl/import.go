package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/zarr"
	"github.com/scc-dev/scc/vfd/s3"
)

func init() {
	register("import", "import a Zarr v2/v3 store or an HDF5 (netCDF-4) file into a new file", cmdImport)
}

// cmdImport imports all or nothing: the file is written under a temporary
// name and moved into place once complete (newOutput), so a failed import
// leaves no file, and --force replaces an existing one whatever the input
// (an HDF5 import goes to a new file too, never merged into the old).
func cmdImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", "[--force] [--verify] [--strict] STORE|FILE.h5 FILE\n\nSTORE (a Zarr v2 or v3 directory) or FILE.h5 is a local path; the new FILE is\nwritten under a temporary name and moved into place once complete.\n\n"+fileHelp, stderr)
	force := fs.Bool("force", false, "replace FILE if it exists")
	workers := fs.Int("workers", 0, "chunks processed at once (0: one per CPU)")
	verify := fs.Bool("verify", false, "decode every copied chunk once before storing it (zlib chunks are otherwise stored uninflated; their Adler-32 is checked on every read)")
	strict := fs.Bool("strict", false, "fail (and write nothing) when any array is skipped because scc cannot hold it")
	links := fs.Bool("follow-outside-links", false, "follow symlinks in the store that point outside it (refused by default)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr("want STORE FILE, got %d arguments", len(pos))
	}
	src, path := pos[0], pos[1]
	if s3.IsURL(src) {
		return usageErr("%s: the input must be a local Zarr store or HDF5 file", src)
	}
	h5, err := isHDF5(src)
	if err != nil {
		return err
	}
	if !h5 {
		if fi, err := os.Stat(src); err != nil {
			return err
		} else if !fi.IsDir() {
			return usageErr("%s is not a directory (a Zarr store is one) nor an HDF5 file", src)
		}
	}
	out, err := newOutput(ctx, path, *force)
	if err != nil {
		return err
	}
	defer out.Discard()
	if h5 {
		// HDF5 needs cgo, which scctl (pure Go) leaves to scc-hdf5, with
		// the same options. scc-hdf5 creates the file when it is missing,
		// and the temporary name is: the import never merges into an old
		// file.
		if err := runHDF5(ctx, hdf5ImportArgs(src, out.Tmp, *workers, *verify, false, *strict), stdout, stderr); err != nil {
			return err
		}
		return out.Commit(ctx)
	}
	f, err := engine.Create(ctx, out.Tmp, nil)
	if err != nil {
		return err
	}
	rep, err := zarr.Import(ctx, src, f, zarr.Options{Workers: *workers, Verify: *verify, FollowOutsideLinks: *links})
	if cerr := f.Close(ctx); err == nil {
		err = cerr
	}
	if rep != nil && (err == nil || len(rep.Skipped) > 0) {
		fmt.Fprint(stdout, rep.Summary())
	}
	if err != nil {
		return err
	}
	if *strict && len(rep.Skipped) > 0 {
		return fmt.Errorf("%d of %d arrays skipped (--strict): nothing written", len(rep.Skipped), len(rep.Skipped)+len(rep.Datasets))
	}
	if err := out.Commit(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported %s into %s\n", src, path)
	return nil
}

// hdf5Suffixes are the names HDF5 files go by (netCDF-4 is HDF5).
var hdf5Suffixes = []string{".h5", ".hdf5", ".he5", ".nc", ".nc4"}

// hdf5Magic is the HDF5 format signature, at offset 0, 512, 1024, ...
var hdf5Magic = []byte("\x89HDF\r\n\x1a\n")

// isHDF5 reports whether src is an HDF5 file: by its signature when it is
// a regular file, else by its name.
func isHDF5(src string) (bool, error) {
	fi, err := os.Stat(src)
	if err == nil && fi.Mode().IsRegular() {
		fh, err := os.Open(src)
		if err != nil {
			return false, err
		}
		defer fh.Close()
		buf := make([]byte, len(hdf5Magic))
		if n, _ := fh.ReadAt(buf, 0); bytes.HasPrefix(buf[:n], []byte("CDF")) {
			return false, usageErr("%s is a classic netCDF (version 3) file; scc imports netCDF-4, which is HDF5", src)
		}
		for off := int64(0); off < min(fi.Size(), 1<<20); off = max(off*2, 512) {
			if _, err := fh.ReadAt(buf, off); err != nil {
				break
			}
			if bytes.Equal(buf, hdf5Magic) {
				return true, nil
			}
		}
	} else if err == nil && !fi.IsDir() {
		return false, fmt.Errorf("%s: %w (%s)", src, errNotRegular, fileKind(fi.Mode()))
	}
	low := strings.ToLower(src)
	for _, s := range hdf5Suffixes {
		if strings.HasSuffix(low, s) {
			return true, nil
		}
	}
	return false, nil
}
