//go:build cgo && linux

// Package zstdsys loads the system's libzstd at run time (dlopen, its own
// namespace), beside whichever libzstd the build links, so a benchmark can
// decode the same frames with both in one process, taking turns: the
// bundled build's speed and the system library's are then measured under the
// same load. Only benchmarks import it.
package zstdsys

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

typedef void *(*create_fn)(void);
typedef size_t (*decompress_fn)(void *, void *, size_t, const void *, size_t);
typedef unsigned (*iserror_fn)(size_t);
typedef unsigned (*version_fn)(void);
typedef size_t (*setparam_fn)(void *, int, int);

static create_fn scc_create;
static decompress_fn scc_decompress;
static iserror_fn scc_iserror;
static version_fn scc_version;
static setparam_fn scc_setparam;

// scc_open loads the library in its own namespace (RTLD_LOCAL): its calls
// to itself resolve within it, not to a libzstd linked into the program.
static int scc_open(const char *name) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) return 0;
	scc_create = (create_fn)dlsym(h, "ZSTD_createDCtx");
	scc_decompress = (decompress_fn)dlsym(h, "ZSTD_decompressDCtx");
	scc_iserror = (iserror_fn)dlsym(h, "ZSTD_isError");
	scc_version = (version_fn)dlsym(h, "ZSTD_versionNumber");
	scc_setparam = (setparam_fn)dlsym(h, "ZSTD_DCtx_setParameter");
	return scc_create && scc_decompress && scc_iserror && scc_version && scc_setparam;
}

// ZSTD_d_forceIgnoreChecksum (ZSTD_d_experimentalParam3) = 1002, and
// ZSTD_d_ignoreChecksum = 1: stable values since libzstd 1.4.7.
static void *scc_dctx(void) {
	void *d = scc_create();
	if (d != NULL && scc_iserror(scc_setparam(d, 1002, 1))) return NULL;
	return d;
}

static long long scc_decompress_into(void *d, void *dst, size_t cap, const void *src, size_t n) {
	size_t r = scc_decompress(d, dst, cap, src, n);
	return scc_iserror(r) ? -1 : (long long)r;
}

static unsigned scc_versionnumber(void) { return scc_version(); }
*/
import "C"

import (
	"errors"
	"sync"
	"unsafe"
)

var (
	once    sync.Once
	openErr error
)

// Open loads libzstd.so.1 once.
func Open() error {
	once.Do(func() {
		name := C.CString("libzstd.so.1")
		defer C.free(unsafe.Pointer(name))
		if C.scc_open(name) == 0 {
			openErr = errors.New("zstdsys: no system libzstd.so.1 with the decompression API")
		}
	})
	return openErr
}

// Version is the loaded library's release (MAJOR*10000 + MINOR*100 +
// RELEASE).
func Version() int { return int(C.scc_versionnumber()) }

// Decoder is one decompression context (not for concurrent use), ignoring
// frame checksums as the cache's trusted decodes do. Never freed: a
// benchmark makes a few.
type Decoder struct{ d unsafe.Pointer }

// NewDecoder needs a successful Open.
func NewDecoder() (*Decoder, error) {
	d := C.scc_dctx()
	if d == nil {
		return nil, errors.New("zstdsys: cannot create a decompression context")
	}
	return &Decoder{d: d}, nil
}

// Decompress decodes src into dst[:cap(dst)] and returns the length.
func (d *Decoder) Decompress(dst, src []byte) (int, error) {
	r := C.scc_decompress_into(d.d, unsafe.Pointer(unsafe.SliceData(dst)), C.size_t(cap(dst)),
		unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)))
	if r < 0 {
		return 0, errors.New("zstdsys: decompression failed")
	}
	return int(r), nil
}
