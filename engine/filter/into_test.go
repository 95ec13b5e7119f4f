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
