package hdf5

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestExportSccTypes: datasets of every scc type (float16, bfloat16 and
// the described types, a compound with a gap) in the chunked and
// contiguous layouts, scalar and null datasets, and attributes of those
// types export to HDF5; h5py reads each value as written (bfloat16,
// which numpy has not, excepted), and importing the export gives the
// same types, dataspaces and bytes back.
func TestExportSccTypes(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	cmp := engine.Compound(16, engine.Field{Name: "a", Offset: 0, Type: engine.Int32},
		engine.Field{Name: "b", Offset: 8, Type: engine.Float64})
	types := map[string]engine.Type{
		"f16":  engine.Float16,
		"bf16": engine.BFloat16,
		"enum": engine.Enum(engine.Uint16, engine.EnumMember{Name: "lo", Value: 1}, engine.EnumMember{Name: "hi", Value: 65535}),
		"opq":  engine.Opaque(3, "scc tag"),
		"bits": engine.Bitfield(4),
		"arr":  engine.ArrayOf(engine.Int16, 2, 3),
		"cmp":  cmp,
		"nest": engine.PackedCompound(engine.Field{Name: "in", Type: cmp}, engine.Field{Name: "v", Type: engine.ArrayOf(engine.Float16, 2)}),
	}
	src := testfile.Create(t, filepath.Join(dir, "s.scc"), &engine.Options{NoSync: true})
	defer src.Close(ctx)
	data := map[string][]byte{}
	for name, ty := range types {
		require.True(t, ty.Valid(), name)
		n := 5
		b := pattern(engine.Uint8, n*ty.Size(), len(name))
		switch ty {
		case engine.Float16, engine.BFloat16:
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint16(b[2*i:], engine.Float16Bits(float64(i)-1.5))
			}
		}
		if ty.Class() == engine.ClassEnum {
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint16(b[2*i:], []uint16{1, 65535}[i%2])
			}
		}
		if name == "cmp" || name == "nest" {
			for i := 0; i < n; i++ { // the gap's bytes zero, as HDF5 keeps them
				clear(b[i*ty.Size()+4 : i*ty.Size()+8])
			}
		}
		data[name] = b
		for _, layout := range []engine.LayoutKind{engine.Chunked, engine.Contiguous} {
			spec := engine.DatasetSpec{Type: ty, Shape: []uint64{uint64(n)}, Layout: layout}
			if layout == engine.Chunked {
				spec.Chunk = []uint64{2}
			}
			ds, err := src.CreateDataset(ctx, fmt.Sprintf("%s_%v", name, layout), spec)
			require.NoError(t, err, name)
			require.NoError(t, ds.Write(ctx, engine.All(spec.Shape), b))
			require.NoError(t, ds.SetAttr(ctx, "one", engine.RawAttr(engine.AttrScalar, ty, b[:ty.Size()])))
			require.NoError(t, ds.SetAttr(ctx, "two", engine.RawAttr(engine.AttrArray, ty, b[:2*ty.Size()])))
			ds.Close(ctx)
		}
		sc, err := src.CreateDataset(ctx, name+"_scalar", engine.DatasetSpec{Type: ty, Fill: b[ty.Size() : 2*ty.Size()]})
		require.NoError(t, err)
		require.NoError(t, sc.Write(ctx, engine.All(nil), b[:ty.Size()]))
		sc.Close(ctx)
		nl, err := src.CreateDataset(ctx, name+"_null", engine.DatasetSpec{Type: ty, Space: engine.SpaceNull})
		require.NoError(t, err)
		nl.Close(ctx)
	}
	out := filepath.Join(dir, "s.h5")
	_, err := Export(ctx, src, out, nil)
	require.NoError(t, err)
	got := dumpTypes(t, out)
	for name, ty := range types {
		b := data[name]
		for _, sfx := range []string{"_chunked", "_contiguous"} {
			v, ok := got[name+sfx]
			if !assert.True(t, ok, name+sfx) || ty == engine.BFloat16 {
				continue
			}
			assert.Equal(t, base64.StdEncoding.EncodeToString(b), v.B64, "%s: h5py's reading", name+sfx)
			assert.Equal(t, base64.StdEncoding.EncodeToString(b[:ty.Size()]), got[name+sfx+"@one"].B64, name+sfx+"@one")
			assert.Equal(t, base64.StdEncoding.EncodeToString(b[:2*ty.Size()]), got[name+sfx+"@two"].B64, name+sfx+"@two")
		}
		if ty != engine.BFloat16 {
			if ty.Class() != engine.ClassArray { // numpy spreads an array type into dimensions
				assert.Equal(t, []any{}, got[name+"_scalar"].Shape, name)
			}
			assert.Equal(t, base64.StdEncoding.EncodeToString(b[:ty.Size()]), got[name+"_scalar"].B64, name+"_scalar")
		}
		assert.Equal(t, "null", got[name+"_null"].Shape, name)
	}
	assert.Equal(t, "scc tag", got["opq_chunked"].Tag)

	back := filepath.Join(dir, "back.scc")
	_, err = ImportFile(ctx, out, back, &Options{Strict: true})
	require.NoError(t, err)
	f, err := engine.Open(ctx, back, nil)
	require.NoError(t, err)
	defer f.Close(ctx)
	for name, ty := range types {
		for _, sfx := range []string{"_chunked", "_contiguous", "_scalar", "_null"} {
			ds, err := f.OpenDataset(ctx, name+sfx, nil)
			require.NoError(t, err, name+sfx)
			assert.Equal(t, ty, ds.Type(), name+sfx)
			want := data[name]
			switch sfx {
			case "_scalar":
				want = want[:ty.Size()]
				assert.Equal(t, engine.SpaceScalar, ds.Space())
				assert.Equal(t, data[name][ty.Size():2*ty.Size()], ds.Fill(), name+sfx+" fill")
			case "_null":
				want = []byte{}
				assert.Equal(t, engine.SpaceNull, ds.Space())
			default:
				for _, an := range []string{"one", "two"} {
					v, err := ds.Attr(an)
					if assert.NoError(t, err, name+sfx+"@"+an) {
						assert.Equal(t, ty, v.Type(), name+sfx+"@"+an)
					}
				}
			}
			buf := make([]byte, len(want))
			require.NoError(t, ds.Read(ctx, engine.All(ds.Shape()), buf))
			assert.Equal(t, want, buf, name+sfx)
			ds.Close(ctx)
		}
	}
}

// TestExportRefusesUnmappedLayouts: a scalar dataset of a layout HDF5
// export does not write for a scalar (sparse) fails the export with
// ErrUnsupported naming it, before any file is made.
func TestExportRefusesUnmappedLayouts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "v.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	_, err := f.CreateDataset(ctx, "d", engine.DatasetSpec{Type: engine.Uint8, Layout: engine.Sparse})
	if err != nil {
		t.Skipf("no scalar sparse dataset in scc: %v", err)
	}
	out := filepath.Join(dir, "v.h5")
	_, err = Export(ctx, f, out, nil)
	assert.True(t, errors.Is(err, ErrUnsupported) && strings.Contains(err.Error(), `"d"`), "%v", err)
	_, serr := os.Stat(out)
	assert.True(t, os.IsNotExist(serr), "refused export left %s", out)

	// An enum without members, even inside a compound, has no HDF5 type
	// this libhdf5 takes.
	g := testfile.Create(t, filepath.Join(dir, "e.scc"), &engine.Options{NoSync: true})
	defer g.Close(ctx)
	empty := engine.PackedCompound(engine.Field{Name: "e", Type: engine.Enum(engine.Int8)})
	require.True(t, empty.Valid())
	_, err = g.CreateDataset(ctx, "e", engine.DatasetSpec{Type: empty, Shape: []uint64{2}, Chunk: []uint64{2}})
	require.NoError(t, err)
	_, err = Export(ctx, g, filepath.Join(dir, "e.h5"), nil)
	assert.True(t, errors.Is(err, ErrUnsupported) && strings.Contains(err.Error(), `"e"`), "%v", err)
}
