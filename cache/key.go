package cache

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"

	"github.com/scc-dev/scc/cache/layout"
)

// Key is a 128-bit chunk key (SCC design §2.1 H5SC_chunk_key_t).
type Key struct {
	Hi, Lo uint64
}

// chunkKey is what the chunk table is keyed by.
//
// Identity: SCC design §2.1 interleaves the dataset's object-header address
// with the chunk coordinates. Here the dataset identity is the dataset
// header's serial, a small integer unique across the whole Cache (it is
// assigned per (file, dataset id) pair and kept across a warm reopen), so
// one serial also tells files apart: no file field is needed and the keys of
// one Cache shared by several files never collide.
//
// Exactness: the serial and the rank coordinates are interleaved LSB first
// into the low 120 bits, each stream getting w = 120/(rank+1) bits, and the
// rank is stored in the top byte (bits 120..127), so keys of datasets with
// different ranks never collide. That is a bijection while every stream fits
// in w bits. When a value does not fit (high rank, huge coordinates) the key
// falls back to an exact, longer form: Key{serial, 0}, the long flag set in
// rank, and the coordinates spelled out in long. Two distinct chunks
// therefore never share a chunkKey.
//
// The short form is a plain 128-bit Key, and that is what the chunk table
// looks up on the hit path (table.go): a comparable 16-byte key, hashed by
// one multiply and compared by two words. The long form, rare, lives in a
// separate table keyed by the whole chunkKey.
type chunkKey struct {
	k    Key
	rank uint8 // rank, | longKey when the fallback form is used
	long string
}

// keyBits is the width the streams of a short key share; the byte above
// holds the rank.
const keyBits = 120

const longKey = 0x80

// interleave computes the LSB-first bit interleaving of streams into 128 bits
// with w bits per stream; ok is false when a value needs more than w bits.
func interleave(streams []uint64, w int) (Key, bool) {
	for _, s := range streams {
		if bits.Len64(s) > w {
			return Key{}, false
		}
	}
	// Visit set bits only: coordinates are small, so this is a handful of
	// iterations instead of w*len(streams).
	var k Key
	n := uint(len(streams))
	for i, s := range streams {
		for s != 0 {
			b := uint(bits.TrailingZeros64(s))
			s &= s - 1
			pos := b*n + uint(i)
			if pos < 64 {
				k.Lo |= 1 << pos
			} else {
				k.Hi |= 1 << (pos - 64)
			}
		}
	}
	return k, true
}

// hash is the chunk table's hash function: the built-in hasher would take
// the slow generic path for a struct holding a string.
func (k chunkKey) hash(seed uint64) uint64 {
	h := mix(k.k.Lo^seed, k.k.Hi^uint64(k.rank))
	if k.long != "" {
		h = mix(h, maphash.String(keySeed, k.long))
	}
	return h
}

var keySeed = maphash.MakeSeed()

// mix is a 128→64-bit mixer (wyhash's multiply-fold).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	return hi ^ lo
}

// makeKey builds the chunk key for coord of the dataset with the given
// serial. Ranks 1 and 2 (two and three streams) take branch-free bit
// spreading; the others the generic interleave, whose scratch array keeps
// the common ranks allocation-free.
func makeKey(serial uint64, coord layout.Coord) chunkKey {
	rank := len(coord)
	if k, ok := shortKey(serial, coord); ok {
		return chunkKey{k: k, rank: uint8(rank)}
	}
	b := make([]byte, 0, 8*rank+2)
	b = binary.AppendUvarint(b, uint64(rank))
	for _, c := range coord {
		b = binary.AppendUvarint(b, c)
	}
	return chunkKey{k: Key{Hi: serial}, rank: uint8(rank&0x7f) | longKey, long: string(b)}
}

// shortKey returns the short form of the key of coord (chunkKey.k), or
// false when the chunk needs the long form. The hit path looks short keys
// up with it directly (chunkTable.lookupIn): a Key travels in two registers,
// where a chunkKey (40 bytes, with its string) went through the stack.
func shortKey(serial uint64, coord layout.Coord) (Key, bool) {
	rank := len(coord)
	switch rank {
	case 1:
		if serial|coord[0] < 1<<(keyBits/2) {
			k := interleave2(serial, coord[0])
			k.Hi |= 1 << 56
			return k, true
		}
		return Key{}, false
	case 2:
		if serial|coord[0]|coord[1] < 1<<(keyBits/3) {
			k := interleave3(serial, coord[0], coord[1])
			k.Hi |= 2 << 56
			return k, true
		}
		return Key{}, false
	}
	if rank >= 127 {
		return Key{}, false
	}
	var scratch [8]uint64
	var streams []uint64
	if rank+1 <= len(scratch) {
		streams = scratch[:rank+1]
	} else {
		streams = make([]uint64, rank+1)
	}
	streams[0] = serial
	copy(streams[1:], coord)
	k, ok := interleave(streams, keyBits/(rank+1))
	if !ok {
		return Key{}, false
	}
	k.Hi |= uint64(rank) << 56
	return k, true
}

// serialKeys holds what a dataset's serial contributes to the short keys
// of rank 1 and rank 2 chunks (the serial's stream, interleaved, and the
// rank byte), computed once when the dataset is made, so that a hit only
// spreads its coordinates' bits (shortKeyIn): the serial's share was half
// of the key's cost, on every hit. ok1/ok2 are false when the serial is
// too wide for that rank's short form.
type serialKeys struct {
	r1, r2   Key
	ok1, ok2 bool
}

func newSerialKeys(serial uint64) serialKeys {
	var s serialKeys
	if serial < 1<<(keyBits/2) {
		s.r1, s.ok1 = interleave2(serial, 0), true
		s.r1.Hi |= 1 << 56
	}
	if serial < 1<<(keyBits/3) {
		s.r2, s.ok2 = interleave3(serial, 0, 0), true
		s.r2.Hi |= 2 << 56
	}
	return s
}

// shortKeyIn is shortKey(serial, coord) for the dataset whose serialKeys
// is sk (the hit path).
func (sk *serialKeys) shortKeyIn(serial uint64, coord layout.Coord) (Key, bool) {
	switch len(coord) {
	case 1:
		c := coord[0]
		if !sk.ok1 || c >= 1<<(keyBits/2) {
			return Key{}, false
		}
		// interleave2(serial, c) is the serial's bits or c's: each
		// stream has its own bit positions.
		k := Key{Lo: sk.r1.Lo | spread2(c)<<1, Hi: sk.r1.Hi}
		if c>>32 != 0 {
			k.Hi |= spread2(c>>32) << 1
		}
		return k, true
	case 2:
		if !sk.ok2 || coord[0]|coord[1] >= 1<<(keyBits/3) {
			return Key{}, false
		}
		k := interleave3(0, coord[0], coord[1])
		return Key{Lo: sk.r2.Lo | k.Lo, Hi: sk.r2.Hi | k.Hi}, true
	}
	return shortKey(serial, coord)
}

// spread2 moves bit b of the low 32 bits of x to bit 2b.
func spread2(x uint64) uint64 {
	x &= 0xffffffff
	x = (x | x<<16) & 0x0000ffff0000ffff
	x = (x | x<<8) & 0x00ff00ff00ff00ff
	x = (x | x<<4) & 0x0f0f0f0f0f0f0f0f
	x = (x | x<<2) & 0x3333333333333333
	x = (x | x<<1) & 0x5555555555555555
	return x
}

// spread3 moves bit b of the low 21 bits of x to bit 3b.
func spread3(x uint64) uint64 {
	x &= 0x1fffff
	x = (x | x<<32) & 0x1f00000000ffff
	x = (x | x<<16) & 0x1f0000ff0000ff
	x = (x | x<<8) & 0x100f00f00f00f00f
	x = (x | x<<4) & 0x10c30c30c30c30c3
	x = (x | x<<2) & 0x1249249249249249
	return x
}

// interleave2 is interleave([a, b], 60) for a, b < 2^60 (always exact).
func interleave2(a, b uint64) Key {
	return Key{
		Lo: spread2(a) | spread2(b)<<1,
		Hi: spread2(a>>32) | spread2(b>>32)<<1,
	}
}

// interleave3 is interleave([a, b, c], 40) for a, b, c < 2^40. Bit j of
// stream i lands at 3j+i: the low word takes bits 0..21 of a and 0..20 of
// b and c; the high word the rest, where bit 21 of b is position 64.
func interleave3(a, b, c uint64) Key {
	return Key{
		Lo: spread3(a) | (a>>21&1)<<63 | spread3(b)<<1 | spread3(c)<<2,
		Hi: spread3(b>>21) | spread3(c>>21)<<1 | spread3(a>>22)<<2,
	}
}
