//go:build cgo

package filter

import (
	"fmt"

	"github.com/scc-dev/scc/engine/filter/internal/libdeflate"
)

// The libdeflate inflater: every cgo build (the default wherever a C
// compiler is found) compiles libdeflate's own C sources
// (internal/libdeflate), so it needs no system package; CGO_ENABLED=0
// builds inflate with pure Go (inflate_go.go).
//
// Why: inflating is most of a DEFLATE chunk read's CPU, and libdeflate
// decodes a whole buffer 2.4-3× as fast as klauspost/compress's streaming
// reader on the same data (BenchmarkInflateLibdeflate). It is made for
// exactly this case — the whole input in memory and the output's bound
// known — and it is bounded by construction: it never writes past the
// capacity it is given and reports INSUFFICIENT_SPACE instead. Its tests
// compare it with the pure-Go inflater (inflate.go).
//
// Encoding stays with klauspost/compress in every build, so files do not
// depend on the build that wrote them.

// Inflater names the DEFLATE decoder this build uses.
const Inflater = "libdeflate"

func inflateRaw(dst, src []byte) ([]byte, error)  { return inflateLD(dst, src, false) }
func inflateZlib(dst, src []byte) ([]byte, error) { return inflateLD(dst, src, true) }

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
	out := dst[:cap(dst)]
	in, n, res := libdeflate.Inflate(out, src, zlib)
	switch res {
	case libdeflate.Success:
	case libdeflate.NoMemory:
		// libdeflate could not allocate its state (C malloc failed): the
		// pure-Go inflater decodes the same streams to the same bytes, so
		// this is a slower path, not a different answer.
		if zlib {
			return inflateZlibGo(dst, src)
		}
		return inflateRawGo(dst, src)
	case libdeflate.InsufficientSpace:
		return nil, fmt.Errorf("%w: %s: stream decodes to more than %d bytes", ErrCorrupt, name, len(out))
	case libdeflate.BadData:
		return nil, fmt.Errorf("%w: %s: invalid stream (libdeflate)", ErrCorrupt, name)
	default:
		return nil, fmt.Errorf("%w: %s: libdeflate result %d", ErrCorrupt, name, int(res))
	}
	if in != len(src) {
		return nil, fmt.Errorf("%w: %s: %d trailing bytes after the stream", ErrCorrupt, name, len(src)-in)
	}
	if n > len(out) {
		// libdeflate's contract; checked because a wrong n would hand the
		// caller bytes past its buffer.
		return nil, fmt.Errorf("%w: %s: libdeflate reported %d bytes into %d", ErrCorrupt, name, n, len(out))
	}
	return out[:n], nil
}
