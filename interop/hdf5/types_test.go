package hdf5

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
)

// makeTypesPy writes datasets and attributes of every type class h5py
// and libhdf5 make that scc now maps: compounds (nested, with array and
// string members, padded, big-endian), h5py's complex as a big-endian
// compound {r, i}, enums (signed, big-endian unsigned), HDF5 array types,
// tagged and untagged opaque, a big-endian bitfield, float16 in both byte
// orders, scalar and null dataspaces, and a chunked compound with a fill
// value of which only part is written.
const makeTypesPy = `
import sys, h5py, numpy as np
pt = np.dtype([("x", "<f8"), ("y", ">f4")])
dt = np.dtype([("id", "<i4"), ("pos", pt), ("v", "<f4", (2, 3)), ("flag", "?"), ("c", "<c8"), ("name", "S5")])
al = np.dtype([("a", "u1"), ("b", "<i8"), ("c", "<u2")], align=True)
be = np.dtype([("a", ">i4"), ("b", ">f8"), ("e", ">u2")])
n = 4
rec = np.zeros(n, dt)
rec["id"] = np.arange(n) - 2
rec["pos"]["x"] = np.linspace(-1, 1, n)
rec["pos"]["y"] = np.arange(n) * 0.5
rec["v"] = np.arange(n * 6).reshape(n, 2, 3) / 7
rec["flag"] = [True, False, True, True]
rec["c"] = np.arange(n) + 1j * np.arange(n)[::-1]
rec["name"] = [b"a", b"bcdef", b"", b"xy"]
e16 = h5py.enum_dtype({"RED": -1, "GREEN": 1, "BLUE": 300}, basetype="<i2")
eu = h5py.enum_dtype({"A": 0, "B": 7, "C": 4000000000}, basetype=">u4")
with h5py.File(sys.argv[1], "w") as f:
    f["comp"] = rec
    f.create_dataset("aligned", data=np.array([(1, -2, 3), (4, 5, 65535)], al))
    f.create_dataset("bigc", data=np.array([(1, 2.5, 3), (-4, -5.5, 6)], be), chunks=(1,))
    f.create_dataset("cplx_be", data=np.array([1 + 2j, -3.5 - 4j], ">c16"))
    f.create_dataset("enum", data=np.array([-1, 1, 300, 1], "<i2"), dtype=e16)
    f.create_dataset("enum_be", data=np.array([0, 7, 4000000000], ">u4"), dtype=eu)
    f.create_dataset("half", data=np.array([0.5, -2, 65504, np.inf, 1e-7], "<f2"))
    f.create_dataset("half_be", data=np.array([1.5, -0.25, np.nan], ">f2"), chunks=(2,))
    f.create_dataset("void", data=np.array([b"\x00\x01\x02", b"abc"], "V3"))
    f.create_dataset("fillc", (6,), dtype=be, chunks=(2,), fillvalue=np.array((9, 9.5, 99), be))
    f["fillc"][0] = (1, 1.5, 2)
    ta = h5py.h5t.array_create(h5py.h5t.STD_I16BE, (2, 2))
    sid = h5py.h5s.create_simple((3,))
    d = h5py.h5d.create(f.id, b"arr", ta, sid)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, (np.arange(12) - 6).astype(">i2").reshape(3, 2, 2), mtype=ta)
    op = h5py.h5t.create(h5py.h5t.OPAQUE, 3)
    op.set_tag(b"my tag")
    d = h5py.h5d.create(f.id, b"tagged", op, sid)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.frombuffer(b"abcdefghi", "V3"), mtype=op)
    bf = h5py.h5t.STD_B16BE
    d = h5py.h5d.create(f.id, b"bits", bf, sid)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, 0x8001, 0xfffe], ">u2"), mtype=bf)
    f["scalar"] = np.float64(2.5)
    f["scalar_comp"] = rec[1]
    f.create_dataset("scalar_fill", shape=(), dtype="<i4", fillvalue=7)
    f["null"] = h5py.Empty("<f4")
    f["str"] = "température"
    f["null_comp"] = h5py.Empty(be)
    f["comp"].attrs["rec"] = rec[2]
    f["comp"].attrs["recs"] = np.array([(1, 2.5, 3), (-4, -5.5, 6)], be)
    f["comp"].attrs["enum"] = np.array([1, -1], "<i2").astype(e16)
    f["comp"].attrs.create("enum1", 300, dtype=e16)
    f["comp"].attrs["half"] = np.array([0.5, -3], ">f2")
    f["comp"].attrs["half1"] = np.float16(1.25)
`

// dumpTypesPy prints every dataset and attribute of a file as h5py reads
// it: the little-endian dtype's description, the enum's names, the
// shape ("null" for an empty dataspace) and the values' little-endian
// bytes (base64), the fill value's too.
const dumpTypesPy = `
import sys, json, base64, h5py, numpy as np
def le(a):
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("<"))
def cover(dt, off, m):
    if dt.fields is not None:
        for f in dt.fields.values():
            cover(f[0], off + f[1], m)
    elif dt.subdtype is not None:
        b, shp = dt.subdtype
        for i in range(int(np.prod(shp))):
            cover(b, off + i * b.itemsize, m)
    else:
        m[off:off + dt.itemsize] = True
def raw(a):
    # The values' bytes with a compound's padding zeroed: h5py's
    # conversions leave scratch bytes there.
    b = np.frombuffer(a.tobytes(), np.uint8).copy()
    if a.dtype.fields is not None and b.size:
        m = np.zeros(a.dtype.itemsize, bool)
        cover(a.dtype, 0, m)
        b = b.reshape(-1, a.dtype.itemsize)
        b[:, ~m] = 0
    return base64.b64encode(b.tobytes()).decode()
def desc(dt):
    e = h5py.check_enum_dtype(dt)
    return {"descr": str(dt.newbyteorder("<").descr) if dt.fields is not None else dt.newbyteorder("<").str,
            "sub": str(dt.subdtype[0].newbyteorder("<").str) + str(dt.subdtype[1]) if dt.subdtype else "",
            "enum": {k: int(v) for k, v in e.items()} if e else None}
def one(v, dt):
    if isinstance(v, h5py.Empty):
        return {"shape": "null", "type": desc(dt)}
    a = le(v)
    return {"shape": list(a.shape), "type": desc(dt), "b64": raw(a)}
out = {}
with h5py.File(sys.argv[1], "r") as f:
    def visit(name, ds):
        if not isinstance(ds, h5py.Dataset):
            return
        try:
            v = ds[()]
        except OSError:
            # h5py reads a tagged opaque type only in its own type.
            v = np.empty(ds.shape, ds.dtype)
            ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, v, mtype=ds.id.get_type())
        r = one(v, ds.dtype)
        if isinstance(ds.id.get_type(), h5py.h5t.TypeOpaqueID):
            r["tag"] = ds.id.get_type().get_tag().decode()
        try:
            # (h5py crashes reading a variable-length string's fill.)
            fv = ds.fillvalue if ds.dtype.kind != "O" else None
        except RuntimeError as e:
            fv = None
            r["fill"] = "unreadable: " + str(e)
        if fv is not None and ds.shape != None:
            r["fill"] = raw(le(fv))
        out[name] = r
        for k in ds.attrs:
            aid = ds.attrs.get_id(k)
            dt = aid.dtype
            try:
                v = ds.attrs[k]
            except OSError:
                # A tagged opaque type again: read in its own type.
                v = np.empty(aid.shape, dt)
                aid.read(v, mtype=aid.get_type())
            out[name + "@" + k] = one(v, dt)
    f.visititems(visit)
print(json.dumps(out, sort_keys=True))
`

type pyValue struct {
	Shape any    `json:"shape"`
	Type  any    `json:"type"`
	B64   string `json:"b64"`
	Fill  string `json:"fill"`
	Tag   string `json:"tag"`
}

func dumpTypes(t *testing.T, path string) map[string]pyValue {
	var m map[string]pyValue
	require.NoError(t, json.Unmarshal([]byte(runPython(t, dumpTypesPy, path)), &m))
	return m
}

// TestImportExportDescribedTypes: every dataset and attribute of the
// file h5py writes imports with the scc type of its class (byte order
// normalised, per member of a compound), each value and fill value equal
// to h5py's, scalar and null dataspaces kept; exporting the imported
// file gives a file h5py reads as the same types and values.
func TestImportExportDescribedTypes(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "types.h5")
	runPython(t, makeTypesPy, src)
	want := dumpTypes(t, src)

	dst := filepath.Join(dir, "types.scc")
	rep, err := ImportFile(ctx, src, dst, &Options{Strict: true})
	require.NoError(t, err, "report %+v", rep)
	f, err := engine.Open(ctx, dst, nil)
	require.NoError(t, err)
	defer f.Close(ctx)

	kinds := map[string]engine.Class{"comp": engine.ClassCompound, "aligned": engine.ClassCompound, "bigc": engine.ClassCompound,
		"cplx_be": engine.ClassComplex, "enum": engine.ClassEnum, "enum_be": engine.ClassEnum, "half": engine.ClassFloat,
		"arr": engine.ClassArray, "tagged": engine.ClassOpaque, "void": engine.ClassOpaque, "bits": engine.ClassBitfield,
		"scalar_comp": engine.ClassCompound, "null_comp": engine.ClassCompound}
	var names []string
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		w := want[name]
		if i := indexByte(name, '@'); i >= 0 {
			ds, err := f.OpenDataset(ctx, name[:i], nil)
			require.NoError(t, err)
			v, err := ds.Attr(name[i+1:])
			ds.Close(ctx)
			if !assert.NoError(t, err, name) {
				continue
			}
			assert.Equal(t, w.B64, base64.StdEncoding.EncodeToString(v.Bytes()), name)
			continue
		}
		ds, err := f.OpenDataset(ctx, name, nil)
		require.NoError(t, err, name)
		if c, ok := kinds[name]; ok {
			assert.Equal(t, c, ds.Type().Class(), "%s: %v", name, ds.Type())
		}
		switch name {
		case "half", "half_be":
			assert.Equal(t, engine.Float16, ds.Type(), name)
		case "scalar", "scalar_comp", "scalar_fill", "str":
			assert.Equal(t, engine.SpaceScalar, ds.Space(), name)
		case "null", "null_comp":
			assert.Equal(t, engine.SpaceNull, ds.Space(), name)
		}
		if ds.Layout() == engine.Vlen {
			vals, err := ds.ReadVlen(ctx, engine.All(ds.Shape()))
			require.NoError(t, err, name)
			require.Len(t, vals, 1)
			assert.Equal(t, w.B64, base64.StdEncoding.EncodeToString(vals[0]), name)
		} else if ds.Space() != engine.SpaceNull {
			sel := engine.All(ds.Shape())
			buf := make([]byte, sel.NumElements()*uint64(ds.Type().Size()))
			require.NoError(t, ds.Read(ctx, sel, buf), name)
			assert.Equal(t, w.B64, base64.StdEncoding.EncodeToString(buf), "%s: %v", name, ds.Type())
		}
		if w.Fill != "" && ds.Fill() != nil {
			assert.Equal(t, w.Fill, base64.StdEncoding.EncodeToString(ds.Fill()), "%s fill", name)
		}
		ds.Close(ctx)
	}

	out := filepath.Join(dir, "back.h5")
	_, err = Export(ctx, f, out, nil)
	require.NoError(t, err)
	got := dumpTypes(t, out)
	for _, name := range names {
		assert.Equal(t, want[name], got[name], name)
	}
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// TestImportRefusesTypesOverBounds: a type description beyond scc's
// bounds (nesting deeper than engine.MaxTypeDepth, a member name over
// 1024 bytes) is skipped, named with the bound it breaks, and the rest
// of the file imports; a compound scc refuses (repeated member names
// cannot be made by h5py, so a vlen member stands in) is named too.
func TestImportRefusesTypesOverBounds(t *testing.T) {
	needReaders(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "deep.h5")
	runPython(t, `
import sys, h5py, numpy as np
dt = np.dtype("<i4")
for i in range(20):
    dt = np.dtype([("x", dt)])
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("deep", (2,), dtype=dt)
    f.create_dataset("longname", (2,), dtype=[("a" * 1100, "<i4")])
    f.create_dataset("ok", data=np.arange(3))
`, src)
	rep, err := ImportFile(ctx, src, filepath.Join(dir, "deep.scc"), nil)
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, s := range rep.Skipped {
		reasons[s.Path] = s.Reason
	}
	assert.Contains(t, reasons["/deep"], "nested more than 16 deep")
	assert.Contains(t, reasons["/longname"], "over 1024 bytes")
	assert.Len(t, rep.Datasets, 1)
}
