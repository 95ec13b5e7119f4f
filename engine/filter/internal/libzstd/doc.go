// Package libzstd calls the reference Zstandard library (libzstd) for
// whole-buffer compression and decompression, so a cgo build gets it with no
// system package.
//
// The library itself is compiled by github.com/DataDog/zstd, which bundles
// libzstd's C sources (v1.5.7) and is imported here only for that. Its Go API
// cannot write into a caller's buffer smaller than the compression bound
// or skip a frame checksum, so this package
// calls the library directly through its own declarations: upstream/ holds
// zstd.h and zstd_errors.h exactly as that module ships them, under their BSD
// licence (upstream/LICENSE). The header and the library must be the same
// release (the tests check ZSTD_versionNumber against the header): to update,
// bump github.com/DataDog/zstd, copy the two headers from it over upstream/
// and run the engine/filter tests, which hold it to the pure-Go codec.
//
// With the build tag external_libzstd, DataDog/zstd links the system's
// libzstd (pkg-config libzstd) and this package compiles against its
// headers instead of upstream/.
//
// Without cgo the package is empty and engine/filter uses pure Go for zstd.
package libzstd
