package format

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"
)

// TestChunkSumResidue: under the unkeyed rule every image that ends with
// its own CRC32C (a pipeline whose last filter is CRC32C) has the same
// trailer; under the keyed rule equal-size images of different contents,
// and equal images at different coordinates or keys, all differ.
func TestChunkSumResidue(t *testing.T) {
	crcTerminated := func(seed byte) []byte {
		b := bytes.Repeat([]byte{seed, seed + 1, 3}, 100)
		return le.AppendUint32(b, Checksum(b))
	}
	a, b := crcTerminated(1), crcTerminated(7)
	var old ChunkSum
	if old.Sum([]uint64{0}, a) != old.Sum([]uint64{1}, b) || old.Sum(nil, a) != 0x48674BC7 {
		t.Fatalf("unkeyed rule: %08x %08x, expected the CRC32C residue for both", old.Sum(nil, a), old.Sum(nil, b))
	}
	k := KeyedChunkSum(0x1234)
	seen := map[uint32]string{}
	note := func(what string, v uint32) {
		if prev, ok := seen[v]; ok {
			t.Fatalf("keyed trailer %08x of %s equals that of %s", v, what, prev)
		}
		seen[v] = what
	}
	note("a at 0,0", k.Sum([]uint64{0, 0}, a))
	note("b at 0,0", k.Sum([]uint64{0, 0}, b))
	note("a at 0,1", k.Sum([]uint64{0, 1}, a))
	note("a at 1,0", k.Sum([]uint64{1, 0}, a))
	note("a at 0,0 under another key", KeyedChunkSum(0x1235).Sum([]uint64{0, 0}, a))
	zero := make([]byte, 64)
	note("zeros at 0,0", k.Sum([]uint64{0, 0}, zero))
	note("zeros at 5,3", k.Sum([]uint64{5, 3}, zero))
}

// TestChunkSumPieces: the keyed rule's Plain checksum is CRC-32 (IEEE) and
// composes by pieces (Update, Combine) as the split and row readers use it;
// a frame verifies only at its own coordinates.
func TestChunkSumPieces(t *testing.T) {
	data := bytes.Repeat([]byte("scc chunk bytes "), 1000)
	for _, c := range []ChunkSum{{}, KeyedChunkSum(99)} {
		whole := c.Plain(data)
		if c.Key() != 0 && whole != crc32.ChecksumIEEE(data) {
			t.Fatal("keyed Plain is not CRC-32 (IEEE)")
		}
		for _, cut := range []int{0, 1, 4095, len(data) - 1, len(data)} {
			if got := c.Combine(c.Plain(data[:cut]), c.Plain(data[cut:]), int64(len(data)-cut)); got != whole {
				t.Fatalf("key %d cut %d: Combine %08x, want %08x", c.Key(), cut, got, whole)
			}
			if got := c.Update(c.Update(0, data[:cut]), data[cut:]); got != whole {
				t.Fatalf("key %d cut %d: Update %08x, want %08x", c.Key(), cut, got, whole)
			}
		}
		frame := c.AppendFrame([]uint64{2, 3}, bytes.Clone(data))
		if img, err := c.VerifyFrame([]uint64{2, 3}, frame); err != nil || !bytes.Equal(img, data) {
			t.Fatalf("key %d: VerifyFrame: %v", c.Key(), err)
		}
		_, err := c.VerifyFrame([]uint64{3, 2}, frame)
		if c.Key() != 0 && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("keyed frame verified at other coordinates: %v", err)
		}
	}
}

// TestHeaderChunkKey: the chunk key part exists from version 5, holds a
// non-zero u64, and round-trips; an older header holding it is damaged.
func TestHeaderChunkKey(t *testing.T) {
	h := DatasetHeader{Name: "d", ID: 9, Type: TypeInt32, Shape: []uint64{4}, MaxShape: []uint64{8},
		Chunk: []uint64{2}, Layout: LayoutDense, IndexKind: 2, ChunkKey: 0xfeedface}
	b := EncodeDatasetHeader(h)
	got, err := DecodeDatasetHeader(b)
	if err != nil || got.ChunkKey != h.ChunkKey {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	reseal := func(b []byte) []byte {
		n := len(b) - crcSize
		return sealFrame(bytes.Clone(b[:n]))
	}
	v4 := bytes.Clone(b)
	v4[4] = 4
	if _, err := DecodeDatasetHeader(reseal(v4)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v4 header with a chunk key: %v, want ErrCorrupt", err)
	}
	zero := bytes.Clone(b)
	copy(zero[len(zero)-crcSize-chunkKeyBytes:], make([]byte, chunkKeyBytes))
	if _, err := DecodeDatasetHeader(reseal(zero)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("zero chunk key: %v, want ErrCorrupt", err)
	}
}

// TestChunkSumDocumented pins the keyed rule as FORMAT.md §9 spells it.
func TestChunkSumDocumented(t *testing.T) {
	if crc32.ChecksumIEEE([]byte("123456789")) != 0xCBF43926 {
		t.Fatal("CRC-32 (IEEE) check value differs from FORMAT.md")
	}
	mix := func(z uint64) uint64 {
		z ^= z >> 30
		z *= 0xBF58476D1CE4E5B9
		z ^= z >> 27
		z *= 0x94D049BB133111EB
		return z ^ z>>31
	}
	key, coord, img := uint64(0x0123456789abcdef), []uint64{7, 0, 1 << 40}, []byte("123456789")
	h := mix(key)
	for _, c := range coord {
		h = mix(h ^ c)
	}
	want := crc32.ChecksumIEEE(img) ^ uint32(h) ^ uint32(h>>32)
	if got := KeyedChunkSum(key).Sum(coord, img); got != want {
		t.Fatalf("keyed chunk checksum %08x, FORMAT.md's rule gives %08x", got, want)
	}
}
