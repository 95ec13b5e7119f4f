package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/zarr"
)

func init() {
	register("import", "import a Zarr v2 or v3 store (groups, arrays, attributes) into a new file", cmdImport)
}

func cmdImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", "[--force] [--verify] DIR FILE", stderr)
	force := fs.Bool("force", false, "replace FILE if it exists")
	workers := fs.Int("workers", 0, "chunks processed at once (0: one per CPU)")
	verify := fs.Bool("verify", false, "decode every copied chunk once before storing it (zlib chunks are otherwise stored uninflated; their Adler-32 is checked on every read)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr("want DIR FILE, got %d arguments", len(pos))
	}
	dir, path := pos[0], pos[1]
	if _, err := os.Stat(path); err == nil && !*force {
		return fmt.Errorf("%w: %s exists (use --force to replace it)", engine.ErrExists, path)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if low := strings.ToLower(dir); strings.HasSuffix(low, ".h5") || strings.HasSuffix(low, ".hdf5") {
		// HDF5 needs cgo, which scctl (pure Go) leaves to scc-hdf5,
		// with the same options.
		args := []string{"import", "-workers", strconv.Itoa(*workers)}
		if *verify {
			args = append(args, "-verify")
		}
		return runHDF5(ctx, append(args, dir, path), stdout, stderr)
	}
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return usageErr("%s is not a directory (a Zarr store is one)", dir)
	}
	f, err := engine.Create(path, nil)
	if err != nil {
		return err
	}
	rep, err := zarr.Import(ctx, dir, f, zarr.Options{Workers: *workers, Verify: *verify})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // a half-imported file is worth nothing
		return err
	}
	fmt.Fprintf(stdout, "imported %s into %s\n%s", dir, path, rep.Summary())
	return nil
}
