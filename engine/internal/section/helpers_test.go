package section

import "github.com/scc-dev/scc/engine/internal/format"

// The unkeyed rule, for the tests of the frame's layout.
func appendFrame0(dst []byte, secs []Stored) ([]byte, uint32) {
	return AppendFrame(dst, secs, format.ChunkSum{}, nil)
}

func parseHeader0(b []byte, frameSize int64, want int, maxDecoded uint32) (Header, error) {
	return ParseHeader(b, frameSize, want, maxDecoded, format.ChunkSum{}, nil)
}
