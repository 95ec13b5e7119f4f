package cache

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// Key is a 128-bit chunk key (seed 000 §2.1 H5SC_chunk_key_t).
type Key struct {
	Hi, Lo uint64
}

// chunkKey is what the chunk table is keyed by.
//
// Identity: seed 000 §2.1 interleaves the dataset's object-header address
// with the chunk coordinates. Here the dataset identity is the dataset
// header's serial, a small integer unique across the whole Cache (it is
// assigned per (file, dataset id) pair and kept across a warm reopen), so
// one serial also tells files apart: no file field is needed and the keys of
// one Cache shared by several files never collide.
//
// Exactness: the serial and the rank coordinates are interleaved LSB first
// into 128 bits, each stream getting w = 128/(rank+1) bits. That is a
// bijection while every stream fits in w bits. Keys of datasets with
// different ranks use different layouts of the same 128 bits, so rank is
// part of the key. When a value does not fit (high rank, huge coordinates)
// the key falls back to an exact, longer form: Key{serial, 0}, the long flag
// set in rank, and the coordinates spelled out in long. Two distinct chunks
// therefore never share a chunkKey.
type chunkKey struct {
	k    Key
	rank uint8 // rank, | longKey when the fallback form is used
	long string
}

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
	h := mix(k.k.Lo^seed, k.k.Hi+uint64(k.rank)<<56)
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
// serial. The scratch array keeps the common ranks allocation-free.
func makeKey(serial uint64, coord Coord) chunkKey {
	rank := len(coord)
	var scratch [8]uint64
	var streams []uint64
	if rank+1 <= len(scratch) {
		streams = scratch[:rank+1]
	} else {
		streams = make([]uint64, rank+1)
	}
	streams[0] = serial
	copy(streams[1:], coord)
	if rank < 127 {
		if k, ok := interleave(streams, 128/(rank+1)); ok {
			return chunkKey{k: k, rank: uint8(rank)}
		}
	}
	b := make([]byte, 0, 8*rank+2)
	b = binary.AppendUvarint(b, uint64(rank))
	for _, c := range coord {
		b = binary.AppendUvarint(b, c)
	}
	return chunkKey{k: Key{Hi: serial}, rank: uint8(rank&0x7f) | longKey, long: string(b)}
}
