package blosc

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode: any input decodes or fails with one of the package's typed
// errors, never panics, and a decoded frame is as long as its header says
// and decodes the same into a used buffer. Seeds: frames of every
// compressor, shuffle and split layout built here, and BloscLZ frames
// numcodecs wrote (testdata/fuzz/FuzzDecode).
func FuzzDecode(f *testing.F) {
	data := sample(4000)
	f.Add(memcpyed(data[:100], 4))
	f.Add(frame(CodecBloscLZ<<5|FlagDontSplit, 1, 16, 16, [][]byte{{0, 'a', 7 << 5, 0, 0, 4, 1, 2, 3, 4, 5}}))
	for _, codec := range []int{CodecLZ4, CodecSnappy, CodecZlib, CodecZstd} {
		for _, shuf := range []byte{0, FlagShuffle, FlagBitShuffle} {
			ts := 4
			blk := data[:1024]
			switch shuf {
			case FlagShuffle:
				blk = shuffled(blk, ts)
			case FlagBitShuffle:
				blk = bitShuffled(blk, ts)
			}
			var split [][]byte
			for s := range ts {
				split = append(split, compress(f, codec, blk[s*256:(s+1)*256]))
			}
			f.Add(frame(byte(codec)<<5|shuf, ts, 1024+10, 1024, split, [][]byte{compress(f, codec, data[1024:1034])}))
			f.Add(frame(byte(codec)<<5|shuf|FlagDontSplit, ts, 1024, 1024, [][]byte{compress(f, codec, blk)}))
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		const limit = 1 << 20
		out, err := Decode(nil, src, limit)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps none of the package's errors", err)
			}
			return
		}
		n, err := DecodedSize(src)
		if err != nil || n != len(out) || n > limit {
			t.Fatalf("decoded %d bytes; DecodedSize %d, %v", len(out), n, err)
		}
		used := bytes.Repeat([]byte{0x5A}, n+7)
		again, err := Decode(used, src, limit)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("decoding into a used buffer: %v, equal %v", err, bytes.Equal(again, out))
		}
	})
}
