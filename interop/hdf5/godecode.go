package hdf5

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// A chunk whose pipeline scc copies (shuffle, deflate, zstd) may still not
// be in scc's form: a zstd frame that grew the chunk (the zstd plugin
// stores what ZSTD_compress returns, larger or not) or that does not
// record its size. libhdf5 decodes such a chunk through its plugin; where
// it has none (Debian ships no zstd plugin), the chunk is decoded here
// with the same libraries scc's own filters use (klauspost/compress),
// each stage bounded by the chunk's size, instead of leaving the dataset
// out.

// goDecodable says whether every stage of fs is one decodeChunkGo knows.
func goDecodable(fs []h5.Filter) bool {
	for _, fl := range fs {
		if fl.ID != h5.FilterShuffle && fl.ID != h5.FilterDeflate && fl.ID != h5.FilterZstd {
			return false
		}
	}
	return true
}

var goZstd = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxChunkBytes+(1<<20)), zstd.WithDecodeAllCapLimit(true))
})

// stageSlack bounds what a stage's output may exceed the chunk by (a
// compressor's framing of an incompressible inner stage).
const stageSlack = 4 << 10

// decodeChunkGo decodes img, the stored chunk of a pipeline of shuffle,
// deflate and zstd stages (filter i skipped where mask bit i is set), to
// its chunkBytes bytes. A stage that would exceed chunkBytes+stageSlack,
// or a result of another size, is ErrCorrupt.
func decodeChunkGo(fs []h5.Filter, mask uint32, img []byte, chunkBytes, elemSize int) ([]byte, error) {
	b := img
	limit := chunkBytes + stageSlack
	for i := len(fs) - 1; i >= 0; i-- {
		if i < 32 && mask&(1<<i) != 0 {
			continue
		}
		switch fs[i].ID {
		case h5.FilterShuffle:
			b = zarrmap.Shuffle(b, elemSize, true)
		case h5.FilterDeflate:
			r, err := zlib.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, fmt.Errorf("%w: deflate: %v", engine.ErrCorrupt, err)
			}
			out := bytes.NewBuffer(make([]byte, 0, min(limit, 8<<20)))
			n, err := io.Copy(out, io.LimitReader(r, int64(limit)+1))
			if err != nil {
				return nil, fmt.Errorf("%w: deflate: %v", engine.ErrCorrupt, err)
			}
			if n > int64(limit) {
				return nil, fmt.Errorf("%w: deflate stage decodes to more than %d bytes", engine.ErrCorrupt, limit)
			}
			b = out.Bytes()
		case h5.FilterZstd:
			dec, err := goZstd()
			if err != nil {
				return nil, err
			}
			out, err := dec.DecodeAll(b, make([]byte, 0, limit))
			if err != nil {
				return nil, fmt.Errorf("%w: zstd: %v", engine.ErrCorrupt, err)
			}
			b = out
		default:
			return nil, fmt.Errorf("%w: filter %s", ErrUnsupported, filterName(fs[i]))
		}
	}
	if len(b) != chunkBytes {
		return nil, fmt.Errorf("%w: chunk decodes to %d bytes, want %d", engine.ErrCorrupt, len(b), chunkBytes)
	}
	return b, nil
}
