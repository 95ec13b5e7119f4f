package engine

import (
	"fmt"

	"github.com/scc-dev/scc/engine/internal/format"
)

// Type is an element type. Elements are stored little-endian; the codes are
// part of the file format (FORMAT.md) and never change.
//
// A Type is a comparable value: the named types below are constants, and
// a fixed-length string type (FixedString) carries its length, padding and
// character set in the same value, so that Size, equality and every switch
// over types see the whole type. The low 8 bits are the file's type code;
// the bits above are only a string's parameters (bits 8..15 the padding,
// 16..23 the character set, 32..63 the length) and zero otherwise.
type Type uint64

const (
	Int8    Type = 1
	Int16   Type = 2
	Int32   Type = 3
	Int64   Type = 4
	Uint8   Type = 5
	Uint16  Type = 6
	Uint32  Type = 7
	Uint64  Type = 8
	Float32 Type = 9
	Float64 Type = 10
	// Bool is one byte, 0 false and 1 true (numpy's bool, h5py's boolean
	// enum). The typed API (WriteSlice[bool], ScalarAttr, a fill value)
	// never stores another byte and attributes refuse one with ErrInvalid;
	// Write of raw bytes stores the bytes as given, and the typed reads
	// take any nonzero byte as true.
	Bool Type = 11
	// Complex64 and Complex128 are a real then an imaginary part, each a
	// float32 (float64): Go's complex64 (complex128) in memory, numpy's
	// complex64 (complex128) and HDF5's complex types.
	Complex64  Type = 12
	Complex128 Type = 13
	// Float16 is IEEE 754 binary16 (numpy's float16, HDF5's
	// H5T_NATIVE_FLOAT16); BFloat16 is bfloat16, the top half of a
	// float32 (ml_dtypes' bfloat16). Go has no such types: ReadAs
	// converts them to and from every numeric type, and
	// Float16Bits/BFloat16Bits make their bits for writing.
	Float16  Type = 15
	BFloat16 Type = 16
)

// stringCode is the type code of every fixed-length string type
// (FixedString); alone, without a length, it is not a valid type.
const stringCode Type = 14

// Types lists the element types with no parameters of format versions 1
// to 5, in code order (fixed-length strings are made with FixedString).
// Float16 and BFloat16 are not in it: code that maps every type of this
// list onto another format maps those two separately.
var Types = []Type{Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float32, Float64, Bool, Complex64, Complex128}

// StrPad is how a fixed-length string fills the bytes after its text, as
// HDF5 defines it (H5T_str_t).
type StrPad uint8

const (
	// NullTerm: the text ends at the first NUL byte; a string of the full
	// length has none. (HDF5's H5T_STR_NULLTERM; HDF5 writes a NUL after
	// a shorter text and NULs after it, as scc does.)
	NullTerm StrPad = StrPad(format.PadNullTerm)
	// NullPad: the text is followed by NULs up to the length; trailing
	// NULs are not part of it (H5T_STR_NULLPAD, numpy's "S").
	NullPad StrPad = StrPad(format.PadNullPad)
	// SpacePad: the text is followed by spaces, which are not part of it
	// (H5T_STR_SPACEPAD, Fortran's strings).
	SpacePad StrPad = StrPad(format.PadSpacePad)
)

func (p StrPad) String() string {
	switch p {
	case NullTerm:
		return "nullterm"
	case NullPad:
		return "nullpad"
	case SpacePad:
		return "spacepad"
	}
	return fmt.Sprintf("pad(%d)", uint8(p))
}

// Charset is a fixed-length string's character set (H5T_cset_t).
type Charset uint8

const (
	ASCII Charset = Charset(format.CharsetASCII)
	UTF8  Charset = Charset(format.CharsetUTF8)
)

func (c Charset) String() string {
	switch c {
	case ASCII:
		return "ascii"
	case UTF8:
		return "utf-8"
	}
	return fmt.Sprintf("charset(%d)", uint8(c))
}

// MaxStringLen is the longest fixed-length string type, in bytes (its fill
// value must fit one part of the dataset header).
const MaxStringLen = format.MaxStringLen

// FixedString is the type of strings of exactly n bytes (1..MaxStringLen)
// padded by pad, in charset. An n, pad or charset out of range gives a
// type that is not Valid (CreateDataset refuses it with ErrInvalid).
// The length is in bytes, as HDF5's: a UTF-8 string of n bytes holds n
// ASCII characters or fewer others.
func FixedString(n int, pad StrPad, cs Charset) Type {
	if n <= 0 || n > MaxStringLen {
		return stringCode // invalid: no length
	}
	return stringCode | Type(pad)<<8 | Type(cs)<<16 | Type(n)<<32
}

// Code is the type's code in the file (FORMAT.md §7).
func (t Type) Code() uint8 { return uint8(t) }

// IsString reports whether t is a fixed-length string type.
func (t Type) IsString() bool { return t&0xff == stringCode }

// IsDescribed reports whether t is an enum, opaque, bitfield, array or
// compound type (types.go's described types).
func (t Type) IsDescribed() bool { return t&0xff == describedCode }

// StrLen, Pad and Charset report a fixed-length string type's parameters
// (zero for other types).
func (t Type) StrLen() int {
	if !t.IsString() {
		return 0
	}
	return int(t >> 32)
}

func (t Type) Pad() StrPad {
	if !t.IsString() {
		return 0
	}
	return StrPad(t >> 8)
}

func (t Type) Charset() Charset {
	if !t.IsString() {
		return 0
	}
	return Charset(t >> 16)
}

// Size reports the element size in bytes (0 for an invalid type).
func (t Type) Size() int {
	if t.IsDescribed() {
		if d := t.desc(); d != nil {
			return d.size
		}
		return 0
	}
	if t.IsString() {
		n := t.StrLen()
		if t>>24&0xff != 0 || t.Pad() > SpacePad || t.Charset() > UTF8 || n == 0 || n > MaxStringLen {
			return 0
		}
		return n
	}
	switch t {
	case Int8, Uint8, Bool:
		return 1
	case Int16, Uint16, Float16, BFloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64, Complex64:
		return 8
	case Complex128:
		return 16
	}
	return 0
}

// Valid reports whether t is one of the defined types.
func (t Type) Valid() bool { return t.Size() != 0 }

// Numeric reports whether t is an integer or floating-point type, the
// types ReadAs converts between.
func (t Type) Numeric() bool { return t >= Int8 && t <= Float64 || t == Float16 || t == BFloat16 }

func (t Type) String() string {
	names := [...]string{"", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
		"bool", "complex64", "complex128", "", "float16", "bfloat16"}
	switch {
	case t.IsDescribed() && t.Valid():
		return t.desc().String()
	case t.IsString() && t.Valid():
		return fmt.Sprintf("string(%d, %v, %v)", t.StrLen(), t.Pad(), t.Charset())
	case t.Valid():
		return names[t]
	}
	return fmt.Sprintf("type(%#x)", uint64(t))
}

// headerType sets a header's type fields from t.
func headerType(h *format.DatasetHeader, t Type) {
	h.Type = t.Code()
	switch {
	case t.IsString():
		h.StrLen, h.StrPad, h.StrCharset = uint32(t.StrLen()), uint8(t.Pad()), uint8(t.Charset())
	case t.IsDescribed():
		h.Desc = typeNode(t)
	}
}

// typeOfHeader is the type a header's fields name.
func typeOfHeader(h format.DatasetHeader) Type {
	switch h.Type {
	case format.TypeString:
		return stringCode | Type(h.StrPad)<<8 | Type(h.StrCharset)<<16 | Type(h.StrLen)<<32
	case format.TypeDescribed:
		return typeOfNode(h.Desc)
	}
	return Type(h.Type)
}

// checkElems reports an ErrInvalid for elements (little-endian, whole
// elements of t) the typed API could not have produced: a Bool byte other
// than 0 or 1.
func (t Type) checkElems(b []byte) error {
	if t != Bool {
		return nil
	}
	for i, c := range b {
		if c > 1 {
			return fmt.Errorf("%w: bool element %d is byte %#x (want 0 or 1)", ErrInvalid, i, c)
		}
	}
	return nil
}
