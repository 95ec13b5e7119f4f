package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Number is the set of Go element types a dataset can hold.
type Number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// TypeOf returns the element type matching T.
func TypeOf[T Number]() Type {
	var z T
	switch any(z).(type) {
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case uint8:
		return Uint8
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case uint64:
		return Uint64
	case float32:
		return Float32
	case float64:
		return Float64
	}
	// A named type (~T): decide by size and kind.
	return typeBySize[T]()
}

func typeBySize[T Number]() Type {
	var z T
	size := unsafe.Sizeof(z)
	isFloat := T(1)/T(2) != 0 // 0.5 for floats, 0 for integers
	isSigned := !isFloat && T(0)-T(1) < T(0)
	switch {
	case isFloat && size == 4:
		return Float32
	case isFloat:
		return Float64
	case isSigned:
		return [...]Type{1: Int8, 2: Int16, 4: Int32, 8: Int64}[size]
	default:
		return [...]Type{1: Uint8, 2: Uint16, 4: Uint32, 8: Uint64}[size]
	}
}

// littleEndian is true on hosts whose memory order matches the file's, so
// typed buffers can be handed to the engine without conversion.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// WriteSlice writes data (the selection's elements in C order) to ds.
func WriteSlice[T Number](ctx context.Context, ds *Dataset, sel Selection, data []T) error {
	if TypeOf[T]() != ds.Type() {
		return fmt.Errorf("%w: writing %v elements to a %v dataset", ErrInvalid, TypeOf[T](), ds.Type())
	}
	return ds.Write(ctx, sel, toBytes(data))
}

// ReadSlice reads the selection into out.
func ReadSlice[T Number](ctx context.Context, ds *Dataset, sel Selection, out []T) error {
	if TypeOf[T]() != ds.Type() {
		return fmt.Errorf("%w: reading a %v dataset into %v elements", ErrInvalid, ds.Type(), TypeOf[T]())
	}
	if littleEndian {
		return ds.Read(ctx, sel, asBytes(out))
	}
	buf := make([]byte, len(out)*int(unsafe.Sizeof(out[0])))
	if err := ds.Read(ctx, sel, buf); err != nil {
		return err
	}
	fromBytes(buf, out)
	return nil
}

// asBytes views a typed slice as its bytes, without copying.
func asBytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// toBytes returns the little-endian bytes of s (a view on little-endian hosts).
func toBytes[T Number](s []T) []byte {
	if littleEndian {
		return asBytes(s)
	}
	size := int(unsafe.Sizeof(*new(T)))
	out := make([]byte, len(s)*size)
	for i, v := range s {
		putElem(out[i*size:], v)
	}
	return out
}

func fromBytes[T Number](b []byte, out []T) {
	size := int(unsafe.Sizeof(*new(T)))
	for i := range out {
		out[i] = getElem[T](b[i*size:])
	}
}

func putElem[T Number](b []byte, v T) {
	switch x := any(v).(type) {
	case float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(x))
	case float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(x))
	default:
		u := uint64(int64(v))
		for i := 0; i < int(unsafe.Sizeof(v)); i++ {
			b[i] = byte(u >> (8 * i))
		}
	}
}

func getElem[T Number](b []byte) T {
	var z T
	switch any(z).(type) {
	case float32:
		return T(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case float64:
		return T(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	var u uint64
	for i := int(unsafe.Sizeof(z)) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	return T(u)
}
