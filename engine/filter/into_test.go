package filter

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// EncodeTo and DecodeTo write into the caller's (recycled) buffer when it
// is large enough, give the same bytes as Encode and Decode, and fall back
// to a fresh slice when it is not.
func TestEncodeDecodeTo(t *testing.T) {
	noise := make([]byte, 64<<10)
	rand.Read(noise)
	pipes := [][]Spec{nil, {shuf}, {shuf, zstd1}, {zstd1}, {defl1}, {lz4s}, {crc}, {shuf, defl1, crc}, {zstd1, crc}}
	for _, specs := range pipes {
		p, err := NewPipeline(specs, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range [][]byte{detectorData(64 << 10), noise, detectorData(100)} {
			want, wmask, err := p.Encode(src)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, 3, p.MaxEncoded(len(src)))
			img, mask, err := p.EncodeTo(dst, src)
			if err != nil || mask != wmask || !bytes.Equal(img, want) {
				t.Fatalf("%s: EncodeTo: mask %#x/%#x, equal %v, err %v", p, mask, wmask, bytes.Equal(img, want), err)
			}
			if len(img) > 0 && &img[0] != &dst[:1][0] {
				t.Fatalf("%s: EncodeTo allocated although dst had room", p)
			}
			small := make([]byte, 0, p.MaxEncoded(len(src))-1)
			if img, _, _ := p.EncodeTo(small, src); !bytes.Equal(img, want) || (len(img) > 0 && &img[0] == &small[:1][0]) {
				t.Fatalf("%s: EncodeTo with a short dst", p)
			}

			out := make([]byte, 0, len(src)+7)
			got, err := p.DecodeTo(out, img, mask, len(src))
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("%s: DecodeTo: equal %v, err %v", p, bytes.Equal(got, src), err)
			}
			if len(got) > 0 && &got[0] != &out[:1][0] {
				t.Fatalf("%s: DecodeTo allocated although dst had room", p)
			}
			short := make([]byte, 0, len(src)-1)
			if got, err := p.DecodeTo(short, img, mask, len(src)); err != nil || !bytes.Equal(got, src) {
				t.Fatalf("%s: DecodeTo with a short dst: %v", p, err)
			}
		}
	}
}

// The final stage of a decode writes straight into dst, for every codec:
// a decode takes a scratch buffer only for each intermediate stage (whose
// output feeds the next), never for the last one, which would mean copying
// the chunk once more after its decoder wrote it. Zstd frames of whole
// 128 KiB blocks bound their own output, so zstd needs no overrun room;
// a frame ending in a short block into a buffer without that room still
// decodes correctly, through a copy.
func TestDecodeToNoCopyAfterDecode(t *testing.T) {
	const n = 512 << 10 // four whole zstd blocks
	src := detectorData(n)
	for _, tc := range []struct {
		specs        []Spec
		intermediate int64
	}{
		{[]Spec{zstd1}, 0},
		{[]Spec{{ID: Zstd, Level: 3}}, 0},
		{[]Spec{defl1}, 0},
		{[]Spec{zlib1}, 0},
		{[]Spec{lz4s}, 0},
		{[]Spec{shuf}, 0},
		{[]Spec{shuf, zstd1}, 1},
		{[]Spec{shuf, defl1}, 1},
		{[]Spec{shuf, lz4s}, 1},
	} {
		p := mustPipeline(t, tc.specs, 2)
		img, mask, err := p.Encode(src)
		if err != nil || mask != 0 {
			t.Fatalf("%s: mask %#x, %v", p, mask, err)
		}
		for _, verified := range []bool{false, true} {
			for _, dst := range [][]byte{make([]byte, n), nil} {
				before := scratchGets.Load()
				var got []byte
				if verified {
					got, err = p.DecodeVerifiedTo(dst, img, mask, n)
				} else {
					got, err = p.DecodeTo(dst, img, mask, n)
				}
				took := scratchGets.Load() - before
				if err != nil || !bytes.Equal(got, src) {
					t.Fatalf("%s: equal %v, err %v", p, bytes.Equal(got, src), err)
				}
				if dst != nil && &got[0] != &dst[0] {
					t.Fatalf("%s: result not in dst", p)
				}
				if dst == nil && cap(got) != n {
					t.Fatalf("%s: result of cap %d, want exactly %d", p, cap(got), n)
				}
				if took != tc.intermediate {
					t.Errorf("%s (dst %v, verified %v): %d scratch buffers, want %d (one per intermediate stage)", p, dst != nil, verified, took, tc.intermediate)
				}
			}
		}
	}

	// A short last block: the frame's bound exceeds an exactly sized dst.
	odd := detectorData(n + 1000)
	p := mustPipeline(t, []Spec{zstd1}, 2)
	img, _, err := p.Encode(odd)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(odd))
	if got, err := p.DecodeTo(dst, img, 0, len(odd)); err != nil || !bytes.Equal(got, odd) || &got[0] != &dst[0] {
		t.Fatalf("short last block: %v", err)
	}
}
