package engine

import "math"

// Float16 and BFloat16 elements are 16 bits: a sign, then 5 (8) exponent
// bits and 10 (7) fraction bits. Rounding into them is IEEE 754's
// round-to-nearest-even, done once from the float64 value (numpy's
// npy_double_to_half does the same, so a float64 rounds as numpy rounds
// it; from a float32 the float64 is exact, so that rounding is numpy's
// too). Values beyond the largest finite become ±Inf, values below half
// the smallest subnormal ±0; NaN stays NaN (quiet, sign kept).

// halfFormat is a 16-bit binary floating-point format.
type halfFormat struct {
	expBits, fracBits int
}

var (
	binary16 = halfFormat{5, 10}
	bfloat16 = halfFormat{8, 7}
)

func (h halfFormat) bias() int { return 1<<(h.expBits-1) - 1 }

// fromBits is the value of the 16 bits b (exact in a float64).
func (h halfFormat) fromBits(b uint16) float64 {
	sign := 1.0
	if b&0x8000 != 0 {
		sign = -1
	}
	e := int(b>>h.fracBits) & (1<<h.expBits - 1)
	frac := float64(b & (1<<h.fracBits - 1))
	switch e {
	case 0: // zero or subnormal
		return sign * math.Ldexp(frac, 1-h.bias()-h.fracBits)
	case 1<<h.expBits - 1:
		if frac != 0 {
			return math.Copysign(math.NaN(), sign)
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(float64(uint64(1)<<h.fracBits)+frac, e-h.bias()-h.fracBits)
}

// toBits rounds f to the nearest value of the format, ties to even.
func (h halfFormat) toBits(f float64) uint16 {
	var sign uint16
	if math.Signbit(f) {
		sign = 0x8000
	}
	expAll := uint16(1<<h.expBits-1) << h.fracBits
	switch {
	case math.IsNaN(f):
		return sign | expAll | 1<<(h.fracBits-1)
	case math.IsInf(f, 0):
		return sign | expAll
	}
	a := math.Abs(f)
	if a == 0 {
		return sign
	}
	_, e := math.Frexp(a) // a = m·2^e, 0.5 <= m < 1: the leading bit is 2^(e-1)
	e--
	emin := 1 - h.bias()
	if e < emin {
		e = emin // subnormal: the quantum of the smallest exponent
	}
	// a / quantum is exact (a power-of-two scale of a normal float64:
	// the quantum is at least 2^-133, far above float64's subnormals).
	q := math.RoundToEven(math.Ldexp(a, h.fracBits-e))
	if q >= float64(uint64(2)<<h.fracBits) { // rounded up to the next binade
		q /= 2
		e++
	}
	if q < float64(uint64(1)<<h.fracBits) { // subnormal (or zero)
		return sign | uint16(q)
	}
	if e > h.bias() {
		return sign | expAll
	}
	return sign | uint16(e+h.bias())<<h.fracBits | uint16(q)&(1<<h.fracBits-1)
}

// Float16Bits rounds f to the nearest float16 (ties to even) and returns
// its bits, the element bytes of a Float16 dataset as a little-endian
// uint16.
func Float16Bits(f float64) uint16 { return binary16.toBits(f) }

// Float16FromBits is the value of the float16 with bits b.
func Float16FromBits(b uint16) float64 { return binary16.fromBits(b) }

// BFloat16Bits rounds f to the nearest bfloat16 (ties to even) and
// returns its bits.
func BFloat16Bits(f float64) uint16 { return bfloat16.toBits(f) }

// BFloat16FromBits is the value of the bfloat16 with bits b.
func BFloat16FromBits(b uint16) float64 { return bfloat16.fromBits(b) }
