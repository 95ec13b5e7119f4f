package zarr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A codec is one bytes-to-bytes stage of a Zarr chunk's codec chain, as
// numcodecs (v2) and the v3 codec registry define it. The chain runs in
// order on encode and in reverse on decode; its input is the chunk's
// elements in C order, little-endian (the "bytes" codec / a "<" dtype).
type codec struct {
	id       string // shuffle, zlib, gzip, zstd, lz4, crc32c
	level    int
	elemSize int // shuffle
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode applies the stage to src.
func (c codec) encode(src []byte) ([]byte, error) {
	switch c.id {
	case "shuffle":
		return shuffle(src, c.elemSize, false), nil
	case "zlib", "gzip":
		var b bytes.Buffer
		lvl := c.level
		if lvl < 1 || lvl > 9 {
			lvl = 6
		}
		fw, err := flate.NewWriter(&b, lvl)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write(src); err != nil {
			return nil, err
		}
		if err := fw.Close(); err != nil {
			return nil, err
		}
		if c.id == "zlib" {
			return wrapZlib(b.Bytes(), adler32.Checksum(src)), nil
		}
		return wrapGzip(b.Bytes(), crc32.ChecksumIEEE(src), len(src)), nil
	case "zstd":
		enc, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return enc.EncodeAll(src, nil), nil
	case "lz4":
		dst := make([]byte, 4+lz4.CompressBlockBound(len(src)))
		binary.LittleEndian.PutUint32(dst, uint32(len(src)))
		var comp lz4.Compressor
		n, err := comp.CompressBlock(src, dst[4:])
		if err != nil {
			return nil, err
		}
		if n == 0 { // incompressible: one literal-only sequence
			return literalBlock(dst[:4], src), nil
		}
		return dst[:4+n], nil
	case "crc32c":
		return binary.LittleEndian.AppendUint32(append([]byte{}, src...), crc32.Checksum(src, castagnoli)), nil
	}
	return nil, fmt.Errorf("%w: codec %q", ErrUnsupported, c.id)
}

// decode inverts encode; the output never exceeds max bytes.
func (c codec) decode(src []byte, max int) ([]byte, error) {
	switch c.id {
	case "shuffle":
		if len(src) > max {
			return nil, fmt.Errorf("%w: shuffle input of %d bytes exceeds %d", ErrCorrupt, len(src), max)
		}
		return shuffle(src, c.elemSize, true), nil
	case "zlib":
		body, sum, err := unwrapZlib(src)
		if err != nil {
			return nil, err
		}
		return inflateChecked(body, max, adler32.New(), sum, -1)
	case "gzip":
		body, sum, size, err := unwrapGzip(src)
		if err != nil {
			return nil, err
		}
		return inflateChecked(body, max, crc32.NewIEEE(), sum, int64(size))
	case "zstd":
		dec, err := zstdDecoder()
		if err != nil {
			return nil, err
		}
		out, err := dec.DecodeAll(src, make([]byte, 0, max))
		if err != nil || len(out) > max {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		return out, nil
	case "lz4":
		if len(src) < 4 {
			return nil, fmt.Errorf("%w: lz4: %d bytes", ErrCorrupt, len(src))
		}
		n := int(binary.LittleEndian.Uint32(src))
		if n > max || n < 0 {
			return nil, fmt.Errorf("%w: lz4 claims %d bytes, chunk holds %d", ErrCorrupt, n, max)
		}
		out := make([]byte, n)
		m, err := lz4.UncompressBlock(src[4:], out)
		if err != nil || m != n {
			return nil, fmt.Errorf("%w: lz4: %v (%d of %d bytes)", ErrCorrupt, err, m, n)
		}
		return out, nil
	case "crc32c":
		if len(src) < 4 || len(src)-4 > max {
			return nil, fmt.Errorf("%w: crc32c: %d bytes", ErrCorrupt, len(src))
		}
		n := len(src) - 4
		if crc32.Checksum(src[:n], castagnoli) != binary.LittleEndian.Uint32(src[n:]) {
			return nil, fmt.Errorf("%w: crc32c mismatch", ErrCorrupt)
		}
		return src[:n], nil
	}
	return nil, fmt.Errorf("%w: codec %q", ErrUnsupported, c.id)
}

// shuffle is numcodecs' Shuffle (the HDF5 byte shuffle): byte j of element
// i goes to j*n+i. Trailing bytes that do not fill an element stay put.
func shuffle(src []byte, es int, inverse bool) []byte {
	out := make([]byte, len(src))
	n := len(src) / max(es, 1)
	if es <= 1 || n <= 1 {
		copy(out, src)
		return out
	}
	for i := 0; i < n; i++ {
		for j := 0; j < es; j++ {
			if inverse {
				out[i*es+j] = src[j*n+i]
			} else {
				out[j*n+i] = src[i*es+j]
			}
		}
	}
	copy(out[n*es:], src[n*es:])
	return out
}

// encodeChain runs the chain over a chunk's bytes.
func encodeChain(chain []codec, b []byte) ([]byte, error) {
	var err error
	for _, c := range chain {
		if b, err = c.encode(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// decodeChain inverts encodeChain; size is the chunk's decoded size, which
// bounds every stage and which the result must match.
func decodeChain(chain []codec, b []byte, size int) ([]byte, error) {
	var err error
	for i := len(chain) - 1; i >= 0; i-- {
		// Stages after the first compressor keep at most a small framing
		// over the chunk; bound each by the chunk size plus slack.
		if b, err = chain[i].decode(b, size+64+len(chain)*8); err != nil {
			return nil, err
		}
	}
	if len(b) != size {
		return nil, fmt.Errorf("%w: chunk decodes to %d bytes, want %d", ErrCorrupt, len(b), size)
	}
	return b, nil
}

// ---- zlib and gzip wrappers around a raw DEFLATE stream ----

// wrapZlib frames a raw DEFLATE stream as zlib (RFC 1950): CMF 0x78 (32 KiB
// window), FLG 0x9c (default level, no dictionary), the stream, Adler-32 of
// the decoded bytes big-endian.
func wrapZlib(deflate []byte, adler uint32) []byte {
	out := make([]byte, 0, len(deflate)+6)
	out = append(out, 0x78, 0x9c)
	out = append(out, deflate...)
	return binary.BigEndian.AppendUint32(out, adler)
}

func unwrapZlib(b []byte) (body []byte, adler uint32, err error) {
	if len(b) < 6 {
		return nil, 0, fmt.Errorf("%w: zlib: %d bytes", ErrCorrupt, len(b))
	}
	cmf, flg := b[0], b[1]
	switch {
	case cmf&0x0f != 8 || cmf>>4 > 7:
		return nil, 0, fmt.Errorf("%w: zlib: method/window byte %#x", ErrCorrupt, cmf)
	case (uint16(cmf)<<8|uint16(flg))%31 != 0:
		return nil, 0, fmt.Errorf("%w: zlib: header check", ErrCorrupt)
	case flg&0x20 != 0:
		return nil, 0, fmt.Errorf("%w: zlib: preset dictionary", ErrUnsupported)
	}
	return b[2 : len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:]), nil
}

// wrapGzip frames a raw DEFLATE stream as one gzip member (RFC 1952) with
// no name, no time and OS "unknown".
func wrapGzip(deflate []byte, crc uint32, size int) []byte {
	out := make([]byte, 0, len(deflate)+18)
	out = append(out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff)
	out = append(out, deflate...)
	out = binary.LittleEndian.AppendUint32(out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(size))
}

func unwrapGzip(b []byte) (body []byte, crc, size uint32, err error) {
	bad := func(why string) ([]byte, uint32, uint32, error) {
		return nil, 0, 0, fmt.Errorf("%w: gzip: %s", ErrCorrupt, why)
	}
	if len(b) < 18 || b[0] != 0x1f || b[1] != 0x8b || b[2] != 8 {
		return bad("header")
	}
	flg := b[3]
	p := 10
	if flg&0x04 != 0 { // FEXTRA
		if p+2 > len(b) {
			return bad("extra field")
		}
		p += 2 + int(binary.LittleEndian.Uint16(b[p:]))
	}
	for _, bit := range []byte{0x08, 0x10} { // FNAME, FCOMMENT: zero-terminated
		if flg&bit != 0 {
			i := bytes.IndexByte(b[min(p, len(b)):], 0)
			if i < 0 {
				return bad("name or comment")
			}
			p += i + 1
		}
	}
	if flg&0x02 != 0 { // FHCRC
		p += 2
	}
	if p > len(b)-8 {
		return bad("truncated")
	}
	n := len(b) - 8
	return b[p:n], binary.LittleEndian.Uint32(b[n:]), binary.LittleEndian.Uint32(b[n+4:]), nil
}

var inflaters sync.Pool // io.ReadCloser that is also a flate.Resetter

// inflateChecked decodes a raw DEFLATE stream of at most max bytes into a
// new buffer, checking the wrapper's checksum (and size, if size >= 0).
func inflateChecked(body []byte, max int, h hash.Hash32, sum uint32, size int64) ([]byte, error) {
	out := bytes.NewBuffer(make([]byte, 0, max))
	n, err := inflateTo(body, max, io.MultiWriter(out, h))
	if err != nil {
		return nil, err
	}
	if h.Sum32() != sum || size >= 0 && uint32(n) != uint32(size) {
		return nil, fmt.Errorf("%w: deflate wrapper checksum mismatch", ErrCorrupt)
	}
	return out.Bytes(), nil
}

// inflateTo decodes a raw DEFLATE stream into w, refusing more than max
// bytes or trailing garbage.
func inflateTo(body []byte, max int, w io.Writer) (int64, error) {
	br := bytes.NewReader(body)
	fr, _ := inflaters.Get().(io.ReadCloser)
	if fr == nil {
		fr = flate.NewReader(br)
	} else if err := fr.(flate.Resetter).Reset(br, nil); err != nil {
		return 0, err
	}
	defer inflaters.Put(fr)
	n, err := io.Copy(w, io.LimitReader(fr, int64(max)+1))
	if err != nil {
		return n, fmt.Errorf("%w: deflate: %v", ErrCorrupt, err)
	}
	if n > int64(max) {
		return n, fmt.Errorf("%w: deflate stream decodes past %d bytes", ErrCorrupt, max)
	}
	if br.Len() != 0 {
		return n, fmt.Errorf("%w: %d bytes after the deflate stream", ErrCorrupt, br.Len())
	}
	return n, nil
}

// rewrap turns a raw DEFLATE stream (scc's deflate stage output) into the
// zlib or gzip framing Zarr readers expect. The compressed stream is kept
// byte for byte; only the wrapper's checksum needs the decoded bytes, so
// the stream is inflated once into the hash (never re-compressed).
func rewrap(id string, deflate []byte, max int) ([]byte, error) {
	var h hash.Hash32 = adler32.New()
	if id == "gzip" {
		h = crc32.NewIEEE()
	}
	n, err := inflateTo(deflate, max, h)
	if err != nil {
		return nil, err
	}
	if id == "gzip" {
		return wrapGzip(deflate, h.Sum32(), int(n)), nil
	}
	return wrapZlib(deflate, h.Sum32()), nil
}

// unwrap is rewrap's inverse for import: the raw DEFLATE stream inside a
// zlib or gzip chunk, its checksum verified by inflating it once.
func unwrap(id string, b []byte, max int) ([]byte, error) {
	if id == "gzip" {
		body, sum, size, err := unwrapGzip(b)
		if err != nil {
			return nil, err
		}
		h := crc32.NewIEEE()
		n, err := inflateTo(body, max, h)
		if err != nil {
			return nil, err
		}
		if h.Sum32() != sum || uint32(n) != size {
			return nil, fmt.Errorf("%w: gzip checksum mismatch", ErrCorrupt)
		}
		return body, nil
	}
	body, sum, err := unwrapZlib(b)
	if err != nil {
		return nil, err
	}
	h := adler32.New()
	if _, err := inflateTo(body, max, h); err != nil {
		return nil, err
	}
	if h.Sum32() != sum {
		return nil, fmt.Errorf("%w: zlib checksum mismatch", ErrCorrupt)
	}
	return body, nil
}

var (
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	})
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(1<<31), zstd.WithDecodeAllCapLimit(true))
	})
)

// literalBlock appends an LZ4 block holding src as literals only (what
// the reference encoder emits for incompressible input).
func literalBlock(dst, src []byte) []byte {
	n := len(src)
	if n < 15 {
		dst = append(dst, byte(n)<<4)
	} else {
		dst = append(dst, 0xf0)
		for r := n - 15; ; r -= 255 {
			if r < 255 {
				dst = append(dst, byte(r))
				break
			}
			dst = append(dst, 255)
		}
	}
	return append(dst, src...)
}
