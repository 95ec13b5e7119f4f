package engine

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/vfd"
)

// TestScalarDatasets: a scalar dataset (no dimensions, one element) of a
// number, a compound and a fixed string, in the chunked, contiguous and
// sparse layouts and with a filter, reads its fill value, writes and
// reads its element through the rank-0 selection (bytes, typed, field,
// strings), keeps everything through a reopen and Check, shows no
// dimensions, and refuses SetExtent and selections of another rank.
func TestScalarDatasets(t *testing.T) {
	ctx := t.Context()
	layouts := map[string]DatasetSpec{
		"chunked":    {},
		"zstd":       {Filters: []Filter{Zstd(1), CRC32C()}},
		"contiguous": {Layout: Contiguous},
		"sparse":     {Layout: Sparse},
		"explicit":   {Space: SpaceScalar},
	}
	for lname, spec := range layouts {
		for _, ty := range []Type{Int32, tRecord, FixedString(4, NullPad, ASCII)} {
			t.Run(fmt.Sprintf("%s/%v", lname, ty.Class()), func(t *testing.T) {
				mem := vfd.NewMem()
				f := tCreate(t, mem, nil)
				spec.Type = ty
				spec.Fill = make([]byte, ty.Size())
				for i := range spec.Fill {
					spec.Fill[i] = byte(i + 1)
				}
				if ty == tRecord {
					spec.Fill[48] = 1 // the Bool field
				}
				d, err := f.CreateDataset(ctx, "s", spec)
				require.NoError(t, err)
				assert.Equal(t, SpaceScalar, d.Space())
				got := make([]byte, ty.Size())
				require.NoError(t, d.Read(ctx, All(d.Shape()), got))
				assert.Equal(t, spec.Fill, got)
				val := make([]byte, ty.Size())
				for i := range val {
					val[i] = byte(0x40 + i)
				}
				require.NoError(t, d.Write(ctx, All(nil), val))
				assert.ErrorIs(t, d.Write(ctx, All([]uint64{1, 1}), val), ErrInvalid)
				assert.ErrorIs(t, d.SetExtent(ctx, []uint64{2}), ErrInvalid)
				assert.ErrorIs(t, d.Read(ctx, All(nil), make([]byte, 2*ty.Size())), ErrInvalid)
				require.NoError(t, f.Close(ctx))
				_, err = Check(ctx, "", &Options{Driver: mem})
				require.NoError(t, err)

				f = tOpen(t, mem, nil)
				d, err = f.OpenDataset(ctx, "s", nil)
				require.NoError(t, err)
				assert.Equal(t, SpaceScalar, d.Space())
				assert.Equal(t, []uint64{}, d.Shape())
				assert.Equal(t, []uint64{}, d.MaxShape())
				assert.Equal(t, []uint64{}, d.Chunk())
				require.NoError(t, d.Read(ctx, Box(nil, nil), got))
				assert.Equal(t, val, got)
				switch ty {
				case Int32:
					v := make([]float64, 1)
					require.NoError(t, ReadSlice(ctx, d, All(nil), v))
					assert.Equal(t, float64(int32(le.Uint32(val))), v[0])
				case tRecord:
					h := make([]byte, 2)
					require.NoError(t, ReadFieldBytes(ctx, d, All(nil), "h", h))
					assert.Equal(t, val[52:54], h)
				default:
					s, err := d.ReadStrings(ctx, All(nil))
					require.NoError(t, err)
					assert.Equal(t, []string{"@ABC"}, s)
					require.NoError(t, d.WriteStrings(ctx, All(nil), []string{"xy"}))
				}
			})
		}
	}
}

// TestNullDatasets: a null dataset has no element: its rank-0 selection
// reads and writes nothing, it has no dimensions, and it keeps its type,
// fill value and attributes through a reopen and Check; a null spec with
// dimensions is refused.
func TestNullDatasets(t *testing.T) {
	ctx := t.Context()
	for lname, spec := range map[string]DatasetSpec{"chunked": {}, "contiguous": {Layout: Contiguous}, "sparse": {Layout: Sparse}} {
		t.Run(lname, func(t *testing.T) {
			mem := vfd.NewMem()
			f := tCreate(t, mem, nil)
			spec.Type, spec.Space, spec.Fill = tColor, SpaceNull, []byte{1, 0}
			d, err := f.CreateDataset(ctx, "n", spec)
			require.NoError(t, err)
			require.NoError(t, d.Read(ctx, All(nil), nil))
			require.NoError(t, d.Write(ctx, All(nil), nil))
			assert.ErrorIs(t, d.Read(ctx, All(nil), make([]byte, 2)), ErrInvalid)
			require.NoError(t, d.SetAttr(ctx, "a", StringAttr("empty")))
			require.NoError(t, f.Close(ctx))
			_, err = Check(ctx, "", &Options{Driver: mem})
			require.NoError(t, err)
			f = tOpen(t, mem, nil)
			d, err = f.OpenDataset(ctx, "n", nil)
			require.NoError(t, err)
			assert.Equal(t, SpaceNull, d.Space())
			assert.Equal(t, tColor, d.Type())
			assert.Equal(t, []byte{1, 0}, d.Fill())
			assert.Empty(t, d.Shape())
			require.NoError(t, ReadSlice(ctx, d, All(nil), []int16{}))
			a, err := d.Attr("a")
			require.NoError(t, err)
			assert.True(t, a.Equal(StringAttr("empty")))
		})
	}
	f := tCreate(t, vfd.NewMem(), nil)
	for name, spec := range map[string]DatasetSpec{
		"null with shape": {Type: Int8, Space: SpaceNull, Shape: []uint64{2}},
		"scalar with max": {Type: Int8, Space: SpaceScalar, MaxShape: []uint64{Unlimited}},
		"scalar chunk":    {Type: Int8, Chunk: []uint64{1}},
		"unknown space":   {Type: Int8, Space: 9},
		"null with chunk": {Type: Uint8, Space: SpaceNull, Chunk: []uint64{1}, Layout: Vlen},
	} {
		_, err := f.CreateDataset(ctx, name, spec)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
}

// TestScalarVlenAndFollow: a scalar variable-length dataset (h5py's
// scalar str) holds one sequence; a reader that follows the writer sees
// the scalar dataset once created and its value after a Refresh.
func TestScalarVlenAndFollow(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "s.scc")
	w := tCreatePath(t, path, nil)
	require.NoError(t, w.Flush(ctx))
	r := tOpenPath(t, path, &Options{ReadOnly: true})
	v, err := w.CreateDataset(ctx, "v", DatasetSpec{Type: Uint8, Layout: Vlen})
	require.NoError(t, err)
	require.NoError(t, v.WriteStrings(ctx, All(nil), []string{"hello"}))
	s, err := w.CreateDataset(ctx, "s", DatasetSpec{Type: Float64})
	require.NoError(t, err)
	require.NoError(t, WriteSlice(ctx, s, All(nil), []float64{2.5}))
	require.NoError(t, w.Flush(ctx))
	require.NoError(t, r.Refresh(ctx))
	rv, err := r.OpenDataset(ctx, "v", nil)
	require.NoError(t, err)
	got, err := rv.ReadStrings(ctx, All(nil))
	require.NoError(t, err)
	assert.Equal(t, []string{"hello"}, got)
	rs, err := r.OpenDataset(ctx, "s", nil)
	require.NoError(t, err)
	require.NoError(t, WriteSlice(ctx, s, All(nil), []float64{-1}))
	require.NoError(t, w.Flush(ctx))
	require.NoError(t, rs.Refresh(ctx))
	x := make([]float64, 1)
	require.NoError(t, ReadSlice(ctx, rs, All(nil), x))
	assert.Equal(t, -1.0, x[0])
	assert.Equal(t, SpaceScalar, rs.Space())
}

// TestScalarNotVirtual: a virtual dataset has dimensions: one without is
// refused, and a mapping onto a scalar source is refused rather than read
// as a rank-1 dataset.
func TestScalarNotVirtual(t *testing.T) {
	ctx := t.Context()
	f := tCreate(t, vfd.NewMem(), nil)
	_, err := f.CreateDataset(ctx, "s", DatasetSpec{Type: Int8})
	require.NoError(t, err)
	_, err = f.CreateVirtualDataset(ctx, "v0", VirtualSpec{Type: Int8})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = f.CreateVirtualDataset(ctx, "v1", VirtualSpec{Type: Int8, Shape: []uint64{1},
		Mappings: []VirtualMapping{{Virtual: All([]uint64{1}), Dataset: "s", Source: All(nil)}}})
	assert.ErrorIs(t, err, ErrInvalid)
}
