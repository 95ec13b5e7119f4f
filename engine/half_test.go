package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numpyFloat16 holds float64 values (their bits) and numpy 1.24's float16
// of each (np.float64(v).astype(np.float16)): ties, subnormals, overflow
// and random values over the whole range.
var numpyFloat16 = [][2]uint64{
	{0x0, 0x0000},
	{0x8000000000000000, 0x8000},
	{0x3ff0000000000000, 0x3c00},
	{0xbff0000000000000, 0xbc00},
	{0x40effc0000000000, 0x7bff},
	{0x40effdffae147ae1, 0x7bff},
	{0x40effe0000000000, 0x7c00},
	{0x412e848000000000, 0x7c00},
	{0xc12e848000000000, 0xfc00},
	{0x3f0ffffffdcd0cd0, 0x0400},
	{0x3e6fff5c939522db, 0x0001},
	{0x3e5fff5c939522db, 0x0000},
	{0x3e5fffffffffffff, 0x0000},
	{0x3e6000001ad7f29b, 0x0001},
	{0x3e112e0be826d695, 0x0000},
	{0x3ff0040000000000, 0x3c01},
	{0x3ff0020000000000, 0x3c00},
	{0x3ff0060000000000, 0x3c02},
	{0x40a0020000000000, 0x6800},
	{0x40a0060000000000, 0x6802},
	{0x3fb999999999999a, 0x2e66},
	{0x3fc999999999999a, 0x3266},
	{0x3fd3333333333333, 0x34cd},
	{0x400921fb54442d18, 0x4248},
	{0x3fd5555555555555, 0x3555},
	{0x3ee4f8b588e368f1, 0x00a8},
	{0xbe7ad7f29abcaf48, 0x8002},
	{0x40b0008000000000, 0x6c00},
	{0x40effc2000000000, 0x7bff},
	{0x7ff0000000000000, 0x7c00},
	{0xfff0000000000000, 0xfc00},
	{0x405ec0fb42ca4e6c, 0x57b0},
	{0x40a756e926ec5064, 0x69d6},
	{0xbe5d6f71a94d8f92, 0x8000},
	{0xbf823d4421b94853, 0xa08f},
	{0xc0e63362833671e0, 0xf98d},
	{0xc08efd2c2506a6f8, 0xe3bf},
	{0x3fe33ef6c3c6472f, 0x38d0},
	{0x3ff571858a941e07, 0x3d5c},
	{0xbe00e97e8bf9060a, 0x8000},
	{0xc04f061426d7c6a9, 0xd3c2},
	{0x3f74105dbdb85c96, 0x1d04},
	{0x3e2ea8073f0735ee, 0x0000},
	{0x3e7c4c031481a873, 0x0002},
	{0xbfb7d1ea56331127, 0xadf4},
	{0xbfd2b89e5c120560, 0xb4ae},
	{0x3f7c7ac84cf5de9b, 0x1f1f},
	{0xbff581e71cf65997, 0xbd60},
	{0xc0b1e0285927c2e1, 0xec78},
	{0xc033032155b28fba, 0xccc1},
	{0xbf20e6f87bdeb297, 0x883a},
	{0xbffd77bf28b367b0, 0xbf5e},
	{0xbf9812c5dfd17313, 0xa605},
	{0xbe4b37dc581f940a, 0x8000},
	{0x3df2a42210b80ba5, 0x0000},
	{0x3fc4106b6b54ede6, 0x3104},
	{0xbef399e3ab89f29e, 0x813a},
	{0xbfd01b75883f2208, 0xb407},
	{0xbed6982bc1c814f3, 0x805a},
	{0xbe6a09eb4f455120, 0x8001},
	{0x3e48553a35b6ba45, 0x0000},
	{0xbf240e489d3ff459, 0x8904},
	{0xc07ddc0d6b2ba97c, 0xdf77},
	{0xbf500834dc14bb36, 0x9402},
	{0xbf153403cbe40342, 0x854d},
	{0x3fbb28b4892e7459, 0x2eca},
	{0xc0f3b7177b0414f5, 0xfc00},
	{0xbecb47fba31b47a2, 0x8037},
	{0x3fb6a3effbbb81e7, 0x2da9},
	{0xbf431f9862e35ff6, 0x90c8},
	{0xbfbc987fbc5d0834, 0xaf26},
	{0x40d2dde15d2627d0, 0x74b7},
	{0x40d81fc22f3f7e54, 0x7608},
	{0xc0e7df35ac93809e, 0xf9f8},
	{0xc0c0520eab013d94, 0xf015},
	{0xc0e1cda17374fb16, 0xf873},
	{0xc0caa91e7f7b65d0, 0xf2aa},
	{0xc0eb91ada8c06636, 0xfae4},
	{0x40effafdab2fd6dc, 0x7bff},
	{0xc0e37b6de9a32554, 0xf8df},
	{0x40d77bc7db6429ac, 0x75df},
	{0xc0db494c11e814d2, 0xf6d2},
	{0x40e9925913c01686, 0x7a65},
	{0x40d62d840e3611f8, 0x758b},
	{0xc0e92eb9252a6fec, 0xfa4c},
	{0x40e796ccf51fe642, 0x79e6},
	{0x40ee6a97ce85d338, 0x7b9b},
	{0x40eb9c8b360bd020, 0x7ae7},
	{0x40c31057212ff8e8, 0x70c4},
	{0xc0e83c73683b0d12, 0xfa0f},
	{0xc0e505e38ae40628, 0xf941},
}

// TestFloat16RoundsAsNumpy: float64 to float16 rounds to nearest, ties to
// even, into subnormals and to ±Inf beyond 65504, bit for bit as numpy.
func TestFloat16RoundsAsNumpy(t *testing.T) {
	for _, c := range numpyFloat16 {
		f := math.Float64frombits(c[0])
		assert.Equal(t, uint16(c[1]), Float16Bits(f), "%v (%#x)", f, c[0])
	}
	assert.Equal(t, uint16(0x7e00), Float16Bits(math.NaN())&0x7e00)
	assert.True(t, math.IsNaN(Float16FromBits(Float16Bits(math.NaN()))))
	assert.True(t, math.Signbit(Float16FromBits(Float16Bits(math.Copysign(math.NaN(), -1)))))
}

// TestHalfBitsRoundTrip: every float16 and bfloat16 value converts to
// float64 exactly and back to the same bits (NaNs to a NaN), and through
// float32 the same way (both are subsets of float32).
func TestHalfBitsRoundTrip(t *testing.T) {
	for _, h := range []halfFormat{binary16, bfloat16} {
		for b := range 1 << 16 {
			f := h.fromBits(uint16(b))
			if math.IsNaN(f) {
				require.True(t, math.IsNaN(h.fromBits(h.toBits(f))))
				continue
			}
			require.Equal(t, uint16(b), h.toBits(f), "%v bits %#04x", h, b)
			require.Equal(t, uint16(b), h.toBits(float64(float32(f))), "%v bits %#04x via float32", h, b)
		}
	}
	assert.Equal(t, 65504.0, Float16FromBits(0x7bff))
	assert.Equal(t, 0x1p-24, Float16FromBits(1))
	assert.Equal(t, float64(math.MaxFloat32)*(1-0x1p-8)/(1-0x1p-24), BFloat16FromBits(0x7f7f))
}

// TestBFloat16RoundsAsReference: bfloat16 of a float32 rounds as the
// reference integer rounding of ml_dtypes and TensorFlow (add 0x7fff plus
// the kept low bit, keep the top 16 bits) for random and edge values.
func TestBFloat16RoundsAsReference(t *testing.T) {
	ref := func(f float32) uint16 {
		u := math.Float32bits(f)
		if f != f {
			return uint16(u>>16) | 0x40
		}
		return uint16((u + 0x7fff + (u>>16)&1) >> 16)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []float32{0, 1, -1, 1.00390625, 1.01171875, 1.005859375, math.MaxFloat32, -math.MaxFloat32, 0x1p-133, 0x1p-134, 3.0e38}
	for range 100000 {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for _, f := range vals {
		if f != f {
			continue
		}
		require.Equal(t, ref(f), BFloat16Bits(float64(f)), "%v (%#x)", f, math.Float32bits(f))
	}
}

// TestConvertHalf: float16 and bfloat16 convert to and from every numeric
// type under ReadAs's rules: exact into float32/float64, integers rounded
// toward zero and saturated, NaN to 0, Inf to the bounds; numbers into
// them rounded to nearest even, overflow to ±Inf, or ErrOutOfRange with
// Strict.
func TestConvertHalf(t *testing.T) {
	h16 := func(fs ...float64) []byte {
		var b []byte
		for _, f := range fs {
			b = le.AppendUint16(b, Float16Bits(f))
		}
		return b
	}
	src := h16(1.5, -2.75, 65504, math.Inf(1), math.Inf(-1), math.NaN(), 0x1p-24, -300)
	f32 := make([]float32, 8)
	require.NoError(t, ConvertElems(asBytes(f32), Float32, src, Float16, ConvertOptions{}))
	assert.Equal(t, []float32{1.5, -2.75, 65504, float32(math.Inf(1)), float32(math.Inf(-1))}, f32[:5])
	assert.True(t, math.IsNaN(float64(f32[5])))
	assert.Equal(t, float32(0x1p-24), f32[6])
	i8 := make([]int8, 8)
	require.NoError(t, ConvertElems(asBytes(i8), Int8, src, Float16, ConvertOptions{}))
	assert.Equal(t, []int8{1, -2, 127, 127, -128, 0, 0, -128}, i8)
	u16 := make([]uint16, 8)
	require.NoError(t, ConvertElems(asBytes(u16), Uint16, src, Float16, ConvertOptions{}))
	assert.Equal(t, []uint16{1, 0, 65504, 65535, 0, 0, 0, 0}, u16)
	assert.ErrorIs(t, ConvertElems(asBytes(i8), Int8, src, Float16, ConvertOptions{Strict: true}), ErrOutOfRange)

	// Into float16: from float64, float32, integers, bfloat16.
	out := make([]byte, 2*5)
	require.NoError(t, ConvertElems(out, Float16, toBytes([]float64{1.0009765625 / 2 * 2, 1e6, -0.1, 2049, 0x1p-26}), Float64, ConvertOptions{}))
	assert.Equal(t, h16(1.0009765625, math.Inf(1), -0.1, 2048, 0), out)
	require.NoError(t, ConvertElems(out, Float16, toBytes([]int64{2049, 2051, 65519, 65520, -70000}), Int64, ConvertOptions{}))
	assert.Equal(t, []byte{0x00, 0x68, 0x02, 0x68, 0xff, 0x7b, 0x00, 0x7c, 0x00, 0xfc}, out) // numpy's int64 -> float16
	assert.ErrorIs(t, ConvertElems(out, Float16, toBytes([]int64{1, 2, 3, 65520, 0}), Int64, ConvertOptions{Strict: true}), ErrOutOfRange)
	assert.ErrorIs(t, ConvertElems(out, Float16, toBytes([]float32{1, 2, 3, 1e5, 0}), Float32, ConvertOptions{Strict: true}), ErrOutOfRange)
	require.NoError(t, ConvertElems(out[:2], Float16, le.AppendUint16(nil, BFloat16Bits(3.5)), BFloat16, ConvertOptions{Strict: true}))
	assert.Equal(t, h16(3.5), out[:2])
	bf := make([]byte, 4)
	require.NoError(t, ConvertElems(bf, BFloat16, toBytes([]uint32{1 << 31, 257}), Uint32, ConvertOptions{}))
	assert.Equal(t, []float64{1 << 31, 256}, []float64{BFloat16FromBits(le.Uint16(bf)), BFloat16FromBits(le.Uint16(bf[2:]))})

	// Every numeric pair converts; nothing else does.
	nums := []Type{Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float32, Float64, Float16, BFloat16}
	for _, a := range nums {
		assert.True(t, canConvert(Float16, a) && canConvert(a, Float16) && canConvert(BFloat16, a) && canConvert(a, BFloat16), "%v", a)
	}
	for _, a := range []Type{Bool, Complex64, FixedString(2, NullPad, ASCII), Bitfield(2), Opaque(2, "")} {
		assert.False(t, canConvert(Float16, a) || canConvert(a, Float16), "%v", a)
	}
	err := ConvertElems(make([]byte, 3), Float16, make([]byte, 4), Float32, ConvertOptions{})
	assert.True(t, errors.Is(err, ErrInvalid), "%v", err)
}
