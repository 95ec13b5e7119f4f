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
// before it (the first as it is) in the numpy type astype, the elements
// being of dtype (the array's type); decoding is numpy's cumsum of the
// astype elements into dtype: integers (either kind, either width) summed
// with 64-bit wrapping and truncated to dtype, which is dtype's own
// wrapping sum of the sign- or zero-extended differences; floats summed
// in the wider of the two float types and rounded to dtype element by
// element. A pair of an integer and a float type, which numpy's cumsum
// refuses to cast, is refused.
type deltaElem struct {
	kind      byte // 'i', 'u' or 'f'
	size      int
	bigEndian bool
}

type deltaType struct {
	deltaElem           // dtype: the array's elements
	as        deltaElem // astype: the stored differences
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
	a, err := parseDeltaType(as)
	if err != nil {
		return deltaType{}, fmt.Errorf("%w: codec %q: astype %s", ErrUnsupported, id, asJSON(cfg["astype"]))
	}
	if (a.kind == 'f') != (t.kind == 'f') {
		return deltaType{}, fmt.Errorf("%w: codec %q: astype %q and dtype %q are not both integers or both floats (numpy's cumsum does not cast between them)", ErrUnsupported, id, as, dt)
	}
	if t.size != elemSize {
		return deltaType{}, fmt.Errorf("%w: codec %q: dtype %q is not the array's %d-byte type", ErrCorrupt, id, dt, elemSize)
	}
	return deltaType{t, a}, nil
}

func parseDeltaType(s string) (deltaElem, error) {
	if len(s) < 3 || !strings.ContainsRune("<>|=", rune(s[0])) {
		return deltaElem{}, fmt.Errorf("dtype %q", s)
	}
	var t deltaElem
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
		return deltaElem{}, fmt.Errorf("dtype %q", s)
	}
	if t.size == 1 {
		t.bigEndian = false
	}
	return t, nil
}

func (e deltaElem) order() binary.ByteOrder {
	if e.bigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

func (e deltaElem) get(b []byte) uint64 {
	switch e.size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(e.order().Uint16(b))
	case 4:
		return uint64(e.order().Uint32(b))
	}
	return e.order().Uint64(b)
}

func (e deltaElem) put(b []byte, v uint64) {
	switch e.size {
	case 1:
		b[0] = byte(v)
	case 2:
		e.order().PutUint16(b, uint16(v))
	case 4:
		e.order().PutUint32(b, uint32(v))
	default:
		e.order().PutUint64(b, v)
	}
}

// inSize is the bytes of the differences of out bytes of elements.
func (t deltaType) inSize(out int) int { return out / t.size * t.as.size }

// decode is the running sum of src's differences as elements of dtype,
// into at most max bytes.
func (t deltaType) decode(src []byte, max int) ([]byte, error) {
	if len(src)%t.as.size != 0 || len(src)/t.as.size > max/t.size {
		return nil, fmt.Errorf("%w: delta input of %d bytes (differences of %d bytes, at most %d elements)", ErrCorrupt, len(src), t.as.size, max/t.size)
	}
	n := len(src) / t.as.size
	out := make([]byte, n*t.size)
	var sum uint64
	var fsum32 float32
	var fsum64 float64
	for i := 0; i < n; i++ {
		v := t.as.get(src[i*t.as.size:])
		o := out[i*t.size:]
		switch {
		case t.kind != 'f':
			if t.as.kind == 'i' && t.as.size < 8 { // sign-extend
				sh := 64 - 8*t.as.size
				v = uint64(int64(v<<sh) >> sh)
			}
			sum += v // two's complement: the same bits for signed and unsigned
			t.put(o, sum)
		case t.size == 4 && t.as.size == 4:
			fsum32 += math.Float32frombits(uint32(v))
			t.put(o, uint64(math.Float32bits(fsum32)))
		default:
			if t.as.size == 4 {
				fsum64 += float64(math.Float32frombits(uint32(v)))
			} else {
				fsum64 += math.Float64frombits(v)
			}
			if t.size == 4 {
				t.put(o, uint64(math.Float32bits(float32(fsum64))))
			} else {
				t.put(o, math.Float64bits(fsum64))
			}
		}
	}
	return out, nil
}
