//go:build cgo

package libzstd

/*
#define ZSTD_STATIC_LINKING_ONLY
#include <stddef.h>
#ifdef SCC_SYSTEM_LIBZSTD
#include <zstd.h>
#include <zstd_errors.h>
#else
#include "upstream/zstd.h"
#include "upstream/zstd_errors.h"
#endif

// scc_compress writes src as one frame at level into dst: content size
// recorded, no frame checksum, and the level's own window (shrunk to the
// input when smaller, when the frame is single-segment). One call, so a
// compression costs one cgo crossing.
//
// The window is not raised to the input: on a 32 MiB chunk of the public
// Zarr benchmark's array at level 3, a window of the whole chunk compressed
// 40× where the level's 2 MiB window does 21×, but its frames decoded at
// 2.5–3.4 GB/s against 3.4–4.2 (matches 32 MiB back miss the caches), at
// the same encoding speed; and level 3 then means what it means in zstd,
// numcodecs and HDF5's plugin.
//
// Blocks are not split before their sequences are found
// (ZSTD_c_blockSplitterLevel 1, "no splitting"), as in every libzstd before
// 1.5.7, which added that stage and turns it on by default. On the same
// chunk at level 3, two goroutines encoded 1.35 GB/s with it and 1.77–1.92
// without, into 1.57 MB with it and 1.35 MB without (1.5.4's own size); on
// a float32 random walk, 425 MB/s against 735, for frames 3.8 % smaller.
// The stage after sequences (ZSTD_c_splitAfterSequences) is left to the
// level.
//
// A system libzstd older than 1.5.7 (the external_libzstd build) has no
// such stage and no parameter to name it, hence the #ifdef.
//
// The speeds above are one-off runs at GOMAXPROCS 2, not a
// benchmark here; the sizes are held by TestZstdLibzstdNoPreSplit, and
// `scctl bench zarrbench` prints the codec's own decode speed.
static size_t scc_compress(ZSTD_CCtx *c, int level, void *dst, size_t cap, const void *src, size_t n) {
	size_t r = ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	if (ZSTD_isError(r)) return r;
	r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
	if (ZSTD_isError(r)) return r;
	r = ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1);
	if (ZSTD_isError(r)) return r;
	r = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0);
	if (ZSTD_isError(r)) return r;
#ifdef ZSTD_c_blockSplitterLevel
	r = ZSTD_CCtx_setParameter(c, ZSTD_c_blockSplitterLevel, 1);
	if (ZSTD_isError(r)) return r;
#endif
	return ZSTD_compress2(c, dst, cap, src, n);
}

// scc_stream is one step of a streamed decode: as much of src from *spos
// as fits decoded into dst[0:cap], positions updated, libzstd's hint (0
// once the frame is complete) or error code returned.
static size_t scc_stream(ZSTD_DCtx *d, void *dst, size_t cap, size_t *dpos, const void *src, size_t n, size_t *spos) {
	ZSTD_outBuffer o = {dst, cap, 0};
	ZSTD_inBuffer i = {src, n, *spos};
	size_t r = ZSTD_decompressStream(d, &o, &i);
	*dpos = o.pos;
	*spos = i.pos;
	return r;
}
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"

	_ "github.com/DataDog/zstd" // compiles and links libzstd
)

// HeaderVersion is the release of the declarations compiled in
// (MAJOR*10000 + MINOR*100 + RELEASE); LibraryVersion, the linked library's.
const HeaderVersion = int(C.ZSTD_VERSION_NUMBER)

func LibraryVersion() int { return int(C.ZSTD_versionNumber()) }

// MaxInput is the largest input Compress takes (libzstd's largest window);
// engine/filter gives larger ones to the pure-Go encoder.
const MaxInput = 1 << C.ZSTD_WINDOWLOG_MAX

// Error is a libzstd error code (zstd_errors.h) with its name.
type Error struct {
	Code int
	Name string
}

func (e *Error) Error() string { return "libzstd: " + e.Name }

// DstTooSmall reports whether err says the output did not fit.
func DstTooSmall(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == C.ZSTD_error_dstSize_tooSmall
}

// ErrNoMemory: C malloc could not allocate a context; nothing was done.
var ErrNoMemory = &Error{Code: C.ZSTD_error_memory_allocation, Name: "cannot allocate a context"}

func result(r C.size_t) (int, error) {
	if C.ZSTD_isError(r) != 0 {
		return 0, &Error{Code: int(C.ZSTD_getErrorCode(r)), Name: C.GoString(C.ZSTD_getErrorName(r))}
	}
	return int(r), nil
}

// cctx and dctx own one libzstd context each (not safe for concurrent use,
// so pooled: each call takes its own, and none waits for another). The
// cleanup frees the context when the pool drops the wrapper.
type cctx struct{ c *C.ZSTD_CCtx }
type dctx struct{ d *C.ZSTD_DCtx }

var cctxs = sync.Pool{New: func() any {
	c := C.ZSTD_createCCtx()
	if c == nil {
		return nil
	}
	w := &cctx{c: c}
	runtime.AddCleanup(w, func(c *C.ZSTD_CCtx) { C.ZSTD_freeCCtx(c) }, c)
	return w
}}

// dctxs[0] verifies a frame checksum when the frame has one; dctxs[1]
// ignores it.
var dctxs = [2]sync.Pool{{New: func() any { return newDctx(false) }}, {New: func() any { return newDctx(true) }}}

func newDctx(ignoreChecksum bool) any {
	d := C.ZSTD_createDCtx()
	if d == nil {
		return nil
	}
	if ignoreChecksum {
		if C.ZSTD_isError(C.ZSTD_DCtx_setParameter(d, C.ZSTD_d_forceIgnoreChecksum, C.ZSTD_d_ignoreChecksum)) != 0 {
			C.ZSTD_freeDCtx(d)
			return nil
		}
	}
	w := &dctx{d: d}
	runtime.AddCleanup(w, func(d *C.ZSTD_DCtx) { C.ZSTD_freeDCtx(d) }, d)
	return w
}

// Compress writes src (at most MaxInput bytes) as one frame at level, with
// the level's window, with its content size and without a checksum, into
// dst[:cap(dst)], and returns its length. A frame that does not fit fails
// (DstTooSmall) without writing past cap(dst).
func Compress(dst, src []byte, level int) (int, error) {
	w, _ := cctxs.Get().(*cctx)
	if w == nil {
		return 0, ErrNoMemory
	}
	r := C.scc_compress(w.c, C.int(level), unsafe.Pointer(unsafe.SliceData(dst)), C.size_t(cap(dst)),
		unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)))
	cctxs.Put(w)
	return result(r)
}

// Decompress decodes every frame in src into dst[:cap(dst)] and returns the
// decoded length; libzstd never writes past cap(dst) (a frame that decodes
// to more fails with DstTooSmall). A frame checksum is verified unless
// ignoreChecksum.
func Decompress(dst, src []byte, ignoreChecksum bool) (int, error) {
	i := 0
	if ignoreChecksum {
		i = 1
	}
	w, _ := dctxs[i].Get().(*dctx)
	if w == nil {
		return 0, ErrNoMemory
	}
	r := C.ZSTD_decompressDCtx(w.d, unsafe.Pointer(unsafe.SliceData(dst)), C.size_t(cap(dst)),
		unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)))
	dctxs[i].Put(w)
	return result(r)
}

// DecompressStream decodes the one frame in src a piece at a time into out,
// which it reuses, calling emit with each piece in order, and returns the
// decoded length. libzstd keeps the frame's window in the context, so the
// pieces can be small and stay in the core's cache for emit; the frame's
// window should be small (the caller checks it: a window of the whole
// content costs a context buffer of that size). A frame checksum is
// verified unless ignoreChecksum. emit's error stops the decode and is
// returned.
func DecompressStream(src, out []byte, ignoreChecksum bool, emit func([]byte) error) (int, error) {
	if len(out) == 0 {
		return 0, &Error{Code: C.ZSTD_error_dstSize_tooSmall, Name: "no room for a piece"}
	}
	i := 0
	if ignoreChecksum {
		i = 1
	}
	w, _ := dctxs[i].Get().(*dctx)
	if w == nil {
		return 0, ErrNoMemory
	}
	defer dctxs[i].Put(w)
	// A decode an earlier emit stopped left its frame half read.
	if _, err := result(C.ZSTD_DCtx_reset(w.d, C.ZSTD_reset_session_only)); err != nil {
		return 0, err
	}
	total := 0
	var spos C.size_t
	for {
		var dpos C.size_t
		before := spos
		r := C.scc_stream(w.d, unsafe.Pointer(unsafe.SliceData(out)), C.size_t(len(out)), &dpos,
			unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)), &spos)
		if _, err := result(r); err != nil {
			return total, err
		}
		if dpos > 0 {
			total += int(dpos)
			if err := emit(out[:dpos]); err != nil {
				return total, err
			}
		}
		if r == 0 {
			return total, nil
		}
		if dpos == 0 && spos == before {
			// All of src given and nothing more comes out: the frame
			// ends early.
			return total, &Error{Code: C.ZSTD_error_srcSize_wrong, Name: "frame truncated"}
		}
	}
}
