//go:build !cgo

package filter

import (
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdReferenceFrame is the frame klauspost/compress writes for src at
// level's speed with the filter's options.
func zstdReferenceFrame(t *testing.T, src []byte, level int) []byte {
	t.Helper()
	ref, err := zstd.NewWriter(nil, zstd.WithWindowSize(zstdWindow), zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithLowerEncoderMem(true), zstd.WithSingleSegment(true), zstd.WithEncoderCRC(false), zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	return ref.EncodeAll(src, nil)
}
