package index

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/scc-dev/scc/internal/invariants"
)

// This file holds what every block of every index kind shares: the block
// frame (magic, version, payload, CRC32C trailer), child pointers and the
// entry codec. FORMAT-index.md describes the bytes.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	blockVersion = 1

	// headerSize is magic(4) + version(1) + three bytes each kind uses for
	// small fields; every block starts with it.
	headerSize = 8
	// trailerSize is the CRC32C of every byte before it.
	trailerSize = 4

	// entrySize is the encoded width of an Entry: Addr u64, Size u64, Mask
	// u32, Sum u32. Size keeps its full 64 bits: a chunk's stored size is
	// not bounded by the format.
	entrySize = 24

	// ptrSize is the encoded width of a child pointer: addr u64, size u32,
	// crc u32.
	ptrSize = 16

	// maxBlockSize bounds every block this package reads or writes, so
	// that no on-disk value can make a decoder allocate more.
	maxBlockSize = 256 << 20
)

type magic [4]byte

var (
	magicRoot      = magic{'S', 'I', 'X', 'R'}
	magicEAIndex   = magic{'E', 'A', 'I', 'B'}
	magicEASuper   = magic{'E', 'A', 'S', 'B'}
	magicEAData    = magic{'E', 'A', 'D', 'B'}
	magicFAHeader  = magic{'F', 'A', 'H', 'D'}
	magicFAPage    = magic{'F', 'A', 'D', 'P'}
	magicGenRoot   = magic{'G', 'N', 'R', 'T'}
	magicGenLeaf   = magic{'G', 'N', 'L', 'F'}
	errNilAddrUsed = fmt.Errorf("%w: nil pointer with size or checksum", ErrCorrupt)
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// ptr references a child block. Addr 0 is the nil pointer: the store never
// hands out offset 0 (the container keeps its superblock there), so a nil
// child costs no allocation. The parent records the child's size and CRC so
// that a stale or misdirected block that is internally valid is still
// rejected.
type ptr struct {
	addr uint64
	size uint32
	crc  uint32
}

func (p ptr) isNil() bool { return p.addr == 0 }

func putPtr(b []byte, p ptr) {
	binary.LittleEndian.PutUint64(b, p.addr)
	binary.LittleEndian.PutUint32(b[8:], p.size)
	binary.LittleEndian.PutUint32(b[12:], p.crc)
}

// getPtr decodes a pointer and checks its size when want > 0 (sizes of EA
// and FA blocks follow from the configuration).
func getPtr(b []byte, want int) (ptr, error) {
	p := ptr{
		addr: binary.LittleEndian.Uint64(b),
		size: binary.LittleEndian.Uint32(b[8:]),
		crc:  binary.LittleEndian.Uint32(b[12:]),
	}
	if p.addr == 0 {
		if p.size != 0 || p.crc != 0 {
			return ptr{}, errNilAddrUsed
		}
		return p, nil
	}
	if p.addr > 1<<62 {
		return ptr{}, corruptf("pointer address %#x out of range", p.addr)
	}
	if p.size < headerSize+trailerSize || p.size > maxBlockSize {
		return ptr{}, corruptf("pointer size %d out of range", p.size)
	}
	if want > 0 && int(p.size) != want {
		return ptr{}, corruptf("pointer size %d, want %d", p.size, want)
	}
	return p, nil
}

func putEntry(b []byte, e Entry) {
	binary.LittleEndian.PutUint64(b, e.Addr)
	binary.LittleEndian.PutUint64(b[8:], e.Size)
	binary.LittleEndian.PutUint32(b[16:], e.Mask)
	binary.LittleEndian.PutUint32(b[20:], e.Sum)
}

// getEntry decodes an entry. An absent entry must be all zero, so that
// every state has exactly one encoding.
func getEntry(b []byte) (Entry, error) {
	e := Entry{
		Addr: binary.LittleEndian.Uint64(b),
		Size: binary.LittleEndian.Uint64(b[8:]),
		Mask: binary.LittleEndian.Uint32(b[16:]),
		Sum:  binary.LittleEndian.Uint32(b[20:]),
	}
	if e.Size == 0 && (e.Addr != 0 || e.Mask != 0 || e.Sum != 0) {
		return Entry{}, corruptf("absent entry with address, mask or checksum")
	}
	return e, nil
}

// recount returns an index's count of existing entries, count, after one of
// its slots (at most slots of them) went from old to e. The count is stored
// in the index's top block and checked against it on open, so a count that
// wraps below zero or passes the slots would write a block every later open
// rejects as corrupt.
func recount(count, slots uint64, old, e Entry) uint64 {
	if old.Exists() {
		if invariants.Enabled && count == 0 {
			panic(invariants.Violation("index: entry removed from an index counting none"))
		}
		count--
	}
	if e.Exists() {
		if invariants.Enabled && count >= slots {
			panic(invariants.Violation("index: entry added to an index counting %d of %d slots", count, slots))
		}
		count++
	}
	return count
}

// normalize makes every absent entry the zero Entry.
func normalize(e Entry) Entry {
	if e.Size == 0 {
		return Entry{}
	}
	return e
}

// newBlock returns a zeroed block of size bytes with its magic and version.
func newBlock(m magic, size int) []byte {
	b := make([]byte, size)
	copy(b, m[:])
	b[4] = blockVersion
	return b
}

// seal writes the CRC32C trailer and returns it.
func seal(b []byte) uint32 {
	c := crc32.Checksum(b[:len(b)-trailerSize], castagnoli)
	binary.LittleEndian.PutUint32(b[len(b)-trailerSize:], c)
	return c
}

// checkBlock validates the frame of a block: length, magic, version and
// trailer. want < 0 accepts any length of at least a frame.
func checkBlock(b []byte, m magic, want int) error {
	if want >= 0 && len(b) != want {
		return corruptf("%s block is %d bytes, want %d", m[:], len(b), want)
	}
	if len(b) < headerSize+trailerSize {
		return corruptf("%s block truncated (%d bytes)", m[:], len(b))
	}
	if magic(b[:4]) != m {
		return corruptf("bad magic %q, want %q", b[:4], m[:])
	}
	if b[4] != blockVersion {
		return corruptf("%s block version %d unsupported", m[:], b[4])
	}
	got := binary.LittleEndian.Uint32(b[len(b)-trailerSize:])
	if c := crc32.Checksum(b[:len(b)-trailerSize], castagnoli); c != got {
		return corruptf("%s block checksum %#08x, computed %#08x", m[:], got, c)
	}
	return nil
}

// checkParent verifies that a block read through p is the one p names.
func checkParent(b []byte, p ptr) error {
	if got := binary.LittleEndian.Uint32(b[len(b)-trailerSize:]); got != p.crc {
		return corruptf("block at %#x has checksum %#08x, parent recorded %#08x", p.addr, got, p.crc)
	}
	return nil
}
