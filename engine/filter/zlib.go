package filter

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zlib"
)

// ---- zlib ----

// zlibCodec is DEFLATE in the zlib framing (RFC 1950): a 2-byte header, the
// raw DEFLATE stream and the Adler-32 of the decoded bytes, big-endian. It
// is byte-compatible with HDF5's deflate filter (H5Z_FILTER_DEFLATE stores
// exactly such a stream per chunk) and numcodecs' Zlib codec, so exporters
// and importers copy these chunks without inflating them: the Adler-32
// stays inside the stream and is checked on every decode here.
type zlibCodec struct {
	level   int
	writers sync.Pool // *zlib.Writer at this level
}

// ZlibOverhead is the framing a zlib stream adds to its DEFLATE body: the
// 2-byte header and the 4-byte Adler-32 trailer.
const ZlibOverhead = 6

var zlibCodecs = func() (cs [DeflateMaxLevel + 1]*zlibCodec) {
	for l := DeflateMinLevel; l <= DeflateMaxLevel; l++ {
		cs[l] = &zlibCodec{level: l}
	}
	return cs
}()

func (c *zlibCodec) encodeCap(n int) int { return max(n-1, 0) }

func (c *zlibCodec) encode(dst, src []byte) ([]byte, bool) {
	if len(src) == 0 {
		return nil, false
	}
	bw := &boundedWriter{buf: dst[:0]}
	var zw *zlib.Writer
	if v := c.writers.Get(); v != nil {
		zw = v.(*zlib.Writer)
		zw.Reset(bw)
	} else {
		var err error
		if zw, err = zlib.NewWriterLevel(bw, c.level); err != nil {
			return nil, false // unreachable: levels are validated
		}
	}
	_, err := zw.Write(src)
	if err == nil {
		err = zw.Close()
	}
	zw.Reset(io.Discard) // clears a sticky errTooBig, drops dst
	c.writers.Put(zw)
	if err != nil {
		return nil, false
	}
	return bw.buf, true
}

func (c *zlibCodec) claimedLen([]byte) (int, error) { return -1, nil }

// overrun is 0: decode reads into dst[:cap(dst)] and stops there.
func (c *zlibCodec) overrun() int { return 0 }

// maxOutput: the DEFLATE body's bound (see deflateCodec.maxOutput).
func (c *zlibCodec) maxOutput(n int) int { return expansionBound(max(n-ZlibOverhead, 0), 1032) }

// decode checks the framing, then inflates with the build's inflater
// (inflate.go), which verifies the Adler-32.
func (c *zlibCodec) decode(dst, src []byte) ([]byte, error) {
	if err := CheckZlibHeader(src); err != nil {
		return nil, err
	}
	return inflateZlib(dst, src)
}

// CheckZlibHeader checks the framing of a zlib stream without inflating it:
// room for the header and the Adler-32 trailer, compression method 8
// (DEFLATE) with a window of at most 32 KiB, the header check bits, and no
// preset dictionary (this package never uses one and cannot decode one).
// Importers call it before storing a foreign stream as a Zlib chunk. Errors
// wrap ErrCorrupt.
func CheckZlibHeader(b []byte) error {
	if len(b) < ZlibOverhead+1 { // an empty DEFLATE stream is at least 1 byte
		return fmt.Errorf("%w: zlib: %d bytes is shorter than the framing", ErrCorrupt, len(b))
	}
	cmf, flg := b[0], b[1]
	switch {
	case cmf&0x0f != 8 || cmf>>4 > 7:
		return fmt.Errorf("%w: zlib: method/window byte %#x", ErrCorrupt, cmf)
	case (uint16(cmf)<<8|uint16(flg))%31 != 0:
		return fmt.Errorf("%w: zlib: header check bits of %#x %#x", ErrCorrupt, cmf, flg)
	case flg&0x20 != 0:
		return fmt.Errorf("%w: zlib: stream needs a preset dictionary", ErrCorrupt)
	}
	return nil
}
