package hdf5

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/scc-dev/scc/engine"
)

// Whole-file results. An import or export either produces its whole result
// or leaves the destination as it was: the new file is written under a
// temporary name in the destination's directory (so that the final rename
// stays on one file system) and renamed into place only when everything
// in it is written, committed and closed. A failure, ctx ending included,
// removes the temporary file; a crash leaves at most a file named
// ".NAME.tmp-*" beside the destination, never a half-written NAME.

// tempBeside reserves a temporary name in dst's directory: the file
// exists, empty, when it returns.
func tempBeside(dst string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// publish moves the finished tmp to dst. With replace it renames over
// whatever dst is; without, dst must not exist, now or when the rename
// happens: a hard link cannot overwrite, so a file that appeared at dst
// since the call began is never clobbered.
func publish(tmp, dst string, replace bool) error {
	if replace {
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		return syncDir(dst)
	}
	if err := os.Link(tmp, dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s exists", engine.ErrExists, dst)
		}
		// A file system without hard links: check, then rename.
		if _, serr := os.Lstat(dst); serr == nil {
			return fmt.Errorf("%w: %s exists", engine.ErrExists, dst)
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		return syncDir(dst)
	}
	if err := os.Remove(tmp); err != nil {
		return err
	}
	return syncDir(dst)
}

// syncDir makes the rename that put path in place durable.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: sync of %s: %v", engine.ErrIO, filepath.Dir(path), err)
	}
	return nil
}

// ImportFile imports srcPath (an HDF5 file) into the scc file dstPath,
// all or nothing: Import runs on a temporary file beside dstPath, which
// replaces dstPath only when the import succeeded and the file is
// committed and closed; on any failure dstPath is as it was and the
// temporary file is gone.
//
// A missing dstPath is created. An existing one is merged into (its
// datasets kept, the imported ones added: the import runs on a copy of
// it), or, with opts.Replace, replaced by a file holding only what was
// imported. A merge assumes no other process writes dstPath meanwhile:
// what such a writer commits after the copy is lost when the copy
// replaces it.
func ImportFile(ctx context.Context, srcPath, dstPath string, opts *Options) (rep Report, err error) {
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	st, serr := os.Stat(dstPath)
	exists := serr == nil
	switch {
	case serr != nil && !errors.Is(serr, fs.ErrNotExist):
		return rep, serr
	case exists && !st.Mode().IsRegular():
		return rep, fmt.Errorf("%w: %s is not a regular file", engine.ErrInvalid, dstPath)
	}
	tmp, err := tempBeside(dstPath)
	if err != nil {
		return rep, err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	var f *engine.File
	if exists && !opts.replace() {
		if err := copyFile(ctx, dstPath, tmp, st.Mode().Perm()); err != nil {
			return rep, err
		}
		f, err = engine.Open(ctx, tmp, nil)
	} else {
		if err := os.Chmod(tmp, 0o644); err != nil {
			return rep, err
		}
		f, err = engine.Create(ctx, tmp, nil)
	}
	if err != nil {
		return rep, err
	}
	rep, err = Import(ctx, srcPath, f, opts)
	if err != nil {
		f.Close(ctx) // the file is removed; its commit error does not matter
		return rep, err
	}
	if err := f.Close(ctx); err != nil {
		return rep, err
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	return rep, publish(tmp, dstPath, exists)
}

// copyFile copies src to dst (which exists) with perm, synced.
func copyFile(ctx context.Context, src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, ctxReader{ctx, in})
	if err == nil {
		err = out.Chmod(perm)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
