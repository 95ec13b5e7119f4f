package engine

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Conversion on read (ReadSlice, ReadAs) follows HDF5's default numeric
// conversions (H5Dread with the library's conversion paths and no
// exception callback):
//
//   - integer to integer: the value when the target can hold it, else the
//     target's minimum or maximum (saturation);
//   - floating point to integer: rounded toward zero, then saturated; +Inf
//     gives the maximum, -Inf the minimum, NaN gives 0;
//   - integer to floating point: the nearest value (ties to even);
//   - float64 to float32, and any number to float16 or bfloat16: the
//     nearest value (ties to even, rounded once, as numpy rounds), ±Inf
//     beyond the target's range; NaN stays NaN, ±Inf stay ±Inf; float16
//     and bfloat16 convert to the other floats exactly;
//   - an enum converts as its base integer type (the integers its
//     elements hold); bitfields, opaque, array and compound types
//     convert to nothing (ReadField reads a compound's field);
//   - complex64 and complex128 into each other: each part as float64 and
//     float32 convert;
//   - Bool and the complex types convert to no other type: a bool is not a
//     number here, and dropping an imaginary part loses a value without
//     saying so.
//   - fixed-length strings (FixedString) convert to nothing and have no Go
//     element type: Dataset.ReadStrings and WriteStrings read and write
//     them as text under their padding rule.
//
// With Strict, a value the target cannot hold fails the read with
// ErrOutOfRange instead of saturating: an integer outside the target's
// range, a float whose integer part is outside it, a NaN or infinity read
// as an integer, or a finite float64 (or complex part) that overflows
// float32. Rounding (a float's fraction dropped, an integer or float64
// rounded to the nearest float) is never an error: HDF5 does not raise it
// either unless asked per value, and it is the conversion's purpose. On
// error out holds an unspecified mix of converted and old elements.

// ConvertOptions chooses how ReadAs treats values the target type cannot
// hold.
type ConvertOptions struct {
	// Strict fails with ErrOutOfRange where the default saturates.
	Strict bool
}

// canConvert reports whether ReadAs converts elements of st to dt. An
// enum converts as its base integer type, the values its elements hold.
func canConvert(st, dt Type) bool {
	st, dt = convType(st), convType(dt)
	switch {
	case !st.Valid() || !dt.Valid():
		return false
	case st == dt:
		return true
	case st.Numeric() && dt.Numeric():
		return true
	}
	cplx := func(t Type) bool { return t == Complex64 || t == Complex128 }
	return cplx(st) && cplx(dt)
}

// convType is the type whose conversions t's elements take: an enum's
// base integer type, else t.
func convType(t Type) Type {
	if t.Class() == ClassEnum {
		return t.Base()
	}
	return t
}

// ConvertElems converts the little-endian elements of src (type st) into
// dst (type dt), under ReadAs's rules (the top of convert.go) and opts.
// It is the conversion of ReadAs for callers that hold elements as bytes,
// and the one way into Float16 and BFloat16, which have no Go type. src
// and dst must hold the same number of whole elements; ErrInvalid when
// they do not or when no conversion exists between the types.
func ConvertElems(dst []byte, dt Type, src []byte, st Type, opts ConvertOptions) error {
	if !canConvert(st, dt) {
		return fmt.Errorf("%w: no conversion from %v to %v", ErrInvalid, st, dt)
	}
	ss, ds := st.Size(), dt.Size()
	if len(src)%ss != 0 || len(dst)%ds != 0 || len(src)/ss != len(dst)/ds {
		return fmt.Errorf("%w: converting %d bytes of %v into %d bytes of %v", ErrInvalid, len(src), st, len(dst), dt)
	}
	if convType(st) == convType(dt) {
		copy(dst, src)
		return nil
	}
	return convertElems(dst, dt, src, st, opts)
}

// convertElems converts the little-endian elements of src (type st) into
// dst (type dt, the same number of elements). canConvert(st, dt) holds.
func convertElems(dst []byte, dt Type, src []byte, st Type, opts ConvertOptions) error {
	st, dt = convType(st), convType(dt)
	if st == Complex64 || st == Complex128 {
		// Each part is a float of half the element size.
		return convertElems(dst, partType(dt), src, partType(st), opts)
	}
	ss, ds := st.Size(), dt.Size()
	for i, j := 0, 0; i+ss <= len(src); i, j = i+ss, j+ds {
		if err := convertOne(dst[j:j+ds], dt, src[i:i+ss], st, opts); err != nil {
			return within(err, fmt.Sprintf("element %d", i/ss))
		}
	}
	return nil
}

// partType is the float type of one part of a complex type.
func partType(t Type) Type {
	if t == Complex64 {
		return Float32
	}
	return Float64
}

var le = binary.LittleEndian // convertOne's shorthand

// intRange reports an integer type's bounds: signed types in lo/hi, the
// unsigned maximum in umax.
func intRange(t Type) (signed bool, lo, hi int64, umax uint64) {
	bits := uint(t.Size() * 8)
	switch t {
	case Int8, Int16, Int32, Int64:
		return true, -1 << (bits - 1), 1<<(bits-1) - 1, 0
	}
	return false, 0, 0, 1<<bits - 1 // bits == 64 wraps to the maximum
}

func putInt(b []byte, t Type, v uint64) {
	for k := range t.Size() {
		b[k] = byte(v >> (8 * k))
	}
}

func convertOne(d []byte, dt Type, s []byte, st Type, opts ConvertOptions) error {
	outOfRange := func(v any) error {
		return fmt.Errorf("%w: %v value %v does not fit %v", ErrOutOfRange, st, v, dt)
	}
	switch st {
	case Float32, Float64, Float16, BFloat16:
		var f float64
		switch st {
		case Float32:
			f = float64(math.Float32frombits(le.Uint32(s)))
		case Float64:
			f = math.Float64frombits(le.Uint64(s))
		case Float16:
			f = binary16.fromBits(le.Uint16(s))
		default:
			f = bfloat16.fromBits(le.Uint16(s))
		}
		switch dt {
		case Float32:
			r := float32(f)
			if opts.Strict && math.IsInf(float64(r), 0) && !math.IsInf(f, 0) {
				return outOfRange(f)
			}
			le.PutUint32(d, math.Float32bits(r))
			return nil
		case Float64:
			le.PutUint64(d, math.Float64bits(f))
			return nil
		case Float16, BFloat16:
			return putHalf(d, dt, f, opts, outOfRange)
		}
		return floatToInt(d, dt, f, opts, outOfRange)
	}
	// An integer source: its value is i (signed types) or u (unsigned).
	var u uint64
	for k := st.Size() - 1; k >= 0; k-- {
		u = u<<8 | uint64(s[k])
	}
	ssigned, _, _, _ := intRange(st)
	var i int64
	if ssigned {
		shift := uint(64 - 8*st.Size())
		i = int64(u<<shift) >> shift // sign-extend
	}
	switch dt {
	case Float32:
		var r float32
		if ssigned {
			r = float32(i)
		} else {
			r = float32(u)
		}
		le.PutUint32(d, math.Float32bits(r))
		return nil
	case Float64:
		var r float64
		if ssigned {
			r = float64(i)
		} else {
			r = float64(u)
		}
		le.PutUint64(d, math.Float64bits(r))
		return nil
	case Float16, BFloat16:
		// Through float64, exact below 2^53; above, only bfloat16 can
		// hold the value, and its 8 bits of precision make a second
		// rounding matter only at exact ties of the first.
		r := float64(u)
		if ssigned {
			r = float64(i)
		}
		return putHalf(d, dt, r, opts, outOfRange)
	}
	dsigned, lo, hi, umax := intRange(dt)
	var out uint64
	switch {
	case ssigned && dsigned:
		out = uint64(min(max(i, lo), hi))
		if opts.Strict && (i < lo || i > hi) {
			return outOfRange(i)
		}
	case ssigned: // to unsigned
		if i < 0 {
			if opts.Strict {
				return outOfRange(i)
			}
			out = 0
		} else {
			out = min(uint64(i), umax)
			if opts.Strict && uint64(i) > umax {
				return outOfRange(i)
			}
		}
	case dsigned: // unsigned to signed
		out = min(u, uint64(hi))
		if opts.Strict && u > uint64(hi) {
			return outOfRange(u)
		}
	default:
		out = min(u, umax)
		if opts.Strict && u > umax {
			return outOfRange(u)
		}
	}
	putInt(d, dt, out)
	return nil
}

// putHalf rounds f into the Float16 or BFloat16 dt; with Strict a finite
// f beyond dt's range fails instead of becoming an infinity.
func putHalf(d []byte, dt Type, f float64, opts ConvertOptions, outOfRange func(any) error) error {
	h := binary16
	if dt == BFloat16 {
		h = bfloat16
	}
	b := h.toBits(f)
	if opts.Strict && b&0x7fff == 0x7fff&^(1<<h.fracBits-1) && !math.IsInf(f, 0) {
		return outOfRange(f)
	}
	le.PutUint16(d, b)
	return nil
}

// floatToInt rounds f toward zero and saturates it into the integer type
// dt (NaN to 0), or with Strict fails for what does not fit.
func floatToInt(d []byte, dt Type, f float64, opts ConvertOptions, outOfRange func(any) error) error {
	signed, lo, hi, umax := intRange(dt)
	t := math.Trunc(f)
	// The bounds as floats: -2^(n-1) and 2^(n-1) (signed), 2^n (unsigned)
	// are exact powers of two, so the comparisons below are exact.
	bits := dt.Size() * 8
	var out uint64
	switch {
	case math.IsNaN(f):
		if opts.Strict {
			return outOfRange(f)
		}
		out = 0
	case signed:
		limit := math.Ldexp(1, bits-1)
		switch {
		case t >= limit:
			if opts.Strict {
				return outOfRange(f)
			}
			out = uint64(hi)
		case t < -limit:
			if opts.Strict {
				return outOfRange(f)
			}
			out = uint64(lo)
		default:
			out = uint64(int64(t))
		}
	default:
		limit := math.Ldexp(1, bits)
		switch {
		case t >= limit:
			if opts.Strict {
				return outOfRange(f)
			}
			out = umax
		case t < 0:
			if opts.Strict {
				return outOfRange(f)
			}
			out = 0
		default:
			out = uint64(t)
		}
	}
	putInt(d, dt, out)
	return nil
}
