package format

// Chunk frame (FORMAT.md "Chunk frame"): every stored chunk is its filtered
// image followed by the CRC32C of the image, little-endian. The index entry's
// size is the frame's size. SCC requirements §3.4 suggests checksums on all chunks;
// here they are mandatory so that a torn or misdirected chunk write is caught
// on read rather than decoded into wrong data.

// AppendChunkChecksum appends the image's CRC32C to img and returns the
// frame. Like append, it writes into img's spare capacity when there is
// some.
func AppendChunkChecksum(img []byte) []byte {
	return le.AppendUint32(img, Checksum(img))
}

// VerifyChunk checks a stored frame and returns the image inside it (a
// sub-slice of stored). The error wraps ErrCorrupt.
func VerifyChunk(stored []byte) ([]byte, error) {
	if len(stored) < crcSize {
		return nil, corrupt("chunk", "frame of %d bytes is shorter than its checksum", len(stored))
	}
	n := len(stored) - crcSize
	img := stored[:n:n]
	if want, got := le.Uint32(stored[n:]), Checksum(img); want != got {
		return nil, corrupt("chunk", "checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return img, nil
}
