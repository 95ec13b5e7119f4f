package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"testing"
)

// convertEdges is every edge value the reference test converts: each
// type's bounds, the bounds of every other type and their neighbours, ±0,
// NaN, ±Inf, halves (rounding toward zero, and ties of int to float
// rounding), and float32 overflow edges.
func convertEdges() (ints []*big.Int, floats []float64) {
	for _, e := range []uint{7, 8, 15, 16, 24, 31, 32, 53, 63, 64} {
		p := new(big.Int).Lsh(big.NewInt(1), e)
		for _, d := range []int64{-3, -2, -1, 0, 1, 2, 3} {
			v := new(big.Int).Add(p, big.NewInt(d))
			ints = append(ints, v, new(big.Int).Neg(v))
		}
		f := math.Ldexp(1, int(e))
		floats = append(floats, f, -f, f-0.5, -f+0.5, f+0.5, -f-0.5, f-1, -f-1, f+1, math.Nextafter(f, 0), math.Nextafter(-f, 0), math.Nextafter(f, math.Inf(1)), math.Nextafter(-f, math.Inf(-1)))
	}
	for _, v := range []int64{0, 1, -1, 2, -2, 100, -100} {
		ints = append(ints, big.NewInt(v))
	}
	// Just above a tie of float32 (float64) rounding, where rounding
	// twice (through float64) lands on the tie and then on the even side.
	for _, e := range []uint{54, 62, 63} {
		for _, tie := range []uint{e - 24, e - 53} {
			v := new(big.Int).Lsh(big.NewInt(1), e)
			v.Add(v, new(big.Int).Lsh(big.NewInt(1), tie))
			v.Add(v, big.NewInt(1))
			ints = append(ints, v, new(big.Int).Neg(v))
		}
	}
	negZero := math.Copysign(0, -1)
	floats = append(floats, 0, negZero, math.NaN(), math.Inf(1), math.Inf(-1),
		0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.9999, -0.9999, 1e-300, -1e-300, math.SmallestNonzeroFloat64,
		math.MaxFloat64, -math.MaxFloat64, math.MaxFloat32, -math.MaxFloat32,
		math.Nextafter(math.MaxFloat32, math.Inf(1)), // rounds to MaxFloat32
		math.MaxFloat32*(1+0x1p-24),                  // the tie above MaxFloat32: overflows
		-math.MaxFloat32*(1+0x1p-24),
		math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32/2, 1+0x1p-24, 1+0x1p-23+0x1p-24)
	return ints, floats
}

// edgeElems returns the little-endian elements of t that convertEdges
// yields (integers in range; floats as t rounds them).
func edgeElems(t Type) [][]byte {
	ints, floats := convertEdges()
	var out [][]byte
	switch t {
	case Float32:
		for _, f := range floats {
			out = append(out, le.AppendUint32(nil, math.Float32bits(float32(f))))
		}
		return out
	case Float64:
		for _, f := range floats {
			out = append(out, le.AppendUint64(nil, math.Float64bits(f)))
		}
		return out
	}
	lo, hi := bigRange(t)
	for _, v := range ints {
		if v.Cmp(lo) >= 0 && v.Cmp(hi) <= 0 {
			out = append(out, bigToElem(t, v))
		}
	}
	return out
}

func bigRange(t Type) (lo, hi *big.Int) {
	bits := uint(t.Size() * 8)
	one := big.NewInt(1)
	if signed, _, _, _ := intRange(t); signed {
		h := new(big.Int).Lsh(one, bits-1)
		return new(big.Int).Neg(h), h.Sub(h, one)
	}
	h := new(big.Int).Lsh(one, bits)
	return big.NewInt(0), h.Sub(h, one)
}

// bigToElem encodes an in-range integer as a little-endian element of t
// (two's complement).
func bigToElem(t Type, v *big.Int) []byte {
	m := new(big.Int).Lsh(big.NewInt(1), uint(t.Size()*8))
	u := new(big.Int).Mod(v, m) // non-negative residue
	b := make([]byte, t.Size())
	for i, w := range u.Bytes() { // big-endian
		b[len(u.Bytes())-1-i] = w
	}
	return b
}

// refConvert is the conversion computed exactly (math/big) from the rules
// in convert.go, independently of its code: the expected bytes, or
// wantErr under strict.
func refConvert(st, dt Type, s []byte, strict bool) (want []byte, wantErr bool) {
	var (
		isFloat bool
		f       float64
		iv      *big.Int
	)
	switch st {
	case Float32:
		isFloat, f = true, float64(math.Float32frombits(le.Uint32(s)))
	case Float64:
		isFloat, f = true, math.Float64frombits(le.Uint64(s))
	default:
		u := new(big.Int).SetBytes(reverse(s))
		if signed, _, _, _ := intRange(st); signed && s[len(s)-1]&0x80 != 0 {
			u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(s))))
		}
		iv = u
	}
	if dt == Float32 || dt == Float64 {
		var x *big.Float
		switch {
		case isFloat && (math.IsNaN(f) || math.IsInf(f, 0)):
			if dt == Float32 {
				return le.AppendUint32(nil, math.Float32bits(float32(f))), false
			}
			return le.AppendUint64(nil, math.Float64bits(f)), false
		case isFloat:
			x = new(big.Float).SetFloat64(f)
		default:
			x = new(big.Float).SetInt(iv)
		}
		if dt == Float64 {
			r, _ := x.Float64()
			return le.AppendUint64(nil, math.Float64bits(r)), false
		}
		r, _ := x.Float32()
		if math.IsInf(float64(r), 0) && strict {
			return nil, true
		}
		if r == 0 && isFloat && math.Signbit(f) {
			r = float32(math.Copysign(0, -1))
		}
		return le.AppendUint32(nil, math.Float32bits(r)), false
	}
	lo, hi := bigRange(dt)
	switch {
	case isFloat && math.IsNaN(f):
		if strict {
			return nil, true
		}
		return make([]byte, dt.Size()), false
	case isFloat && math.IsInf(f, 1):
		iv = new(big.Int).Add(hi, big.NewInt(1))
	case isFloat && math.IsInf(f, -1):
		iv = new(big.Int).Sub(lo, big.NewInt(1))
	case isFloat:
		iv, _ = new(big.Float).SetFloat64(f).Int(nil) // truncates toward zero
	}
	switch {
	case iv.Cmp(lo) < 0:
		if strict {
			return nil, true
		}
		iv = lo
	case iv.Cmp(hi) > 0:
		if strict {
			return nil, true
		}
		iv = hi
	}
	return bigToElem(dt, iv), false
}

func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i, c := range b {
		r[len(b)-1-i] = c
	}
	return r
}

func describeElem(t Type, b []byte) string {
	switch t {
	case Float32:
		return fmt.Sprint(math.Float32frombits(le.Uint32(b)))
	case Float64:
		return fmt.Sprint(math.Float64frombits(le.Uint64(b)))
	}
	return fmt.Sprintf("%x", b)
}

// TestConvertReference: every numeric pair, every edge value, both modes,
// against refConvert; NaN results compare as NaN.
func TestConvertReference(t *testing.T) {
	numeric := Types[:10]
	checked := 0
	for _, st := range numeric {
		for _, dt := range numeric {
			for _, s := range edgeElems(st) {
				for _, strict := range []bool{false, true} {
					want, wantErr := refConvert(st, dt, s, strict)
					got := make([]byte, dt.Size())
					err := convertElems(got, dt, s, st, ConvertOptions{Strict: strict})
					checked++
					if wantErr {
						if !errors.Is(err, ErrOutOfRange) {
							t.Errorf("%v %s -> %v strict: %v (got %s), want ErrOutOfRange", st, describeElem(st, s), dt, err, describeElem(dt, got))
						}
						continue
					}
					if err != nil {
						t.Errorf("%v %s -> %v strict=%v: %v", st, describeElem(st, s), dt, strict, err)
						continue
					}
					if isNaNElem(dt, want) && isNaNElem(dt, got) {
						continue
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%v %s -> %v strict=%v: got %s, want %s", st, describeElem(st, s), dt, strict, describeElem(dt, got), describeElem(dt, want))
					}
				}
			}
		}
	}
	t.Logf("%d conversions checked", checked)
}

func isNaNElem(t Type, b []byte) bool {
	switch t {
	case Float32:
		return math.IsNaN(float64(math.Float32frombits(le.Uint32(b))))
	case Float64:
		return math.IsNaN(math.Float64frombits(le.Uint64(b)))
	}
	return false
}

// TestConvertPairs: Bool and the complex types convert only to
// themselves (and complex64 to complex128 and back), never to or from a
// number.
func TestConvertPairs(t *testing.T) {
	for _, st := range Types {
		for _, dt := range Types {
			want := st == dt || st.Numeric() && dt.Numeric() ||
				(st == Complex64 || st == Complex128) && (dt == Complex64 || dt == Complex128)
			if got := canConvert(st, dt); got != want {
				t.Errorf("canConvert(%v, %v) = %v, want %v", st, dt, got, want)
			}
		}
	}
}

// TestConvertComplex: complex parts convert as floats, overflow included.
func TestConvertComplex(t *testing.T) {
	src := toBytes([]complex128{complex(1.5, -2.25), complex(math.MaxFloat64, math.NaN()), complex(math.Inf(-1), 0x1p-200)})
	got := make([]complex64, 3)
	if err := convertElems(asBytes(got), Complex64, src, Complex128, ConvertOptions{}); err != nil {
		t.Fatal(err)
	}
	if got[0] != complex(1.5, -2.25) || !math.IsInf(float64(real(got[1])), 1) || !math.IsNaN(float64(imag(got[1]))) ||
		!math.IsInf(float64(real(got[2])), -1) || imag(got[2]) != 0 {
		t.Fatalf("complex128 -> complex64: %v", got)
	}
	err := convertElems(asBytes(got), Complex64, src, Complex128, ConvertOptions{Strict: true})
	if !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("strict overflow: %v, want ErrOutOfRange", err)
	}
	back := make([]complex128, 1)
	if err := convertElems(asBytes(back), Complex128, toBytes([]complex64{complex(0.1, 3)}), Complex64, ConvertOptions{Strict: true}); err != nil || back[0] != complex(float64(float32(0.1)), 3) {
		t.Fatalf("complex64 -> complex128: %v %v", back, err)
	}
}
