package zarr

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// describedPy writes (write STORE) Zarr v2 arrays of float16 in both byte
// orders, structured dtypes (nested, with a subarray field, big-endian
// fields), void, and zero-dimensional arrays,
// with zarr-python; and dumps (dump STORE) every array as zarr-python
// reads it: shape, little-endian bytes with structured padding zeroed,
// fill value likewise.
const describedPy = `
import sys, json, base64, numpy as np, zarr
def cover(dt, off, m):
    if dt.fields is not None:
        for f in dt.fields.values():
            cover(f[0], off + f[1], m)
    elif dt.subdtype is not None:
        b, shp = dt.subdtype
        for i in range(int(np.prod(shp))):
            cover(b, off + i * b.itemsize, m)
    elif dt.kind != "V":
        m[off:off + dt.itemsize] = True
def raw(a):
    a = np.asarray(a)
    a = a.astype(a.dtype.newbyteorder("<"))
    b = np.frombuffer(a.tobytes(), np.uint8).copy()
    if a.dtype.fields is not None and b.size:
        m = np.zeros(a.dtype.itemsize, bool)
        cover(a.dtype, 0, m)
        b = b.reshape(-1, a.dtype.itemsize)
        b[:, ~m] = 0
    return base64.b64encode(b.tobytes()).decode()
cmd, store = sys.argv[1], sys.argv[2]
if cmd == "write":
    g = zarr.open_group(store, mode="w")
    pt = np.dtype([("x", "<f8"), ("y", ">f4")])
    dt = np.dtype([("id", "<i4"), ("pos", pt), ("v", "<f2", (2, 3)), ("flag", "?"), ("c", ">c8"), ("name", "S5")])
    rec = np.zeros(5, dt)
    rec["id"] = np.arange(5) - 2
    rec["pos"]["x"] = np.linspace(-1, 1, 5)
    rec["pos"]["y"] = np.arange(5) * 0.5
    rec["v"] = np.arange(30).reshape(5, 2, 3) / 8
    rec["flag"] = [True, False, True, True, False]
    rec["c"] = np.arange(5) + 1j
    rec["name"] = [b"a", b"bcdef", b"", b"xy", b"z"]
    g.array("comp", rec, chunks=(2,), fill_value=None)
    g.array("half", np.array([0.5, -2, 65504, np.inf, 1e-7, np.nan], "<f2"), chunks=(4,), fill_value=1.5)
    g.array("half_be", np.array([1.5, -0.25, 3], ">f2"), chunks=(2,))
    g.array("void", np.array([b"\x00\x01\x02", b"abc"], "V3"), chunks=(1,))
    z = g.create("scalar", shape=(), dtype="<f8")
    z[...] = 2.5
    g.create("scalar_fill", shape=(), dtype="<i4", fill_value=7)
    s = g.create("scalar_comp", shape=(), dtype=dt)
    s[...] = rec[1]
else:
    g = zarr.open_group(store, mode="r")
    out = {}
    def visit(name, a):
        if isinstance(a, zarr.Array):
            out[name] = {"shape": list(a.shape), "b64": raw(a[...]),
                         "fill": raw(np.array(a.fill_value, a.dtype)) if a.fill_value is not None else None,
                         "attrs": dict(a.attrs)}
    g.visititems(visit)
    print(json.dumps(out, sort_keys=True))
`

type pyArray struct {
	Shape []uint64       `json:"shape"`
	B64   string         `json:"b64"`
	Fill  *string        `json:"fill"`
	Attrs map[string]any `json:"attrs"`
}

func runDescribedPy(t *testing.T, cmd, store string) map[string]pyArray {
	t.Helper()
	out, err := exec.Command(python, "-c", describedPy, cmd, store).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("python %s: %v\n%s", cmd, err, ee.Stderr)
	}
	require.NoError(t, err)
	var m map[string]pyArray
	if cmd == "dump" {
		require.NoError(t, json.Unmarshal(out, &m))
	}
	return m
}

// TestZarrV2DescribedTypes: zarr-python's float16, structured (nested,
// subarray and big-endian fields, aligned padding), void and
// zero-dimensional arrays import with scc's types (compound, opaque,
// Float16; a scalar dataset), every element and fill value equal to
// zarr-python's reading; the import exports back to a Zarr v2 store
// zarr-python reads with the same values.
func TestZarrV2DescribedTypes(t *testing.T) {
	zarrPython(t)
	ctx := context.Background()
	dir := t.TempDir()
	store := filepath.Join(dir, "src.zarr")
	runDescribedPy(t, "write", store)
	want := runDescribedPy(t, "dump", store)

	dst := filepath.Join(dir, "d.scc")
	f := testfile.Create(t, dst, &engine.Options{NoSync: true})
	defer f.Close(ctx)
	_, err := Import(ctx, store, f, Options{Strict: true})
	require.NoError(t, err)
	classes := map[string]engine.Class{"comp": engine.ClassCompound, "half": engine.ClassFloat,
		"void": engine.ClassOpaque, "scalar_comp": engine.ClassCompound}
	for name, w := range want {
		ds, err := f.OpenDataset(ctx, name, nil)
		require.NoError(t, err, name)
		if c, ok := classes[name]; ok {
			assert.Equal(t, c, ds.Type().Class(), "%s: %v", name, ds.Type())
		}
		if strings.HasPrefix(name, "half") {
			assert.Equal(t, engine.Float16, ds.Type())
		}
		if strings.HasPrefix(name, "scalar") {
			assert.Equal(t, engine.SpaceScalar, ds.Space(), name)
		}
		sel := engine.All(ds.Shape())
		buf := make([]byte, sel.NumElements()*uint64(ds.Type().Size()))
		require.NoError(t, ds.Read(ctx, sel, buf), name)
		assert.Equal(t, w.B64, base64.StdEncoding.EncodeToString(zeroPad(ds.Type(), buf)), "%s: %v", name, ds.Type())
		if w.Fill != nil && ds.Fill() != nil {
			assert.Equal(t, *w.Fill, base64.StdEncoding.EncodeToString(zeroPad(ds.Type(), ds.Fill())), name+" fill")
		}
		ds.Close(ctx)
	}

	back := filepath.Join(dir, "back.zarr")
	_, err = Export(ctx, f, back, Options{Version: 2, Strict: true})
	require.NoError(t, err)
	got := runDescribedPy(t, "dump", back)
	for name, w := range want {
		assert.Equal(t, w.Shape, got[name].Shape, name)
		assert.Equal(t, w.B64, got[name].B64, name)
	}
}

// zeroPad is b with a compound's padding zeroed (zarr-python's reading
// keeps whatever bytes the writer left there).
func zeroPad(t engine.Type, b []byte) []byte {
	if t.Class() != engine.ClassCompound {
		return b
	}
	covered := make([]bool, t.Size())
	var cover func(t engine.Type, off int)
	cover = func(t engine.Type, off int) {
		switch t.Class() {
		case engine.ClassCompound:
			for _, f := range t.Fields() {
				cover(f.Type, off+f.Offset)
			}
		default:
			for i := off; i < off+t.Size(); i++ {
				covered[i] = true
			}
		}
	}
	cover(t, 0)
	out := append([]byte(nil), b...)
	for i := range out {
		if !covered[i%t.Size()] {
			out[i] = 0
		}
	}
	return out
}

// TestZarrEnumScalarExport: an scc enum exports as its base integer with
// the names in zarrmap.EnumAttr, which zarr-python reads as integers and
// import makes the enum again; a scalar dataset exports as a
// zero-dimensional array in v2 and v3 (zarr-python and zarrita read its
// value) and imports back scalar; a compound exports to v2 only, v3 and
// null datasets being refused by name.
func TestZarrEnumScalarExport(t *testing.T) {
	zarrPython(t)
	ctx := context.Background()
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "s.scc"), &engine.Options{NoSync: true})
	defer f.Close(ctx)
	et := engine.Enum(engine.Int16, engine.EnumMember{Name: "RED", Value: -1}, engine.EnumMember{Name: "BLUE", Value: 300})
	e, err := f.CreateDataset(ctx, "enum", engine.DatasetSpec{Type: et, Shape: []uint64{3}, Chunk: []uint64{2}})
	require.NoError(t, err)
	vals := []byte{0xff, 0xff, 0x2c, 0x01, 0xff, 0xff}
	require.NoError(t, e.Write(ctx, engine.All([]uint64{3}), vals))
	e.Close(ctx)
	gap := engine.Compound(16, engine.Field{Name: "a", Offset: 0, Type: engine.Int32}, engine.Field{Name: "b", Offset: 8, Type: engine.Float64})
	gapFill := make([]byte, 16)
	binary.LittleEndian.PutUint32(gapFill[0:], 42)
	binary.LittleEndian.PutUint64(gapFill[8:], 0x4000000000000000) // 2.0
	gd, err := f.CreateDataset(ctx, "gap", engine.DatasetSpec{Type: gap, Shape: []uint64{2}, Chunk: []uint64{2}, Fill: gapFill})
	require.NoError(t, err)
	gapVals := make([]byte, 32)
	binary.LittleEndian.PutUint32(gapVals[0:], 7)
	binary.LittleEndian.PutUint64(gapVals[8:], 0x3ff8000000000000)
	binary.LittleEndian.PutUint32(gapVals[16:], 0xfffffffe)
	binary.LittleEndian.PutUint64(gapVals[24:], 0xc000000000000000)
	require.NoError(t, gd.Write(ctx, engine.All([]uint64{2}), gapVals))
	gd.Close(ctx)
	s, err := f.CreateDataset(ctx, "scalar", engine.DatasetSpec{Type: engine.Float64, Fill: binary.LittleEndian.AppendUint64(nil, 0)})
	require.NoError(t, err)
	one := binary.LittleEndian.AppendUint64(nil, 0x400c000000000000) // 3.5
	require.NoError(t, s.Write(ctx, engine.All(nil), one))
	s.Close(ctx)

	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, "v"+string(rune('0'+v))+".zarr")
		_, err := Export(ctx, f, store, Options{Version: v, Strict: v == 2})
		require.NoError(t, err)
		if v == 2 {
			got := runDescribedPy(t, "dump", store)
			assert.Equal(t, base64.StdEncoding.EncodeToString(vals), got["enum"].B64)
			assert.Contains(t, got["enum"].Attrs, "scc:enum")
			assert.Equal(t, []uint64{}, got["scalar"].Shape)
			assert.Equal(t, base64.StdEncoding.EncodeToString(one), got["scalar"].B64)
			// numpy's padding fields read as the gap's bytes, zeros here.
			assert.Equal(t, base64.StdEncoding.EncodeToString(gapVals), got["gap"].B64)
			if assert.NotNil(t, got["gap"].Fill) {
				assert.Equal(t, base64.StdEncoding.EncodeToString(gapFill), *got["gap"].Fill, "zarr-python's fill value")
			}
		} else {
			node := zarrita(t)
			out := t.TempDir()
			cmd := exec.Command("node", filepath.Join(node, "zarr3.mjs"), "read", store, out, "scalar", "enum")
			b, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", b)
			sb, err := os.ReadFile(filepath.Join(out, "0.bin"))
			require.NoError(t, err)
			assert.Equal(t, one, sb, "zarrita's scalar")
			eb, err := os.ReadFile(filepath.Join(out, "1.bin"))
			require.NoError(t, err)
			assert.Equal(t, vals, eb, "zarrita's enum integers")
		}
		g := testfile.Create(t, filepath.Join(dir, "b"+string(rune('0'+v))+".scc"), &engine.Options{NoSync: true})
		_, err = Import(ctx, store, g, Options{Strict: true})
		require.NoError(t, err)
		if v == 2 {
			bg, err := g.OpenDataset(ctx, "gap", nil)
			require.NoError(t, err)
			assert.Equal(t, gap, bg.Type())
			assert.Equal(t, gapFill, bg.Fill())
			got := make([]byte, 32)
			require.NoError(t, bg.Read(ctx, engine.All([]uint64{2}), got))
			assert.Equal(t, gapVals, got)
			bg.Close(ctx)
		}
		be, err := g.OpenDataset(ctx, "enum", nil)
		require.NoError(t, err)
		assert.Equal(t, et, be.Type(), "v%d enum", v)
		_, err = be.Attr("scc:enum")
		assert.True(t, errors.Is(err, engine.ErrNotFound), "the enum's names stay in its type, not an attribute: %v", err)
		be.Close(ctx)
		bs, err := g.OpenDataset(ctx, "scalar", nil)
		require.NoError(t, err)
		assert.Equal(t, engine.SpaceScalar, bs.Space())
		buf := make([]byte, 8)
		require.NoError(t, bs.Read(ctx, engine.All(nil), buf))
		assert.Equal(t, one, buf)
		bs.Close(ctx)
		g.Close(ctx)
	}

	// v3 refuses a compound, both versions a null dataset.
	h := testfile.Create(t, filepath.Join(dir, "c.scc"), &engine.Options{NoSync: true})
	defer h.Close(ctx)
	_, err = h.CreateDataset(ctx, "comp", engine.DatasetSpec{Type: engine.PackedCompound(engine.Field{Name: "a", Type: engine.Int32}), Shape: []uint64{2}, Chunk: []uint64{2}})
	require.NoError(t, err)
	_, err = h.CreateDataset(ctx, "null", engine.DatasetSpec{Type: engine.Int32, Space: engine.SpaceNull})
	require.NoError(t, err)
	_, err = Export(ctx, h, filepath.Join(dir, "c3s.zarr"), Options{Version: 3, Strict: true})
	assert.True(t, errors.Is(err, ErrUnsupported) && strings.Contains(err.Error(), "comp"), "%v", err)
	_, err = Export(ctx, h, filepath.Join(dir, "c3.zarr"), Options{Version: 3})
	assert.True(t, errors.Is(err, ErrUnsupported) && strings.Contains(err.Error(), "structured") && strings.Contains(err.Error(), "null dataspace"), "%v", err)
	rep, err := Export(ctx, h, filepath.Join(dir, "c2.zarr"), Options{Version: 2})
	require.NoError(t, err)
	assert.Len(t, rep.Skipped, 1)
}

// FuzzParseStructured: a structured dtype's list form from a .zarray
// never panics: it is a compound of at most engine.MaxTypeSize bytes
// whose byte-swapped parts lie inside its element, or a typed error.
func FuzzParseStructured(f *testing.F) {
	for _, s := range []string{
		`[["a","<i4"],["b",">f8"]]`,
		`[["a","|u1"],["","|V7"],["b","<i8"],["c","<u2"],["","|V6"]]`,
		`[["p",[["x",">f8"],["y",">c8"]]],["v","<f2",[2,3]],["s","|S5"],["f","|b1"]]`,
		`[["n",[["m",[["k",">i2",[4]]]]],[2]]]`,
		`[["a","<i4"],["a","<i4"]]`, `[[["t","a"],"<i4"]]`, `[["a","<i4",[0]]]`, `[]`,
		`[["a","<i4",[100000,100000]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > fuzzMax {
			return
		}
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		l, ok := v.([]any)
		if !ok {
			return
		}
		typ, spans, err := parseStructured(l, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !typ.Valid() || typ.Class() != engine.ClassCompound || typ.Size() > engine.MaxTypeSize {
			t.Fatalf("%s: %v", b, typ)
		}
		for _, s := range spans {
			if s.off < 0 || s.size < 2 || s.off+s.size > typ.Size() {
				t.Fatalf("%s: span %+v outside %v", b, s, typ)
			}
		}
	})
}

// FuzzParseEnum: the enum attribute an import reads never panics: an
// enum over the base it names, or a typed error.
func FuzzParseEnum(f *testing.F) {
	for _, s := range []string{
		`{"base":"int16","members":[["RED",-1],["BLUE",300]]}`,
		`{"base":"uint64","members":[["MAX",18446744073709551615]]}`,
		`{"base":"int8","members":[["a",1],["a",2]]}`, `{"base":"int8","members":[["a",1000]]}`, `{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, base := range []engine.Type{engine.Int8, engine.Int16, engine.Uint64} {
			typ, err := zarrmap.ParseEnum(string(b), base)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("untyped error %v", err)
				}
				continue
			}
			if typ.Class() != engine.ClassEnum || typ.Base() != base {
				t.Fatalf("%s: %v", b, typ)
			}
		}
	})
}
