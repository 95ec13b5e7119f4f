package engine

import "fmt"

// Type is an element type. Elements are stored little-endian; the codes are
// part of the file format (FORMAT.md) and never change.
type Type uint8

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
)

// Types lists every element type, in code order.
var Types = []Type{Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float32, Float64, Bool, Complex64, Complex128}

// Size reports the element size in bytes (0 for an invalid type).
func (t Type) Size() int {
	switch t {
	case Int8, Uint8, Bool:
		return 1
	case Int16, Uint16:
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
func (t Type) Numeric() bool { return t >= Int8 && t <= Float64 }

func (t Type) String() string {
	names := [...]string{"", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
		"bool", "complex64", "complex128"}
	if t.Valid() {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
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
