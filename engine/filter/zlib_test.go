package filter

import (
	"bytes"
	stdzlib "compress/zlib"
	"encoding/binary"
	"errors"
	"hash/adler32"
	"io"
	"testing"
)

// TestZlibIsRFC1950 proves the images are plain zlib streams: the standard
// library's reader (an independent implementation) decodes them to the
// shuffled chunk, and the trailer is the Adler-32 of those bytes. That is
// what lets exporters hand them to HDF5 and numcodecs unchanged.
func TestZlibIsRFC1950(t *testing.T) {
	src := detectorData(1 << 16)
	for _, lvl := range []int32{1, 6, 9} {
		p := mustPipeline(t, []Spec{shuf, {ID: Zlib, Level: lvl}}, 2)
		image, mask := roundTrip(t, p, src)
		if mask != 0 {
			t.Fatalf("level %d: detector data not compressed", lvl)
		}
		shuffled := make([]byte, len(src))
		shuffle(shuffled, src, 2)
		zr, err := stdzlib.NewReader(bytes.NewReader(image))
		if err != nil {
			t.Fatalf("level %d: compress/zlib rejects the header: %v", lvl, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, shuffled) {
			t.Fatalf("level %d: compress/zlib decodes %d bytes, err %v", lvl, len(got), err)
		}
		if sum := binary.BigEndian.Uint32(image[len(image)-4:]); sum != adler32.Checksum(shuffled) {
			t.Fatalf("level %d: trailer %08x is not the Adler-32", lvl, sum)
		}
	}
}

// TestZlibDecodesForeignStreams: streams from another zlib implementation
// at every level (the FLEVEL bits differ) decode, as chunks imported raw
// from HDF5 or Zarr will.
func TestZlibDecodesForeignStreams(t *testing.T) {
	src := textData(50_000)
	p := mustPipeline(t, []Spec{zlib6}, 1)
	for lvl := 1; lvl <= 9; lvl++ {
		var b bytes.Buffer
		zw, _ := stdzlib.NewWriterLevel(&b, lvl)
		zw.Write(src)
		zw.Close()
		got, err := p.Decode(b.Bytes(), 0, len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("level %d stream: %v", lvl, err)
		}
	}
}

// TestZlibChecksumChecked flips bits in the Adler-32 trailer only (the
// DEFLATE body still decodes): the checksum, not the body, must catch it.
// Without the reader's check (e.g. decoding the body as raw DEFLATE) these
// would decode.
func TestZlibChecksumChecked(t *testing.T) {
	src := textData(20_000)
	p := mustPipeline(t, []Spec{zlib1}, 1)
	image, _ := roundTrip(t, p, src)
	for i := len(image) - 4; i < len(image); i++ {
		bad := bytes.Clone(image)
		bad[i] ^= 0x10
		if _, err := p.Decode(bad, 0, len(src)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailer byte %d flipped: Decode = %v, want ErrCorrupt", i, err)
		}
	}
	// A flip in the body may still inflate (a literal byte in a stored
	// block): then the Adler-32 must catch it. Flip bytes across the body
	// and require none to decode to wrong bytes without an error.
	step := max(1, len(image)/300) // ~300 positions spread over the body
	for i := 2; i < len(image)-4; i += step {
		bad := bytes.Clone(image)
		bad[i] ^= 1
		if got, err := p.Decode(bad, 0, len(src)); err == nil && !bytes.Equal(got, src) {
			t.Fatalf("body byte %d flipped: decoded wrong bytes without an error", i)
		}
	}
}

func TestZlibCorruptFraming(t *testing.T) {
	src := textData(20_000)
	p := mustPipeline(t, []Spec{zlib1}, 1)
	image, _ := roundTrip(t, p, src)
	dict := bytes.Clone(image)
	dict[1] |= 0x20
	dict[1] -= byte((uint16(dict[0])<<8 | uint16(dict[1])) % 31) // keep FCHECK valid
	if (uint16(dict[0])<<8|uint16(dict[1]))%31 != 0 || dict[1]&0x20 == 0 {
		t.Fatal("test bug: dictionary header")
	}
	cases := map[string][]byte{
		"empty":          nil,
		"short":          image[:6],
		"method 7":       append([]byte{0x77, 0x9c}, image[2:]...),
		"window 64 KiB":  append([]byte{0x88, 0x98}, image[2:]...),
		"fcheck":         append([]byte{0x78, 0x9d}, image[2:]...),
		"preset dict":    dict,
		"no trailer":     image[:len(image)-4],
		"trailing bytes": append(bytes.Clone(image), 0, 0),
		"raw deflate":    image[2 : len(image)-4],
	}
	for name, bad := range cases {
		if _, err := p.Decode(bad, 0, len(src)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
	for _, name := range []string{"empty", "short", "method 7", "window 64 KiB", "fcheck", "preset dict"} {
		if err := CheckZlibHeader(cases[name]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("CheckZlibHeader(%s) = %v, want ErrCorrupt", name, err)
		}
	}
	if err := CheckZlibHeader(image); err != nil {
		t.Errorf("CheckZlibHeader(valid) = %v", err)
	}
	// Decoded size one short or one long of the truth.
	for _, n := range []int{len(src) - 1, len(src) + 1} {
		if _, err := p.Decode(image, 0, n); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decoded size %d of %d: Decode = %v, want ErrCorrupt", n, len(src), err)
		}
	}
}

// TestZlibOptional: an incompressible chunk skips the filter (mask bit set,
// stored raw), like Deflate.
func TestZlibOptional(t *testing.T) {
	src := randomData(4096, 5)
	p := mustPipeline(t, []Spec{shuf, zlib9}, 4)
	image, mask := roundTrip(t, p, src)
	if mask != 1<<1 || len(image) != len(src) {
		t.Fatalf("random data: mask %#x, %d bytes, want mask 0x2 and %d bytes", mask, len(image), len(src))
	}
}

func TestBombZlib(t *testing.T) {
	p := mustPipeline(t, []Spec{zlib1}, 1)
	image, mask, _ := p.Encode(make([]byte, bombSize))
	if mask != 0 || len(image) > bombSize/200 {
		t.Fatalf("bomb: %d bytes, mask %#x", len(image), mask)
	}
	checkBomb(t, p, image, mask, bombDecoded)
	p2 := mustPipeline(t, []Spec{shuf, zlib6}, 2)
	img2, m2, _ := p2.Encode(make([]byte, bombSize))
	checkBomb(t, p2, img2, m2, bombDecoded)
}
