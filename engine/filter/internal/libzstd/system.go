//go:build cgo && external_libzstd

package libzstd

// With the build tag external_libzstd, github.com/DataDog/zstd links the
// system's libzstd (found by pkg-config) instead of compiling its bundled
// sources, and this package compiles against that library's own headers,
// so declarations and library stay the same release.

// #cgo CFLAGS: -DSCC_SYSTEM_LIBZSTD
// #cgo pkg-config: libzstd
import "C"

// Bundled reports whether the linked libzstd is the copy compiled from
// DataDog/zstd's sources (false: the system's, through pkg-config).
const Bundled = false
