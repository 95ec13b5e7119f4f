//go:build cgo && !external_libzstd

package libzstd

// Bundled reports whether the linked libzstd is the copy compiled from
// DataDog/zstd's sources (false: the system's, through pkg-config, with the
// build tag external_libzstd).
const Bundled = true
