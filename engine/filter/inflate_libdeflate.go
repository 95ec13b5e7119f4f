//go:build cgo && libdeflate

package filter

/*
#cgo LDFLAGS: -ldeflate
#include <stddef.h>
#include <libdeflate.h>

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
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// The libdeflate inflater (build tag libdeflate, cgo; Debian libdeflate-dev).
//
// Why: inflating is most of a DEFLATE chunk read's CPU, and libdeflate
// decodes a whole buffer 2.4-3× as fast as klauspost/compress's streaming
// reader on the same data (BenchmarkInflateLibdeflate on the 2-core
// benchmark VM, 3 runs: a 32 KiB uint16 frame at level 1 433-484 against
// 139-177 MB/s, a 1 MiB one 380-384 against 157-160; the randread
// target). It is
// made for exactly this case — the whole input in memory and the output's
// bound known — and it is bounded by construction: it never writes past the
// capacity it is given and reports INSUFFICIENT_SPACE instead. The default
// build stays pure Go (CGO_ENABLED=0 builds the module), so this is opt-in;
// its tests compare it with the pure-Go inflater (inflate.go).
//
// Encoding stays with klauspost/compress in every build, so files do not
// depend on the build that wrote them.

// Inflater names the DEFLATE decoder this build uses.
const Inflater = "libdeflate"

// ldDecompressor owns one libdeflate decompressor (about 11 KiB of C
// memory; not safe for concurrent use, so pooled). The cleanup frees it
// when the pool drops the wrapper.
type ldDecompressor struct {
	d *C.struct_libdeflate_decompressor
}

var ldDecompressors = sync.Pool{New: func() any {
	d := C.libdeflate_alloc_decompressor()
	if d == nil {
		return nil
	}
	w := &ldDecompressor{d: d}
	runtime.AddCleanup(w, func(d *C.struct_libdeflate_decompressor) { C.libdeflate_free_decompressor(d) }, d)
	return w
}}

func inflateRaw(dst, src []byte) ([]byte, error)  { return inflateLD(dst, src, false) }
func inflateZlib(dst, src []byte) ([]byte, error) { return inflateLD(dst, src, true) }

// libdeflate_result values (libdeflate.h).
const (
	ldSuccess           = 0
	ldBadData           = 1
	ldInsufficientSpace = 3
)

// inflateLD inflates src into dst[:cap(dst)]; errors wrap ErrCorrupt, as the
// pure-Go inflater's do, with the same messages for the same failures where
// libdeflate tells them apart.
func inflateLD(dst, src []byte, zlib bool) ([]byte, error) {
	name := "deflate"
	if zlib {
		name = "zlib"
	}
	if len(src) == 0 {
		return nil, fmt.Errorf("%w: %s: empty stream", ErrCorrupt, name)
	}
	w, _ := ldDecompressors.Get().(*ldDecompressor)
	if w == nil {
		// libdeflate could not allocate its state (C malloc failed): the
		// pure-Go inflater decodes the same streams to the same bytes, so
		// this is a slower path, not a different answer.
		if zlib {
			return inflateZlibGo(dst, src)
		}
		return inflateRawGo(dst, src)
	}
	out := dst[:cap(dst)]
	var z C.int
	if zlib {
		z = 1
	}
	r := C.scc_inflate(w.d, z, unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)),
		unsafe.Pointer(unsafe.SliceData(out)), C.size_t(len(out)))
	ldDecompressors.Put(w)
	switch r.res {
	case ldSuccess:
	case ldInsufficientSpace:
		return nil, fmt.Errorf("%w: %s: stream decodes to more than %d bytes", ErrCorrupt, name, len(out))
	case ldBadData:
		return nil, fmt.Errorf("%w: %s: invalid stream (libdeflate)", ErrCorrupt, name)
	default:
		return nil, fmt.Errorf("%w: %s: libdeflate result %d", ErrCorrupt, name, int(r.res))
	}
	if in := int(r.in); in != len(src) {
		return nil, fmt.Errorf("%w: %s: %d trailing bytes after the stream", ErrCorrupt, name, len(src)-in)
	}
	return out[:int(r.out)], nil
}
