package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// Value returns the attribute's value as the Go value it holds, for
// printing, JSON and code that switches on the type: a string
// attribute's text (string), a byte string ([]byte, a copy), a scalar as
// its element's Go type (int8 ... float64, bool, complex64, complex128;
// a fixed-length string as string) and an array as a slice of it ([]int32,
// []string ...). The typed getters (Scalar, Array, Str) are for code that
// knows the type.
func (v AttrValue) Value() any {
	switch v.kind {
	case AttrString:
		return string(v.data)
	case AttrBytes:
		return v.Bytes()
	case AttrScalar, AttrArray:
	default:
		return nil
	}
	var arr any
	switch {
	case v.typ.IsString():
		s, _ := v.Strings()
		arr = s
	default:
		arr = v.elements()
	}
	if v.kind == AttrArray || arr == nil {
		return arr
	}
	if s, ok := arr.([]string); ok && len(s) == 1 {
		return s[0]
	}
	return firstOf(arr)
}

// elements is a scalar's or array's elements as a slice of their Go type.
func (v AttrValue) elements() any {
	switch v.typ {
	case Int8:
		return attrSlice[int8](v)
	case Int16:
		return attrSlice[int16](v)
	case Int32:
		return attrSlice[int32](v)
	case Int64:
		return attrSlice[int64](v)
	case Uint8:
		return attrSlice[uint8](v)
	case Uint16:
		return attrSlice[uint16](v)
	case Uint32:
		return attrSlice[uint32](v)
	case Uint64:
		return attrSlice[uint64](v)
	case Float32:
		return attrSlice[float32](v)
	case Float64:
		return attrSlice[float64](v)
	case Bool:
		return attrSlice[bool](v)
	case Complex64:
		return attrSlice[complex64](v)
	case Complex128:
		return attrSlice[complex128](v)
	}
	return nil
}

func attrSlice[T Element](v AttrValue) []T {
	s, err := Array[T](v)
	if err != nil {
		return nil
	}
	return s
}

// firstOf is the one element of a one-element slice of elements.
func firstOf(arr any) any {
	switch s := arr.(type) {
	case []int8:
		return s[0]
	case []int16:
		return s[0]
	case []int32:
		return s[0]
	case []int64:
		return s[0]
	case []uint8:
		return s[0]
	case []uint16:
		return s[0]
	case []uint32:
		return s[0]
	case []uint64:
		return s[0]
	case []float32:
		return s[0]
	case []float64:
		return s[0]
	case []bool:
		return s[0]
	case []complex64:
		return s[0]
	case []complex128:
		return s[0]
	}
	return nil
}

// String formats the value as Python prints it in h5py (and scctl ls shows
// it): text as it is, a scalar as its number, an array as [1 2 3], strings
// of an array quoted, a byte string as b'...'.
func (v AttrValue) String() string {
	switch v.kind {
	case AttrString:
		return string(v.data)
	case AttrBytes:
		return "b" + strconv.QuoteToASCII(string(v.data))
	}
	val := v.Value()
	switch x := val.(type) {
	case nil:
		return fmt.Sprintf("AttrValue(%v, %v, %d bytes)", v.kind, v.typ, len(v.data))
	case string:
		return x
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, " ") + "]"
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case []float32:
		q := make([]string, len(x))
		for i, f := range x {
			q[i] = strconv.FormatFloat(float64(f), 'g', -1, 32)
		}
		return "[" + strings.Join(q, " ") + "]"
	}
	return fmt.Sprint(val)
}
