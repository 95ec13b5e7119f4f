package engine

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Value returns the attribute's value as the Go value it holds, for
// printing, JSON and code that switches on the type: a string
// attribute's text (string), a byte string ([]byte, a copy), a scalar as
// its element's Go type (int8 ... float64, bool, complex64, complex128;
// a fixed-length string as string) and an array as a slice of it ([]int32,
// []string ...). Elements of float16, bfloat16 and the described types
// come as elemValue gives them (float32, an enum's base integer, []byte,
// []any for an array type, map[string]any for a compound), a scalar as one
// and an array as []any. An N-D array is nested []any, one level per
// dimension but the last, whose rows are the slices a 1-D array gives
// (as JSON: nested lists); a null is nil. The typed getters (Scalar,
// Array, Str) are for code that knows the type.
func (v AttrValue) Value() any {
	if v.dims != nil {
		flat := AttrValue{kind: AttrArray, typ: v.typ, data: v.data}.Value()
		if flat == nil {
			return nil
		}
		return nestRows(reflect.ValueOf(flat), v.dims)
	}
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
	case v.typ.Class() != ClassInvalid && v.elements() == nil:
		// float16, bfloat16 and the described types: one Go value per
		// element (elemValue).
		es := v.typ.Size()
		if es == 0 || len(v.data)%es != 0 {
			return nil
		}
		out := make([]any, len(v.data)/es)
		for i := range out {
			out[i] = elemValue(v.typ, v.data[i*es:(i+1)*es])
		}
		if v.kind == AttrScalar && len(out) == 1 {
			return out[0]
		}
		return out
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

// nestRows splits flat, a slice of the product of dims elements, into
// nested []any of dims, its last dimension as sub-slices of flat.
func nestRows(flat reflect.Value, dims []uint64) any {
	if len(dims) == 1 {
		return flat.Interface()
	}
	n := int(dims[0])
	out := make([]any, n)
	step := 0
	if n > 0 {
		step = flat.Len() / n
	}
	for i := range out {
		out[i] = nestRows(flat.Slice(i*step, (i+1)*step), dims[1:])
	}
	return out
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

// elemValue is one element of type t as a Go value: a number as its Go
// type (float16 and bfloat16 as float32), an enum as its base integer, a
// fixed string as string, opaque and bitfield bytes as []byte, an array
// as []any of its elements and a compound as map[string]any by field.
func elemValue(t Type, b []byte) any {
	switch t.Class() {
	case ClassEnum:
		return elemValue(t.Base(), b)
	case ClassOpaque, ClassBitfield:
		return append([]byte(nil), b...)
	case ClassString:
		return DecodeString(t, b)
	case ClassArray:
		et := t.Base()
		es := et.Size()
		out := make([]any, 0, len(b)/max(es, 1))
		for off := 0; es > 0 && off+es <= len(b); off += es {
			out = append(out, elemValue(et, b[off:off+es]))
		}
		return out
	case ClassCompound:
		m := make(map[string]any, len(t.Fields()))
		for _, f := range t.Fields() {
			if end := f.Offset + f.Type.Size(); end <= len(b) {
				m[f.Name] = elemValue(f.Type, b[f.Offset:end])
			}
		}
		return m
	}
	switch t {
	case Float16:
		return float32(Float16FromBits(binary.LittleEndian.Uint16(b)))
	case BFloat16:
		return float32(BFloat16FromBits(binary.LittleEndian.Uint16(b)))
	}
	v := AttrValue{kind: AttrScalar, typ: t, data: b}
	if s := v.elements(); s != nil {
		return firstOf(s)
	}
	return nil
}

// enumName is the name of an enum element's value, if it has one.
func enumName(t Type, b []byte) (string, bool) {
	var val int64
	switch x := elemValue(t.Base(), b).(type) {
	case int8:
		val = int64(x)
	case int16:
		val = int64(x)
	case int32:
		val = int64(x)
	case int64:
		val = x
	case uint8:
		val = int64(x)
	case uint16:
		val = int64(x)
	case uint32:
		val = int64(x)
	case uint64:
		val = int64(x)
	default:
		return "", false
	}
	for _, m := range t.Members() {
		if m.Value == val {
			return m.Name, true
		}
	}
	return "", false
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
// it): text as it is, a scalar as its number, an array as [1 2 3], an N-D
// array as nested lists ([[1 2] [3 4]]), strings of an array quoted, a
// byte string as b'...', a null as h5py's Empty(dtype=dtype('float32')).
func (v AttrValue) String() string {
	if v.dims != nil {
		return v.nestedString()
	}
	switch v.kind {
	case AttrNull:
		return "Empty(dtype=dtype('" + numpyName(v.typ) + "'))"
	case AttrString:
		return string(v.data)
	case AttrBytes:
		return "b" + strconv.QuoteToASCII(string(v.data))
	}
	if v.typ.Class() == ClassEnum {
		// An enum prints its members' names, as h5py prints the names of
		// an enum dtype's values.
		es := v.typ.Size()
		var names []string
		for off := 0; es > 0 && off+es <= len(v.data); off += es {
			n, ok := enumName(v.typ, v.data[off:off+es])
			if !ok {
				n = fmt.Sprint(elemValue(v.typ.Base(), v.data[off:off+es]))
			}
			names = append(names, n)
		}
		if v.kind == AttrScalar && len(names) == 1 {
			return names[0]
		}
		return "[" + strings.Join(names, " ") + "]"
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

// nestedString prints an N-D array as numpy does, rows in brackets inside
// brackets, each element as the 1-D array's String prints it.
func (v AttrValue) nestedString() string {
	es := v.typ.Size()
	elems := make([]string, v.Len())
	for i := range elems {
		e := AttrValue{kind: AttrArray, typ: v.typ, data: v.data[i*es : (i+1)*es]}.String()
		elems[i] = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")
	}
	var b strings.Builder
	var rows func(elems []string, dims []uint64)
	rows = func(elems []string, dims []uint64) {
		b.WriteByte('[')
		if len(dims) == 1 {
			b.WriteString(strings.Join(elems, " "))
		} else if n := int(dims[0]); n > 0 {
			step := len(elems) / n
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(' ')
				}
				rows(elems[i*step:(i+1)*step], dims[1:])
			}
		}
		b.WriteByte(']')
	}
	rows(elems, v.dims)
	return b.String()
}

// numpyName is the name numpy gives the dtype of t's elements, as h5py's
// Empty prints it; text (type 0) is h5py's object dtype for strings.
func numpyName(t Type) string {
	switch {
	case t == 0:
		return "O"
	case t.IsString():
		return fmt.Sprintf("S%d", t.StrLen())
	}
	return t.String()
}
