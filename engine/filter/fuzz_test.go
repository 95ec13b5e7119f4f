package filter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func FuzzDecodeSpecs(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0})
	f.Add(EncodeSpecs([]Spec{shuf, zstd1, crc}))
	f.Add(EncodeSpecs([]Spec{defl9, lz4s}))
	f.Add(EncodeSpecs([]Spec{shuf, zlib9}))
	f.Add(EncodeSpecs(make([]Spec, MaxFilters)))
	f.Add([]byte{1, 255})
	f.Add([]byte{1, 1, 3, 0, 7, 0, 0, 0})
	f.Add([]byte{1, 2, 1, 0, 0, 0, 0, 0, 3, 0, 2, 0, 0, 0}) // shuffle + the zstd preset 2
	f.Fuzz(func(t *testing.T, b []byte) {
		specs, err := DecodeSpecs(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknown) {
				t.Fatalf("DecodeSpecs error %v wraps neither ErrCorrupt nor ErrUnknown", err)
			}
			return
		}
		if len(specs) > MaxFilters {
			t.Fatalf("%d specs accepted", len(specs))
		}
		// Canonical: what decodes re-encodes to the same bytes, and is a
		// valid pipeline; a zstd preset record (ID 3, read only) re-encodes
		// as the zstd record with the level it stands for.
		want := bytes.Clone(b)
		for i := range specs {
			r := want[specsHeaderLen+specRecordLen*i:]
			if ID(binary.LittleEndian.Uint16(r)) == zstdPreset {
				binary.LittleEndian.PutUint16(r, uint16(Zstd))
				binary.LittleEndian.PutUint32(r[2:], uint32(specs[i].Level))
			}
		}
		if again := EncodeSpecs(specs); !bytes.Equal(again, want) {
			t.Fatalf("EncodeSpecs(DecodeSpecs(%x)) = %x, want %x", b, again, want)
		}
		if _, err := NewPipeline(specs, 4); err != nil {
			t.Fatalf("decoded specs %v rejected by NewPipeline: %v", specs, err)
		}
	})
}

// fuzzPipelines are the fixed pipelines FuzzPipelineDecode attacks.
var fuzzPipelines = [][]Spec{
	{shuf, zstd1},
	{defl1},
	{lz4s},
	{zstd1},
	{shuf, lz4s, crc},
	{zstd1, defl1, lz4s},
	{crc, zstd1, shuf},
	{shuf, zlib6},
}

// fuzzMaxSize bounds the decoded size the fuzzer may ask for, so a run
// measures the decoder, not the allocator.
const fuzzMaxSize = 1 << 16

// fuzzSlack is what a decode may allocate beyond 2x its output when the
// scratch pools are cold: one buffer per stage (each up to 25% over its
// bound, zstd's with 128 KiB of headroom) plus decoder state. A decoder
// trusting a claimed or produced size would blow through it.
const fuzzSlack = 1 << 20

func FuzzPipelineDecode(f *testing.F) {
	// Valid images of each pipeline, with their masks.
	for i, specs := range fuzzPipelines {
		p, err := NewPipeline(specs, 2)
		if err != nil {
			f.Fatal(err)
		}
		for _, src := range [][]byte{detectorData(3000), textData(1000), randomData(300, 1), nil} {
			image, mask, err := p.Encode(src)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), image, mask, uint32(len(src)))
		}
	}
	// Bombs: 1 MiB of zeros squeezed by each compressor, decoded small.
	for _, i := range []int{1, 2, 3, 7} {
		p, _ := NewPipeline(fuzzPipelines[i], 2)
		image, mask, _ := p.Encode(make([]byte, 1<<20))
		f.Add(uint8(i), image, mask, uint32(1000))
	}
	lie := []byte{0, 0, 0, 0x40, 0x10, 0, 0}
	binary.LittleEndian.PutUint32(lie, 1<<30)
	f.Add(uint8(2), lie, uint32(0), uint32(100))
	f.Add(uint8(0), []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0xff, 0}, uint32(0), uint32(255))
	f.Add(uint8(4), []byte{}, uint32(0xFFFFFFFF), uint32(0))

	f.Fuzz(func(t *testing.T, which uint8, image []byte, mask uint32, size uint32) {
		p, err := NewPipeline(fuzzPipelines[int(which)%len(fuzzPipelines)], 2)
		if err != nil {
			t.Fatal(err)
		}
		n := int(size % (fuzzMaxSize + 1))
		var out []byte
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, err = p.Decode(image, mask, n)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(2*n+fuzzSlack) {
			t.Fatalf("%v: Decode allocated %d bytes for a %d-byte chunk", p, alloc, n)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: Decode error %v does not wrap ErrCorrupt", p, err)
			}
			return
		}
		if len(out) != n || cap(out) != n {
			t.Fatalf("%v: Decode returned len %d cap %d, want %d", p, len(out), cap(out), n)
		}
		// What decodes must survive a fresh round trip.
		img2, mask2, err := p.Encode(out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := p.Decode(img2, mask2, n)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("%v: re-encoded output does not round trip: %v", p, err)
		}
	})
}

// FuzzZstdDecode holds each zstd decoder the build has (libzstd in a cgo
// build) to the pure-Go one on arbitrary frames, output bounds and checksum
// policies: every frame claimedLen accepts and the pure-Go decoder decodes,
// the other decodes to the same bytes; every failure wraps ErrCorrupt;
// nothing is written past the bound. libzstd, the reference decoder, is the
// more lenient of the two: it decodes frames whose Huffman-coded literals
// klauspost/compress rejects ("short output block"; the zstd command line
// tool decodes them too, to the same bytes as libzstd). That is not a way
// for corruption to pass: every chunk image scc reads has the chunk frame's
// CRC32C verified before it is decoded. What libzstd alone decodes must
// still be exactly the frame's content size.
func FuzzZstdDecode(f *testing.F) {
	withCRC, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithSingleSegment(true))
	if err != nil {
		f.Fatal(err)
	}
	for _, src := range [][]byte{detectorData(3000), textData(1000), randomData(300, 1), textData(200 << 10), nil, {7}} {
		for _, im := range zstdImpls {
			for _, level := range []int{-5, 1, 3, 19} {
				if frame, ok := im.encode(level, make([]byte, 0, len(src)+1024), src); ok {
					f.Add(frame, uint32(len(src)), level&1 == 0)
				}
			}
		}
		sum := withCRC.EncodeAll(src, nil)
		f.Add(sum, uint32(len(src)), false)
		sum[len(sum)-1] ^= 1
		f.Add(sum, uint32(len(src)), false)
		f.Add(sum, uint32(len(src)), true)
	}
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0xff, 0}, uint32(255), false)
	f.Fuzz(func(t *testing.T, src []byte, bound uint32, trusted bool) {
		if _, _, err := zstdWalk(src); err != nil {
			return // the codec walks the frame before decoding (claimedLen)
		}
		n := int(bound % (fuzzMaxSize + 1))
		want, errGo := zstdDecodeGo(make([]byte, 0, n), src, trusted)
		if errGo != nil && !errors.Is(errGo, ErrCorrupt) {
			t.Fatalf("pure-Go decoder: %v does not wrap ErrCorrupt", errGo)
		}
		for _, im := range zstdImpls[1:] {
			buf := bytes.Repeat([]byte{0xEE}, n+256)
			got, err := im.decode(buf[:0:n], src, trusted)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: %v does not wrap ErrCorrupt", im.name, err)
			}
			if errGo == nil && err != nil {
				t.Fatalf("%d-byte frame %x, bound %d, trusted %v: %s %v, pure Go decodes it", len(src), src, n, trusted, im.name, err)
			}
			if claim, _ := (zstdCodec{}).claimedLen(src); err == nil && len(got) != claim {
				t.Fatalf("%s decoded %d bytes of a frame claiming %d", im.name, len(got), claim)
			}
			if errGo == nil && !bytes.Equal(got, want) {
				t.Fatalf("%s decoded %d bytes, pure Go %d, differing", im.name, len(got), len(want))
			}
			if bytes.Count(buf[n:], []byte{0xEE}) != len(buf)-n {
				t.Fatalf("%s wrote past the bound %d", im.name, n)
			}
		}
	})
}
