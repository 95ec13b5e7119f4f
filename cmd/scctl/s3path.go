package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
	"github.com/scc-dev/scc/vfd/s3"
)

// Every command that takes a file path takes an s3://bucket/key URL too
// (endpoint, region and credentials from the URL's query and the AWS_*
// environment; see package vfd/s3). These helpers route a path to the
// local file or to the S3 driver.

// openPath opens the file at path (a local path or an s3:// URL). done
// closes the File and, for an object, its driver.
func openPath(ctx context.Context, path string, opts *engine.Options) (f *engine.File, done func() error, err error) {
	if !s3.IsURL(path) {
		f, err := engine.OpenContext(ctx, path, opts)
		if err != nil {
			return nil, nil, err
		}
		return f, f.Close, nil
	}
	drv, err := s3.Open(ctx, path, &s3.Options{ReadOnly: opts != nil && opts.ReadOnly})
	if err != nil {
		return nil, nil, s3Err(err)
	}
	f, err = engine.OpenWithContext(ctx, drv, opts)
	if err != nil {
		drv.Close()
		return nil, nil, err
	}
	return f, closeBoth(f, drv), nil
}

// createPath creates the file at path (replacing what is there, as
// engine.Create truncates).
func createPath(ctx context.Context, path string, opts *engine.Options) (*engine.File, func() error, error) {
	if !s3.IsURL(path) {
		f, err := engine.Create(path, opts)
		if err != nil {
			return nil, nil, err
		}
		return f, f.Close, nil
	}
	drv, err := s3.Open(ctx, path, &s3.Options{Create: true})
	if err != nil {
		return nil, nil, s3Err(err)
	}
	f, err := engine.CreateWith(drv, opts)
	if err != nil {
		drv.Close()
		return nil, nil, err
	}
	return f, closeBoth(f, drv), nil
}

// checkPath runs the consistency check on the file at path.
func checkPath(ctx context.Context, path string) (*engine.CheckReport, error) {
	if !s3.IsURL(path) {
		return engine.CheckPath(ctx, path)
	}
	drv, err := s3.Open(ctx, path, &s3.Options{ReadOnly: true})
	if err != nil {
		return nil, s3Err(err)
	}
	defer drv.Close()
	return engine.Check(ctx, drv)
}

// pathSize is the stored size of the file at path for listings: the
// driver's size for an object.
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

func closeBoth(f *engine.File, drv *s3.Driver) func() error {
	return func() error {
		err := f.Close()
		if derr := drv.Close(); err == nil {
			err = derr
		}
		return err
	}
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
	return fmt.Errorf("%w: %w", engine.ErrIO, err)
}
