package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/scc-dev/scc/internal/zarrmap"
	"github.com/scc-dev/scc/interop/zarr/internal/blosc"
)

// A codec is one stage of a Zarr chunk's codec chain as import reads it:
// zarrmap.Codec (the stages an export writes, and their encoding) and
// Blosc, which import decodes and never writes. The chain runs in order
// on encode and in reverse on decode; its input is the chunk's elements
// in C order, little-endian (the "bytes" codec / a "<" dtype).
type codec struct {
	id       string // shuffle, zlib, gzip, zstd, lz4, crc32c, blosc, bz2, delta
	level    int
	elemSize int    // shuffle
	cname    string // blosc: the frame's compressor
	shuffle  int    // blosc: 0 none, 1 byte, 2 bit, -1 by element size
	delta    deltaType
}

// shared is c as the mapping's codec: its encoding and its name in a
// report (a Blosc stage has neither: Encode refuses it).
func (c codec) shared() zarrmap.Codec {
	return zarrmap.Codec{ID: c.id, Level: c.level, ElemSize: c.elemSize}
}

// bloscDecode decodes one Blosc frame (header, blocks, byte or bit
// shuffle, its compressor) into at most max bytes, refusing more with
// ErrCorrupt. Blosc is zarr-python 2's default compressor; its chunks are
// decoded and stored with the scc stage nearest to the frame's compressor
// (importPlan). A variable so that tests can unlink it: without a decoder,
// arrays compressed with it are skipped with ErrUnsupported.
var bloscDecode = decodeBlosc

func decodeBlosc(src []byte, max int) ([]byte, error) {
	b, err := blosc.Decode(nil, src, max)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, blosc.ErrUnsupported):
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	default:
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
}

// codecFrom maps one numcodecs (v2) or v3 codec onto the chain, checking
// its configuration.
func codecFrom(id string, cfg map[string]any, elemSize int) (codec, error) {
	intCfg := func(key string, def int) (int, error) {
		v, ok := cfg[key]
		if !ok || v == nil {
			return def, nil
		}
		n, isNum := v.(json.Number)
		i, err := n.Int64()
		if !isNum || err != nil || i < -1<<20 || i > 1<<20 {
			return 0, fmt.Errorf("%w: codec %q: %q is %s, want an integer", ErrCorrupt, id, key, asJSON(v))
		}
		return int(i), nil
	}
	level, err := intCfg("level", 0)
	if err != nil {
		return codec{}, err
	}
	switch strings.TrimPrefix(id, "numcodecs.") {
	case "shuffle":
		es, err := intCfg("elementsize", elemSize)
		if err != nil {
			return codec{}, err
		}
		if es < 1 {
			return codec{}, fmt.Errorf("%w: codec %q: elementsize %d", ErrCorrupt, id, es)
		}
		return codec{id: "shuffle", elemSize: es}, nil
	case "zlib":
		return codec{id: "zlib", level: level}, nil
	case "gzip":
		return codec{id: "gzip", level: level}, nil
	case "zstd":
		return codec{id: "zstd", level: level}, nil
	case "lz4":
		return codec{id: "lz4"}, nil
	case "crc32c":
		if id == "crc32c" {
			return codec{id: "crc32c"}, nil
		}
	case "bz2":
		return codec{id: "bz2", level: level}, nil
	case "delta":
		dt, err := deltaFrom(id, cfg, elemSize)
		if err != nil {
			return codec{}, err
		}
		return codec{id: "delta", delta: dt, elemSize: elemSize}, nil
	case "blosc":
		cname, _ := cfg["cname"].(string)
		if bloscDecode == nil {
			return codec{}, fmt.Errorf("%w: compressor \"blosc\" (cname %q): no Blosc decoder in this build", ErrUnsupported, cname)
		}
		sh, err := bloscShuffle(id, cfg["shuffle"])
		if err != nil {
			return codec{}, err
		}
		clevel, err := intCfg("clevel", 5)
		if err != nil {
			return codec{}, err
		}
		return codec{id: "blosc", cname: cname, shuffle: sh, level: clevel}, nil
	}
	return codec{}, fmt.Errorf("%w: codec %q (scc maps shuffle, zlib, gzip, zstd, lz4, crc32c, blosc, bz2, delta, transpose)", ErrUnsupported, id)
}

// bloscShuffle reads a blosc codec's shuffle: numcodecs (v2) writes an
// integer (0 none, 1 byte, 2 bit, -1 by element size), the v3 blosc codec
// a name. The frame's own header says how its blocks were shuffled, which
// is what decoding follows; this only picks the stage import stores with.
func bloscShuffle(id string, v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return 1, nil
	case string:
		switch x {
		case "noshuffle":
			return 0, nil
		case "shuffle":
			return 1, nil
		case "bitshuffle":
			return 2, nil
		}
	case json.Number:
		if i, err := x.Int64(); err == nil && i >= -1 && i <= 2 {
			return int(i), nil
		}
	}
	return 0, fmt.Errorf("%w: codec %q: \"shuffle\" is %s, want \"noshuffle\", \"shuffle\", \"bitshuffle\" or one of -1, 0, 1, 2", ErrCorrupt, id, asJSON(v))
}

// decode inverts the stage's encoding (zarrmap.Codec.Encode); the output never exceeds max bytes.
func (c codec) decode(src []byte, max int) ([]byte, error) {
	switch c.id {
	case "shuffle":
		if len(src) > max {
			return nil, fmt.Errorf("%w: shuffle input of %d bytes exceeds %d", ErrCorrupt, len(src), max)
		}
		return zarrmap.Shuffle(src, c.elemSize, true), nil
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
		// The frame's content size, when it records one within the
		// bound, sizes the output (a variable-length chunk's bound is
		// far above its usual size); DecodeAll never grows past cap.
		size := max
		var h zstd.Header
		if h.Decode(src) == nil && h.HasFCS && h.FrameContentSize <= uint64(max) {
			size = int(h.FrameContentSize)
		}
		out, err := dec.DecodeAll(src, make([]byte, 0, size))
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
	case "blosc":
		if bloscDecode == nil {
			return nil, fmt.Errorf("%w: codec \"blosc\"", ErrUnsupported)
		}
		return bloscDecode(src, max)
	case "bz2":
		return bz2Decode(src, max)
	case "delta":
		return c.delta.decode(src, max)
	case "crc32c":
		if len(src) < 4 || len(src)-4 > max {
			return nil, fmt.Errorf("%w: crc32c: %d bytes", ErrCorrupt, len(src))
		}
		n := len(src) - 4
		if crc32.Checksum(src[:n], zarrmap.Castagnoli) != binary.LittleEndian.Uint32(src[n:]) {
			return nil, fmt.Errorf("%w: crc32c mismatch", ErrCorrupt)
		}
		return src[:n], nil
	}
	return nil, fmt.Errorf("%w: codec %q", ErrUnsupported, c.id)
}

// untranspose returns the C-order chunk of shape chunk from src, which
// holds it with its axes permuted by order: src is the C-order array of
// shape chunk[order[0]], chunk[order[1]], ... whose element j is the
// chunk's element x with x[order[i]] = j[i] (the v3 transpose codec;
// Fortran order is the reversed axes).
func untranspose(src []byte, chunk []uint64, order []int, es int) []byte {
	r := len(chunk)
	stride := make([]uint64, r) // of the C-order output, in bytes
	s := uint64(es)
	for d := r - 1; d >= 0; d-- {
		stride[d] = s
		s *= chunk[d]
	}
	out := make([]byte, len(src))
	idx := make([]uint64, r) // over the permuted shape
	off := uint64(0)
	for p := 0; p+es <= len(src); p += es {
		copy(out[off:off+uint64(es)], src[p:p+es])
		for d := r - 1; d >= 0; d-- {
			a := order[d]
			idx[d]++
			off += stride[a]
			if idx[d] < chunk[a] {
				break
			}
			off -= stride[a] * chunk[a]
			idx[d] = 0
		}
	}
	return out
}

// decodeChain inverts zarrmap.EncodeChain; size is the chunk's decoded size, which
// bounds every stage and which the result must match.
func decodeChain(chain []codec, b []byte, size int) ([]byte, error) {
	var err error
	for i := len(chain) - 1; i >= 0; i-- {
		// Stages after the first compressor keep at most a small framing
		// over the chunk; bound each by the chunk size plus slack, the
		// size being that of a delta's differences below the delta.
		n := size
		for _, c := range chain[:i] {
			if c.id == "delta" {
				n = c.delta.inSize(n)
			}
		}
		max := n + 64 + len(chain)*8
		if chain[i].id == "delta" {
			max = n
		}
		if b, err = chain[i].decode(b, max); err != nil {
			return nil, err
		}
	}
	if len(b) != size {
		return nil, fmt.Errorf("%w: chunk decodes to %d bytes, want %d", ErrCorrupt, len(b), size)
	}
	return b, nil
}

// ---- zlib and gzip wrappers around a raw DEFLATE stream ----

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

// inflateChecked decodes a raw DEFLATE stream of at most max bytes into a
// new buffer, checking the wrapper's checksum (and size, if size >= 0).
func inflateChecked(body []byte, max int, h hash.Hash32, sum uint32, size int64) ([]byte, error) {
	// Grown past 8 MiB only as the stream fills it: the bound of a
	// variable-length chunk is far above its usual size.
	out := bytes.NewBuffer(make([]byte, 0, min(max, 8<<20)))
	n, err := zarrmap.InflateTo(body, max, io.MultiWriter(out, h))
	if err != nil {
		return nil, err
	}
	if h.Sum32() != sum || size >= 0 && uint32(n) != uint32(size) {
		return nil, fmt.Errorf("%w: deflate wrapper checksum mismatch", ErrCorrupt)
	}
	return out.Bytes(), nil
}

// unwrap is zarrmap.Rewrap's inverse for import: the raw DEFLATE stream inside a
// zlib or gzip chunk, its checksum verified by inflating it once.
func unwrap(id string, b []byte, max int) ([]byte, error) {
	if id == "gzip" {
		body, sum, size, err := unwrapGzip(b)
		if err != nil {
			return nil, err
		}
		h := crc32.NewIEEE()
		n, err := zarrmap.InflateTo(body, max, h)
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
	if _, err := zarrmap.InflateTo(body, max, h); err != nil {
		return nil, err
	}
	if h.Sum32() != sum {
		return nil, fmt.Errorf("%w: zlib checksum mismatch", ErrCorrupt)
	}
	return body, nil
}

var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(1<<31), zstd.WithDecodeAllCapLimit(true))
})
