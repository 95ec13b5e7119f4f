package filter

import (
	"bytes"
	"errors"
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

// zlibReader is a pooled zlib reader with the bytes.Reader it reads from.
type zlibReader struct {
	src bytes.Reader
	zr  io.ReadCloser // also a zlib.Resetter; nil until the first valid header
}

var zlibReaders sync.Pool // *zlibReader

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

func (c *zlibCodec) decode(dst, src []byte) ([]byte, error) {
	if err := CheckZlibHeader(src); err != nil {
		return nil, err
	}
	zr, _ := zlibReaders.Get().(*zlibReader)
	if zr == nil {
		zr = new(zlibReader)
	}
	defer func() {
		zr.src.Reset(nil) // do not keep src alive from the pool
		zlibReaders.Put(zr)
	}()
	zr.src.Reset(src)
	var err error
	if zr.zr == nil {
		zr.zr, err = zlib.NewReader(&zr.src)
	} else {
		err = zr.zr.(zlib.Resetter).Reset(&zr.src, nil)
	}
	if err != nil {
		zr.zr = nil // a failed reset may leave it unusable
		return nil, fmt.Errorf("%w: zlib: %v", ErrCorrupt, err)
	}
	// The zlib reader verifies the Adler-32 when the DEFLATE stream ends,
	// and reports a mismatch instead of io.EOF.
	n, err := readBounded(zr.zr, dst[:cap(dst)])
	if err != nil {
		return nil, fmt.Errorf("%w: zlib: %v", ErrCorrupt, err)
	}
	if zr.src.Len() != 0 {
		return nil, fmt.Errorf("%w: zlib: %d trailing bytes after the stream", ErrCorrupt, zr.src.Len())
	}
	return dst[:n], nil
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

// readBounded reads r into out until io.EOF and fails when the stream holds
// more than len(out) bytes. out never grows, so a decompression bomb stops
// after len(out) bytes.
func readBounded(r io.Reader, out []byte) (int, error) {
	n := 0
	for n < len(out) {
		m, err := r.Read(out[n:])
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, errors.New("decoder made no progress")
		}
	}
	// The output is full; a valid stream must end here.
	var probe [1]byte
	m, err := r.Read(probe[:])
	if m != 0 {
		return n, fmt.Errorf("stream decodes to more than %d bytes", len(out))
	}
	if err != io.EOF {
		if err == nil {
			err = errors.New("stream does not end at the bound")
		}
		return n, err
	}
	return n, nil
}
