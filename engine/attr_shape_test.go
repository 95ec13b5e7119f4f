package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

// TestAttrShapeAndNullRoundTrip: N-D and null attributes keep their shape,
// type and values through a commit and a reopen, on a file and a dataset.
func TestAttrShapeAndNullRoundTrip(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: []uint64{4}, Chunk: []uint64{2}})
	require.NoError(t, err)
	m, err := ArrayAttr([]int32{1, 2, 3, 4, 5, 6}).WithShape(2, 3)
	require.NoError(t, err)
	cube, err := ArrayAttr([]float64{1, 2, 3, 4, 5, 6, 7, 8}).WithShape(2, 2, 2)
	require.NoError(t, err)
	fs, err := FixedStringsAttr(FixedString(3, NullPad, UTF8), "a", "bc", "d", "e")
	require.NoError(t, err)
	strs, err := fs.WithShape(2, 2)
	require.NoError(t, err)
	empty, err := ArrayAttr([]int8{}).WithShape(0, 3)
	require.NoError(t, err)
	vals := map[string]AttrValue{
		"m": m, "cube": cube, "strs": strs, "empty2d": empty,
		"null_f32": NullAttr(Float32), "null_text": NullAttr(0), "null_str": NullAttr(FixedString(5, NullTerm, ASCII)),
		"null_enum": NullAttr(tColor), "plain": ArrayAttr([]int32{1, 2}),
	}
	for n, v := range vals {
		require.NoError(t, f.SetAttr(ctx, n, v), n)
		require.NoError(t, ds.SetAttr(ctx, n, v), n)
	}
	require.NoError(t, f.Close(ctx))
	f2 := tOpen(t, mem, &Options{ReadOnly: true})
	defer f2.Close(ctx)
	ds2, err := f2.OpenDataset(ctx, "d", nil)
	require.NoError(t, err)
	for n, v := range vals {
		got, err := f2.Attr(n)
		require.NoError(t, err)
		assert.True(t, got.Equal(v), "file %s: %v, want %v", n, got, v)
		assert.Equal(t, v.Shape(), got.Shape(), n)
		got, err = ds2.Attr(n)
		require.NoError(t, err)
		assert.True(t, got.Equal(v), "dataset %s: %v, want %v", n, got, v)
	}
	assert.Equal(t, []uint64{2, 3}, m.Shape())
	assert.Equal(t, []uint64{2}, ArrayAttr([]int32{1, 2}).Shape())
	assert.Nil(t, ScalarAttr(int8(1)).Shape())
	assert.Nil(t, NullAttr(Float32).Shape())
	assert.Equal(t, AttrNull, NullAttr(Float32).Kind())
	assert.Equal(t, 0, NullAttr(Float32).Len())
	got, err := Array[int32](m)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2, 3, 4, 5, 6}, got, "row-major elements")
}

// TestAttrWithShape: a shape is checked against the value.
func TestAttrWithShape(t *testing.T) {
	a := ArrayAttr([]uint8{1, 2, 3, 4})
	for _, dims := range [][]uint64{{3}, {2, 3}, {4, 0}, make([]uint64, MaxAttrRank+1), {1 << 40, 1 << 40, 0, 1}, {1 << 63, 2}} {
		_, err := a.WithShape(dims...)
		assert.ErrorIs(t, err, ErrInvalid, "%v", dims)
	}
	_, err := StringAttr("x").WithShape(1)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = NullAttr(Int8).WithShape()
	assert.ErrorIs(t, err, ErrInvalid)
	one, err := a.WithShape(4)
	require.NoError(t, err)
	assert.True(t, one.Equal(a), "1-D is the plain array")
	flat, err := a.WithShape(2, 2)
	require.NoError(t, err)
	assert.False(t, flat.Equal(a))
	back, err := flat.WithShape(4)
	require.NoError(t, err)
	assert.True(t, back.Equal(a))
	s, err := ArrayAttr([]int16{7}).WithShape()
	require.NoError(t, err)
	assert.Equal(t, AttrScalar, s.Kind())
	deep, err := ArrayAttr([]uint8{1}).WithShape(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	require.NoError(t, err)
	assert.Len(t, deep.Shape(), MaxAttrRank)
	// Set refuses what no constructor makes.
	f := tCreate(t, vfd.NewMem(), nil)
	defer f.Close(t.Context())
	for _, v := range []AttrValue{NullAttr(Type(99)), RawAttr(AttrNull, Int8, []byte{1})} {
		assert.ErrorIs(t, f.SetAttr(t.Context(), "x", v), ErrInvalid, "%v", v)
	}
}

// TestAttrShapeStringAndValue: N-D values print as h5py prints numpy
// arrays (nested lists), a null as h5py's Empty; Value nests.
func TestAttrShapeStringAndValue(t *testing.T) {
	m, err := ArrayAttr([]int32{1, 2, 3, 4}).WithShape(2, 2)
	require.NoError(t, err)
	assert.Equal(t, "[[1 2] [3 4]]", m.String())
	c, err := ArrayAttr([]float32{1.5, 2, 3, 4, 5, 6, 7, 8}).WithShape(2, 1, 4)
	require.NoError(t, err)
	assert.Equal(t, "[[[1.5 2 3 4]] [[5 6 7 8]]]", c.String())
	fs, err := FixedStringsAttr(FixedString(2, NullPad, UTF8), "a", "b]", "c", "d")
	require.NoError(t, err)
	s2, err := fs.WithShape(2, 2)
	require.NoError(t, err)
	assert.Equal(t, `[["a" "b]"] ["c" "d"]]`, s2.String())
	e, err := ArrayAttr([]int8{}).WithShape(2, 0)
	require.NoError(t, err)
	assert.Equal(t, "[[] []]", e.String())
	assert.Equal(t, "Empty(dtype=dtype('float32'))", NullAttr(Float32).String())
	assert.Equal(t, "Empty(dtype=dtype('O'))", NullAttr(0).String())
	assert.Equal(t, []any{[]int32{1, 2}, []int32{3, 4}}, m.Value())
	assert.Nil(t, NullAttr(Int8).Value())
	j, err := json.Marshal(m.Value())
	require.NoError(t, err)
	assert.JSONEq(t, "[[1,2],[3,4]]", string(j))
	_, err = NullAttr(Int8).Float64s()
	assert.ErrorIs(t, err, ErrAttrType)
}

// TestAttrShapeEncodingVersion: a set without shaped or null attributes
// keeps the version-4 encoding; one with them is version 5, and kinds 5
// and 6 in an older encoding, bad ranks, shapes that do not match the
// value and a null with bytes are corruption.
func TestAttrShapeEncodingVersion(t *testing.T) {
	plain := encodeAttrs([]Attr{{"a", ArrayAttr([]int32{1, 2})}})
	assert.EqualValues(t, attrVersionV4, plain[0])
	m, err := ArrayAttr([]int32{1, 2, 3, 4}).WithShape(2, 2)
	require.NoError(t, err)
	shaped := encodeAttrs([]Attr{{"a", m}})
	assert.EqualValues(t, attrVersion, shaped[0])
	null := encodeAttrs([]Attr{{"a", NullAttr(Int16)}})
	assert.EqualValues(t, attrVersion, null[0])
	for _, b := range [][]byte{shaped, null} {
		s, err := decodeAttrs(b)
		require.NoError(t, err)
		assert.Equal(t, b, s.encoding())
	}
	bad := func(b []byte, what string) {
		t.Helper()
		_, err := decodeAttrs(b)
		assert.ErrorIs(t, err, ErrCorrupt, what)
	}
	old := append([]byte{}, shaped...)
	old[0] = attrVersionV4
	bad(old, "kind 5 in version 4")
	old = append([]byte{}, null...)
	old[0] = attrVersionV4
	bad(old, "kind 6 in version 4")
	v5plain := append([]byte{}, plain...)
	v5plain[0] = attrVersion
	bad(v5plain, "version 5 without a shaped attribute")
	// Layout of the shaped entry: version, count, name len, "a", kind,
	// type, rank, dims..., value length, value.
	rankAt := 1 + 4 + 2 + 1 + 2
	for _, r := range []byte{0, 1, MaxAttrRank + 1, 255} {
		b := append([]byte{}, shaped...)
		b[rankAt] = r
		bad(b, "rank")
	}
	b := append([]byte{}, shaped...)
	binary.LittleEndian.PutUint64(b[rankAt+1:], 3)
	bad(b, "shape product differs")
	binary.LittleEndian.PutUint64(b[rankAt+1:], 1<<63)
	bad(b, "shape product overflows")
	b = append([]byte{}, null...)
	b[len(b)-4] = 1
	bad(append(b, 0), "null with a value")
	bad(shaped[:rankAt+5], "truncated shape")
}
