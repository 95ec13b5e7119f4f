package hdf5

import (
	"encoding/binary"
	"fmt"

	"github.com/scc-dev/scc/engine"
)

// HDF5's LZ4 filter (id 32004, the H5Zlz4 plugin) frames a chunk as an
// 8-byte big-endian decoded size, a 4-byte big-endian block size, and
// then each block as a 4-byte big-endian stored size and the block's
// bytes: an LZ4 block (the block format) when the stored size is below
// the block's decoded size, the block's bytes as they are when it equals
// it (LZ4 did not shrink them). The block size defaults to 1 GiB, so a
// chunk is one block unless the writer asked for smaller ones. scc's LZ4
// filter stores a 4-byte little-endian decoded size and one LZ4 block
// (engine/filter/codec.go), so a one-block HDF5 chunk whose block is
// compressed becomes scc's image by changing the 16-byte framing alone:
// the compressed block is never decoded here (the engine decodes it once
// to verify it, as for every copied chunk that is not deflate).

// lz4HDF5Overhead is the framing of a one-block chunk: the two sizes and
// the block's stored size.
const lz4HDF5Overhead = 8 + 4 + 4

// lz4SCCMax is the largest decoded size scc's LZ4 filter takes (LZ4's
// block input limit, LZ4_MAX_INPUT_SIZE).
const lz4SCCMax = 0x7E000000

// lz4FromHDF5 returns scc's LZ4 image of the HDF5 LZ4 chunk image, whose
// decoded size must be chunkBytes. The framing is checked against the
// image's length before anything is allocated; an image that is not one
// compressed block (several blocks, or a block stored as it is) is not
// scc's form and returns ErrInvalid, so the chunk goes through HDF5's
// decoder instead; a framing that contradicts itself is ErrCorrupt.
func lz4FromHDF5(image []byte, chunkBytes int) ([]byte, error) {
	if len(image) < lz4HDF5Overhead {
		return nil, fmt.Errorf("%w: lz4 chunk of %d bytes, shorter than its framing", engine.ErrCorrupt, len(image))
	}
	size := binary.BigEndian.Uint64(image)
	block := uint64(binary.BigEndian.Uint32(image[8:]))
	stored := uint64(binary.BigEndian.Uint32(image[12:]))
	if size != uint64(chunkBytes) {
		return nil, fmt.Errorf("%w: lz4 chunk claims %d bytes, the chunk holds %d", engine.ErrCorrupt, size, chunkBytes)
	}
	if block == 0 && size > 0 {
		return nil, fmt.Errorf("%w: lz4 chunk with block size 0", engine.ErrCorrupt)
	}
	// The plugin reads blocks of min(block, size) bytes.
	block = min(block, size)
	if block < size {
		return nil, fmt.Errorf("%w: lz4 chunk in %d-byte blocks (scc's LZ4 is one block)", engine.ErrInvalid, block)
	}
	if stored != uint64(len(image)-lz4HDF5Overhead) {
		return nil, fmt.Errorf("%w: lz4 block of %d stored bytes in a chunk of %d", engine.ErrCorrupt, stored, len(image))
	}
	if stored >= size {
		return nil, fmt.Errorf("%w: lz4 block stored uncompressed", engine.ErrInvalid)
	}
	if size > lz4SCCMax {
		return nil, fmt.Errorf("%w: lz4 chunk of %d bytes, above LZ4's block limit", engine.ErrInvalid, size)
	}
	out := make([]byte, 4, 4+stored)
	binary.LittleEndian.PutUint32(out, uint32(size))
	return append(out, image[lz4HDF5Overhead:]...), nil
}
