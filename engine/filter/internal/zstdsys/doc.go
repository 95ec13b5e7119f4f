//go:build !cgo || !linux

// Package zstdsys is empty without cgo on Linux: benchmarks then skip the
// system libzstd's row.
package zstdsys
