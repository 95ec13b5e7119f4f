package zarrmap

import (
	"encoding/binary"
	"fmt"
)

// VlenStringAttr marks an scc variable-length Uint8 dataset whose elements
// are text: its value is the character set ("utf-8" or "ascii"). Zarr's
// variable-length strings (numcodecs vlen-utf8, v2 dtype "|O"; v3
// data_type "string") and numpy unicode ("<U<n>") import as such
// datasets, and such datasets export as vlen-utf8 strings. The HDF5
// bridge sets and reads the same attribute (its VlenStringAttr).
const VlenStringAttr = "scc:vlen-string"

// EncodeVLen encodes elements in numcodecs' VLenUTF8 / VLenBytes format:
// a little-endian uint32 count, then each element as a little-endian
// uint32 length and its bytes.
func EncodeVLen(vals [][]byte) ([]byte, error) {
	n := 4
	for _, v := range vals {
		n += 4 + len(v)
	}
	if uint64(len(vals)) > 1<<32-1 {
		return nil, fmt.Errorf("%w: %d elements in one chunk", ErrUnsupported, len(vals))
	}
	out := make([]byte, 0, n)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(vals)))
	for _, v := range vals {
		if uint64(len(v)) > 1<<32-1 {
			return nil, fmt.Errorf("%w: an element of %d bytes", ErrUnsupported, len(v))
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	return out, nil
}
