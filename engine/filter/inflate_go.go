//go:build !(cgo && libdeflate)

package filter

// Inflater names the DEFLATE decoder this build uses (benchmark reports
// print it): klauspost/compress here; "libdeflate" in a cgo build with the
// libdeflate tag (inflate_libdeflate.go).
const Inflater = "klauspost/compress"

func inflateRaw(dst, src []byte) ([]byte, error)  { return inflateRawGo(dst, src) }
func inflateZlib(dst, src []byte) ([]byte, error) { return inflateZlibGo(dst, src) }
