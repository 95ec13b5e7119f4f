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
)

// Types lists every element type, in code order.
var Types = []Type{Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float32, Float64}

// Size reports the element size in bytes (0 for an invalid type).
func (t Type) Size() int {
	switch t {
	case Int8, Uint8:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// Valid reports whether t is one of the defined types.
func (t Type) Valid() bool { return t.Size() != 0 }

func (t Type) String() string {
	names := [...]string{"", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"}
	if t.Valid() {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}
