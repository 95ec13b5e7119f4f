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
	"github.com/scc-dev/scc/vfd"
	"github.com/scc-dev/scc/vfd/s3"
)

// Every command that takes a file path takes an s3://bucket/key URL too
// (endpoint, region and credentials from the URL's query and the AWS_*
// environment; see package vfd/s3): engine.Open, Create and Check take
// both, and open a virtual dataset's s3:// sources alike, so that every
// command reads the same source, or fails on it alike.

// openPath opens the file at path (a local path or an s3:// URL). done
// closes it.
func openPath(ctx context.Context, path string, opts *engine.Options) (f *engine.File, done func() error, err error) {
	f, err = engine.Open(ctx, path, opts)
	if err != nil {
		return nil, nil, err
	}
	return f, func() error { return f.Close(ctx) }, nil
}

// createPath creates the file at path (replacing what is there, as
// engine.Create does).
func createPath(ctx context.Context, path string, opts *engine.Options) (*engine.File, func() error, error) {
	f, err := engine.Create(ctx, path, opts)
	if err != nil {
		return nil, nil, err
	}
	return f, func() error { return f.Close(ctx) }, nil
}

// checkPath runs the consistency check on the file at path.
func checkPath(ctx context.Context, path string) (*engine.CheckReport, error) {
	return engine.Check(ctx, path, nil)
}

// s3Size is the stored size of the object at path for listings.
func s3Size(ctx context.Context, path string) (int64, bool) {
	if !s3.IsURL(path) {
		return 0, false
	}
	drv, err := s3.Open(ctx, path, &s3.Options{ReadOnly: true})
	if err != nil {
		return 0, false
	}
	defer drv.Close()
	n, err := drv.Size()
	return n, err == nil
}

// s3Err gives an error from opening an S3 driver its engine sentinel, as
// the engine does for errors it meets itself.
func s3Err(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", engine.ErrNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %w", engine.ErrDenied, err)
	case errors.Is(err, vfd.ErrLocked), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, vfd.ErrInvalid):
		return fmt.Errorf("%w: %w", engine.ErrInvalid, err)
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", engine.ErrIO, err)
}

// output is where a command that writes a whole file (import) puts it,
// all or nothing: the file is written at Tmp, a fresh name in a fresh
// directory beside the target (for an s3:// target, in the local temporary
// directory), and Commit moves it into place in one step — a rename, or
// for an object one commit of the S3 driver — so a failed command leaves
// no file and an existing one as it was. Discard removes what is left.
type output struct {
	Target string // the path or s3:// URL asked for
	Tmp    string // where to write the file
	dir    string // the temporary directory holding Tmp
	force  bool
}

// newOutput checks the target (it must not exist unless force) and makes
// the temporary directory.
func newOutput(ctx context.Context, target string, force bool) (*output, error) {
	o := &output{Target: target, force: force}
	parent := ""
	if s3.IsURL(target) {
		if _, ok := s3Size(ctx, target); ok && !force {
			return nil, fmt.Errorf("%w: %s exists (use --force to replace it)", engine.ErrExists, target)
		}
	} else {
		if fi, err := os.Lstat(target); err == nil {
			if !force {
				return nil, fmt.Errorf("%w: %s exists (use --force to replace it)", engine.ErrExists, target)
			}
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("%s: %w (%s); not replacing it", target, errNotRegular, fileKind(fi.Mode()))
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		parent = filepath.Dir(target)
	}
	dir, err := os.MkdirTemp(parent, "."+filepath.Base(target)+".tmp-")
	if err != nil {
		return nil, err
	}
	o.dir, o.Tmp = dir, filepath.Join(dir, filepath.Base(target))
	return o, nil
}

// Discard removes the temporary file and directory (after Commit, only
// the empty directory is left to remove).
func (o *output) Discard() { os.RemoveAll(o.dir) }

// Commit moves the finished file into place.
func (o *output) Commit(ctx context.Context) error {
	if s3.IsURL(o.Target) {
		return upload(ctx, o.Tmp, o.Target)
	}
	if !o.force {
		// link(2) fails if the target appeared meanwhile: no clobbering.
		if err := os.Link(o.Tmp, o.Target); err == nil {
			syncDir(filepath.Dir(o.Target))
			return nil
		} else if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s exists (use --force to replace it)", engine.ErrExists, o.Target)
		}
		// No hard links on this file system: rename, as with --force.
		if _, err := os.Lstat(o.Target); err == nil {
			return fmt.Errorf("%w: %s exists (use --force to replace it)", engine.ErrExists, o.Target)
		}
	}
	if err := os.Rename(o.Tmp, o.Target); err != nil {
		return err
	}
	syncDir(filepath.Dir(o.Target))
	return nil
}

// syncDir makes a rename in dir durable (best effort: not every system
// syncs directories).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// upload copies a local scc file to an object in one commit of the S3
// driver: an existing object is rewritten in place (truncated, written,
// synced once), so readers see the old file until the new one is whole;
// a new object is created empty first (the driver's Create), then filled.
func upload(ctx context.Context, local, url string) error {
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	drv, err := s3.Open(ctx, url, nil)
	if errors.Is(err, fs.ErrNotExist) {
		drv, err = s3.Open(ctx, url, &s3.Options{Create: true})
	}
	if err != nil {
		return s3Err(err)
	}
	fail := func(err error) error {
		drv.Close() // unsynced writes are dropped: the object keeps its last commit
		return s3Err(err)
	}
	if err := drv.Truncate(0); err != nil {
		return fail(err)
	}
	buf := make([]byte, 4<<20)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			drv.Close()
			return err
		}
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			if _, err := drv.WriteAt(buf[:n], off); err != nil {
				return fail(err)
			}
			off += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			drv.Close()
			return rerr
		}
	}
	if err := drv.Sync(); err != nil {
		return fail(err)
	}
	return s3Err(drv.Close())
}

// localCopy gives a local path holding the file at path: path itself, or
// for an s3:// URL a temporary copy of the object (for tools that need a
// local file, such as scc-hdf5). done removes the copy.
func localCopy(ctx context.Context, path string) (string, func(), error) {
	if !s3.IsURL(path) {
		return path, func() {}, nil
	}
	drv, err := s3.Open(ctx, path, &s3.Options{ReadOnly: true})
	if err != nil {
		return "", nil, s3Err(err)
	}
	defer drv.Close()
	size, err := drv.Size()
	if err != nil {
		return "", nil, s3Err(err)
	}
	dir, err := os.MkdirTemp("", "scctl-s3-")
	if err != nil {
		return "", nil, err
	}
	done := func() { os.RemoveAll(dir) }
	local := filepath.Join(dir, filepath.Base(path))
	dst, err := os.Create(local)
	if err != nil {
		done()
		return "", nil, err
	}
	buf := make([]byte, 4<<20)
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		if _, err := drv.ReadAtContext(ctx, buf[:n], off); err != nil {
			dst.Close()
			done()
			return "", nil, s3Err(err)
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			dst.Close()
			done()
			return "", nil, err
		}
		off += int64(n)
	}
	if err := dst.Close(); err != nil {
		done()
		return "", nil, err
	}
	return local, done, nil
}
