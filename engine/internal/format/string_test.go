package format

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func stringHeader(n uint32, pad, cs uint8, fill []byte) DatasetHeader {
	return DatasetHeader{Name: "s", ID: 3, Type: TypeString, StrLen: n, StrPad: pad, StrCharset: cs,
		Shape: []uint64{4}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{2}, Layout: LayoutDense, Fill: fill}
}

// TestHeaderStringType: a string header keeps its length, padding and
// character set; a fill value of up to 255 bytes stays in the fixed part
// and a longer one goes to the wide fill part, both re-encoding to the
// same bytes; the chunk size counts the string length.
func TestHeaderStringType(t *testing.T) {
	for _, h := range []DatasetHeader{
		stringHeader(1, PadNullTerm, CharsetASCII, nil),
		stringHeader(16, PadSpacePad, CharsetUTF8, []byte("héllo          ")),
		stringHeader(255, PadNullPad, CharsetASCII, bytes.Repeat([]byte{'a'}, 255)),
		stringHeader(256, PadNullPad, CharsetASCII, bytes.Repeat([]byte{'b'}, 256)),
		stringHeader(MaxStringLen, PadNullTerm, CharsetUTF8, bytes.Repeat([]byte{'c'}, MaxStringLen)),
	} {
		b := EncodeDatasetHeader(h)
		got, err := DecodeDatasetHeader(b)
		if err != nil {
			t.Fatalf("len %d: %v", h.StrLen, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("len %d: decoded %+v, want %+v", h.StrLen, got, h)
		}
		if !bytes.Equal(EncodeDatasetHeader(got), b) {
			t.Fatalf("len %d: re-encoding differs", h.StrLen)
		}
		if wide := b[25] == 0 && len(h.Fill) > 0; wide != (len(h.Fill) > 255) {
			t.Fatalf("len %d: fill length byte %d for a fill of %d", h.StrLen, b[25], len(h.Fill))
		}
		if got.ChunkBytes() != uint64(2*h.StrLen) {
			t.Fatalf("len %d: chunk bytes %d", h.StrLen, got.ChunkBytes())
		}
		// Older versions knew no string type: damage, not a newer file.
		for v := uint8(MinVersion); v < 4; v++ {
			if _, err := DecodeDatasetHeader(resealAs(b, v)); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) {
				t.Fatalf("len %d sealed as v%d: %v, want ErrCorrupt", h.StrLen, v, err)
			}
		}
	}
}

// TestHeaderStringInvalid: parameters out of range are refused by
// Validate and, when encoded anyway, by the decoder.
func TestHeaderStringInvalid(t *testing.T) {
	num := DatasetHeader{Name: "n", ID: 1, Type: TypeInt32, Shape: []uint64{4}, MaxShape: []uint64{4}, Chunk: []uint64{2}, Layout: LayoutDense}
	strOnInt := num
	strOnInt.StrPad = 1
	for name, h := range map[string]DatasetHeader{
		"length 0":         stringHeader(0, 0, 0, nil),
		"length too large": stringHeader(MaxStringLen+1, 0, 0, nil),
		"padding 3":        stringHeader(4, 3, 0, nil),
		"charset 2":        stringHeader(4, 0, 2, nil),
		"short fill":       stringHeader(4, 0, 0, []byte("abc")),
		"params on int32":  strOnInt,
	} {
		if err := h.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
		if _, err := DecodeDatasetHeader(EncodeDatasetHeader(h)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decode = %v, want ErrCorrupt", name, err)
		}
	}
}

// TestHeaderStringParts: the parts must match the type: a string header
// without its string part, a numeric one with one, a wide fill part that
// the fixed part could hold, or one beside an inline fill, are damage.
func TestHeaderStringParts(t *testing.T) {
	str := EncodeDatasetHeader(stringHeader(8, PadNullPad, CharsetASCII, nil))
	num := EncodeDatasetHeader(DatasetHeader{Name: "n", ID: 1, Type: TypeInt32, Shape: []uint64{4}, MaxShape: []uint64{4}, Chunk: []uint64{2}, Layout: LayoutDense})
	cut := func(b []byte, tail int) []byte { return bytes.Clone(b[:len(b)-crcSize-tail]) }
	seal := func(b []byte) []byte { return le.AppendUint32(b, Checksum(b)) }
	addPart := func(b []byte, tag uint16, data []byte) []byte {
		return seal(appendParts(cut(b, 0), []part{{tag, data}}))
	}
	small := EncodeDatasetHeader(stringHeader(4, PadNullPad, CharsetASCII, []byte("abcd")))
	for name, b := range map[string][]byte{
		"string without its part":    seal(cut(str, partHeader+stringTypeBytes)),
		"int32 with a string part":   addPart(num, partStringType, []byte{4, 0, 0, 0, 1, 0}),
		"string part of 5 bytes":     seal(append(cut(str, partHeader+stringTypeBytes), appendParts(nil, []part{{partStringType, []byte{8, 0, 0, 0, 1}}})...)),
		"wide fill that fits inline": addPart(EncodeDatasetHeader(stringHeader(4, PadNullPad, CharsetASCII, nil)), partWideFill, []byte("abcd")),
		"wide fill beside inline":    addPart(small, partWideFill, bytes.Repeat([]byte{1}, 300)),
	} {
		if _, err := DecodeDatasetHeader(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
