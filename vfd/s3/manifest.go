package s3

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// manifest is the decoded commit object (FORMAT.md §19): the whole state of
// one file at one commit. It is immutable once built; a commit builds a new
// one.
type manifest struct {
	gen      uint64 // commit generation, +1 per commit
	pageSize int64
	headSize int64
	size     int64  // the file's size in bytes
	epoch    uint64 // writer epoch: +1 on every writable open
	// owner holds the lease (zero: none); expiry is when it lapses, in
	// Unix nanoseconds of the holder's clock.
	owner  [16]byte
	expiry int64
	// nonce identifies the PUT that wrote this object, so a writer whose
	// conditional PUT's answer was lost can tell whether it landed.
	nonce uint64
	head  []byte   // headSize bytes: the file's bytes [0, headSize)
	pages []uint64 // page i's object version; 0 = never written (zeros)
}

const (
	manifestMagic   = "SCCS3MF1"
	manifestVersion = 1
	manifestFixed   = 8 + 4 + 4 + 8*5 + 16 + 8 + 8 + 8 // through npages
	// maxManifest bounds a commit object read from the store (64 MiB: 8M
	// pages, 8 TiB at the default page size), so a hostile length never
	// drives a huge allocation.
	maxManifest = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// numPages is how many page objects a file of size bytes spans.
func numPages(size, headSize, pageSize int64) int64 {
	if size <= headSize {
		return 0
	}
	return (size - headSize + pageSize - 1) / pageSize
}

func (m *manifest) encode() []byte {
	b := make([]byte, 0, manifestFixed+len(m.head)+8*len(m.pages)+4)
	b = append(b, manifestMagic...)
	b = binary.LittleEndian.AppendUint32(b, manifestVersion)
	b = binary.LittleEndian.AppendUint32(b, 0) // flags
	for _, v := range []uint64{m.gen, uint64(m.pageSize), uint64(m.headSize), uint64(m.size), m.epoch} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = append(b, m.owner[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.expiry))
	b = binary.LittleEndian.AppendUint64(b, m.nonce)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(m.pages)))
	b = append(b, m.head...)
	for _, v := range m.pages {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeManifest checks and decodes a commit object. Every length is checked
// against the buffer before anything is allocated.
func decodeManifest(b []byte) (*manifest, error) {
	if len(b) < manifestFixed+4 || len(b) > maxManifest {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if string(body[:8]) != manifestMagic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, body[:8])
	}
	if v := binary.LittleEndian.Uint32(body[8:]); v != manifestVersion {
		return nil, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	if f := binary.LittleEndian.Uint32(body[12:]); f != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", ErrCorrupt, f)
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(body[16+8*i:]) }
	m := &manifest{gen: u(0), epoch: u(4)}
	ps, hs, size := u(1), u(2), u(3)
	if ps < minPageSize || ps > maxPageSize || hs > maxHeadSize || size > 1<<62 {
		return nil, fmt.Errorf("%w: page %d, head %d, size %d", ErrCorrupt, ps, hs, size)
	}
	m.pageSize, m.headSize, m.size = int64(ps), int64(hs), int64(size)
	p := 16 + 8*5
	copy(m.owner[:], body[p:p+16])
	p += 16
	m.expiry = int64(binary.LittleEndian.Uint64(body[p:]))
	m.nonce = binary.LittleEndian.Uint64(body[p+8:])
	np := binary.LittleEndian.Uint64(body[p+16:])
	p += 24
	if np != uint64(numPages(m.size, m.headSize, m.pageSize)) ||
		uint64(len(body)-p) != uint64(m.headSize)+8*np || np > uint64(len(body))/8 {
		return nil, fmt.Errorf("%w: %d pages for size %d do not fit %d bytes", ErrCorrupt, np, m.size, len(b))
	}
	m.head = append([]byte(nil), body[p:p+int(m.headSize)]...)
	p += int(m.headSize)
	m.pages = make([]uint64, np)
	for i := range m.pages {
		m.pages[i] = binary.LittleEndian.Uint64(body[p+8*i:])
	}
	return m, nil
}
