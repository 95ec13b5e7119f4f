//go:build cgo

package libdeflate

/*
#cgo CFLAGS: -O2 -DNDEBUG
#include <stddef.h>
#include "upstream/libdeflate.h"

// The results come back by value, so no Go pointer to them crosses into C
// (taking the address of a Go local for C would move it to the heap).
typedef struct { int res; size_t in, out; } scc_inflate_result;

static scc_inflate_result scc_inflate(struct libdeflate_decompressor *d, int zlib,
		const void *in, size_t in_n, void *out, size_t out_avail) {
	scc_inflate_result r = {0, 0, 0};
	if (zlib)
		r.res = libdeflate_zlib_decompress_ex(d, in, in_n, out, out_avail, &r.in, &r.out);
	else
		r.res = libdeflate_deflate_decompress_ex(d, in, in_n, out, out_avail, &r.in, &r.out);
	return r;
}
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Version is the libdeflate release compiled in.
const Version = C.LIBDEFLATE_VERSION_STRING

// Result is libdeflate's enum libdeflate_result, plus NoMemory.
type Result int

const (
	Success           Result = C.LIBDEFLATE_SUCCESS
	BadData           Result = C.LIBDEFLATE_BAD_DATA
	ShortOutput       Result = C.LIBDEFLATE_SHORT_OUTPUT // only when the caller asks for an exact size, which Inflate does not
	InsufficientSpace Result = C.LIBDEFLATE_INSUFFICIENT_SPACE
	// NoMemory: C malloc could not allocate a decompressor; nothing was
	// decoded.
	NoMemory Result = -1
)

// decompressor owns one libdeflate decompressor (about 11 KiB of C memory;
// not safe for concurrent use, so pooled). The cleanup frees it when the
// pool drops the wrapper.
type decompressor struct {
	d *C.struct_libdeflate_decompressor
}

var decompressors = sync.Pool{New: func() any {
	d := C.libdeflate_alloc_decompressor()
	if d == nil {
		return nil
	}
	w := &decompressor{d: d}
	runtime.AddCleanup(w, func(d *C.struct_libdeflate_decompressor) { C.libdeflate_free_decompressor(d) }, d)
	return w
}}

// Inflate decodes the one raw DEFLATE stream (zlib: the one zlib stream,
// Adler-32 verified) at the start of src into out, and returns how many
// bytes of src it consumed and of out it wrote. libdeflate never writes past
// len(out): a stream that decodes to more returns InsufficientSpace.
func Inflate(out, src []byte, zlib bool) (in, n int, res Result) {
	w, _ := decompressors.Get().(*decompressor)
	if w == nil {
		return 0, 0, NoMemory
	}
	var z C.int
	if zlib {
		z = 1
	}
	r := C.scc_inflate(w.d, z, unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)),
		unsafe.Pointer(unsafe.SliceData(out)), C.size_t(len(out)))
	decompressors.Put(w)
	return int(r.in), int(r.out), Result(r.res)
}
