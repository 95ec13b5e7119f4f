package format

import "hash/crc32"

// Chunk frame (FORMAT.md "Chunk frame"): every stored chunk is its filtered
// image followed by a 4-byte checksum trailer, little-endian. The index
// entry's size is the frame's size and its checksum the trailer. SCC
// requirements §3.4 suggests checksums on all chunks; here they are
// mandatory so that a torn or misdirected chunk write is caught on read
// rather than decoded into wrong data.
//
// How the trailer is computed is the dataset's ChunkSum rule. Up to version
// 4 it is the CRC32C of the image. That cannot tell chunks apart when the
// image itself ends with its CRC32C (a pipeline whose last filter is
// CRC32C): the CRC32C of bytes followed by their own CRC32C is a constant,
// so every such chunk had the same trailer, and two chunks of equal size
// swapped on disk, or a chunk read from where another (or an older version
// of itself) now lies, passed. From version 5 a dataset's header carries a
// chunk key, and its trailers are keyed: the CRC-32 (IEEE polynomial, not
// the filter's) of the image, XORed with a value derived from the key and
// the chunk's coordinates. The trailer then depends on the bytes whatever
// the pipeline, and on which chunk of which dataset they are.

// ChunkSum is a dataset's rule for its chunk checksums. The zero value is
// the unkeyed rule of datasets written before version 5.
type ChunkSum struct {
	key uint64
}

// KeyedChunkSum is the rule of a dataset whose header carries key
// (0 gives the unkeyed rule).
func KeyedChunkSum(key uint64) ChunkSum { return ChunkSum{key} }

// Key returns the rule's chunk key, 0 for the unkeyed rule.
func (c ChunkSum) Key() uint64 { return c.key }

// Plain is the checksum of b before it is bound to a chunk: CRC32C for the
// unkeyed rule, CRC-32 (IEEE) for the keyed one. It can be computed by
// pieces (Update, Combine).
func (c ChunkSum) Plain(b []byte) uint32 {
	if c.key == 0 {
		return Checksum(b)
	}
	return crc32.ChecksumIEEE(b)
}

// Update continues a Plain checksum over b: Update(Plain(a), b) is
// Plain(a||b), and Update(0, b) is Plain(b).
func (c ChunkSum) Update(sum uint32, b []byte) uint32 {
	if c.key == 0 {
		return crc32.Update(sum, castagnoli, b)
	}
	return crc32.Update(sum, crc32.IEEETable, b)
}

// Combine returns Plain(a||b) from Plain(a), Plain(b) and len(b).
func (c ChunkSum) Combine(sa, sb uint32, nb int64) uint32 {
	if c.key == 0 {
		return CombineChecksum(sa, sb, nb)
	}
	return ieeeCombine.combine(sa, sb, nb)
}

// Bind returns the trailer of the chunk at coord whose image has the
// Plain checksum plain.
func (c ChunkSum) Bind(coord []uint64, plain uint32) uint32 {
	if c.key == 0 {
		return plain
	}
	return plain ^ chunkSeal(c.key, coord)
}

// Sum is the trailer of the chunk at coord whose image is img.
func (c ChunkSum) Sum(coord []uint64, img []byte) uint32 { return c.Bind(coord, c.Plain(img)) }

// chunkSeal is what a keyed trailer is XORed with: the key and the
// coordinates run through splitmix64's finalizer (a bijection of 64-bit
// words), folded to 32 bits.
func chunkSeal(key uint64, coord []uint64) uint32 {
	h := mix64(key)
	for _, x := range coord {
		h = mix64(h ^ x)
	}
	return uint32(h) ^ uint32(h>>32)
}

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// AppendFrame appends the trailer of the chunk at coord to img and returns
// the frame. Like append, it writes into img's spare capacity when there
// is some.
func (c ChunkSum) AppendFrame(coord []uint64, img []byte) []byte {
	return le.AppendUint32(img, c.Sum(coord, img))
}

// VerifyFrame checks the stored frame of the chunk at coord and returns
// the image inside it (a sub-slice of stored). The error wraps ErrCorrupt.
func (c ChunkSum) VerifyFrame(coord []uint64, stored []byte) ([]byte, error) {
	if len(stored) < crcSize {
		return nil, corrupt("chunk", "frame of %d bytes is shorter than its checksum", len(stored))
	}
	n := len(stored) - crcSize
	img := stored[:n:n]
	if want, got := le.Uint32(stored[n:]), c.Sum(coord, img); want != got {
		return nil, corrupt("chunk", "checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return img, nil
}

// AppendChunkChecksum appends the unkeyed trailer (the image's CRC32C) to
// img and returns the frame.
func AppendChunkChecksum(img []byte) []byte { return ChunkSum{}.AppendFrame(nil, img) }

// VerifyChunk checks a stored frame of the unkeyed rule and returns the
// image inside it.
func VerifyChunk(stored []byte) ([]byte, error) { return ChunkSum{}.VerifyFrame(nil, stored) }
