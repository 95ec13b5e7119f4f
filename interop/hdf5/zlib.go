package hdf5

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zlib"
)

// HDF5's deflate filter (H5Zdeflate.c) writes and reads zlib streams
// (RFC 1950): CMF, FLG, the raw DEFLATE stream (RFC 1951), then the
// Adler-32 of the uncompressed bytes, big-endian. scc's Zlib filter stores
// exactly that, so those chunks move both ways untouched. scc's older
// Deflate filter stores the raw stream alone (engine/filter/codec.go), so
// exporting such a chunk adds 6 bytes — but the Adler-32 covers the
// uncompressed bytes, so it can only be computed by inflating. Nothing is
// ever re-compressed. (Import never needs this: HDF5's deflate becomes
// scc's Zlib.)

// zlibHeader is CMF 0x78 (deflate, 32 KiB window) and FLG 0x01 (no
// dictionary, "fastest" level hint, FCHECK making 0x7801 a multiple of 31).
var zlibHeader = [2]byte{0x78, 0x01}

const zlibOverhead = 2 + 4

// inflater is a reusable DEFLATE decoder.
type inflater struct {
	src bytes.Reader
	fr  io.ReadCloser
	out []byte
}

var inflaters = sync.Pool{New: func() any {
	in := new(inflater)
	in.fr = flate.NewReader(&in.src)
	return in
}}

// inflatedAdler inflates the raw DEFLATE stream, which must decode to
// exactly n bytes and end there, and returns the Adler-32 of those bytes.
func inflatedAdler(stream []byte, n int) (uint32, error) {
	in := inflaters.Get().(*inflater)
	defer inflaters.Put(in)
	in.src.Reset(stream)
	if err := in.fr.(flate.Resetter).Reset(&in.src, nil); err != nil {
		return 0, err
	}
	if cap(in.out) < n+1 {
		in.out = make([]byte, n+1)
	}
	out := in.out[:n+1]
	// Read until the stream ends: only a clean end (io.EOF, not a
	// truncated stream's io.ErrUnexpectedEOF) after exactly n bytes is
	// valid, and the extra byte of room catches a stream that is longer.
	// The Adler-32 runs over each piece as it is inflated, while it is
	// still in the CPU's cache.
	got := 0
	sum := adler32.New()
	var err error
	for err == nil && got < len(out) {
		var m int
		m, err = in.fr.Read(out[got:])
		sum.Write(out[got:min(got+m, n)])
		got += m
		if m == 0 && err == nil {
			err = io.ErrNoProgress
		}
	}
	rest := in.src.Len()
	in.src.Reset(nil)
	switch {
	case got > n:
		return 0, fmt.Errorf("deflate stream decodes to more than %d bytes", n)
	case err != io.EOF:
		return 0, fmt.Errorf("deflate stream: %v", err)
	case got != n:
		return 0, fmt.Errorf("deflate stream decodes to %d bytes, want %d", got, n)
	case rest != 0:
		// zlib's trailer must follow the stream directly (and scc's
		// decoder refuses trailing bytes too).
		return 0, fmt.Errorf("%d bytes after the end of the deflate stream", rest)
	}
	return sum.Sum32(), nil
}

// wrapZlib returns the zlib stream around a raw DEFLATE stream whose
// uncompressed form is n bytes.
func wrapZlib(stream []byte, n int) ([]byte, error) {
	sum, err := inflatedAdler(stream, n)
	if err != nil {
		return nil, err
	}
	z := make([]byte, 0, len(stream)+zlibOverhead)
	z = append(z, zlibHeader[:]...)
	z = append(z, stream...)
	return binary.BigEndian.AppendUint32(z, sum), nil
}

// zlibCompress is HDF5's deflate filter in Go, for re-encoded chunks.
func zlibCompress(src []byte, level int) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(src)/2 + 64)
	w, err := zlib.NewWriterLevel(&b, level)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
