package engine

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"
)

// Number is the set of Go numeric element types, the ones ReadSlice and
// ReadAs convert between.
type Number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Element is the set of Go element types a dataset can hold: the numbers,
// bool (Bool) and the complex types (Complex64, Complex128).
type Element interface {
	Number | ~bool | ~complex64 | ~complex128
}

// TypeOf returns the element type matching T (a named type by its
// underlying kind).
func TypeOf[T Element]() Type {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int8:
		return Int8
	case reflect.Int16:
		return Int16
	case reflect.Int32:
		return Int32
	case reflect.Int64:
		return Int64
	case reflect.Uint8:
		return Uint8
	case reflect.Uint16:
		return Uint16
	case reflect.Uint32:
		return Uint32
	case reflect.Uint64:
		return Uint64
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Bool:
		return Bool
	case reflect.Complex64:
		return Complex64
	case reflect.Complex128:
		return Complex128
	}
	panic("unreachable: Element admits no other kind")
}

// littleEndian is true on hosts whose memory order matches the file's, so
// typed buffers can be handed to the engine without conversion.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// WriteSlice writes data (the selection's elements in C order) to ds. T
// must be the dataset's type, or an enum dataset's base type: writes
// never convert.
func WriteSlice[T Element](ctx context.Context, ds *Dataset, sel Selection, data []T) error {
	if TypeOf[T]() != convType(ds.Type()) {
		return fmt.Errorf("%w: dataset %q: writing %v elements to a %v dataset", ErrInvalid, ds.s.path(), TypeOf[T](), ds.Type())
	}
	return ds.Write(ctx, sel, toBytes(data))
}

// ReadSlice reads the selection into out. When T is not the dataset's
// type, the elements are converted as ReadAs does with the zero
// ConvertOptions (HDF5's rules: saturate at the range of T); a Bool or
// complex dataset reads only into its own type (complex64 and complex128
// into each other). A Bool element reads as true for any nonzero byte.
func ReadSlice[T Element](ctx context.Context, ds *Dataset, sel Selection, out []T) error {
	return ReadAs(ctx, ds, sel, out, ConvertOptions{})
}

// ReadAs reads the selection into out, converting each element from the
// dataset's type to T under opts (convert.go: the rules, and the
// conversions there are). Conversion never reinterprets bytes.
func ReadAs[T Element](ctx context.Context, ds *Dataset, sel Selection, out []T, opts ConvertOptions) error {
	dt, st := TypeOf[T](), ds.Type()
	if !canConvert(st, dt) {
		return fmt.Errorf("%w: dataset %q: reading a %v dataset into %v elements", ErrInvalid, ds.s.path(), st, dt)
	}
	if dt == convType(st) {
		if littleEndian {
			if err := ds.Read(ctx, sel, asBytes(out)); err != nil {
				return err
			}
		} else {
			buf := make([]byte, len(out)*dt.Size())
			if err := ds.Read(ctx, sel, buf); err != nil {
				return err
			}
			fromBytes(buf, out)
		}
		if dt == Bool {
			normalizeBools(asBytes(out))
		}
		return nil
	}
	src := make([]byte, len(out)*st.Size())
	if err := ds.Read(ctx, sel, src); err != nil {
		return err
	}
	dst := asBytes(out)
	if !littleEndian {
		dst = make([]byte, len(out)*dt.Size())
	}
	if err := convertElems(dst, dt, src, st, opts); err != nil {
		return classifyIn(err, ds.s.path())
	}
	if !littleEndian {
		fromBytes(dst, out)
	}
	return nil
}

// normalizeBools makes every nonzero byte 1, before the bytes are read as
// Go bools (whose only representations are 0 and 1).
func normalizeBools(b []byte) {
	for i, c := range b {
		if c > 1 {
			b[i] = 1
		}
	}
}

// asBytes views a typed slice as its bytes, without copying.
func asBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// toBytes returns the little-endian bytes of s (a view on little-endian hosts).
func toBytes[T Element](s []T) []byte {
	if littleEndian {
		return asBytes(s)
	}
	out := append([]byte(nil), asBytes(s)...)
	swapParts(out, partSize(TypeOf[T]()))
	return out
}

// fromBytes fills out from little-endian element bytes.
func fromBytes[T Element](b []byte, out []T) {
	mem := asBytes(out)
	copy(mem, b)
	if !littleEndian {
		swapParts(mem, partSize(TypeOf[T]()))
	}
	if TypeOf[T]() == Bool {
		normalizeBools(mem)
	}
}

// partSize is the size of the numbers an element of t is made of: the
// element itself, or each half of a complex element.
func partSize(t Type) int {
	if t == Complex64 || t == Complex128 {
		return t.Size() / 2
	}
	return t.Size()
}

// swapParts reverses the bytes of each n-byte number of b, converting
// between little-endian and the host's big-endian order.
func swapParts(b []byte, n int) {
	for i := 0; i+n <= len(b); i += n {
		p := b[i : i+n]
		for j, k := 0, n-1; j < k; j, k = j+1, k-1 {
			p[j], p[k] = p[k], p[j]
		}
	}
}
