package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestDumpDescribedTypes: float16, enum, bitfield, opaque, array and
// compound datasets and attributes print their types and values in ls and
// dump, as text and as JSON (an enum by its member's name, a compound as
// an object of its fields).
func TestDumpDescribedTypes(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/described.scc"
	f := testfile.Create(t, path, nil)
	color := engine.Enum(engine.Uint8, engine.EnumMember{Name: "RED", Value: 0}, engine.EnumMember{Name: "GREEN", Value: 1})
	rec := engine.PackedCompound(
		engine.Field{Name: "h", Type: engine.Float16},
		engine.Field{Name: "c", Type: color},
		engine.Field{Name: "v", Type: engine.ArrayOf(engine.Int16, 2)},
		engine.Field{Name: "o", Type: engine.Opaque(2, "tag")},
		engine.Field{Name: "b", Type: engine.Bitfield(2)})
	elem := func(h float64, c byte, v0, v1 int16, o0, o1 byte, b uint16) []byte {
		e := []byte{byte(engine.Float16Bits(h)), byte(engine.Float16Bits(h) >> 8), c,
			byte(v0), byte(uint16(v0) >> 8), byte(v1), byte(uint16(v1) >> 8), o0, o1, byte(b), byte(b >> 8)}
		return e
	}
	d, err := f.CreateDataset(ctx, "rec", engine.DatasetSpec{Type: rec, Shape: []uint64{2}, Chunk: []uint64{2},
		Fill: elem(-1, 1, 0, 0, 0, 0, 0)})
	require.NoError(t, err)
	require.NoError(t, d.Write(ctx, engine.All([]uint64{2}), append(elem(1.5, 1, -3, 4, 0xab, 0xcd, 0x0f01), elem(0.25, 7, 0, 1, 0, 1, 2)...)))
	require.NoError(t, d.SetAttr(ctx, "col", engine.RawAttr(engine.AttrArray, color, []byte{0, 1})))
	h, err := f.CreateDataset(ctx, "half", engine.DatasetSpec{Type: engine.Float16, Shape: []uint64{3}})
	require.NoError(t, err)
	raw := make([]byte, 6)
	require.NoError(t, engine.ConvertElems(raw, engine.Float16, []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x7c, 0, 0}, engine.Int32, engine.ConvertOptions{}))
	require.NoError(t, h.Write(ctx, engine.All([]uint64{3}), raw))
	require.NoError(t, f.Close(ctx))

	code, out, stderr := runCmd(t, "dump", "--dataset", "rec", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `DATATYPE  compound(11, "h"@0 float16, "c"@2 enum(uint8, "RED"=0, "GREEN"=1)`)
	assert.Contains(t, out, `(0): {h=1.5, c=GREEN, v=[-3, 4], o=0xabcd, b=0x0f01}, {h=0.25, c=7, v=[0, 1], o=0x0001, b=0x0002}`)
	assert.Contains(t, out, `ATTRIBUTE "col" { enum(uint8, "RED"=0, "GREEN"=1)[2] [RED, GREEN] }`)
	code, out, stderr = runCmd(t, "dump", "--json", "--dataset", "rec", path)
	require.Equal(t, 0, code, stderr)
	var dj struct{ Values []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(out), &dj))
	assert.Equal(t, map[string]any{"h": 1.5, "c": "GREEN", "v": []any{-3.0, 4.0}, "o": "0xabcd", "b": 3841.0}, dj.Values[0])
	assert.Equal(t, 7.0, dj.Values[1]["c"])
	code, out, stderr = runCmd(t, "dump", "--dataset", "half", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "DATATYPE  float16")
	assert.Contains(t, out, "(0): 1, -1, 31744")
	code, out, stderr = runCmd(t, "ls", path)
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.Contains(out, "float16") && strings.Contains(out, "compound(11"), out)
	code, out, stderr = runCmd(t, "ls", "--json", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"fill": "{h=-1, c=GREEN, v=[0, 0], o=0x0000, b=0x0000}"`)
}

// TestDumpScalarAndNull: scalar and null datasets print as h5dump prints
// them (DATASPACE SCALAR with the one value, DATASPACE NULL with none),
// and ls lists them without dimensions.
func TestDumpScalarAndNull(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/spaces.scc"
	f := testfile.Create(t, path, nil)
	s, err := f.CreateDataset(ctx, "s", engine.DatasetSpec{Type: engine.Int16})
	require.NoError(t, err)
	require.NoError(t, engine.WriteSlice(ctx, s, engine.All(nil), []int16{-12}))
	_, err = f.CreateDataset(ctx, "n", engine.DatasetSpec{Type: engine.Float64, Space: engine.SpaceNull})
	require.NoError(t, err)
	require.NoError(t, f.Close(ctx))
	code, out, stderr := runCmd(t, "dump", "--dataset", "s", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "DATASPACE  SCALAR")
	assert.Contains(t, out, "(): -12")
	code, out, stderr = runCmd(t, "dump", "--json", "--dataset", "s", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"values":[-12]`)
	code, out, stderr = runCmd(t, "dump", "--dataset", "n", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "DATASPACE  NULL")
	code, out, stderr = runCmd(t, "ls", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "int16")
}
