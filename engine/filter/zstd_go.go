//go:build !cgo

package filter

import "fmt"

// ZstdCodec names the zstd implementation this build uses (benchmark
// reports print it): klauspost/compress without cgo; libzstd in a cgo build
// (zstd_libzstd.go).
const ZstdCodec = "klauspost/compress"

// ZstdVersion is empty without cgo: the pure-Go codec's version is the
// module's (the build information has it).
func ZstdVersion() string { return "" }

func zstdEncode(c zstdCodec, dst, src []byte) ([]byte, bool) { return zstdEncodeGo(c.speed, dst, src) }

func zstdDecode(dst, src []byte, trusted bool) ([]byte, error) {
	return zstdDecodeGo(dst, src, trusted)
}

// zstdDecodeOverrun: klauspost's decoder may write up to zstdOverrun past a
// lying content size before it fails.
const zstdDecodeOverrun = zstdOverrun

// zstdStreams: the pure-Go build decodes whole chunks only.
const zstdStreams = false

func zstdDecodeStream([]byte, []byte, func([]byte) error) (int, error) {
	return 0, fmt.Errorf("%w: zstd: no streamed decode without cgo", ErrInvalid)
}
