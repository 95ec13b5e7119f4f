package zarrmap

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Sharded datasets cross as Zarr v3 arrays of the sharding_indexed codec
// (ZarrV3 "sharding"): the scc chunk is the shard, the scc inner chunk the
// Zarr inner chunk. The inner chunks' codecs are the pipeline's chain
// followed by crc32c, so the inner frames of a sharded chunk's portable
// form (FORMAT.md "Sharded chunks", raw chunks: the filtered image and its
// plain CRC32C) are Zarr inner chunks byte for byte, and only the index is
// rewritten: scc's entry is u64 offset, u32 size, u32 filter mask; Zarr's
// u64 offset, u64 size, with a crc32c of its own.

// PortableEntrySize is one index entry of a sharded chunk's portable form.
const PortableEntrySize = 16

// ZarrEmpty is the offset and size of an absent inner chunk in a Zarr
// shard index (and the offset of one in scc's).
const ZarrEmpty = ^uint64(0)

// An Inner is one inner chunk of a sharded chunk's portable form.
type Inner struct {
	// Frame is the filtered image followed by its CRC32C (the crc32c
	// codec's output); nil for an inner chunk without a frame (fill).
	Frame []byte
	// Off is the frame's offset in the portable form.
	Off  uint64
	Mask uint32
}

// Image is the filtered image without its CRC32C.
func (in Inner) Image() []byte { return in.Frame[:len(in.Frame)-4] }

// SplitPortable checks the portable form of a sharded chunk of n inner
// chunks (what engine.Dataset.ReadChunkRaw returns, whose frames the
// engine verified) and returns its inner chunks in C order of the inner
// grid, with the end of the frames (where the index starts).
func SplitPortable(data []byte, n int) ([]Inner, int, error) {
	if n <= 0 || len(data) < n*PortableEntrySize {
		return nil, 0, fmt.Errorf("%w: sharded chunk of %d bytes for %d inner chunks", ErrCorrupt, len(data), n)
	}
	end := len(data) - n*PortableEntrySize
	out := make([]Inner, n)
	for i := range out {
		e := data[end+i*PortableEntrySize:]
		off, size, mask := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
		if off == ZarrEmpty {
			continue
		}
		if size < 4 || off > uint64(end) || uint64(size) > uint64(end)-off {
			return nil, 0, fmt.Errorf("%w: sharded chunk: inner chunk %d at [%d, +%d) outside %d bytes", ErrCorrupt, i, off, size, end)
		}
		out[i] = Inner{Frame: data[off : off+uint64(size) : off+uint64(size)], Off: off, Mask: mask}
	}
	return out, end, nil
}

// AppendCRC appends the crc32c codec's checksum of b[from:] to b.
func AppendCRC(b []byte, from int) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[from:], Castagnoli))
}

// AppendZarrIndex appends a Zarr shard index (the spec's default
// index_codecs: bytes little-endian, then crc32c) of inner chunks at the
// offsets and sizes given, ZarrEmpty in both for an absent one.
func AppendZarrIndex(b []byte, offs, sizes []uint64) []byte {
	start := len(b)
	for i := range offs {
		b = binary.LittleEndian.AppendUint64(b, offs[i])
		b = binary.LittleEndian.AppendUint64(b, sizes[i])
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], Castagnoli))
}

// ShardingCodec is the v3 codec object of a sharded array whose inner
// chunks have shape inner and the codecs chain (after bytes) and crc32c.
func ShardingCodec(inner []uint64, chain []Codec) map[string]any {
	bytesCodec := map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}}
	codecs := []any{bytesCodec}
	for _, c := range chain {
		codecs = append(codecs, c.JSON(3))
	}
	codecs = append(codecs, Codec{ID: "crc32c"}.JSON(3))
	return map[string]any{"name": "sharding_indexed", "configuration": map[string]any{
		"chunk_shape":    inner,
		"codecs":         codecs,
		"index_codecs":   []any{bytesCodec, map[string]any{"name": "crc32c"}},
		"index_location": "end",
	}}
}

// InnerGrid is the number of inner chunks along each dimension of a chunk.
func InnerGrid(chunk, inner []uint64) []uint64 {
	out := make([]uint64, len(chunk))
	for d := range chunk {
		out[d] = chunk[d] / inner[d]
	}
	return out
}

// InnerCoord is the position in the inner grid of inner chunk i (C order).
func InnerCoord(counts []uint64, i int) []uint64 {
	q := make([]uint64, len(counts))
	x := uint64(i)
	for d := len(q) - 1; d >= 0; d-- {
		q[d] = x % counts[d]
		x /= counts[d]
	}
	return q
}

// InnerBox copies inner chunk q (inner grid coordinates) of a whole chunk
// buffer (shape chunk, es bytes an element) into its own buffer, in C
// order, or back into the chunk when in.
func InnerBox(full []byte, chunk, inner, q []uint64, es int, part []byte, in bool) {
	r := len(chunk)
	row := int(inner[r-1]) * es
	idx := make([]uint64, r)
	for p := 0; p < len(part); p += row {
		off := uint64(0)
		for d := 0; d < r; d++ {
			x := q[d] * inner[d]
			if d < r-1 {
				x += idx[d]
			}
			off = off*chunk[d] + x
		}
		off *= uint64(es)
		if in {
			copy(full[off:off+uint64(row)], part[p:p+row])
		} else {
			copy(part[p:p+row], full[off:])
		}
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			if idx[d] < inner[d] {
				break
			}
			idx[d] = 0
		}
	}
}
