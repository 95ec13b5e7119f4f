//go:build !cgo

package filter

// Inflater names the DEFLATE decoder this build uses (benchmark reports
// print it): klauspost/compress without cgo; libdeflate in a cgo build
// (inflate_libdeflate.go).
const Inflater = "klauspost/compress"

func inflateRaw(dst, src []byte) ([]byte, error)  { return inflateRawGo(dst, src) }
func inflateZlib(dst, src []byte) ([]byte, error) { return inflateZlibGo(dst, src) }
