package zarr

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
)

// numcodecs' BZ2 codec stores one bzip2 stream (Python's bz2.compress).
// Go's compress/bzip2 decodes it; import stores the chunk with zstd (scc
// has no bzip2 stage, and no well-kept Go encoder of it exists), so a store
// with bz2 imports but does not export back with it.

// bz2Decode decodes one bzip2 stream into at most max bytes: the decoder
// stops one byte past max, so a stream that expands further (a bomb) costs
// max+1 bytes of output, never more.
func bz2Decode(src []byte, max int) ([]byte, error) {
	r := bzip2.NewReader(bytes.NewReader(src))
	out := bytes.NewBuffer(make([]byte, 0, min(max, 64<<10)))
	n, err := io.Copy(out, io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: bz2: %v", ErrCorrupt, err)
	}
	if n > int64(max) {
		return nil, fmt.Errorf("%w: bz2 stream decodes to more than %d bytes", ErrCorrupt, max)
	}
	return out.Bytes(), nil
}

// numcodecs' Delta filter stores each element's difference from the one
// before it (the first as it is), computed in the numpy type astype;
// decoding is the running sum in dtype, wrapping for integers as numpy's
// cumsum does. scc decodes the filter where dtype and astype are the
// array's own type (the form numcodecs writes unless told otherwise);
// other pairs change the values' type and are refused.
type deltaType struct {
	kind      byte // 'i', 'u' or 'f'
	size      int
	bigEndian bool
}

// deltaFrom reads a delta filter's configuration.
func deltaFrom(id string, cfg map[string]any, elemSize int) (deltaType, error) {
	dt, _ := cfg["dtype"].(string)
	as, ok := cfg["astype"].(string)
	if !ok || as == "" {
		as = dt
	}
	t, err := parseDeltaType(dt)
	if err != nil {
		return deltaType{}, fmt.Errorf("%w: codec %q: dtype %s", ErrUnsupported, id, asJSON(cfg["dtype"]))
	}
	if a, err := parseDeltaType(as); err != nil || a != t {
		return deltaType{}, fmt.Errorf("%w: codec %q: astype %s differs from dtype %q (scc decodes the filter in the array's own type)", ErrUnsupported, id, asJSON(cfg["astype"]), dt)
	}
	if t.size != elemSize {
		return deltaType{}, fmt.Errorf("%w: codec %q: dtype %q is not the array's %d-byte type", ErrCorrupt, id, dt, elemSize)
	}
	return t, nil
}

func parseDeltaType(s string) (deltaType, error) {
	if len(s) < 3 || !strings.ContainsRune("<>|=", rune(s[0])) {
		return deltaType{}, fmt.Errorf("dtype %q", s)
	}
	var t deltaType
	t.bigEndian = s[0] == '>'
	t.kind = s[1]
	switch s[1:] {
	case "i1", "u1":
		t.size = 1
	case "i2", "u2":
		t.size = 2
	case "i4", "u4", "f4":
		t.size = 4
	case "i8", "u8", "f8":
		t.size = 8
	default:
		return deltaType{}, fmt.Errorf("dtype %q", s)
	}
	if t.size == 1 {
		t.bigEndian = false
	}
	return t, nil
}

// decode is the running sum of src's elements, in their byte order.
func (t deltaType) decode(src []byte, max int) ([]byte, error) {
	if len(src) > max || len(src)%t.size != 0 {
		return nil, fmt.Errorf("%w: delta input of %d bytes (elements of %d, at most %d)", ErrCorrupt, len(src), t.size, max)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if t.bigEndian {
		bo = binary.BigEndian
	}
	out := make([]byte, len(src))
	get := func(b []byte) uint64 {
		switch t.size {
		case 1:
			return uint64(b[0])
		case 2:
			return uint64(bo.Uint16(b))
		case 4:
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	put := func(b []byte, v uint64) {
		switch t.size {
		case 1:
			b[0] = byte(v)
		case 2:
			bo.PutUint16(b, uint16(v))
		case 4:
			bo.PutUint32(b, uint32(v))
		default:
			bo.PutUint64(b, v)
		}
	}
	var sum uint64
	var fsum32 float32
	var fsum64 float64
	for i := 0; i < len(src); i += t.size {
		v := get(src[i:])
		switch {
		case t.kind != 'f':
			sum += v // two's complement: the same bits for signed and unsigned
			put(out[i:], sum)
		case t.size == 4:
			fsum32 += math.Float32frombits(uint32(v))
			put(out[i:], uint64(math.Float32bits(fsum32)))
		default:
			fsum64 += math.Float64frombits(v)
			put(out[i:], math.Float64bits(fsum64))
		}
	}
	return out, nil
}
