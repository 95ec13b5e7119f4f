package blosc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Each stream decoder fills out exactly or fails with ErrCorrupt; none
// writes past out or allocates more than a bounded working set.

func lz4Block(out, in []byte) error {
	n, err := lz4.UncompressBlock(in, out)
	if err != nil || n != len(out) {
		return fmt.Errorf("%w: lz4: %v (%d of %d bytes)", ErrCorrupt, err, n, len(out))
	}
	return nil
}

func snappyBlock(out, in []byte) error {
	n, err := snappy.DecodedLen(in)
	if err != nil || n != len(out) {
		return fmt.Errorf("%w: snappy: stream claims %d bytes, block holds %d (%v)", ErrCorrupt, n, len(out), err)
	}
	got, err := snappy.DecodeStrict(out, in)
	if err != nil || len(got) != len(out) || &got[0] != &out[0] {
		return fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
	}
	return nil
}

// zstdDec decodes into the caller's buffer and refuses to write past its
// capacity, so a stream can never grow beyond its block.
var zstdDec = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderConcurrency(0))
})

func zstdBlock(out, in []byte) error {
	dec, err := zstdDec()
	if err != nil {
		return fmt.Errorf("blosc: zstd decoder: %w", err)
	}
	got, err := dec.DecodeAll(in, out[:0:len(out)])
	if err != nil || len(got) != len(out) {
		return fmt.Errorf("%w: zstd: %v (%d of %d bytes)", ErrCorrupt, err, len(got), len(out))
	}
	if &got[0] != &out[0] { // the cap limit should make this impossible
		copy(out, got)
	}
	return nil
}

type zlibReader struct {
	r  io.ReadCloser
	br bytes.Reader
}

var zlibReaders sync.Pool

func zlibBlock(out, in []byte) (err error) {
	z, _ := zlibReaders.Get().(*zlibReader)
	if z == nil {
		z = new(zlibReader)
	}
	defer func() {
		z.br.Reset(nil)
		zlibReaders.Put(z)
	}()
	z.br.Reset(in)
	if z.r == nil {
		z.r, err = zlib.NewReader(&z.br)
	} else {
		err = z.r.(zlib.Resetter).Reset(&z.br, nil)
	}
	if err != nil {
		z.r = nil
		return fmt.Errorf("%w: zlib: %v", ErrCorrupt, err)
	}
	if n, err := io.ReadFull(z.r, out); err != nil {
		return fmt.Errorf("%w: zlib: %v (%d of %d bytes)", ErrCorrupt, err, n, len(out))
	}
	// The stream must end here; reading its end also checks its Adler-32.
	var one [1]byte
	switch n, err := io.ReadFull(z.r, one[:]); {
	case n != 0:
		return fmt.Errorf("%w: zlib: stream decodes to more than the %d-byte block", ErrCorrupt, len(out))
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("%w: zlib: %v", ErrCorrupt, err)
	}
	return nil
}
