// Package libdeflate is Eric Biggers' libdeflate whole-buffer DEFLATE and
// zlib decompressor, compiled from its own C sources by cgo, so a cgo build
// gets it with no system package.
//
// upstream/ holds the decompression sources of libdeflate v1.25 (tag commit
// c8c56a20f8f621e6a966b716b31f1dedab6a41e3), byte for byte, under their MIT
// licence (upstream/COPYING). cgo compiles only the C files of the package
// directory itself, so each ld_*.c here includes one upstream .c file. To
// update: copy the same files from a newer release over upstream/ and run the
// engine/filter tests, which hold it to the pure-Go inflater.
//
// Without cgo the package is empty and engine/filter inflates with pure Go.
package libdeflate
