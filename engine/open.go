package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/scc-dev/scc/vfd"
	"github.com/scc-dev/scc/vfd/s3"
)

// The two constructors. A file is named by one string, as every scctl
// command takes it: a local path, or an s3://bucket/key URL (package
// vfd/s3, configured by Options.S3). A program that brings its own
// storage sets Options.Driver; the path then only names the file.

// Open opens the file at path: a local path, an s3:// URL, or any name
// with Options.Driver set. See Options.ReadOnly for readers that follow
// a writer. A writable open walks every committed chunk index to rebuild
// the free-space map, which ctx can cancel.
func Open(ctx context.Context, path string, opts *Options) (*File, error) {
	return start(ctx, path, opts, openDriver, openLocal, false)
}

// Create creates the file at path, replacing any file there, and opens it
// for writing: a local path (see createLocal for how a reader never finds
// it half made), an s3:// URL (a new object, replacing any that no writer
// holds), or any name with Options.Driver set, whose driver must be empty.
func Create(ctx context.Context, path string, opts *Options) (*File, error) {
	if opts != nil && opts.ReadOnly {
		return nil, fmt.Errorf("%w: cannot create a read-only file", ErrInvalid)
	}
	return start(ctx, path, opts, createDriver, createLocal, true)
}

// start is Open and Create: onDriver makes the File on a driver (the
// caller's, or an s3:// object's, which the File then owns), local on a
// local path.
func start(ctx context.Context, path string, opts *Options,
	onDriver func(context.Context, vfd.Driver, *Options) (*File, error),
	local func(context.Context, string, *Options) (*File, error), create bool) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &Options{}
	}
	switch {
	case opts.Driver != nil:
		f, err := onDriver(ctx, opts.Driver, opts)
		if err != nil {
			return nil, err
		}
		f.path = path
		return f, nil
	case path == "":
		return nil, errNoFile
	case s3.IsURL(path):
		drv, err := s3.Open(ctx, path, s3Options(opts, create))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, classify(err))
		}
		f, err := onDriver(ctx, drv, opts)
		if err != nil {
			drv.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		f.ownDrv, f.path = true, path
		return f, nil
	}
	return local(ctx, path, opts)
}

// errNoFile refuses a call naming no file: no path and no driver.
var errNoFile = fmt.Errorf("%w: no file: give a path, an s3:// URL or Options.Driver", ErrInvalid)

// s3Options is the object-store driver's configuration for an open
// (create: a new object) under opts.
func s3Options(opts *Options, create bool) *s3.Options {
	o := s3.Options{}
	if opts.S3 != nil {
		o = *opts.S3
	}
	o.ReadOnly, o.Create = opts.ReadOnly, create
	return &o
}

// openCheckDriver opens the storage Check reads, read-only, with a close
// for the caller: opts.Driver (kept), an s3:// object or a local file.
func openCheckDriver(ctx context.Context, path string, opts *Options) (vfd.Driver, func(), error) {
	switch {
	case path == "" && opts.Driver == nil:
		return nil, nil, errNoFile
	case opts.Driver != nil:
		return opts.Driver, func() {}, nil
	case s3.IsURL(path):
		o := s3Options(opts, false)
		o.ReadOnly = true
		drv, err := s3.Open(ctx, path, o)
		if err != nil {
			return nil, nil, classify(err)
		}
		return drv, func() { drv.Close() }, nil
	}
	if err := checkRegular(path, false); err != nil {
		return nil, nil, err
	}
	drv, err := vfd.Open(path, 0, 0)
	if err != nil {
		if errors.Is(err, vfd.ErrLocked) {
			return nil, nil, err
		}
		return nil, nil, classify(err)
	}
	return drv, func() { drv.Close() }, nil
}
