package filter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zlib"
)

// The pure-Go inflater: klauspost/compress's DEFLATE and zlib readers,
// pooled (each holds a 32 KiB window). It is what a build without cgo uses;
// a cgo build inflates with libdeflate (inflate_libdeflate.go) and keeps
// these as the reference its tests compare against.

// goInflater is a pooled deflate reader with the bytes.Reader it reads from.
type goInflater struct {
	src bytes.Reader
	fr  io.ReadCloser // also a flate.Resetter
}

var goInflaters sync.Pool // *goInflater

// inflateRawGo inflates the raw DEFLATE stream src into dst[:cap(dst)].
// Errors wrap ErrCorrupt.
func inflateRawGo(dst, src []byte) ([]byte, error) {
	inf, _ := goInflaters.Get().(*goInflater)
	if inf == nil {
		inf = new(goInflater)
		inf.src.Reset(src)
		inf.fr = flate.NewReader(&inf.src)
	} else {
		inf.src.Reset(src)
		if err := inf.fr.(flate.Resetter).Reset(&inf.src, nil); err != nil {
			return nil, fmt.Errorf("%w: deflate: %v", ErrCorrupt, err)
		}
	}
	defer func() {
		inf.src.Reset(nil) // do not keep src alive from the pool
		goInflaters.Put(inf)
	}()
	n, err := readBounded(inf.fr, dst[:cap(dst)])
	if err != nil {
		return nil, fmt.Errorf("%w: deflate: %v", ErrCorrupt, err)
	}
	if inf.src.Len() != 0 {
		return nil, fmt.Errorf("%w: deflate: %d trailing bytes after the stream", ErrCorrupt, inf.src.Len())
	}
	return dst[:n], nil
}

// goZlibReader is a pooled zlib reader with the bytes.Reader it reads from.
type goZlibReader struct {
	src bytes.Reader
	zr  io.ReadCloser // also a zlib.Resetter; nil until the first valid header
}

var goZlibReaders sync.Pool // *goZlibReader

// inflateZlibGo inflates the zlib stream src (framing already checked by
// CheckZlibHeader) into dst[:cap(dst)] and verifies its Adler-32. Errors
// wrap ErrCorrupt.
func inflateZlibGo(dst, src []byte) ([]byte, error) {
	zr, _ := goZlibReaders.Get().(*goZlibReader)
	if zr == nil {
		zr = new(goZlibReader)
	}
	defer func() {
		zr.src.Reset(nil) // do not keep src alive from the pool
		goZlibReaders.Put(zr)
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
