package zarrmap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/scc-dev/scc/engine"
)

// A Codec is one bytes-to-bytes stage of a Zarr chunk's codec chain, as
// numcodecs (v2) and the v3 codec registry define it. The chain runs in
// order on encode and in reverse on decode; its input is the chunk's
// elements in C order, little-endian (the "bytes" codec / a "<" dtype).
type Codec struct {
	ID       string // shuffle, zlib, gzip, zstd, lz4, crc32c
	Level    int
	ElemSize int // shuffle
}

// A Plan is how one dataset's chunks cross: the Zarr chain and whether the
// stored bytes can go across without re-encoding.
type Plan struct {
	Chain []Codec
	Copy  bool   // chunks with mask 0 copy (rewrapping a last deflate stage)
	Wrap  string // "zlib" or "gzip" when the last stage is rewrapped
	Why   string // why not copy
	// Inner is the inner chunk shape of a sharded dataset (nil for any
	// other); its chunks are no chain's output (Copy is false), but its
	// inner chunks' images are when InnerCopy (with Wrap, as Copy's).
	Inner     []uint64
	InnerCopy bool
}

// PlanOf maps a dataset's pipeline onto the Zarr codecs of version.
func PlanOf(ds *engine.Dataset, version int) Plan {
	var p Plan
	p.Copy = true
	filters := ds.Filters()
	for i, f := range filters {
		name, level := f.Stage()
		last := i == len(filters)-1
		switch name {
		case "shuffle":
			p.Chain = append(p.Chain, Codec{ID: "shuffle", ElemSize: ds.Type().Size()})
		case "deflate":
			id := "zlib"
			if version == 3 {
				id = "gzip"
			}
			p.Chain = append(p.Chain, Codec{ID: id, Level: level})
			if last {
				p.Wrap = id
			} else if p.Copy {
				p.Copy, p.Why = false, "deflate is not the pipeline's last stage, so its stream cannot be rewrapped in place"
			}
		case "zlib":
			// numcodecs' Zlib is the same zlib stream (v3: numcodecs.zlib,
			// read by zarrita and zarr-python 3): copied byte for byte,
			// no inflate.
			p.Chain = append(p.Chain, Codec{ID: "zlib", Level: level})
		case "zstd":
			// scc's zstd levels are zstd's (0: the default, 3); the
			// level is metadata only, readers do not need it.
			if level == 0 {
				level = 3
			}
			p.Chain = append(p.Chain, Codec{ID: "zstd", Level: level})
		case "lz4":
			p.Chain = append(p.Chain, Codec{ID: "lz4"})
		case "crc32c":
			if version == 3 {
				p.Chain = append(p.Chain, Codec{ID: "crc32c"})
			} else if p.Copy {
				p.Copy, p.Why = false, "Zarr v2 (numcodecs) has no crc32c codec; the stage is left out"
			}
		default:
			if p.Copy {
				p.Copy, p.Why = false, fmt.Sprintf("filter %s has no Zarr codec; left out", name)
			}
		}
	}
	if p.Inner = ds.InnerChunk(); p.Inner != nil {
		// The stored bytes are inner chunks and an index, not one
		// codec chain's output; each inner chunk's image is.
		p.InnerCopy = p.Copy
		if p.Copy {
			p.Copy, p.Why = false, "sharded chunks (inner chunks and an index, not one codec chain's output)"
		}
	}
	return p
}

// JSON is the codec's metadata object in version: a numcodecs config (v2
// "compressor" or "filters" entry) or a v3 codec.
func (c Codec) JSON(version int) map[string]any {
	if version == 2 {
		switch c.ID {
		case "shuffle":
			return map[string]any{"id": "shuffle", "elementsize": c.ElemSize}
		case "lz4":
			return map[string]any{"id": "lz4", "acceleration": 1}
		}
		return map[string]any{"id": c.ID, "level": c.Level}
	}
	switch c.ID {
	case "shuffle":
		return map[string]any{"name": "numcodecs.shuffle", "configuration": map[string]any{"elementsize": c.ElemSize}}
	case "lz4":
		return map[string]any{"name": "numcodecs.lz4", "configuration": map[string]any{"acceleration": 1}}
	case "crc32c":
		return map[string]any{"name": "crc32c"}
	case "zlib":
		// Not a v3 core codec: numcodecs registers it for zarr-python 3
		// under this name, and zarrita reads it under both.
		return map[string]any{"name": "numcodecs.zlib", "configuration": map[string]any{"level": c.Level}}
	case "zstd":
		return map[string]any{"name": "zstd", "configuration": map[string]any{"level": c.Level, "checksum": false}}
	}
	return map[string]any{"name": c.ID, "configuration": map[string]any{"level": c.Level}}
}

// ChainString names a chain for a report: "raw" when empty, else its
// codecs in order, with their levels where they have one
// ("shuffle,zlib(3)").
func ChainString(chain []Codec) string {
	if len(chain) == 0 {
		return "raw"
	}
	parts := make([]string, len(chain))
	for i, c := range chain {
		parts[i] = c.ID
		if c.ID == "zlib" || c.ID == "gzip" || c.ID == "zstd" {
			parts[i] = fmt.Sprintf("%s(%d)", c.ID, c.Level)
		}
	}
	return strings.Join(parts, ",")
}

// Castagnoli is the CRC-32C table of the crc32c codec.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode applies the stage to src.
func (c Codec) Encode(src []byte) ([]byte, error) {
	switch c.ID {
	case "shuffle":
		return Shuffle(src, c.ElemSize, false), nil
	case "zlib", "gzip":
		var b bytes.Buffer
		lvl := c.Level
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
		if c.ID == "zlib" {
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
		return binary.LittleEndian.AppendUint32(append([]byte{}, src...), crc32.Checksum(src, Castagnoli)), nil
	}
	return nil, fmt.Errorf("%w: codec %q", ErrUnsupported, c.ID)
}

// EncodeChain runs the chain over a chunk's bytes.
func EncodeChain(chain []Codec, b []byte) ([]byte, error) {
	var err error
	for _, c := range chain {
		if b, err = c.Encode(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Shuffle is numcodecs' Shuffle (the HDF5 byte shuffle): byte j of element
// i goes to j*n+i, or back when inverse. Trailing bytes that do not fill
// an element stay put.
func Shuffle(src []byte, es int, inverse bool) []byte {
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

// wrapZlib frames a raw DEFLATE stream as zlib (RFC 1950): CMF 0x78 (32 KiB
// window), FLG 0x9c (default level, no dictionary), the stream, Adler-32 of
// the decoded bytes big-endian.
func wrapZlib(deflate []byte, adler uint32) []byte {
	out := make([]byte, 0, len(deflate)+6)
	out = append(out, 0x78, 0x9c)
	out = append(out, deflate...)
	return binary.BigEndian.AppendUint32(out, adler)
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

var inflaters sync.Pool // io.ReadCloser that is also a flate.Resetter

// InflateTo decodes a raw DEFLATE stream into w, refusing more than max
// bytes or trailing garbage with ErrCorrupt.
func InflateTo(body []byte, max int, w io.Writer) (int64, error) {
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

// Rewrap turns a raw DEFLATE stream (scc's deflate stage output) into the
// zlib or gzip framing Zarr readers expect. The compressed stream is kept
// byte for byte; only the wrapper's checksum needs the decoded bytes, so
// the stream is inflated once into the hash (never re-compressed).
func Rewrap(id string, deflate []byte, max int) ([]byte, error) {
	var h hash.Hash32 = adler32.New()
	if id == "gzip" {
		h = crc32.NewIEEE()
	}
	n, err := InflateTo(deflate, max, h)
	if err != nil {
		return nil, err
	}
	if id == "gzip" {
		return wrapGzip(deflate, h.Sum32(), int(n)), nil
	}
	return wrapZlib(deflate, h.Sum32()), nil
}

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	// Single-segment frames always record the content size, which
	// numcodecs needs to decode them (the library leaves it out of
	// frames under 256 bytes otherwise).
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithSingleSegment(true))
})

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
