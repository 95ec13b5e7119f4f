package blosc

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// frame assembles a Blosc frame from its parts: one list of streams per
// block, each stream stored with its size in front. The header fields are
// taken as given, so a test can make them inconsistent.
func frame(flags byte, ts, nbytes, blocksize int, blocks ...[][]byte) []byte {
	f := []byte{formatVersion, 1, flags, byte(ts)}
	f = binary.LittleEndian.AppendUint32(f, uint32(nbytes))
	f = binary.LittleEndian.AppendUint32(f, uint32(blocksize))
	f = binary.LittleEndian.AppendUint32(f, 0) // cbytes, below
	var body []byte
	base := HeaderSize + 4*len(blocks)
	for _, streams := range blocks {
		f = binary.LittleEndian.AppendUint32(f, uint32(base+len(body)))
		for _, s := range streams {
			body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
			body = append(body, s...)
		}
	}
	f = append(f, body...)
	binary.LittleEndian.PutUint32(f[12:], uint32(len(f)))
	return f
}

func memcpyed(data []byte, ts int) []byte {
	f := []byte{formatVersion, 1, FlagMemcpyed, byte(ts)}
	f = binary.LittleEndian.AppendUint32(f, uint32(len(data)))
	f = binary.LittleEndian.AppendUint32(f, uint32(len(data)))
	f = binary.LittleEndian.AppendUint32(f, uint32(HeaderSize+len(data)))
	return append(f, data...)
}

// compress encodes one stream with a codec the Go libraries can write.
func compress(t testing.TB, codec int, data []byte) []byte {
	switch codec {
	case CodecLZ4:
		out := make([]byte, lz4.CompressBlockBound(len(data)))
		n, err := lz4.CompressBlock(data, out, nil)
		must(t, err)
		if n == 0 {
			t.Fatal("lz4: incompressible test data")
		}
		return out[:n]
	case CodecSnappy:
		return snappy.Encode(nil, data)
	case CodecZlib:
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		_, err := w.Write(data)
		must(t, err)
		must(t, w.Close())
		return b.Bytes()
	case CodecZstd:
		enc, err := zstd.NewWriter(nil)
		must(t, err)
		return enc.EncodeAll(data, nil)
	}
	t.Fatalf("no encoder for codec %d", codec)
	return nil
}

// shuffled is Blosc's byte shuffle of one block (the forward direction).
func shuffled(b []byte, ts int) []byte {
	out := bytes.Clone(b)
	n := len(b) / ts
	for i := range n {
		for j := range ts {
			out[j*n+i] = b[i*ts+j]
		}
	}
	return out
}

// bitShuffled is Blosc's bit shuffle of one block, written from the
// format's description (row 8*j+k holds bit k of byte j of every element).
func bitShuffled(b []byte, ts int) []byte {
	out := bytes.Clone(b)
	n := len(b) / ts
	if n%8 != 0 {
		return out
	}
	clear(out[:n*ts])
	for i := range n {
		for j := range ts {
			for k := range 8 {
				if b[i*ts+j]>>k&1 != 0 {
					out[(8*j+k)*(n/8)+i/8] |= 1 << (i % 8)
				}
			}
		}
	}
	return out
}

func sample(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i/16) ^ byte(i%3)
	}
	return b
}

// TestDecodeGoEncoded decodes frames the Go compressors write, through
// each codec, shuffle and split layout, independently of numcodecs.
func TestDecodeGoEncoded(t *testing.T) {
	for _, codec := range []int{CodecLZ4, CodecSnappy, CodecZlib, CodecZstd} {
		for _, shuf := range []byte{0, FlagShuffle, FlagBitShuffle} {
			for _, ts := range []int{1, 2, 4, 8, 3} {
				name := fmt.Sprintf("%s/flags%x/ts%d", codecNames[codec], shuf, ts)
				data := sample(3*1024*ts + 5) // two whole blocks and a short one
				bs := 1024 * ts
				var blocks [][][]byte
				for lo := 0; lo < len(data); lo += bs {
					blk := data[lo:min(lo+bs, len(data))]
					switch shuf {
					case FlagShuffle:
						blk = shuffled(blk, ts)
					case FlagBitShuffle:
						blk = bitShuffled(blk, ts)
					}
					if len(blk) == bs && ts > 1 && ts <= maxSplits { // split: one stream per byte of an element
						var streams [][]byte
						for s := range ts {
							streams = append(streams, compress(t, codec, blk[s*1024:(s+1)*1024]))
						}
						blocks = append(blocks, streams)
					} else {
						blocks = append(blocks, [][]byte{compress(t, codec, blk)})
					}
				}
				f := frame(byte(codec)<<5|shuf, ts, len(data), bs, blocks...)
				got, err := Decode(nil, f, len(data))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s: %v, equal %v (first difference at %d)", name, err, bytes.Equal(got, data), firstDiff(got, data))
				}
			}
		}
	}
}

func TestBloscLZ(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"literals", []byte{0x20 | 2, 'a', 'b', 'c'}, "abc"},
		// match code 1 (length 3), distance 1: a run.
		{"run", []byte{1, 'a', 'b', 1 << 5, 0, 0, 'z'}, "abbbbz"},
		// match code 2 (length 4), distance 2: overlapping pattern.
		{"overlap", []byte{1, 'a', 'b', 2 << 5, 1, 0, 'z'}, "abababz"},
		// match code 7: length 6 + 1 + 3 = 10 from distance 3.
		{"long", []byte{2, 'x', 'y', 'z', 7 << 5, 1, 2, 0, '!'}, "xyzxyzxyzxyzx!"},
		// length bytes 255 then 0: 6 + 255 + 0 + 3 = 264 from distance 1.
		{"longer", []byte{0, 'q', 7 << 5, 255, 0, 0, 0, '.'}, "q" + string(bytes.Repeat([]byte{'q'}, 264)) + "."},
	} {
		out := make([]byte, len(c.want))
		if err := blosclz(out, c.in); err != nil || string(out) != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, out, err, c.want)
		}
	}
	// A 16-bit distance: 8192 + 0x0102 = 8450 bytes back.
	hist := sample(8450)
	var in []byte
	for lo := 0; lo < len(hist); lo += 32 {
		chunk := hist[lo:min(lo+32, len(hist))]
		in = append(in, byte(len(chunk)-1))
		in = append(in, chunk...)
	}
	in = append(in, 2<<5|31, 255, 0x01, 0x02, 0, '#')
	want := append(append(bytes.Clone(hist), hist[:4]...), '#')
	out := make([]byte, len(want))
	if err := blosclz(out, in); err != nil || !bytes.Equal(out, want) {
		t.Errorf("far match: %v, equal %v", err, bytes.Equal(out, want))
	}
}

// TestDecodeHostile feeds frames damaged in each way the decoder checks
// and wants the matching typed error, never a panic.
func TestDecodeHostile(t *testing.T) {
	raw := sample(4096)
	lzs := compress(t, CodecLZ4, raw)
	good := frame(CodecLZ4<<5|FlagDontSplit, 4, 4096, 4096, [][]byte{lzs})
	if got, err := Decode(nil, good, 4096); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("the undamaged frame: %v", err)
	}
	edit := func(f []byte, fn func(f []byte)) []byte { f = bytes.Clone(f); fn(f); return f }
	put := func(at int, v uint32) func([]byte) {
		return func(f []byte) { binary.LittleEndian.PutUint32(f[at:], v) }
	}
	blz := func(stream ...byte) []byte {
		return frame(CodecBloscLZ<<5|FlagDontSplit, 1, 8, 8, [][]byte{stream})
	}
	blz16 := func(stream ...byte) []byte {
		return frame(CodecBloscLZ<<5|FlagDontSplit, 1, 16, 16, [][]byte{stream})
	}
	// Two blocks whose offsets both point at one stream: c-blosc decodes it
	// twice. Letting blocks share streams makes the work quadratic in the
	// frame's size (a zlib or zstd stream can be long and decode to little).
	shared := frame(CodecLZ4<<5|FlagDontSplit, 4, 8192, 4096, [][]byte{lzs})
	shared = slices.Insert(shared, HeaderSize+4, shared[HeaderSize:HeaderSize+4]...)
	binary.LittleEndian.PutUint32(shared[HeaderSize:], HeaderSize+8)
	binary.LittleEndian.PutUint32(shared[HeaderSize+4:], HeaderSize+8)
	binary.LittleEndian.PutUint32(shared[12:], uint32(len(shared)))
	for _, c := range []struct {
		name  string
		f     []byte
		limit int
		want  error
	}{
		{"empty", nil, 1 << 20, ErrCorrupt},
		{"blocks share a stream", shared, 1 << 20, ErrCorrupt},
		{"short header", good[:15], 1 << 20, ErrCorrupt},
		{"version 1", edit(good, func(f []byte) { f[0] = 1 }), 1 << 20, ErrUnsupported},
		{"version 3 (Blosc2)", edit(good, func(f []byte) { f[0] = 3 }), 1 << 20, ErrUnsupported},
		{"compressor format version 2", edit(good, func(f []byte) { f[1] = 2 }), 1 << 20, ErrUnsupported},
		{"reserved flag", edit(good, func(f []byte) { f[2] |= 0x08 }), 1 << 20, ErrUnsupported},
		{"compressor 5", edit(good, func(f []byte) { f[2] = 5<<5 | FlagDontSplit }), 1 << 20, ErrUnsupported},
		{"compressor 7", edit(good, func(f []byte) { f[2] = 7<<5 | FlagDontSplit }), 1 << 20, ErrUnsupported},
		{"over the limit", good, 4095, ErrTooLarge},
		{"nbytes 2 GiB", edit(good, put(4, 1<<31)), 1 << 40, ErrCorrupt},
		{"nbytes over the limit", edit(good, func(f []byte) { put(4, 1<<29)(f); put(8, 1<<29)(f) }), 1 << 20, ErrTooLarge},
		{"typesize 0", edit(good, func(f []byte) { f[3] = 0 }), 1 << 20, ErrCorrupt},
		{"blocksize 0", edit(good, put(8, 0)), 1 << 20, ErrCorrupt},
		{"blocksize over nbytes", edit(good, put(8, 4097)), 1 << 20, ErrCorrupt},
		{"blocksize negative", edit(good, put(8, 1<<31)), 1 << 20, ErrCorrupt},
		{"cbytes past the end", edit(good, put(12, uint32(len(good)+1))), 1 << 20, ErrCorrupt},
		{"cbytes inside the header", edit(good, put(12, 15)), 1 << 20, ErrCorrupt},
		{"cbytes cuts the stream", edit(good, put(12, uint32(len(good)-1))), 1 << 20, ErrCorrupt},
		{"truncated", good[:len(good)-1], 1 << 20, ErrCorrupt},
		{"offsets table past cbytes", edit(good, put(8, 16)), 1 << 20, ErrCorrupt},
		{"block offset negative", edit(good, put(16, 1<<31)), 1 << 20, ErrCorrupt},
		{"block offset past the end", edit(good, put(16, uint32(len(good)-3))), 1 << 20, ErrCorrupt},
		{"stream size negative", edit(good, put(20, 1<<31)), 1 << 20, ErrCorrupt},
		{"stream size past the end", edit(good, put(20, uint32(len(lzs)+1))), 1 << 20, ErrCorrupt},
		{"stream longer than its block", edit(good, func(f []byte) { put(4, 4000)(f); put(8, 4000)(f) }), 1 << 20, ErrCorrupt},
		{"stream shorter than its block", edit(good, func(f []byte) { put(4, 5000)(f); put(8, 5000)(f) }), 1 << 20, ErrCorrupt},
		{"lz4 stream cut", edit(good, put(20, uint32(len(lzs)-1))), 1 << 20, ErrCorrupt},
		{"memcpyed cbytes mismatch", edit(memcpyed(raw, 1), put(12, uint32(HeaderSize+len(raw)-1))), 1 << 20, ErrCorrupt},
		{"memcpyed truncated", memcpyed(raw, 1)[:100], 1 << 20, ErrCorrupt},
		{"split block not whole elements", frame(CodecLZ4<<5, 3, 3*200+1, 3*200+1,
			[][]byte{compress(t, CodecLZ4, raw[:200]), compress(t, CodecLZ4, raw[:200]), compress(t, CodecLZ4, raw[:201])}), 1 << 20, ErrCorrupt},
		{"zlib stream longer than its block", frame(CodecZlib<<5|FlagDontSplit, 1, 100, 100, [][]byte{compress(t, CodecZlib, raw[:101])}), 1 << 20, ErrCorrupt},
		{"zlib checksum", edit(frame(CodecZlib<<5|FlagDontSplit, 1, 100, 100, [][]byte{compress(t, CodecZlib, raw[:100])}),
			func(f []byte) { f[len(f)-1] ^= 1 }), 1 << 20, ErrCorrupt},
		{"zstd stream longer than its block", frame(CodecZstd<<5|FlagDontSplit, 1, 100, 100, [][]byte{compress(t, CodecZstd, raw[:101])}), 1 << 20, ErrCorrupt},
		{"snappy stream longer than its block", frame(CodecSnappy<<5|FlagDontSplit, 1, 100, 100, [][]byte{compress(t, CodecSnappy, raw[:101])}), 1 << 20, ErrCorrupt},
		{"blosclz empty stream", blz(), 1 << 20, ErrCorrupt},
		{"blosclz literals past the block", blz(8, 1, 2, 3, 4, 5, 6, 7, 8, 9), 1 << 20, ErrCorrupt},
		{"blosclz literals past the stream", blz(7, 1, 2, 3), 1 << 20, ErrCorrupt},
		{"blosclz match before the block", blz(0, 'a', 1<<5, 1, 0, 'b'), 1 << 20, ErrCorrupt},
		{"blosclz match past the block", blz(0, 'a', 6<<5, 0, 0, 'b'), 1 << 20, ErrCorrupt},
		{"blosclz match distance runs out", blz(0, 'a', 5<<5, 0), 1 << 20, ErrCorrupt},
		{"blosclz match ends the stream", blz16(0, 'a', 7<<5, 0, 0), 1 << 20, ErrCorrupt},
		{"blosclz match length runs out", blz(0, 'a', 7<<5, 255, 255, 255), 1 << 20, ErrCorrupt},
		{"blosclz far distance runs out", blz(0, 'a', 1<<5|31, 255, 1), 1 << 20, ErrCorrupt},
		{"blosclz far distance before the block", blz16(0, 'a', 1<<5|31, 255, 0, 0, 0, 'b'), 1 << 20, ErrCorrupt},
		{"blosclz short stream", blz(2, 'a', 'b', 'c'), 1 << 20, ErrCorrupt},
	} {
		got, err := Decode(nil, c.f, c.limit)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v (%d bytes), want %v", c.name, err, len(got), c.want)
		}
	}
}

// TestDecodedSize checks the header alone, without decoding.
func TestDecodedSize(t *testing.T) {
	if n, err := DecodedSize(memcpyed(sample(77), 1)); n != 77 || err != nil {
		t.Fatalf("DecodedSize = %d, %v", n, err)
	}
	if _, err := DecodedSize(memcpyed(sample(77), 1)[:50]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated memcpyed frame: %v", err)
	}
}

// TestDecodeConcurrent decodes frames of every codec, damaged ones among
// them, from many goroutines at once (run it under -race): the pooled
// zlib readers, zstd decoders and scratch buffers must never mix two
// decodes, nor carry a failed decode's state into the next.
func TestDecodeConcurrent(t *testing.T) {
	type want struct {
		f    []byte
		data []byte // nil: must fail with ErrCorrupt
	}
	var frames []want
	for i, codec := range []int{CodecLZ4, CodecSnappy, CodecZlib, CodecZstd} {
		for k, shuf := range []byte{0, FlagShuffle, FlagBitShuffle} {
			data := sample(2048 + 8*(3*i+k))
			for j := range data {
				data[j] += byte(i*7 + k)
			}
			blk := data
			switch shuf {
			case FlagShuffle:
				blk = shuffled(data, 4)
			case FlagBitShuffle:
				blk = bitShuffled(data, 4)
			}
			f := frame(byte(codec)<<5|shuf|FlagDontSplit, 4, len(data), len(data), [][]byte{compress(t, codec, blk)})
			frames = append(frames, want{f, data})
			bad := bytes.Clone(f)
			bad[len(bad)-1] ^= 0x40 // the end of the stream
			if _, err := Decode(nil, bad, 1<<20); err != nil {
				frames = append(frames, want{bad, nil})
			}
		}
	}
	if len(frames) == 12 {
		t.Fatal("no damaged frame among the decoded ones")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := range 200 {
				w := frames[(i*7+g)%len(frames)]
				out, err := Decode(buf, w.f, 1<<20)
				switch {
				case w.data == nil && !errors.Is(err, ErrCorrupt):
					errs <- fmt.Errorf("damaged frame %d: %v, want ErrCorrupt", (i*7+g)%len(frames), err)
					return
				case w.data != nil && (err != nil || !bytes.Equal(out, w.data)):
					errs <- fmt.Errorf("frame %d: %v, equal %v", (i*7+g)%len(frames), err, bytes.Equal(out, w.data))
					return
				}
				if err == nil {
					buf = out
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
